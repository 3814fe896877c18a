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

// One linear of a precision map: a layer's module (q … down), its router, or one of its experts'
// gate, up or down.
struct LinearSlot {
  int64_t layer = 0;
  Module module = Module::q;  // the router: gate
  int64_t expert = -1;        // ≥ 0: this expert's module
  bool router = false;
  // "L3.q", "L3.router", "L3.e5.up" (names in reports and the studio).
  std::string name() const;
  // The override that sets this linear alone to p ("3.q=bf16", "3.experts.5.up=bf16").
  std::string override_text(Precision p) const;
  bool operator==(const LinearSlot&) const = default;
};

// Precision of every linear of every layer. A layer with experts (mixture of experts) has, besides
// its attention's q, k, v, o, a router (bf16 unless asked: it stays out of FP8 as NeMo RL and
// Megatron keep it) and a gate, up and down for each expert; the layer's own gate/up/down
// entries then stand for "every expert's" (set() changes them all). Activations are f32 when
// every linear is fp32 and bf16 otherwise (mixing fp32 with bf16/fp8 is refused by validate()).
class PrecisionMap {
 public:
  PrecisionMap() = default;
  // A dense model's map: `layers` layers, every linear `all`.
  PrecisionMap(int64_t layers, Precision all);
  // A model whose layer l has experts[l] experts (0: a dense MLP); routers get `router` (fp32
  // when all is fp32).
  PrecisionMap(const std::vector<int64_t>& experts, Precision all,
               Precision router = Precision::bf16);

  // A dense linear, or q/k/v/o of a layer with experts; gate/up/down of a layer with experts:
  // the precision its experts share (throws when they differ: ask expert()).
  Precision at(int64_t layer, Module m) const;
  // Sets a linear; gate/up/down of a layer with experts: every expert's.
  void set(int64_t layer, Module m, Precision p);
  int64_t layers() const { return static_cast<int64_t>(map_.size()); }
  // Experts of a layer (0: dense MLP), and whether any layer has some.
  int64_t experts(int64_t layer) const;
  bool has_experts() const;
  // An expert's gate, up or down.
  Precision expert(int64_t layer, int64_t e, Module m) const;
  void set_expert(int64_t layer, int64_t e, Module m, Precision p);
  // Whether the experts of a layer share module m's precision.
  bool experts_uniform(int64_t layer, Module m) const;
  // A layer's router (layers with experts only).
  Precision router(int64_t layer) const;
  void set_router(int64_t layer, Precision p);

  // Every linear in order: by layer, q, k, v, o, then gate, up, down of a dense layer or the
  // router and each expert's gate, up, down.
  std::vector<LinearSlot> linears() const;
  Precision get(const LinearSlot& s) const;
  void set(const LinearSlot& s, Precision p);

  bool all_fp32() const;
  // Throws when fp32 is mixed with other precisions.
  void validate() const;
  // "fp8" / "bf16" / "fp32" when uniform, else e.g. "fp8 (3 of 28 linears bf16)"; routers
  // count only when one is not bf16 (their default).
  std::string summary() const;
  // The overrides that turn a map of `base` everywhere (routers bf16) into this one: per
  // differing linear ("0.gate=bf16"), experts compactly when they agree ("3.up=bf16"), else one
  // each ("3.experts.5.up=bf16"), routers ("3.router=fp8"); by layer.
  std::vector<std::string> overrides_from(Precision base) const;

  // [{"q": "fp8", "k": "fp8", ...}, ...]: one object per layer (the run store's and the
  // protocol's form); a layer with experts: {"q", "k", "v", "o", "router", "experts":
  // [{"gate", "up", "down"}, ...]}.
  Json to_json() const;
  // The inverse of to_json; throws naming the layer and module of a bad entry.
  static PrecisionMap from_json(const Json& j);

  bool operator==(const PrecisionMap&) const = default;

 private:
  void check_layer(int64_t layer) const;
  std::vector<std::array<Precision, kModules>> map_;
  std::vector<std::vector<std::array<Precision, 3>>> experts_;  // [layer][expert][gate, up, down]
  std::vector<Precision> routers_;                               // [layer]
};

// One parsed override "LAYER.TARGET=PRECISION": LAYER an index or * (L3 also reads as 3);
// TARGET a module (q, k, v, o, gate, up, down or *; in a layer with experts gate/up/down/*
// reach every expert's), "experts.EXPERT.MODULE" (EXPERT an index or *, MODULE gate, up, down
// or *), or "router" ("mlp.gate" as in the checkpoints' names; "mlp.experts…" likewise). The
// router is reached only by name.
struct PrecisionOverride {
  enum class Target { module, experts, router };
  std::optional<int64_t> layer;
  std::optional<Module> module;
  Precision precision = Precision::fp8;
  Target target = Target::module;
  std::optional<int64_t> expert;  // Target::experts: which (unset: *)

  PrecisionOverride() = default;
  PrecisionOverride(std::optional<int64_t> l, std::optional<Module> m, Precision p,
                    Target t = Target::module, std::optional<int64_t> e = std::nullopt)
      : layer(l), module(m), precision(p), target(t), expert(e) {}

  // Parses the grammar; `layers` (when ≥ 0) bounds the index. Throws naming the bad part and
  // the grammar.
  static PrecisionOverride parse(const std::string& text, int64_t layers = -1);
  // "0.gate=bf16", "*.down=bf16", "3.experts.*.up=bf16", "*.router=fp8"
  std::string to_string() const;
  // Throws when the layer or expert is beyond the map, or names experts / a router of a layer
  // without them.
  void apply(PrecisionMap& pm) const;
  bool operator==(const PrecisionOverride&) const = default;
};

// Parses and applies one override to a map (throws naming the bad part).
void apply_precision_override(PrecisionMap& pm, const std::string& override_text);

}  // namespace fp8rl
