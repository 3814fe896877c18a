#include "rl/run_config.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "contract/live_settings.hpp"
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

}  // namespace

const std::map<std::string, std::vector<std::string>>& RunConfig::choices() {
  static const std::map<std::string, std::vector<std::string>> c = {
      {"backend", {"auto", "cpu", "cuda"}},
      {"task.name", {"reverse", "addition", "sort", "jsonl"}},
      {"task.reward", {"auto", "shaped", "partial", "exact", "numeric", "math"}},
      {"task.thinking", {"on", "off"}},
      {"precision.default", precision_names()},
      {"precision.kv_cache", precision_names()},
      {"precision.lm_head", precision_names()},
      {"precision.scale_format", {"fp32", "pow2"}},
      {"grpo.advantage", {"mean_std", "leave_one_out"}},
      {"grpo.importance", {"tis", "icepop", "off"}},
      {"grpo.decode_graphs", {"auto", "off"}},
      {"optimizer.schedule", {"constant", "cosine"}},
      {"model.family",
       [] {
         std::vector<std::string> names;
         for (const ModelFamily* f : model_families()) names.push_back(f->name);
         return names;
       }()},
      {"model.rope_scaling", {"none", "llama3"}},
      {"moe.routing_replay", {"off", "rollout"}},
  };
  return c;
}

Json RunConfig::defaults() {
  return parse_yaml(R"(
name: run
seed: 1
backend: auto
task:
  name: reverse
  min_len: 3
  max_len: 6
  validation_size: 64
  path: ""
  reward: auto
  prompt_key: prompt
  answer_key: answer
  instruction: ""
  max_response_tokens: 0
  system_prompt: ""
  date: "26 Jul 2024"    # Llama 3.1's "Today Date" in every prompt, pinned for reproducible prompts
  thinking: "on"
model:
  family: qwen3          # qwen3, llama (Llama 3.1) or qwen3_moe (model/family.hpp)
  hidden_size: 128
  num_hidden_layers: 2
  num_attention_heads: 4
  num_key_value_heads: 2
  head_dim: 32
  intermediate_size: 256
  max_position_embeddings: 64
  rope_theta: 10000
  rope_scaling: none     # llama3: Llama 3.1's, with the four rope_* values below
  rope_factor: 8.0
  rope_low_freq_factor: 1.0
  rope_high_freq_factor: 4.0
  rope_original_max_position_embeddings: 8192
  num_experts: 8         # qwen3_moe: experts per MoE layer, each token's top
  num_experts_per_tok: 2
  moe_intermediate_size: 128
  norm_topk_prob: true
  decoder_sparse_step: 1
  init_std: 0.05
  checkpoint: ""
moe:
  routing_replay: "off"  # rollout: the trainer replays the generator's expert choices
  freeze_router: false   # the routers' weights are not trained
  router_aux_loss_coef: 0.0  # load-balancing loss (off in RL: it made log-probs diverge)
precision:
  default: fp8
  overrides: []
  kv_cache: bf16
  lm_head: bf16
  scale_format: fp32
grpo:
  steps: 400
  prompts_per_step: 16
  group_size: 8
  temperature: 1.0
  top_p: 1.0
  decode_graphs: auto
  advantage: mean_std
  clip_low: 0.2
  clip_high: 0.2
  importance: tis
  is_min: 0.0
  is_max: 2.0
  kl_beta: 0.0
  epochs: 1
  mini_batches: 1
  micro_batch_size: 64
optimizer:
  lr: 0.001
  weight_decay: 0.0
  max_grad_norm: 1.0
  warmup_steps: 0
  schedule: constant
  beta1: 0.9
  beta2: 0.999
sft:
  steps: 0
  batch_size: 32
  lr: 0.001
validation:
  every: 20
samples:
  per_step: 4
checkpoint:
  every: 0
  dir: ""
audit:
  every: 1
telemetry:
  fp8_every: 1
)",
                    "defaults");
}

