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

// The linear modules of a decoder layer: attention's q, k, v, o and the MLP's gate, up, down
// (every family), then multi-head latent attention's low-rank projections (DeepSeek-V3:
// q_a, q_b when the query is compressed, kv_a, kv_b in place of k and v). A layer has the
// modules its shape says (LayerShape).
enum class Module { q, k, v, o, gate, up, down, q_a, q_b, kv_a, kv_b };
inline constexpr int kModules = 11;
// The linears of a standard layer (dense MLP, standard attention): q … down, the first seven.
inline constexpr int kDenseModules = 7;
// "q_proj", ..., "down_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"
// (checkpoint tensor names).
const char* module_name(Module m);
// "q", ..., "down", "q_a", "q_b", "kv_a", "kv_b" (overrides, maps, the studio's grid).
const char* module_short(Module m);
// The short names, in enum order.
const std::vector<std::string>& module_short_names();
// Parses a short module name; nullopt when it is none.
std::optional<Module> parse_module(const std::string& s);
// Whether m belongs to attention (self_attn.*) rather than the MLP (gate, up, down).
bool is_attention_module(Module m);

// The linears a decoder layer has: attention (standard q, k, v, o, or latent: q or q_a/q_b,
// kv_a, kv_b, o) and MLP (dense gate, up, down; or a router with experts, and beside them a
// shared expert's gate, up, down).
struct LayerShape {
  int64_t experts = 0;          // routed experts (0: a dense MLP)
  bool shared_experts = false;  // (with experts) a shared MLP every token passes through
  bool latent = false;          // multi-head latent attention: kv_a, kv_b instead of k, v
  bool q_lora = false;          // (latent) q_a, q_b instead of q
  // Whether the layer has module m as its own linear (gate/up/down: a dense layer only).
  bool has(Module m) const;
  bool operator==(const LayerShape&) const = default;
};

// One linear of a precision map: a layer's module (q … kv_b), its router, one of its experts'
// gate, up or down, or its shared expert's.
struct LinearSlot {
  int64_t layer = 0;
  Module module = Module::q;  // the router: gate
  int64_t expert = -1;        // ≥ 0: this expert's module
  bool router = false;
  bool shared = false;  // the shared expert's module
  // "L3.q", "L3.router", "L3.e5.up", "L3.shared.up" (names in reports and the studio).
  std::string name() const;
  // The override that sets this linear alone to p ("3.q=bf16", "3.experts.5.up=bf16",
  // "3.shared.up=bf16").
  std::string override_text(Precision p) const;
  bool operator==(const LinearSlot&) const = default;
};

// Precision of every linear of every layer. A layer with experts (mixture of experts) has, besides
// its attention's linears, a router (bf16 unless asked: it stays out of FP8 as NeMo RL and
// Megatron keep it), a gate, up and down for each expert, and (DeepSeekMoE) a shared expert's;
// the layer's own gate/up/down entries then stand for "every expert's", the shared one's
// included (set() changes them all). Activations are f32 when every linear is fp32 and bf16
// otherwise (mixing fp32 with bf16/fp8 is refused by validate()).
class PrecisionMap {
 public:
  PrecisionMap() = default;
  // A dense model's map: `layers` layers, every linear `all`.
  PrecisionMap(int64_t layers, Precision all);
  // A model whose layer l has experts[l] experts (0: a dense MLP); routers get `router` (fp32
  // when all is fp32).
  PrecisionMap(const std::vector<int64_t>& experts, Precision all,
               Precision router = Precision::bf16);
  // A model whose layer l has the linears shapes[l] says.
  PrecisionMap(const std::vector<LayerShape>& shapes, Precision all,
               Precision router = Precision::bf16);

