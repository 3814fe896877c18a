#include "rl/run_config.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "contract/autopilot.hpp"
#include "contract/live_settings.hpp"
#include "contract/settings.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/yaml.hpp"
#include "model/family.hpp"

namespace fp8rl {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string model_types() {
  std::vector<std::string> t;
  for (const ModelFamily* f : model_families()) t.emplace_back(f->model_type);
  return join(t);
}

// Errors about the model section's fields name them as settings.
std::string model_setting(const std::string& key) {
  return "setting 'model." + key + "'";
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& RunConfig::choices() {
  static const std::map<std::string, std::vector<std::string>> c = [] {
    std::map<std::string, std::vector<std::string>> m;
    for (const SettingSpec& s : setting_specs())
      if (s.kind == SettingKind::choice) m[s.key] = s.choices;
    // The model section's family: the families' config.json model_type.
    for (const ModelFamily* f : model_families()) m["model.model_type"].emplace_back(f->model_type);
    return m;
  }();
  return c;
}

Json RunConfig::defaults() {
  Json d = setting_defaults();
  // The model section: the first family's config.json for a small random model, and the folder
  // to start from instead (model.checkpoint, the one run setting of the section).
  Json model = model_defaults(*model_families().front());
  model["checkpoint"] = d.at("model").at("checkpoint");
  d["model"] = std::move(model);
  return d;
}

namespace {

// The model section's first form, before it was the family's config.json: model.family, the
// rotary scaling as a name (rope_scaling: llama3) with rope_factor, rope_low_freq_factor,
// rope_high_freq_factor and rope_original_max_position_embeddings beside it, and init_std.
// Rewritten in place to config.json's names, with a note of what was rewritten.
void migrate_flat_model(Json& over, std::vector<std::string>* notes) {
  std::vector<std::string> old;
  if (over.contains("family")) {
    over["model_type"] = model_family(over.at("family").as_string("model.family")).model_type;
    over.as_object().erase("family");
    old.emplace_back("family → model_type");
  }
  if (over.contains("init_std")) {
    over["initializer_range"] = over.at("init_std");
    over.as_object().erase("init_std");
    old.emplace_back("init_std → initializer_range");
  }
  static const std::pair<const char*, const char*> kRope[] = {
      {"rope_factor", "factor"},
      {"rope_low_freq_factor", "low_freq_factor"},
      {"rope_high_freq_factor", "high_freq_factor"},
      {"rope_original_max_position_embeddings", "original_max_position_embeddings"}};
  const bool named = over.contains("rope_scaling") && over.at("rope_scaling").is_string();
  bool fields = false;
  for (const auto& [flat, nested] : kRope) fields = fields || over.contains(flat);
  if (named || fields) {
    const std::string type = named ? over.at("rope_scaling").as_string() : "none";
    check(type == "none" || type == "llama3",
          "setting 'model.rope_scaling' is '" + type + "' (allowed: none, llama3)");
    Json s;  // null: no scaling
    if (type == "llama3") {
      // The first form's defaults for the fields a file left out.
      s["rope_type"] = "llama3";
      s["factor"] = 8.0;
      s["low_freq_factor"] = 1.0;
      s["high_freq_factor"] = 4.0;
      s["original_max_position_embeddings"] = int64_t{8192};
      for (const auto& [flat, nested] : kRope)
        if (over.contains(flat)) s[nested] = over.at(flat);
    }
    for (const auto& [flat, nested] : kRope) over.as_object().erase(flat);
    if (named) over["rope_scaling"] = std::move(s);
    old.push_back("rope_scaling: " + type + " with rope_* → rope_scaling: {rope_type, factor, …}");
  }
  if (!old.empty() && notes)
    notes->push_back("model: read the names of an earlier version as config.json's (" + join(old) +
                     "); docs/model-families.md");
}

// Overlays a model section (a family's config.json) onto the one in force. A section naming
// another family (model_type or architectures) starts from that family's defaults, keeping the
// values of the fields both have (a preset's shape survives --set model.model_type=…).
void overlay_model(Json& model, Json over, std::vector<std::string>* notes) {
  check(over.is_object(), "setting 'model' must be a mapping of settings");
  migrate_flat_model(over, notes);
  if (over.contains("model_type") || over.contains("architectures")) {
    Json probe(Json::Object{});
    for (const char* key : {"architectures", "model_type"})
      if (over.contains(key)) probe[key] = over.at(key);
    const ModelFamily* to = nullptr;
    try {
      to = &model_family_of(probe);
    } catch (const Error& e) {
      if (probe.contains("architectures"))
        throw Error("setting 'model.architectures': " + e.message());
      throw Error("setting 'model.model_type' is " + probe.at("model_type").dump() +
                  " (allowed: " + model_types() + ")");
    }
    if (to != &model_family_of(model)) {
      Json rebased = model_defaults(*to);
      for (const auto& [key, value] : model.as_object())
        if (key != "architectures" && key != "model_type" &&
            (rebased.contains(key) || key == "checkpoint"))
          rebased[key] = value;
      model = std::move(rebased);
    }
  }
  overlay(model, over, "model", notes);
}

}  // namespace

void overlay(Json& base, const Json& over, const std::string& where,
             std::vector<std::string>* notes) {
  check(over.is_object(), where.empty() ? std::string("expected a mapping of settings")
                                        : "setting '" + where + "' must be a mapping of settings");
  for (const auto& [key, value] : over.as_object()) {
    const std::string path = where.empty() ? key : where + "." + key;
    if (path == "model" && base.contains(key)) {
      overlay_model(base[key], value, notes);
      continue;
    }
    // An object inside the model section (config.json's rope_scaling) has the fields its type
    // needs: new ones are taken, and the family checks them when the model is configured.
    if (!base.contains(key) && where.starts_with("model.")) {
      base[key] = value;
      continue;
    }
    if (!base.contains(key)) {
      std::vector<std::string> allowed;
      for (const auto& [k, v] : base.as_object()) allowed.push_back(k);
      throw Error("unknown setting '" + path + "' (allowed here: " + join(allowed) + ")");
    }
    Json& slot = base[key];
    // In the model section (a config.json) null clears an object: rope_scaling: null.
    if (slot.is_object() && !(value.is_null() && path.starts_with("model."))) {
      overlay(slot, value, path, notes);
      continue;
    }
    // Types must match the default's (numbers for numbers, strings for strings, ...); a null
    // default (config.json's rope_scaling) takes anything.
    const bool ok = slot.is_number()   ? value.is_number()
                    : slot.is_bool()   ? value.is_bool()
                    : slot.is_array()  ? value.is_array()
                    : slot.is_string() ? (value.is_string() || value.is_number())
                                       : true;
    check(ok, "setting '" + path + "' must be " +
                  (slot.is_number()  ? std::string("a number")
                   : slot.is_bool()  ? std::string("true or false")
                   : slot.is_array() ? std::string("a list")
                                     : std::string("a string")) +
                  ", got " + value.dump());
    slot = value.is_number() && slot.is_string() ? Json(value.dump()) : value;
  }
}

namespace {

// overlay() of a configuration file's settings; errors name the file.
void overlay_file(Json& doc, const Json& settings, const std::string& path,
                  std::vector<std::string>* notes) {
  try {
    overlay(doc, settings, "", notes);
  } catch (const Error& e) {
    throw Error(path + ": " + e.message());
  }
}

}  // namespace

void apply_override(Json& doc, const std::string& assignment, std::vector<std::string>* notes) {
  const size_t eq = assignment.find('=');
  check(eq != std::string::npos && eq > 0, "--set '" + assignment + "' is not key=value");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  Json value;
  if (!text.empty() && text.front() == '[') {
    value = parse_yaml("v: " + text, "--set").at("v");
  } else {
    value = yaml_scalar(text);
  }
  set_setting(doc, key, value, "--set '" + assignment + "'", notes);
}

void set_setting(Json& doc, const std::string& key, const Json& value, const std::string& where,
                 std::vector<std::string>* notes) {
  // Build {"a": {"b": {"c": value}}} and overlay it.
  Json over = value;
  size_t end = key.size();
  while (true) {
    const size_t dot = end == 0 ? std::string::npos : key.rfind('.', end - 1);
    const size_t begin = dot == std::string::npos ? 0 : dot + 1;
    const std::string part = key.substr(begin, end - begin);
    check(!part.empty(), where + ": '" + key + "' has an empty part");
    Json wrap;
    wrap[part] = over;
    over = wrap;
    if (dot == std::string::npos) break;
    end = dot;
  }
  overlay(doc, over, "", notes);
}

RunConfig RunConfig::from_json(const Json& in) {
  RunConfig c;
  Json doc = defaults();
  overlay(doc, in, "", &c.notes);
  c.doc = doc;
  // Each setting read through its schema row (contract/settings): type, range and choices are
  // checked there, errors name the key, the value and what is allowed.
  auto num = [&](const char* key) { return read_setting(doc, key).as_number(); };
  auto integer = [&](const char* key) { return read_setting(doc, key).as_int(); };
  auto str = [&](const char* key) { return read_setting(doc, key).as_string(); };
  auto flag = [&](const char* key) { return read_setting(doc, key).as_bool(); };
  c.name = str("name");
  c.backend = str("backend");
  c.seed = static_cast<uint64_t>(integer("seed"));

  c.task.name = str("task.name");
  c.task.min_len = integer("task.min_len");
  c.task.max_len = integer("task.max_len");
  c.task.validation_size = integer("task.validation_size");
  c.task.path = str("task.path");
  c.task.reward = str("task.reward");
  c.task.prompt_key = str("task.prompt_key");
  c.task.answer_key = str("task.answer_key");
  c.task.instruction = str("task.instruction");
  c.task.max_response_tokens = integer("task.max_response_tokens");
  c.task.response_tokens_min = integer("task.response_tokens_min");
  c.task.vocab_size = integer("task.vocab_size");
  c.chat_system_prompt = str("task.system_prompt");
  c.chat_thinking = str("task.thinking") == "on";
  c.chat_date = str("task.date");
  c.task.seed = c.seed;

  {
    // The model section is a config.json of its family (model/family.hpp) without the
    // vocabulary, which the task's tokenizer sets (rl/group_rollouts.cpp: make_run_model), and
    // with model.checkpoint beside it.
    Json hf = doc.at("model");
    c.init_checkpoint = str("model.checkpoint");
    hf.as_object().erase("checkpoint");
    check(hf.contains("initializer_range") && hf.at("initializer_range").is_number() &&
              hf.at("initializer_range").as_number() > 0,
          "setting 'model.initializer_range' must be positive (the standard deviation of a "
          "random model's weights)");
    c.init_std = hf.at("initializer_range").as_number();
    hf["vocab_size"] = int64_t{1};
    try {
      c.model = ModelConfig::from_json(hf, model_setting);
    } catch (const Error& e) {
      throw e.message().starts_with("setting '") ? e : Error("setting 'model': " + e.message());
    }
  }
  c.moe_routing_replay = str("moe.routing_replay") == "rollout";
  c.moe_freeze_router = flag("moe.freeze_router");
  c.moe_router_aux_loss_coef = num("moe.router_aux_loss_coef");

  c.default_precision = parse_precision(str("precision.default"));
  for (const auto& o : read_setting(doc, "precision.overrides").as_array())
    c.precision_overrides.push_back(o.as_string());
  c.kv_cache = parse_kv_dtype(str("precision.kv_cache"));
  c.pow2_scales = str("precision.scale_format") == "pow2";
  c.lm_head = parse_precision(str("precision.lm_head"));
  check(!(c.default_precision == Precision::fp32) == !(c.kv_cache == KvDType::fp32),
        "precision.kv_cache fp32 goes with precision.default fp32 only (the CPU reference)");

  c.steps = integer("grpo.steps");
  c.prompts_per_step = integer("grpo.prompts_per_step");
  c.group_size = integer("grpo.group_size");
  c.epochs = integer("grpo.epochs");
  c.mini_batches = integer("grpo.mini_batches");
  c.micro_batch_size = integer("grpo.micro_batch_size");
  check((c.prompts_per_step * c.group_size) % c.mini_batches == 0,
        "grpo.mini_batches must divide prompts_per_step × group_size");
  c.sampling.temperature = num("grpo.temperature");
  c.sampling.top_p = num("grpo.top_p");
  c.decode_graphs = str("grpo.decode_graphs") == "auto";
  c.advantage = parse_advantage_mode(str("grpo.advantage"));
  c.loss.clip_low = num("grpo.clip_low");
  c.loss.clip_high = num("grpo.clip_high");
  c.loss.importance = parse_importance_mode(str("grpo.importance"));
  c.loss.is_min = num("grpo.is_min");
  c.loss.is_max = num("grpo.is_max");
  if (auto e = importance_bounds_error(c.loss.is_min, c.loss.is_max))
    throw Error("settings 'grpo.is_min' and 'grpo.is_max': " + *e);
  c.loss.kl_beta = num("grpo.kl_beta");

  c.optimizer.lr = num("optimizer.lr");
  c.optimizer.weight_decay = num("optimizer.weight_decay");
  c.optimizer.max_grad_norm = num("optimizer.max_grad_norm");
  c.optimizer.warmup_steps = integer("optimizer.warmup_steps");
  c.optimizer.schedule = str("optimizer.schedule");
  c.optimizer.beta1 = num("optimizer.beta1");
  c.optimizer.beta2 = num("optimizer.beta2");
  c.optimizer.total_steps = c.steps * c.mini_batches * c.epochs;
  c.optimizer.validate();

  c.sft_steps = integer("sft.steps");
  c.sft_batch_size = integer("sft.batch_size");
  c.sft_lr = num("sft.lr");
  c.validation_every = integer("validation.every");
  c.samples_per_step = integer("samples.per_step");
  c.checkpoint_every = integer("checkpoint.every");
  c.checkpoint_dir = str("checkpoint.dir");
  c.audit_every = integer("audit.every");
  c.fp8_telemetry_every = integer("telemetry.fp8_every");
  c.autopilot.on = flag(autopilot::kSwitchKey);
  c.autopilot.metric = str("autopilot.metric");
  c.autopilot.threshold = num("autopilot.threshold");
  c.autopilot.patience = integer("autopilot.patience");
  c.autopilot.moves = integer("autopilot.moves");
  c.autopilot.budget = num("autopilot.budget");
  c.autopilot.budget_flops = str("autopilot.budget_unit") == autopilot::kUnitFlops;
  c.autopilot.cooldown = integer("autopilot.cooldown");
  c.autopilot.hysteresis = num("autopilot.hysteresis");
  c.autopilot.return_to_fp8 = flag("autopilot.return_to_fp8");
  c.autopilot.calm_steps = integer("autopilot.calm_steps");
  c.autopilot.confirm = flag("autopilot.confirm");
  for (const auto& o : read_setting(doc, "outliers.linears").as_array()) {
    // "1.down" or "*.down": only a down projection can carry a dead channel (its input, the
    // SwiGLU product, is 0 where gate and up are).
    const std::string& t = o.as_string();
    const size_t dot = t.find('.');
    const std::string layer = t.substr(0, dot);
    const bool ok = dot != std::string::npos && t.substr(dot + 1) == "down" && !layer.empty() &&
                    (layer == "*" || layer.find_first_not_of("0123456789") == std::string::npos);
    check(ok, "setting 'outliers.linears': '" + t +
                  "' must be LAYER.down or *.down (an MLP's down projection: only its input can "
                  "hold a dead channel)");
    c.outlier_layers.push_back(layer == "*" ? -1 : std::stoll(layer));
  }
  c.outlier_scale = num("outliers.scale");
  // Validates the overrides: against the configured layers, or only their grammar when the
  // model comes from a checkpoint (whose layer count applies when the model is built).
  if (c.init_checkpoint.empty())
    c.precision_map(c.model);
  else
    for (const auto& o : c.precision_overrides) PrecisionOverride::parse(o);
  return c;
}

RunConfig RunConfig::with_live_state(const LiveState& live) const {
  Json d = doc;
  live.write_settings(d);
  Json::Array overrides;
  for (const auto& o : live.precision.overrides_from(default_precision)) overrides.emplace_back(o);
  d["precision"]["overrides"] = Json(std::move(overrides));
  return from_json(d);
}

PrecisionMap RunConfig::precision_map(const ModelConfig& shape) const {
  PrecisionMap pm = uniform_precision(shape, default_precision);
  for (const auto& o : precision_overrides) apply_precision_override(pm, o);
  pm.validate();
  return pm;
}

std::vector<std::string> RunConfig::preset_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("FP8RL_PRESETS"); env && *env) dirs.push_back(env);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec)
    dirs.push_back((exe.parent_path() / "../share/fp8rl/presets").lexically_normal().string());
  return dirs;
}

