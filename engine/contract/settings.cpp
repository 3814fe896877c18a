#include "contract/settings.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "contract/autopilot.hpp"
#include "contract/precision.hpp"
#include "core/error.hpp"
#include "core/yaml.hpp"

namespace fp8rl {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

const char* kind_name(SettingKind k) {
  switch (k) {
    case SettingKind::integer:
      return "integer";
    case SettingKind::number:
      return "number";
    case SettingKind::boolean:
      return "boolean";
    case SettingKind::text:
      return "text";
    case SettingKind::choice:
      return "choice";
    case SettingKind::list:
      return "list";
  }
  return "?";
}

// Row builders: the kind and the values a setting takes; the rest is named in the table.
SettingSpec row(std::string key, SettingKind kind, std::string def) {
  SettingSpec s;
  s.key = std::move(key);
  s.kind = kind;
  s.default_yaml = std::move(def);
  return s;
}
SettingSpec integer(std::string key, int64_t def, double lo, double hi = kInf,
                    bool lo_open = false) {
  SettingSpec s = row(std::move(key), SettingKind::integer, std::to_string(def));
  s.lo = lo, s.hi = hi, s.lo_open = lo_open;
  return s;
}
SettingSpec positive(std::string key, int64_t def) {
  return integer(std::move(key), def, 0, kInf, true);
}
SettingSpec number(std::string key, const char* def, double lo = -kInf, double hi = kInf,
                   bool lo_open = false, bool hi_open = false) {
  SettingSpec s = row(std::move(key), SettingKind::number, def);
  s.lo = lo, s.hi = hi, s.lo_open = lo_open, s.hi_open = hi_open;
  return s;
}
SettingSpec text(std::string key, const char* def) {
  return row(std::move(key), SettingKind::text, def);
}
SettingSpec list(std::string key, const char* def) {
  return row(std::move(key), SettingKind::list, def);
}
SettingSpec choice(std::string key, const char* def, std::vector<std::string> choices) {
  SettingSpec s = row(std::move(key), SettingKind::choice, def);
  s.choices = std::move(choices);
  return s;
}
SettingSpec boolean(std::string key, bool def) {
  return row(std::move(key), SettingKind::boolean, def ? "true" : "false");
}
// The meaning (and, for a live setting, its live key and when it applies) of a row.
SettingSpec means(SettingSpec s, std::string meaning, std::string live = "",
                  std::string applies = "") {
  s.meaning = std::move(meaning);
  s.live = std::move(live);
  s.applies = std::move(applies);
  return s;
}

// When a new value of an autopilot setting counts.
constexpr const char* kAutopilotApplies = "from the next RL step's observation";

std::vector<SettingSpec> make_specs() {
  const std::vector<std::string> precisions = precision_names();
  // Live ranges are what a run can take: AdamW's learning rate beyond 1 moves every weight by
  // its own size per step; a temperature beyond 100 samples uniformly for any logits; the
  // truncation bounds keep the on-policy weight w = 1 inside [is_min, is_max].
  return {
      means(text("name", "run"), "the run's name in the run list"),
      means(integer("seed", 1, 0),
            "random seed of the model's initialisation, the tasks and sampling"),
      means(choice("backend", "auto", {"auto", "cpu", "cuda"}),
            "where the run computes: auto takes CUDA when it loads and a device exists"),
      means(choice("task.name", "reverse", {"reverse", "addition", "sort", "jsonl", "synthetic"}),
            "the task: a built-in one, jsonl (prompts and answers from task.path), or synthetic "
            "(a benchmark's: random prompts, responses of forced lengths)"),
      means(integer("task.min_len", 3, 1),
            "built-in tasks: shortest input (letters or digits; synthetic: prompt tokens)"),
      means(integer("task.max_len", 6, 1),
            "built-in tasks: longest input (addition: at most 9; synthetic: prompt tokens)"),
      means(positive("task.validation_size", 64), "held-out prompts of each validation"),
      means(text("task.path", "\"\""), "jsonl: the file of records"),
      means(
          choice("task.reward", "auto", {"auto", "shaped", "partial", "exact", "numeric", "math"}),
          "how a response is scored (auto: shaped for the built-in tasks, exact for jsonl)"),
      means(text("task.prompt_key", "prompt"), "jsonl: the record's prompt field"),
      means(text("task.answer_key", "answer"), "jsonl: the record's answer field"),
      means(text("task.instruction", "\"\""), "jsonl: a line appended to every prompt"),
      means(integer("task.max_response_tokens", 0, 0),
            "jsonl: the response budget in tokens (0: the longest answer + 1); synthetic: every "
            "response's length (the longest, with task.response_tokens_min)"),
      means(integer("task.response_tokens_min", 0, 0),
            "synthetic: each response's length drawn from [this, task.max_response_tokens] (0: "
            "exactly task.max_response_tokens)"),
      means(
          integer("task.vocab_size", 256, 4, 1 << 30),
          "synthetic: the vocabulary, and so the embedding's and the head's rows (Qwen3: 151936)"),
      means(text("task.system_prompt", "\"\""), "the chat template's system message"),
      means(text("task.date", "\"26 Jul 2024\""),
            "Llama 3.1's \"Today Date\" in every prompt, pinned for reproducible prompts"),
      means(choice("task.thinking", "\"on\"", {"on", "off"}), "Qwen3's thinking switch in prompts"),
      means(text("model.checkpoint", "\"\""),
            "a Hugging Face folder to start from (its config.json replaces the model section)"),
      means(choice("moe.routing_replay", "\"off\"", {"off", "rollout"}),
            "rollout: the trainer routes each token through the experts the generator chose"),
      means(boolean("moe.freeze_router", false), "the routers' weights are not trained"),
      means(number("moe.router_aux_loss_coef", "0.0", 0),
            "weight of the load-balancing loss (0: off; in RL it made log-probs diverge)"),
      means(choice(setting_key::kPrecisionDefault, "fp8", precisions),
            "the precision of every linear unless an override says otherwise"),
      means(list(setting_key::kPrecisionOverrides, "[]"),
            "per-linear precisions, LAYER.MODULE=PRECISION with * wildcards (0.gate=bf16)"),
      means(choice("precision.kv_cache", "bf16", precisions), "the KV cache's element type"),
      means(choice("precision.lm_head", "bf16", precisions), "the output head's precision"),
      means(choice("precision.scale_format", "fp32", {"fp32", "pow2"}),
            "FP8 block scales: any FP32 value, or powers of two"),
      means(boolean(autopilot::kSwitchKey, false),
            "the precision autopilot: moves FP8 linears to BF16 when the watched metric stays "
            "above its threshold (autopilot.*; docs/autopilot.md)",
            autopilot::kLive, kAutopilotApplies),
      means(number("optimizer.lr", "0.001", 0, 1, true),
            "learning rate of the policy optimizer, in (0, 1]", "lr",
            "from the next optimizer update"),
      means(number("optimizer.weight_decay", "0.0", 0), "AdamW's decoupled weight decay"),
      means(number("optimizer.max_grad_norm", "1.0", 0), "gradient clipping (0: none)"),
      means(integer("optimizer.warmup_steps", 0, 0), "linear warm-up of the learning rate"),
      means(choice("optimizer.schedule", "constant", {"constant", "cosine"}),
            "the learning rate after warm-up (cosine: to 0.1 × lr at the last step)"),
      means(number("optimizer.beta1", "0.9", 0, 1, false, true), "AdamW's first-moment decay"),
      means(number("optimizer.beta2", "0.999", 0, 1, false, true), "AdamW's second-moment decay"),
      means(integer("grpo.steps", 400, 0), "RL steps"),
      means(positive(setting_key::kPromptsPerStep, 16), "prompts of each step"),
      means(positive("grpo.group_size", 8), "responses per prompt (a GRPO group)"),
      means(number("grpo.temperature", "1.0", 0, 100, true),
            "sampling temperature of the rollouts, in (0, 100]", "temperature",
            "from the next rollout"),
      means(number("grpo.top_p", "1.0", 0, 1, true), "nucleus sampling's probability mass"),
      means(choice("grpo.decode_graphs", "auto", {"auto", "off"}),
            "decode steps replayed as CUDA graphs where the backend can"),
      means(choice("grpo.advantage", "mean_std", {"mean_std", "leave_one_out"}),
            "each response's advantage from its group's rewards"),
      means(number("grpo.clip_low", "0.2", 0, 1, false, true), "PPO ratio clip below 1"),
      means(number("grpo.clip_high", "0.2", 0), "PPO ratio clip above 1"),
      means(choice("grpo.importance", "tis", {"tis", "icepop", "off"}),
            "the generator/trainer importance weight: truncated, masked outside bounds, or none"),
      means(number("grpo.is_min", "0.0", 0, 1),
            "lower importance-weight bound C_min, in [0, 1] and below is_max", "is_min",
            "from the next step's loss"),
      means(number("grpo.is_max", "2.0", 1, 1e6),
            "upper importance-weight bound C, in [1, 1e6] and above is_min", "is_max",
            "from the next step's loss"),
      means(number(setting_key::kKlBeta, "0.0", 0),
            "weight of the KL penalty to the frozen reference"),
      means(positive("grpo.epochs", 1), "passes over each step's responses"),
      means(positive(setting_key::kMiniBatches, 1),
            "optimizer updates per epoch (divides the batch)"),
      means(positive("grpo.micro_batch_size", 64), "sequences per forward/backward pass"),
      means(integer("sft.steps", 0, 0), "supervised warm-up steps before RL"),
      means(positive("sft.batch_size", 32), "examples per warm-up step"),
      means(number("sft.lr", "0.001", 0, 1, true), "the warm-up's learning rate"),
      means(integer("validation.every", 20, 0, 1e9),
            "steps between validations, a whole number in [0, 1e9] (0: only at start and end)",
            "validation_every", "from the next step (validation after every k-th)"),
      means(integer("samples.per_step", 4, 0), "responses recorded per step for the samples view"),
      means(integer("checkpoint.every", 0, 0), "steps between checkpoints (0: at the end only)"),
      means(text("checkpoint.dir", "\"\""), "where checkpoints go (empty: beside the run store)"),
      means(integer("audit.every", 1, 0),
            "the layer audit (generator vs trainer weights) every k-th RL step (0: off)"),
      means(integer("telemetry.fp8_every", 1, 0),
            "FP8 quantization telemetry every k-th RL step (0: off)"),
      means(choice("autopilot.metric", autopilot::kWatchTokenMultProbError,
                   {autopilot::kWatchTokenMultProbError, autopilot::kWatchGenKlError,
                    autopilot::kWatchPolicyKl}),
            "the run-level metric the autopilot watches (fp8/policy_kl: KL of the BF16 policy "
            "to the run's, measured on each step's first micro-batch)",
            autopilot::kLiveMetric, kAutopilotApplies),
      means(number("autopilot.threshold", "1.05", 0, kInf, true),
            "the watched metric's level above which FP8 hurts (positive)",
            autopilot::kLiveThreshold, kAutopilotApplies),
      means(integer("autopilot.patience", 3, 1, 1e6),
            "RL steps in a row above the threshold before the autopilot acts, in [1, 1e6]",
            autopilot::kLivePatience, kAutopilotApplies),
      means(integer("autopilot.moves", 1, 1, 1000),
            "linears moved to BF16 per action (the worst by their FP8 error), in [1, 1000]",
            autopilot::kLiveMoves, kAutopilotApplies),
      means(number("autopilot.budget", "0.25", 0, 1),
            "the most the autopilot may hold in BF16: a share of the GEMM FLOPs or of the "
            "linears (autopilot.budget_unit), in [0, 1]",
            autopilot::kLiveBudget, kAutopilotApplies),
      means(choice("autopilot.budget_unit", autopilot::kUnitFlops,
                   {autopilot::kUnitFlops, autopilot::kUnitLinears}),
            "what the budget counts: GEMM FLOPs per token, or linears", autopilot::kLiveBudgetUnit,
            kAutopilotApplies),
      means(integer("autopilot.cooldown", 5, 0, 1e6),
            "RL steps after an action during which the autopilot only watches, in [0, 1e6]",
            autopilot::kLiveCooldown, kAutopilotApplies),
      means(number("autopilot.hysteresis", "0.5", 0, 1),
            "calm means below the threshold by this share of its distance from the metric's "
            "ideal value, in [0, 1]",
            autopilot::kLiveHysteresis, kAutopilotApplies),
      means(boolean("autopilot.return_to_fp8", false),
            "whether a linear the autopilot moved goes back to FP8 after a calm period",
            autopilot::kLiveReturn, kAutopilotApplies),
      means(integer("autopilot.calm_steps", 20, 1, 1e6),
            "calm RL steps in a row before a linear returns to FP8, in [1, 1e6]",
            autopilot::kLiveCalmSteps, kAutopilotApplies),
      means(boolean("autopilot.confirm", false),
            "confirm the ranking by each candidate's KL (the sensitivity advisor's measure) on "
            "the step's first micro-batch",
            autopilot::kLiveConfirm, kAutopilotApplies),
      means(list("outliers.linears", "[]"),
            "demonstrations: MLP down projections (LAYER.down, * for every layer) given a dead "
            "channel with huge weights per 128 columns before the first RL step"),
      means(number("outliers.scale", "300000.0", 1),
            "the injected columns' magnitude over the linear's largest weight (≥ 1)"),
  };
}

// The value's own words: 0.0003, "tis", [..].
std::string shown(const Json& v) {
  return v.is_number() ? number_text(v.as_number()) : v.dump();
}

}  // namespace

