// Run configuration: YAML presets (resources/presets/NAME.yaml), a config file, and
// `--set section.key=value` overrides, layered over the defaults below. Unknown keys, wrong
// types and values outside the allowed set are errors naming the key and what is allowed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "contract/live_edit.hpp"
#include "core/json.hpp"
#include "model/config.hpp"
#include "model/kv_cache.hpp"
#include "model/optimizer.hpp"
#include "rl/autopilot.hpp"
#include "rl/grpo.hpp"
#include "rl/tasks.hpp"
#include "rollout/sampling.hpp"

namespace fp8rl {

// Every setting but the model section is a row of the settings schema (contract/settings.hpp):
// its default, range or choices, meaning and whether it is live; from_json binds each to a field
// below. The model section (`model:`) is the model family's config.json (model/family.hpp:
// model_defaults, overlaid with the preset's fields) plus model.checkpoint.
struct RunConfig {
  Json doc;  // the full, validated configuration (defaults + preset + overrides)
  // What loading noticed and the user should hear (names of an earlier version read as today's).
  std::vector<std::string> notes;

  std::string name, backend;
  uint64_t seed = 0;
  TaskConfig task;
  ModelConfig model;
  double init_std = 0.02;
  // Mixture-of-experts models (model.family qwen3_moe): the trainer replays the generator's
  // expert choices (moe.routing_replay rollout), the routers stay as they are
  // (moe.freeze_router), the load-balancing loss's weight (moe.router_aux_loss_coef; 0: off).
  bool moe_routing_replay = false, moe_freeze_router = false;
  double moe_router_aux_loss_coef = 0;
  std::string init_checkpoint;  // model.checkpoint: start from it instead of random init
  // The chat template's system message and thinking switch (task.system_prompt, task.thinking)
  // for prompts in a model's tokenizer.
  std::string chat_system_prompt;
  bool chat_thinking = true;
  std::string chat_date;  // task.date: Llama 3.1's "Today Date"
  Precision default_precision = Precision::fp8;
  std::vector<std::string> precision_overrides;  // "LAYER.MODULE=PRECISION", * wildcards
  KvDType kv_cache = KvDType::bf16;
  // The lm_head's precision (DecoderModel::set_lm_head_precision); an fp32 map runs it in fp32.
  Precision lm_head = Precision::bf16;
  // Decode steps recorded as graphs where the backend can (DecodeGraphs::automatic; "off":
  // every step launched op by op).
  bool decode_graphs = true;
  bool pow2_scales = false;
  // grpo
  int64_t steps = 0, prompts_per_step = 0, group_size = 0, epochs = 1, mini_batches = 1,
          micro_batch_size = 64;
  SamplingParams sampling;
  AdvantageMode advantage = AdvantageMode::mean_std;
  LossConfig loss;
  OptimizerConfig optimizer;
  int64_t sft_steps = 0, sft_batch_size = 32;
  double sft_lr = 0;
  int64_t validation_every = 20, samples_per_step = 4;
  int64_t checkpoint_every = 0;
  // Layer audit (model/weight_audit.hpp) before every audit_every-th RL step's rollout; 0: off.
  int64_t audit_every = 1;
  // FP8 quantization telemetry (scale histograms, saturation, flush-to-zero and error of the
  // weights at recalibration and of one micro-batch's activations and gradients) on every
  // fp8_telemetry_every-th RL step; 0: off. On a device each observed quantization
  // synchronises, which costs more than the step's FP8 saves (docs/benchmarks.md).
  int64_t fp8_telemetry_every = 1;
  std::string checkpoint_dir;
  // The precision autopilot (precision.autopilot, autopilot.*; live: docs/autopilot.md).
  AutopilotSettings autopilot;
  // Demonstrations of FP8 failing: the layers whose MLP gets dead channels with huge down_proj
  // columns before the first RL step (outliers.linears "LAYER.down" / "*.down", parsed), and
  // the columns' magnitude over down_proj's largest weight (outliers.scale).
  std::vector<int64_t> outlier_layers;  // −1: every layer
  double outlier_scale = 0;

  // The precision map of a model of this shape (default + overrides).
  PrecisionMap precision_map(const ModelConfig& shape) const;
  // This configuration with a run's live state written into it: every live setting through its
  // config path, the map as precision.overrides from precision.default. What a checkpoint
  // saves, so a resumed run continues with its live edits.
  RunConfig with_live_state(const LiveState& live) const;

  // The defaults, as a YAML-compatible JSON document (what `fp8rl train --print-config` shows).
  static Json defaults();
  // Builds from a layered document; throws naming the offending key.
  static RunConfig from_json(const Json& doc);
  // Loads a preset by name (searched in FP8RL_PRESETS, then <exe>/../share/fp8rl/presets) or a
  // file, applies `key=value` overrides, validates.
  static RunConfig load(const std::string& preset, const std::string& file,
                        const std::vector<std::string>& sets);
  // The allowed values of every string setting with a fixed set, by dotted key
  // ("task.reward" → auto, shaped, …; "model.model_type" → the families): what
  // `fp8rl train --list-choices` prints.
  static const std::map<std::string, std::vector<std::string>>& choices();
  // Where presets are looked up, and the names found there.
  static std::vector<std::string> preset_dirs();
  static std::vector<std::string> preset_names();
};

// Applies one "a.b.c=value" override to a config document (the key must exist in the defaults).
// notes: where to say what was read under a name of an earlier version (may be null).
void apply_override(Json& doc, const std::string& assignment,
                    std::vector<std::string>* notes = nullptr);
// Sets the setting at a dotted key ("grpo.lr") of a config document to value: overlays
// {"grpo": {"lr": value}} (the key must exist, with value's type). An empty part of the key is
// an error prefixed with `where`.
void set_setting(Json& doc, const std::string& key, const Json& value, const std::string& where,
                 std::vector<std::string>* notes = nullptr);
// Overlays `over` onto `base` (both objects); keys of `over` must exist in `base` with the same
// type. `where` prefixes error messages. The model section of a whole document (where "") is a
// family's config.json: naming another family starts it from that family's defaults, and the
// names of an earlier version are read as today's (noted in notes).
void overlay(Json& base, const Json& over, const std::string& where,
             std::vector<std::string>* notes = nullptr);

}  // namespace fp8rl