void overlay(Json& base, const Json& over, const std::string& where) {
  check(over.is_object(), where.empty() ? std::string("expected a mapping of settings")
                                        : "setting '" + where + "' must be a mapping of settings");
  for (const auto& [key, value] : over.as_object()) {
    const std::string path = where.empty() ? key : where + "." + key;
    if (!base.contains(key)) {
      std::vector<std::string> allowed;
      for (const auto& [k, v] : base.as_object()) allowed.push_back(k);
      throw Error("unknown setting '" + path + "' (allowed here: " + join(allowed) + ")");
    }
    Json& slot = base[key];
    if (slot.is_object()) {
      overlay(slot, value, path);
      continue;
    }
    // Types must match the default's (numbers for numbers, strings for strings, ...).
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
void overlay_file(Json& doc, const Json& settings, const std::string& path) {
  try {
    overlay(doc, settings, "");
  } catch (const Error& e) {
    throw Error(path + ": " + e.message());
  }
}

}  // namespace

void apply_override(Json& doc, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  check(eq != std::string::npos && eq > 0, "--set '" + assignment + "' is not key=value");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  Json value;
  if (!text.empty() && text.front() == '[') {
    value = parse_yaml("v: " + text, "--set").at("v");
  } else {
    value = yaml_scalar(text);
  }
  set_setting(doc, key, value, "--set '" + assignment + "'");
}

void set_setting(Json& doc, const std::string& key, const Json& value, const std::string& where) {
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
  overlay(doc, over, "");
}

RunConfig RunConfig::from_json(const Json& in) {
  Json doc = defaults();
  overlay(doc, in, "");
  for (const auto& [path, allowed] : RunConfig::choices()) {
    const size_t dot = path.find('.');
    const Json& v = dot == std::string::npos ? doc.at(path)
                                             : doc.at(path.substr(0, dot)).at(path.substr(dot + 1));
    const std::string s = v.as_string(path);
    check(std::find(allowed.begin(), allowed.end(), s) != allowed.end(),
          "setting '" + path + "' is '" + s + "' (allowed: " + join(allowed) + ")");
  }
  RunConfig c;
  c.doc = doc;
  auto num = [&](const char* sec, const char* key) {
    return doc.at(sec).at(key).as_number(std::string(sec) + "." + key);
  };
  auto integer = [&](const char* sec, const char* key) {
    return doc.at(sec).at(key).as_int(std::string(sec) + "." + key);
  };
  auto str = [&](const char* sec, const char* key) {
    return doc.at(sec).at(key).as_string(std::string(sec) + "." + key);
  };
  auto positive = [&](const char* sec, const char* key) {
    const int64_t v = integer(sec, key);
    check(v > 0, std::string("setting '") + sec + "." + key + "' must be positive, got " +
                     std::to_string(v));
    return v;
  };
  c.name = doc.at("name").as_string("name");
  c.backend = doc.at("backend").as_string("backend");
  c.seed = static_cast<uint64_t>(doc.at("seed").as_int("seed"));

  c.task.name = str("task", "name");
  c.task.min_len = integer("task", "min_len");
  c.task.max_len = integer("task", "max_len");
  c.task.validation_size = integer("task", "validation_size");
  c.task.path = str("task", "path");
  c.task.reward = str("task", "reward");
  c.task.prompt_key = str("task", "prompt_key");
  c.task.answer_key = str("task", "answer_key");
  c.task.instruction = str("task", "instruction");
  c.task.max_response_tokens = integer("task", "max_response_tokens");
  check(c.task.max_response_tokens >= 0,
        "setting 'task.max_response_tokens' must be ≥ 0 (0: the longest answer + 1)");
  c.chat_system_prompt = str("task", "system_prompt");
  c.chat_thinking = str("task", "thinking") == "on";
  c.chat_date = str("task", "date");
  c.task.seed = c.seed;

  {
    // The model section is a config.json of its family (model/family.hpp) without the
    // vocabulary, which the task's tokenizer sets (rl/group_rollouts.cpp: make_run_model).
    const Json& m = doc.at("model");
    const ModelFamily& family = model_family(str("model", "family"));
    Json hf;
    hf["architectures"] = Json(Json::Array{Json(family.architecture)});
    for (const char* key :
         {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "head_dim", "intermediate_size", "max_position_embeddings"})
      hf[key] = positive("model", key);
    hf["rope_theta"] = num("model", "rope_theta");
    hf["vocab_size"] = int64_t{1};
    if (str("model", "rope_scaling") == "llama3") {
      Json s;
      s["rope_type"] = "llama3";
      s["factor"] = num("model", "rope_factor");
      s["low_freq_factor"] = num("model", "rope_low_freq_factor");
      s["high_freq_factor"] = num("model", "rope_high_freq_factor");
      s["original_max_position_embeddings"] =
          integer("model", "rope_original_max_position_embeddings");
      hf["rope_scaling"] = std::move(s);
    }
    if (std::string(family.name) == "qwen3_moe") {
      for (const char* key :
           {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step"})
        hf[key] = integer("model", key);
      hf["norm_topk_prob"] = m.at("norm_topk_prob").as_bool("model.norm_topk_prob");
    }
    try {
      c.model = ModelConfig::from_json(hf);
    } catch (const Error& e) {
      throw Error("settings 'model': " + e.message());
    }
  }
  c.moe_routing_replay = str("moe", "routing_replay") == "rollout";
  c.moe_freeze_router = doc.at("moe").at("freeze_router").as_bool("moe.freeze_router");
  c.moe_router_aux_loss_coef = num("moe", "router_aux_loss_coef");
  check(c.moe_router_aux_loss_coef >= 0, "setting 'moe.router_aux_loss_coef' must be ≥ 0");
  c.init_std = num("model", "init_std");
  c.init_checkpoint = str("model", "checkpoint");
  check(c.init_std > 0, "setting 'model.init_std' must be positive");

  c.default_precision = parse_precision(str("precision", "default"));
  for (const auto& o : doc.at("precision").at("overrides").as_array("precision.overrides"))
    c.precision_overrides.push_back(o.as_string("precision.overrides item"));
  c.kv_cache = parse_kv_dtype(str("precision", "kv_cache"));
  c.pow2_scales = str("precision", "scale_format") == "pow2";
  c.lm_head = parse_precision(str("precision", "lm_head"));
  check(!(c.default_precision == Precision::fp32) == !(c.kv_cache == KvDType::fp32),
        "precision.kv_cache fp32 goes with precision.default fp32 only (the CPU reference)");

  c.steps = integer("grpo", "steps");
  check(c.steps >= 0, "setting 'grpo.steps' must be ≥ 0");
  c.prompts_per_step = positive("grpo", "prompts_per_step");
  c.group_size = positive("grpo", "group_size");
  c.epochs = positive("grpo", "epochs");
  c.mini_batches = positive("grpo", "mini_batches");
  c.micro_batch_size = positive("grpo", "micro_batch_size");
  check((c.prompts_per_step * c.group_size) % c.mini_batches == 0,
        "grpo.mini_batches must divide prompts_per_step × group_size");
  c.sampling.temperature = num("grpo", "temperature");
  c.sampling.top_p = num("grpo", "top_p");
  c.decode_graphs = str("grpo", "decode_graphs") == "auto";
  c.advantage = parse_advantage_mode(str("grpo", "advantage"));
  c.loss.clip_low = num("grpo", "clip_low");
  c.loss.clip_high = num("grpo", "clip_high");
  check(c.loss.clip_low >= 0 && c.loss.clip_low < 1 && c.loss.clip_high >= 0,
        "grpo.clip_low must be in [0, 1) and grpo.clip_high ≥ 0");
  c.loss.importance = parse_importance_mode(str("grpo", "importance"));
  c.loss.is_min = num("grpo", "is_min");
  c.loss.is_max = num("grpo", "is_max");
  c.loss.kl_beta = num("grpo", "kl_beta");
  check(c.loss.kl_beta >= 0, "setting 'grpo.kl_beta' must be ≥ 0");

  c.optimizer.lr = num("optimizer", "lr");
  c.optimizer.weight_decay = num("optimizer", "weight_decay");
  c.optimizer.max_grad_norm = num("optimizer", "max_grad_norm");
  c.optimizer.warmup_steps = integer("optimizer", "warmup_steps");
  c.optimizer.schedule = str("optimizer", "schedule");
  c.optimizer.beta1 = num("optimizer", "beta1");
  c.optimizer.beta2 = num("optimizer", "beta2");
  c.optimizer.total_steps = c.steps * c.mini_batches * c.epochs;
  c.optimizer.validate();

  c.sft_steps = integer("sft", "steps");
  check(c.sft_steps >= 0, "setting 'sft.steps' must be ≥ 0");
  c.sft_batch_size = positive("sft", "batch_size");
  c.sft_lr = num("sft", "lr");
  c.validation_every = integer("validation", "every");
  c.samples_per_step = integer("samples", "per_step");
  c.checkpoint_every = integer("checkpoint", "every");
  c.audit_every = integer("audit", "every");
  check(c.audit_every >= 0, "setting 'audit.every' must be ≥ 0 (0: no layer audit)");
  c.fp8_telemetry_every = integer("telemetry", "fp8_every");
  check(c.fp8_telemetry_every >= 0,
        "setting 'telemetry.fp8_every' must be ≥ 0 (0: no FP8 quantization telemetry)");
  c.checkpoint_dir = str("checkpoint", "dir");
  // The settings that may also change live: the same ranges either way (run contract).
  for (const auto& s : live_settings())
    if (auto e = live_setting_error(s.key, *live_setting_in_config(doc, s.key)))
      throw Error("setting '" + std::string(s.config_path) + "': " + *e);
  if (auto e = importance_bounds_error(c.loss.is_min, c.loss.is_max))
    throw Error("settings 'grpo.is_min' and 'grpo.is_max': " + *e);
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
      overlay_file(doc, j, path);
    } else {
      overlay_file(doc, parse_yaml(text, path), path);
    }
  }
  for (const auto& s : sets) apply_override(doc, s);
  return from_json(doc);
}

}  // namespace fp8rl