namespace {

// "positive", "≥ 0", "in (0, 1]" ("" when unbounded).
std::string range_text(const SettingSpec& s) {
  if (s.lo == 0 && s.lo_open && s.hi == kInf) return "positive";
  if (s.hi == kInf && s.lo != -kInf) return (s.lo_open ? "> " : "≥ ") + number_text(s.lo);
  if (s.lo == -kInf && s.hi != kInf) return (s.hi_open ? "< " : "≤ ") + number_text(s.hi);
  if (s.lo == -kInf) return "";
  return std::string("in ") + (s.lo_open ? "(" : "[") + number_text(s.lo) + ", " +
         number_text(s.hi) + (s.hi_open ? ")" : "]");
}

}  // namespace

std::string SettingSpec::allowed() const {
  switch (kind) {
    case SettingKind::boolean:
      return "true or false";
    case SettingKind::choice:
      return "one of " + join(choices);
    case SettingKind::list:
      return "a list of strings";
    case SettingKind::text:
      return "";
    case SettingKind::number:
      return range_text(*this).empty() ? "a number" : range_text(*this);
    case SettingKind::integer:
      break;
  }
  const std::string r = range_text(*this);
  return r == "positive" ? "a positive whole number"
         : r.empty()     ? "a whole number"
                         : "a whole number " + r;
}

