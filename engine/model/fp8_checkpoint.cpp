#include "model/fp8_checkpoint.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/files.hpp"
#include "fp8/codec.hpp"
#include "model/checkpoint.hpp"

namespace fp8rl {
namespace {

// -1, nan, 0.0078125: a value as the file holds it.
std::string number_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::vector<int64_t> param_shape(const Param& p) {
  return p.master.rows == 1 ? std::vector<int64_t>{p.master.cols}
                            : std::vector<int64_t>{p.master.rows, p.master.cols};
}

// A non-linear tensor as an export writes it: BF16, but the router's score-correction bias F32.
SafeTensor export_tensor(Backend& be, const Param& p) {
  const bool f32 = p.name.ends_with(".e_score_correction_bias");
  return make_safetensor(download_floats(be, p.master), param_shape(p), f32 ? "F32" : "BF16");
}

std::string module_of(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - 7);  // without ".weight"
}

struct LinearRef {
  LinearSlot slot;
  Linear* lin;
};

// The decoder linears (routers and experts' included) by weight name.
std::map<std::string, LinearRef> decoder_linears(DecoderModel& model) {
  std::map<std::string, LinearRef> out;
  for (const LinearSlot& s : model.linear_slots()) {
    Linear& lin = model.linear(s);
    out.emplace(lin.weight().name, LinearRef{s, &lin});
  }
  return out;
}

// config.json of an export: the base (or the model's own) with torch_dtype set.
Json export_config(DecoderModel& model, const Json& base, const std::string& dir) {
  Json cfg = base.is_null() ? model.config().to_json() : base;
  check(cfg.is_object(), dir + "/config.json: the base configuration is not a JSON object");
  // The base must describe this model: sizes read back from it must be the model's.
  check(ModelConfig::from_json(cfg).to_json().dump() == model.config().to_json().dump(),
        dir + "/config.json: the base configuration's sizes differ from the model's");
  cfg["torch_dtype"] = "bfloat16";
  return cfg;
}

// The E4M3 tiles an export writes for a linear: the checkpoint's own when it gave some, else
// our quantizer's tiles of the masters.
Fp8WeightTiles export_tiles(Backend& be, const Linear& lin, const QuantOptions& qopt) {
  const int64_t N = lin.out_features(), K = lin.in_features();
  const int64_t ns = scale_count(ScaleBlock::tile128x128, N, K);
  Fp8Tensor fresh;
  const Fp8Matrix* q = nullptr;
  Fp8WeightTiles t;
  if (const Fp8Tensor* g = lin.given_fp8_weight(); g && g->q.format == Fp8Format::e4m3) {
    q = &g->q;
    t.scale_dtype = lin.given_scale_dtype();
  } else {
    fresh = Fp8Tensor::make(be, N, K, ScaleBlock::tile128x128, Fp8Format::e4m3);
    be.quantize(lin.weight().master.m(), fresh.q, qopt, nullptr);
    q = &fresh.q;
  }
  t.format = Fp8Format::e4m3;
  t.codes.resize(static_cast<size_t>(N * K));
  t.scale_inv.assign(static_cast<size_t>(ns), 1.0f);
  be.download(t.codes.data(), q->codes, t.codes.size());
  be.download(t.scale_inv.data(), q->scale_inv, t.scale_inv.size() * 4);
  return t;
}

}  // namespace

Json BlockFp8Config::to_json() const {
  Json q;
  q["quant_method"] = "fp8";
  q["fmt"] = "e4m3";
  q["activation_scheme"] = "dynamic";
  q["weight_block_size"] = Json(Json::Array{Json(int64_t{kBlock}), Json(int64_t{kBlock})});
  Json::Array keep;
  for (const auto& m : modules_to_not_convert) keep.push_back(Json(m));
  q["modules_to_not_convert"] = Json(std::move(keep));
  return q;
}