std::vector<std::string> RunConfig::preset_names() {
  std::set<std::string> names;
  for (const auto& d : preset_dirs()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec))
      if (e.path().extension() == ".yaml") names.insert(e.path().stem().string());
  }
  return {names.begin(), names.end()};
}

RunConfig RunConfig::load(const std::string& preset, const std::string& file,
                          const std::vector<std::string>& sets) {
  check(preset.empty() || file.empty(), "give a preset or a config file, not both");
  Json doc = defaults();
  std::vector<std::string> notes;
  std::string path = file;
  if (!preset.empty()) {
    for (const auto& d : preset_dirs())
      if (std::filesystem::exists(d + "/" + preset + ".yaml")) {
        path = d + "/" + preset + ".yaml";
        break;
      }
    check(!path.empty(),
          "unknown preset '" + preset + "' (available: " + join(preset_names()) + ")");
  }
  if (!path.empty()) {
    // A JSON object (what the studio writes, or `--print-config` output) or a YAML preset.
    const std::string text = read_text_file(path);
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') {
      Json j;
      try {
        j = Json::parse(text);
      } catch (const Error& e) {
        throw Error(path + ": " + e.message());
      }
      overlay_file(doc, j, path, &notes);
    } else {
      overlay_file(doc, parse_yaml(text, path), path, &notes);
    }
  }
  for (const auto& s : sets) apply_override(doc, s, &notes);
  RunConfig c = from_json(doc);
  c.notes.insert(c.notes.begin(), notes.begin(), notes.end());
  return c;
}

}  // namespace fp8rl
