// Precisions of the linear layers and the per-layer precision map: the names, the module list,
// the one override grammar "LAYER.MODULE=PRECISION" and the map's JSON form. Every part of the
// project (engine, store, workers, the command line, the studio) asks this file; none spells a
// precision, a module or the grammar on its own.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"

namespace fp8rl {

// Precision of a linear layer's GEMMs (and of the KV cache). fp32 exists on the CPU backend
// only (the reference), and an fp32 map is all fp32.
enum class Precision { fp32, bf16, fp8 };
inline constexpr int kPrecisions = 3;
const char* precision_name(Precision p);  // "fp32", "bf16", "fp8"
// Parses a precision name; throws naming the allowed values.
Precision parse_precision(const std::string& s);
// The names, in enum order ({"fp32", "bf16", "fp8"}).
const std::vector<std::string>& precision_names();

// The seven linear modules of a decoder layer, in Hugging Face order.
enum class Module { q, k, v, o, gate, up, down };
inline constexpr int kModules = 7;
const char* module_name(Module m);   // "q_proj", ..., "down_proj" (checkpoint tensor names)
const char* module_short(Module m);  // "q", ..., "down" (overrides, maps, the studio's grid)
// The short names, in order ({"q", "k", "v", "o", "gate", "up", "down"}).
const std::vector<std::string>& module_short_names();
// Parses a short module name; nullopt when it is none.
std::optional<Module> parse_module(const std::string& s);

// Precision of every linear of every layer. Activations are f32 when every linear is fp32 and
// bf16 otherwise (mixing fp32 with bf16/fp8 is refused by validate()).
class PrecisionMap {
 public:
  PrecisionMap() = default;
  PrecisionMap(int64_t layers, Precision all);

  Precision at(int64_t layer, Module m) const;
  void set(int64_t layer, Module m, Precision p);
  int64_t layers() const { return static_cast<int64_t>(map_.size()); }
  bool all_fp32() const;
  // Throws when fp32 is mixed with other precisions.
  void validate() const;
  // "fp8" / "bf16" / "fp32" when uniform, else e.g. "fp8 (3 of 28 linears bf16)".
  std::string summary() const;
  // The overrides that turn a map of `base` everywhere into this one, one per differing
  // linear ("0.gate=bf16"), by layer then module.
  std::vector<std::string> overrides_from(Precision base) const;

  // [{"q": "fp8", "k": "fp8", ...}, ...]: one object per layer (the run store's and the
  // protocol's form).
  Json to_json() const;
  // The inverse of to_json; throws naming the layer and module of a bad entry.
  static PrecisionMap from_json(const Json& j);

  bool operator==(const PrecisionMap&) const = default;

 private:
  std::vector<std::array<Precision, kModules>> map_;
};

// One parsed override "LAYER.MODULE=PRECISION": LAYER an index or *, MODULE a short module name
// or *. layer / module are nullopt for *.
struct PrecisionOverride {
  std::optional<int64_t> layer;
  std::optional<Module> module;
  Precision precision = Precision::fp8;

  // Parses the grammar; `layers` (when ≥ 0) bounds the index. Throws naming the bad part and
  // the grammar.
  static PrecisionOverride parse(const std::string& text, int64_t layers = -1);
  std::string to_string() const;  // "0.gate=bf16", "*.down=bf16"
  // Throws when the layer index is beyond the map.
  void apply(PrecisionMap& pm) const;
  bool operator==(const PrecisionOverride&) const = default;
};

// Parses and applies one override to a map (throws naming the bad part).
void apply_precision_override(PrecisionMap& pm, const std::string& override_text);

}  // namespace fp8rl