std::optional<BlockFp8Config> parse_block_fp8_config(const Json& config, const std::string& where) {
  if (!config.is_object() || !config.contains("quantization_config") ||
      config.at("quantization_config").is_null())
    return std::nullopt;
  const Json& q = config.at("quantization_config");
  const std::string at = where + ": quantization_config";
  check(q.is_object(), at + " is not a JSON object");
  auto text = [&](const char* key) -> std::string {
    const Json& v = q.at(key);
    return v.is_string() ? "\"" + v.as_string() + "\"" : v.dump();
  };
  check(q.contains("quant_method"), at + ".quant_method is missing; supported: \"fp8\"");
  check(q.at("quant_method").is_string() && q.at("quant_method").as_string() == "fp8",
        at + ".quant_method is " + text("quant_method") +
            "; supported: \"fp8\" (block-wise FP8, weight_block_size [128, 128])");
  if (q.contains("fmt") && !q.at("fmt").is_null())
    check(q.at("fmt").is_string() &&
              (q.at("fmt").as_string() == "e4m3" || q.at("fmt").as_string() == "float8_e4m3fn"),
          at + ".fmt is " + text("fmt") + "; supported: \"e4m3\"");
  if (q.contains("activation_scheme") && !q.at("activation_scheme").is_null())
    check(
        q.at("activation_scheme").is_string() && q.at("activation_scheme").as_string() == "dynamic",
        at + ".activation_scheme is " + text("activation_scheme") +
            "; supported: \"dynamic\" (activations are quantized 1x128 on the fly)");
  check(q.contains("weight_block_size") && !q.at("weight_block_size").is_null(),
        at + ".weight_block_size is missing (per-tensor FP8 with weight_scale); supported: " +
            "[128, 128]");
  const Json& bs = q.at("weight_block_size");
  const bool block_ok = bs.is_array() && bs.as_array().size() == 2 &&
                        bs.as_array()[0].is_number() && bs.as_array()[1].is_number() &&
                        bs.as_array()[0].as_number() == kBlock &&
                        bs.as_array()[1].as_number() == kBlock;
  if (!block_ok) {
    std::string shown = bs.dump();
    if (bs.is_array()) {  // "[64, 64]", as people write it
      shown = "[";
      for (size_t i = 0; i < bs.as_array().size(); ++i)
        shown += (i ? ", " : "") + bs.as_array()[i].dump();
      shown += "]";
    }
    throw Error(at + ".weight_block_size is " + shown + "; supported: [128, 128]");
  }
  BlockFp8Config c;
  if (q.contains("modules_to_not_convert") && !q.at("modules_to_not_convert").is_null())
    for (const auto& m : q.at("modules_to_not_convert").as_array(at + ".modules_to_not_convert"))
      c.modules_to_not_convert.push_back(m.as_string(at + ".modules_to_not_convert item"));
  return c;
}

std::vector<float> tile_scales_to_hf(const std::vector<float>& ours, int64_t rows, int64_t cols) {
  const int64_t R = blocks_of(rows), C = blocks_of(cols), L4 = tile_scale_stride(cols);
  check(static_cast<int64_t>(ours.size()) == R * L4, "tile_scales_to_hf: wrong scale count");
  std::vector<float> hf(static_cast<size_t>(R * C));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      hf[static_cast<size_t>(r * C + c)] = ours[static_cast<size_t>(r * L4 + c)];
  return hf;
}

std::vector<float> tile_scales_from_hf(const std::vector<float>& hf, int64_t rows, int64_t cols) {
  const int64_t R = blocks_of(rows), C = blocks_of(cols), L4 = tile_scale_stride(cols);
  check(static_cast<int64_t>(hf.size()) == R * C, "tile_scales_from_hf: wrong scale count");
  // The padding is never read as a scale; 1 keeps it a harmless finite value.
  std::vector<float> ours(static_cast<size_t>(R * L4), 1.0f);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      ours[static_cast<size_t>(r * L4 + c)] = hf[static_cast<size_t>(r * C + c)];
  return ours;
}