  // A dense linear, or an attention linear of a layer with experts; gate/up/down of a layer with
  // experts: the precision its experts (the shared one included) share (throws when they differ:
  // ask expert(), shared()). Throws for a module the layer does not have.
  Precision at(int64_t layer, Module m) const;
  // Sets a linear; gate/up/down of a layer with experts: every expert's, the shared one's too.
  void set(int64_t layer, Module m, Precision p);
  int64_t layers() const { return static_cast<int64_t>(map_.size()); }
  // The linears layer l has.
  const LayerShape& shape(int64_t layer) const;
  // Whether layer l has module m (a dense one, an attention linear, or its experts' gate/up/down).
  bool has(int64_t layer, Module m) const;
  // Experts of a layer (0: dense MLP), and whether any layer has some.
  int64_t experts(int64_t layer) const;
  bool has_experts() const;
  // An expert's gate, up or down.
  Precision expert(int64_t layer, int64_t e, Module m) const;
  void set_expert(int64_t layer, int64_t e, Module m, Precision p);
  // Whether the experts of a layer (the shared one included) share module m's precision.
  bool experts_uniform(int64_t layer, Module m) const;
  // A layer's shared expert's gate, up or down (layers with a shared expert only).
  Precision shared(int64_t layer, Module m) const;
  void set_shared(int64_t layer, Module m, Precision p);
  // A layer's router (layers with experts only).
  Precision router(int64_t layer) const;
  void set_router(int64_t layer, Precision p);

  // Every linear in order: by layer, its attention linears in Hugging Face order (q, k, v, o or
  // q / q_a, q_b, kv_a, kv_b, o), then gate, up, down of a dense layer, or the router, each
  // expert's gate, up, down and the shared expert's.
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
  // each ("3.experts.5.up=bf16", "3.shared.up=bf16"), routers ("3.router=fp8"); by layer.
  std::vector<std::string> overrides_from(Precision base) const;

  // [{"q": "fp8", "k": "fp8", ...}, ...]: one object per layer (the run store's and the
  // protocol's form) with the layer's own modules; a layer with experts: {"q", "k", "v", "o",
  // "router", "experts": [{"gate", "up", "down"}, ...]} and, with a shared expert, "shared":
  // {"gate", "up", "down"}. Latent attention layers have "q" or "q_a", "q_b", and "kv_a", "kv_b"
  // in place of "k", "v".
  Json to_json() const;
  // The inverse of to_json; throws naming the layer and module of a bad entry.
  static PrecisionMap from_json(const Json& j);

  bool operator==(const PrecisionMap&) const = default;

 private:
  void check_layer(int64_t layer) const;
  std::vector<LayerShape> shapes_;
  std::vector<std::array<Precision, kModules>> map_;
  std::vector<std::array<Precision, 3>> shared_;  // [layer][gate, up, down] (shared expert)
  std::vector<std::vector<std::array<Precision, 3>>> experts_;  // [layer][expert][gate, up, down]
  std::vector<Precision> routers_;                              // [layer]
};

// One parsed override "LAYER.TARGET=PRECISION": LAYER an index or * (L3 also reads as 3);
// TARGET a module (q, k, v, o, gate, up, down, q_a, q_b, kv_a, kv_b or *; in a layer with
// experts gate/up/down/* reach every expert's, the shared one's too), "experts.EXPERT.MODULE"
// (EXPERT an index or *, MODULE gate, up, down or *), "shared.MODULE" (the shared expert's;
// also "shared_experts.MODULE"), or "router" ("mlp.gate" as in the checkpoints' names;
// "mlp.experts…", "mlp.shared_experts…" likewise), or "low_rank" (latent attention's low-rank
// projections q_a, q_b, kv_a, kv_b, which NeMo RL keeps in BF16 for DeepSeek-V3 and Moonlight:
// "*.low_rank=bf16"). The router is reached only by name. A module no layer of the map has is
// an error ("0.k=bf16" on latent attention), and so is low_rank without latent attention.
struct PrecisionOverride {
  enum class Target { module, experts, router, shared, low_rank };
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
  // "0.gate=bf16", "*.down=bf16", "3.experts.*.up=bf16", "*.router=fp8", "3.shared.up=bf16",
  // "*.low_rank=bf16"
  std::string to_string() const;
  // Throws when the layer or expert is beyond the map, names experts / a router / a shared
  // expert of a layer without them, or a module the model does not have.
  void apply(PrecisionMap& pm) const;
  bool operator==(const PrecisionOverride&) const = default;
};

// Parses and applies one override to a map (throws naming the bad part).
void apply_precision_override(PrecisionMap& pm, const std::string& override_text);

}  // namespace fp8rl