std::optional<std::string> SettingSpec::problem(const Json& v) const {
  switch (kind) {
    case SettingKind::boolean:
      if (!v.is_bool()) return "must be true or false, got " + v.dump();
      return std::nullopt;
    case SettingKind::text:
      if (!v.is_string()) return "must be a string, got " + v.dump();
      return std::nullopt;
    case SettingKind::choice: {
      if (!v.is_string()) return "must be a string, got " + v.dump();
      for (const auto& c : choices)
        if (v.as_string() == c) return std::nullopt;
      return "is '" + v.as_string() + "' (allowed: " + join(choices) + ")";
    }
    case SettingKind::list:
      if (!v.is_array()) return "must be a list, got " + v.dump();
      for (const auto& x : v.as_array())
        if (!x.is_string()) return "must be a list of strings, got " + v.dump();
      return std::nullopt;
    case SettingKind::integer:
    case SettingKind::number:
      break;
  }
  if (!v.is_number()) return "must be a number, got " + v.dump();
  const double x = v.as_number();
  const bool below = lo_open ? x <= lo : x < lo;
  const bool above = hi_open ? x >= hi : x > hi;
  if (!std::isfinite(x)) return "must be a finite number, got " + shown(v);
  if (below || above) return "must be " + range_text(*this) + ", got " + shown(v);
  if (kind == SettingKind::integer && x != std::floor(x))
    return "must be a whole number, got " + shown(v);
  return std::nullopt;
}