Fp8WeightTiles read_fp8_weight(const SafeTensor& weight, const SafeTensor& scale,
                               const std::string& name, const std::string& scale_name, int64_t rows,
                               int64_t cols, const std::string& where) {
  check(weight.dtype == "F8_E4M3" || weight.dtype == "F8_E5M2",
        where + ": tensor " + name + " has dtype " + weight.dtype + ", expected F8_E4M3");
  check(weight.shape == std::vector<int64_t>{rows, cols},
        where + ": tensor " + name + " has shape " + shape_str(weight.shape) + ", expected " +
            shape_str({rows, cols}));
  const std::vector<int64_t> want = {blocks_of(rows), blocks_of(cols)};
  check(
      scale.dtype == "F32" || scale.dtype == "BF16",
      where + ": tensor " + scale_name + " has dtype " + scale.dtype + ", expected F32 (or BF16)");
  check(scale.shape == want, where + ": tensor " + scale_name + " has shape " +
                                 shape_str(scale.shape) + ", expected " + shape_str(want) +
                                 " (one scale per 128x128 tile of " + name + " " +
                                 shape_str({rows, cols}) + ")");
  Fp8WeightTiles t;
  t.format = weight.dtype == "F8_E4M3" ? Fp8Format::e4m3 : Fp8Format::e5m2;
  t.scale_dtype = scale.dtype == "BF16" ? DType::bf16 : DType::f32;
  t.codes = weight.data;
  const std::vector<float> scales = safetensor_floats(scale, scale_name);
  // A scale multiplies every value of its tile: one that is not a finite positive number
  // (a corrupt file) would turn the tile into NaNs or flip its signs.
  for (size_t i = 0; i < scales.size(); ++i)
    check(std::isfinite(scales[i]) && scales[i] > 0,
          where + ": tensor " + scale_name + " holds " + number_text(scales[i]) + " at [" +
              std::to_string(static_cast<int64_t>(i) / want[1]) + ", " +
              std::to_string(static_cast<int64_t>(i) % want[1]) +
              "]; scales must be finite and positive");
  t.scale_inv = tile_scales_from_hf(scales, rows, cols);
  return t;
}

std::vector<float> dequantize_tiles(const Fp8WeightTiles& w, int64_t rows, int64_t cols) {
  const float* table = fp8_table(w.format);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      v[static_cast<size_t>(i)] =
          table[w.codes[static_cast<size_t>(i)]] *
          w.scale_inv[static_cast<size_t>(scale_index(ScaleBlock::tile128x128, rows, cols, r, c))];
    }
  return v;
}

