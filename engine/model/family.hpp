// Model families: the Hugging Face decoder architectures the engine runs (Qwen3ForCausalLM,
// LlamaForCausalLM, Qwen3MoeForCausalLM). A family says how its config.json reads into a
// ModelConfig and is written back, and which chat template its prompts use; the decoder
// (model/decoder.hpp) runs every family from the ModelConfig's fields (QK-norm or not, rotary
// scaling, dense or expert MLP, tied head), and the tensor names follow from them.
//
// A run configuration's `model:` section is a family's config.json too (rl/run_config.hpp): the
// family's defaults (model_defaults) for a small random model, overlaid with the preset's keys.
//
// Adding a family: one file in model/families/ defining its ModelFamily, and its line in
// model_families() (model/family.cpp). docs/model-families.md walks through it.
#pragma once

#include <string>
#include <vector>

#include "core/json.hpp"
#include "model/config.hpp"

namespace fp8rl {

struct ModelFamily {
  const char* name;           // "qwen3", "llama", "qwen3_moe" (ModelConfig::family)
  const char* architecture;   // config.json's architectures[0]
  const char* model_type;     // config.json's model_type
  const char* chat_template;  // the prompts' template (text/chat_template.hpp): "qwen3", "llama3"
  // Reads the family's own fields of config.json into c (the shared ones are read already);
  // throws naming the key of a missing or unsupported value.
  void (*read)(const Json& config, ModelConfig& c);
  // Writes the family's own fields into config.json (the shared ones are written already).
  void (*write)(const ModelConfig& c, Json& config);
  // YAML: the family's own config.json fields for a random model, beside the shared ones of
  // model_defaults() ("" when it has none). Every field a preset may set is in the defaults.
  const char* defaults;
};

// Every family, in registration order.
const std::vector<const ModelFamily*>& model_families();
// "qwen3, llama, qwen3_moe, deepseek_v3".
std::string model_family_names();
// The family called name; throws naming the known ones.
const ModelFamily& model_family(const std::string& name);
// The family of a config.json (architectures[0], else model_type); throws naming what the
// file says and the families known.
const ModelFamily& model_family_of(const Json& config);

// The config.json of a small random model of this family (what a run configuration's model
// section starts from): architectures, model_type, the shape and rotary fields every family
// reads, initializer_range, and the family's own defaults. No vocab_size (the task's tokenizer
// sets it) and no eos_token_id.
Json model_defaults(const ModelFamily& f);

// Helpers for the families' read functions.
// config.json's rope_scaling (null, absent, or an object with rope_type / type) into c; throws
// naming a missing field or an unsupported type.
void read_rope_scaling(const Json& config, ModelConfig& c);
void write_rope_scaling(const ModelConfig& c, Json& config);

}  // namespace fp8rl