Json SettingSpec::default_value() const {
  return parse_yaml("v: " + default_yaml, "the default of " + key).at("v");
}

const std::vector<SettingSpec>& setting_specs() {
  static const std::vector<SettingSpec> specs = make_specs();
  return specs;
}

const SettingSpec* find_setting(const std::string& key) {
  static const std::map<std::string, const SettingSpec*> index = [] {
    std::map<std::string, const SettingSpec*> m;
    for (const auto& s : setting_specs()) m[s.key] = &s;
    return m;
  }();
  const auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

const Json* find_setting_value(const Json& doc, const std::string& key) {
  const Json* v = &doc;
  size_t begin = 0;
  while (true) {
    const size_t dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? dot : dot - begin);
    if (!v->is_object() || !v->contains(part)) return nullptr;
    v = &v->at(part);
    if (dot == std::string::npos) return v;
    begin = dot + 1;
  }
}

const Json& read_setting(const Json& doc, const std::string& key) {
  const SettingSpec* s = find_setting(key);
  check(s != nullptr, "no setting '" + key + "' in the settings schema");
  const Json* v = find_setting_value(doc, key);
  check(v != nullptr, "setting '" + key + "' is missing");
  if (auto p = s->problem(*v)) throw Error("setting '" + key + "' " + *p);
  return *v;
}