bool module_name_matches(const std::string& pattern, const std::string& name) {
  // Iterative glob with one backtracking point (the last '*'): linear time in practice.
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

ExportSummary save_fp8_checkpoint(const std::string& dir, DecoderModel& model,
                                  const Fp8ExportOptions& opt) {
  const QuantOptions qopt = model.quant_options();
  check(qopt.format == Fp8Format::e4m3, "block-FP8 export: the model quantizes weights to " +
                                            std::string(fp8_format_name(qopt.format)) +
                                            "; the format stores E4M3");
  Json cfg = export_config(model, opt.base_config, dir);
  const auto linears = decoder_linears(model);

  // Patterns name modules: the decoder linears and lm_head.
  std::vector<std::string> modules;
  for (const auto& [name, ref] : linears) modules.push_back(module_of(name));
  modules.push_back("lm_head");
  std::set<std::string> kept;
  for (const auto& pattern : opt.keep_bf16) {
    bool any = false;
    for (const auto& m : modules)
      if (module_name_matches(pattern, m)) {
        kept.insert(m);
        any = true;
      }
    check(any, "keep-bf16 pattern '" + pattern +
                   "' matches no module (module names look like model.layers.0.mlp.down_proj, "
                   "model.layers.3.self_attn.*, lm_head)");
  }

  Backend& be = model.backend();
  SafeTensorsFile f;
  f.metadata["format"] = "pt";
  BlockFp8Config qc;
  ExportSummary s;
  // Written as FP8, by the module's prefix ("model.layers.3.self_attn", "…mlp",
  // "…mlp.experts.5") and module (for the fused-group check).
  std::map<std::string, std::array<bool, kModules>> fp8;
  for (Param* p : model.parameters()) {
    const auto it = linears.find(p->name);
    const bool is_fp8 = it != linears.end() &&
                        model.precision().get(it->second.slot) == Precision::fp8 &&
                        !kept.count(module_of(p->name));
    if (!is_fp8) {
      f.tensors[p->name] = export_tensor(be, *p);
      if (it != linears.end()) {
        qc.modules_to_not_convert.push_back(module_of(p->name));
        ++s.bf16_linears;
      }
      continue;
    }
    const int64_t N = p->master.rows, K = p->master.cols;
    Fp8WeightTiles tiles = export_tiles(be, *it->second.lin, qopt);
    SafeTensor w;
    w.dtype = "F8_E4M3";
    w.shape = {N, K};
    w.data = std::move(tiles.codes);
    f.tensors[p->name] = std::move(w);
    f.tensors[p->name + "_scale_inv"] =
        make_safetensor(tile_scales_to_hf(tiles.scale_inv, N, K), {blocks_of(N), blocks_of(K)},
                        tiles.scale_dtype == DType::bf16 ? "BF16" : "F32");
    if (!it->second.slot.router)
      fp8[p->name.substr(0, p->name.rfind('.', p->name.size() - 8))]
         [static_cast<size_t>(it->second.slot.module)] = true;
    ++s.fp8_linears;
  }
  qc.modules_to_not_convert.push_back("lm_head");  // never quantized; listed for readers
  for (const LinearSlot& sl : model.linear_slots()) {
    // Each fused group once: at its q (standard attention) or q_a (latent attention, whose
    // q_a_proj and kv_a_proj_with_mqa vLLM fuses) or its gate (a dense MLP, an expert, the
    // shared expert).
    const bool q = sl.module == Module::q && model.precision().has(sl.layer, Module::k);
    if (sl.router || !(q || sl.module == Module::q_a || sl.module == Module::gate)) continue;
    const std::string name = DecoderModel::weight_name(sl);
    const std::string group = name.substr(0, name.rfind('.', name.size() - 8));
    const auto r = fp8.count(group) ? fp8[group] : std::array<bool, kModules>{};
    auto at = [&](Module m) { return r[static_cast<size_t>(m)]; };
    if (q && !(at(Module::q) == at(Module::k) && at(Module::k) == at(Module::v)))
      s.split_fused.push_back(group.substr(0, group.rfind('.')) + ": q/k/v_proj");
    if (sl.module == Module::q_a && at(Module::q_a) != at(Module::kv_a))
      s.split_fused.push_back(group.substr(0, group.rfind('.')) + ": q_a_proj/kv_a_proj_with_mqa");
    if (sl.module == Module::gate && r[4] != r[5])
      s.split_fused.push_back(
          (group.ends_with(".mlp") ? group.substr(0, group.size() - 4) : group) + ": gate/up_proj");
  }
  cfg["quantization_config"] = qc.to_json();
  for (const auto& [name, t] : opt.pass_through) f.tensors[name] = t;
  s.tensors = static_cast<int64_t>(f.tensors.size());
  s.bytes = f.data_bytes();
  s.files = f.write_dir(dir, opt.max_shard_bytes);
  write_private_file(dir + "/config.json", cfg.dump(2) + "\n");
  return s;
}

std::map<std::string, SafeTensor> read_mtp_tensors(const std::string& dir, const ModelConfig& cfg,
                                                   bool to_bf16) {
  std::map<std::string, SafeTensor> out;
  if (cfg.mtp_layers <= 0) return out;
  SafeTensorsFile f = SafeTensorsFile::read_dir(dir);
  for (auto& [name, t] : f.tensors)
    if (is_mtp_tensor(cfg, name)) out[name] = std::move(t);
  if (!to_bf16) return out;
  std::map<std::string, SafeTensor> bf16;
  for (const auto& [name, t] : out) {
    if (name.ends_with("_scale_inv")) continue;
    if (t.dtype == "F8_E4M3" || t.dtype == "F8_E5M2") {
      check(t.shape.size() == 2, dir + ": tensor " + name + " is FP8 but not a matrix");
      const std::string scale = name + "_scale_inv";
      check(out.count(scale), dir + ": tensor " + name + " is FP8 without its " + scale);
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const Fp8WeightTiles tiles = read_fp8_weight(t, out.at(scale), name, scale, rows, cols, dir);
      bf16[name] = make_safetensor(dequantize_tiles(tiles, rows, cols), t.shape, "BF16");
    } else {
      bf16[name] = make_safetensor(safetensor_floats(t, dir + ": tensor " + name), t.shape, "BF16");
    }
  }
  return bf16;
}

ExportSummary save_bf16_checkpoint(const std::string& dir, DecoderModel& model,
                                   uint64_t max_shard_bytes, const Json& base_config,
                                   const std::map<std::string, SafeTensor>& pass_through) {
  Json cfg = export_config(model, base_config, dir);
  if (cfg.contains("quantization_config")) cfg.as_object().erase("quantization_config");
  const auto linears = decoder_linears(model);
  SafeTensorsFile f;
  f.metadata["format"] = "pt";
  ExportSummary s;
  for (Param* p : model.parameters()) {
    f.tensors[p->name] = export_tensor(model.backend(), *p);
    if (linears.count(p->name)) ++s.bf16_linears;
  }
  for (const auto& [name, t] : pass_through) f.tensors[name] = t;
  s.tensors = static_cast<int64_t>(f.tensors.size());
  s.bytes = f.data_bytes();
  s.files = f.write_dir(dir, max_shard_bytes);
  write_private_file(dir + "/config.json", cfg.dump(2) + "\n");
  return s;
}

}  // namespace fp8rl