Json setting_defaults() {
  Json doc(Json::Object{});
  for (const auto& s : setting_specs()) {
    Json* at = &doc;
    size_t begin = 0;
    for (size_t dot; (dot = s.key.find('.', begin)) != std::string::npos; begin = dot + 1) {
      const std::string part = s.key.substr(begin, dot - begin);
      if (!at->contains(part)) (*at)[part] = Json(Json::Object{});
      at = &(*at)[part];
    }
    (*at)[s.key.substr(begin)] = s.default_value();
  }
  return doc;
}

Json settings_to_json() {
  Json::Array rows;
  for (const auto& s : setting_specs()) {
    Json r;
    r["key"] = s.key;
    r["kind"] = kind_name(s.kind);
    r["default"] = s.default_value();
    r["allowed"] = s.allowed();
    if (s.kind == SettingKind::choice) {
      Json::Array c;
      for (const auto& x : s.choices) c.emplace_back(x);
      r["choices"] = Json(std::move(c));
    }
    if (s.kind == SettingKind::integer || s.kind == SettingKind::number) {
      if (std::isfinite(s.lo)) r["min"] = s.lo;
      if (std::isfinite(s.hi)) r["max"] = s.hi;
    }
    r["meaning"] = s.meaning;
    if (!s.live.empty()) {
      r["live"] = s.live;
      r["applies"] = s.applies;
    }
    rows.emplace_back(std::move(r));
  }
  return Json(std::move(rows));
}

std::string settings_markdown() {
  std::string out =
      "| setting | default | allowed | meaning | live |\n"
      "|---|---|---|---|---|\n";
  for (const auto& s : setting_specs()) {
    const Json d = s.default_value();
    std::string def = d.is_string()   ? (d.as_string().empty() ? "\"\"" : d.as_string())
                      : d.is_number() ? number_text(d.as_number())
                                      : d.dump();
    out += "| `" + s.key + "` | `" + def + "` | " + s.allowed() + " | " + s.meaning + " | " +
           (s.live.empty() ? "" : "`" + s.live + "`, " + s.applies) + " |\n";
  }
  return out;
}

}  // namespace fp8rl
