// fp8rl bench decode: what one decode step's kernels read and how fast, at a model's shapes,
// against a device copy measured in the same run (GB/s counting bytes read + written, as bench
// quant does), and sweeps of the kernel options a device exposes.
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>

#include "bench.hpp"
#include "core/error.hpp"

namespace fp8rl::cli::bench {
namespace {

// Seconds per call of fn(r) for r = 0, 1, ...: calls in batches of up to `reps` (back to back,
// one synchronisation), so a kernel of a few microseconds is not timed against the launch and
// synchronisation latency; calls of a millisecond or more go one at a time.
double per_call(Backend& be, const std::function<void(int)>& fn, double min_s, int reps) {
  int r = 0;
  fn(r++);  // first calls may load kernels and make plans
  be.synchronize();
  const auto t0 = Clock::now();
  fn(r++);
  be.synchronize();
  const double first = seconds_since(t0);
  const int n = std::clamp(static_cast<int>(1e-3 / std::max(first, 1e-9)), 1, reps);
  const double t = time_op(
      be,
      [&] {
        for (int i = 0; i < n; ++i) fn(r++);
      },
      min_s, 3);
  return t / n;
}

// One linear of a layer: W [N, K], `count` of them per layer (k and v, gate and up: 2).
struct LinearShape {
  const char* name;
  int64_t N, K;
  int count;
};

// The weights of one linear shape in `copies` copies (FP8 128x128 tiles and BF16), the input
// x [rows, K] and output y [rows, N] for the most rows measured.
struct LinearOperands {
  LinearShape shape{};
  int copies = 1;
  std::vector<Buffer> codes, scales, bf16;
  Buffer x, y;
};

LinearOperands make_linear(Backend& be, const LinearShape& l, int64_t max_rows, size_t rotate_bytes,
                           Rng& rng) {
  LinearOperands o;
  o.shape = l;
  const size_t nk = static_cast<size_t>(l.N * l.K);
  o.copies = static_cast<int>(std::clamp<size_t>((rotate_bytes + nk - 1) / nk, 1, 64));
  Buffer w = upload_random_bf16(be, l.N * l.K, rng);
  const size_t nscales = static_cast<size_t>(scale_count(ScaleBlock::tile128x128, l.N, l.K));
  for (int c = 0; c < o.copies; ++c) {
    o.codes.push_back(be.alloc(nk));
    o.scales.push_back(be.alloc(nscales * 4));
    o.bf16.push_back(be.alloc(nk * 2));
    be.copy(o.bf16.back().data(), w.data(), nk * 2);
    if (c == 0) {
      be.quantize(Matrix{w.data(), l.N, l.K, DType::bf16},
                  Fp8Matrix{o.codes[0].as<uint8_t>(), o.scales[0].as<float>(), l.N, l.K,
                            ScaleBlock::tile128x128, Fp8Format::e4m3},
                  QuantOptions{}, nullptr);
    } else {
      be.copy(o.codes.back().data(), o.codes[0].data(), nk);
      be.copy(o.scales.back().data(), o.scales[0].data(), nscales * 4);
    }
  }
  o.x = upload_random_bf16(be, max_rows * l.K, rng);
  o.y = be.alloc(static_cast<size_t>(max_rows * l.N) * 2);
  return o;
}

Fp8Matrix fp8_weight(const LinearOperands& o, int c) {
  return Fp8Matrix{o.codes[c].as<uint8_t>(), o.scales[c].as<float>(), o.shape.N, o.shape.K,
                   ScaleBlock::tile128x128,  Fp8Format::e4m3};
}

// Seconds per linear_fp8 call of `rows` rows (under the kernel options as set now).
double time_fp8(Backend& be, const LinearOperands& o, int64_t rows, double min_s, int reps) {
  const Matrix x{o.x.data(), rows, o.shape.K, DType::bf16};
  const Matrix y{o.y.data(), rows, o.shape.N, DType::bf16};
  const QuantOptions opt;
  return per_call(
      be, [&](int r) { be.linear_fp8(x, fp8_weight(o, r % o.copies), y, opt); }, min_s, reps);
}

double time_bf16(Backend& be, const LinearOperands& o, int64_t rows, double min_s, int reps) {
  const Matrix x{o.x.data(), rows, o.shape.K, DType::bf16};
  const Matrix y{o.y.data(), rows, o.shape.N, DType::bf16};
  return per_call(
      be,
      [&](int r) {
        be.gemm(x, Matrix{o.bf16[r % o.copies].data(), o.shape.N, o.shape.K, DType::bf16}, y, 0.0f);
      },
      min_s, reps);
}

// Bytes one FP8 linear call moves: the weight's codes and scales, x read, y written (BF16).
double fp8_bytes(const LinearShape& l, int64_t rows) {
  return static_cast<double>(l.N * l.K) +
         4.0 * static_cast<double>(scale_count(ScaleBlock::tile128x128, l.N, l.K)) +
         2.0 * static_cast<double>(rows * (l.K + l.N));
}

// A KV cache of `rows` sequences of `ctx` positions, in `copies` copies (distinct slots), with
// the query, output, slot ids (one list per copy) and lengths.
struct AttentionOperands {
  int64_t rows = 0, ctx = 0;
  int copies = 1;
  DType dtype = DType::bf16;
  Buffer k, v, q, o, ids, scales;
  Buffer o_codes, o_scales;  // o as o_proj's FP8 input (attention_cached_fp8)
};

AttentionOperands make_attention(Backend& be, const ModelConfig& cfg, DType cdt, int64_t rows,
                                 int64_t ctx, size_t rotate_bytes, Rng& rng) {
  AttentionOperands a;
  a.rows = rows;
  a.ctx = ctx;
  a.dtype = cdt;
  const int64_t width = cfg.num_key_value_heads * cfg.head_dim;
  const size_t one = static_cast<size_t>(rows * ctx * width) * dtype_size(cdt);
  a.copies = static_cast<int>(std::clamp<size_t>((rotate_bytes + 2 * one - 1) / (2 * one), 1, 64));
  const size_t bytes = one * static_cast<size_t>(a.copies);
  a.k = be.alloc(bytes);
  a.v = be.alloc(bytes);
  // Zeros: the kernels' time does not depend on the cached values (no early exits).
  be.zero(a.k.data(), bytes);
  be.zero(a.v.data(), bytes);
  const int64_t qn = rows * cfg.num_attention_heads * cfg.head_dim;
  a.q = upload_random_bf16(be, qn, rng);
  a.o = be.alloc(static_cast<size_t>(qn) * 2);
  a.o_codes = be.alloc(static_cast<size_t>(qn));
  a.o_scales = be.alloc(static_cast<size_t>(scale_count(ScaleBlock::row1x128, rows,
                                                        cfg.num_attention_heads * cfg.head_dim)) *
                        4);
  // ids: copy c's slot ids (c·rows + i), then the lengths (all ctx).
  std::vector<int32_t> host(static_cast<size_t>((a.copies + 1) * rows));
  for (int64_t c = 0; c < a.copies; ++c)
    for (int64_t i = 0; i < rows; ++i)
      host[static_cast<size_t>(c * rows + i)] = static_cast<int32_t>(c * rows + i);
  for (int64_t i = 0; i < rows; ++i)
    host[static_cast<size_t>(a.copies * rows + i)] = static_cast<int32_t>(ctx);
  a.ids = be.alloc(host.size() * 4);
  be.upload(a.ids.data(), host.data(), host.size() * 4);
  const float sc[2] = {0.01f, 0.01f};
  a.scales = be.alloc(sizeof sc);
  be.upload(a.scales.data(), sc, sizeof sc);
  return a;
}

// Seconds a call of attention_cached takes — or, with quantize_o, of attention_cached_fp8 (o
// also quantized as o_proj's FP8 input, as FP8 generation runs it).
double time_attention(Backend& be, const ModelConfig& cfg, const AttentionOperands& a, double min_s,
                      int reps, bool quantize_o = false) {
  const int64_t Hq = cfg.num_attention_heads, Hkv = cfg.num_key_value_heads;
  const int64_t width = Hkv * cfg.head_dim;
  const KvCacheView view{a.k.data(), a.v.data(), a.rows * a.copies,    a.ctx,
                         width,      a.dtype,    a.scales.as<float>(), a.scales.as<float>() + 1};
  const Matrix Q{a.q.data(), a.rows, Hq * cfg.head_dim, DType::bf16};
  const Matrix O{a.o.data(), a.rows, Hq * cfg.head_dim, DType::bf16};
  const int32_t* ids = a.ids.as<int32_t>();
  const int32_t* lengths = ids + a.copies * a.rows;
  const Fp8Operands o8{Fp8Matrix{a.o_codes.as<uint8_t>(), a.o_scales.as<float>(), a.rows,
                                 Hq * cfg.head_dim, ScaleBlock::row1x128, Fp8Format::e4m3},
                       {}};
  return per_call(
      be,
      [&](int r) {
        const int32_t* slots = ids + (r % a.copies) * a.rows;
        if (quantize_o) {
          be.attention_cached_fp8(Q, view, slots, lengths, Hq, Hkv, O, o8, QuantOptions{});
        } else {
          be.attention_cached(Q, view, slots, lengths, Hq, Hkv, O);
        }
      },
      min_s, reps);
}

// Bytes one attention call moves: the cached keys and values, q read and o written (BF16).
double attention_bytes(const ModelConfig& cfg, DType cdt, int64_t rows, int64_t ctx) {
  const double width = static_cast<double>(cfg.num_key_value_heads * cfg.head_dim);
  return 2.0 * static_cast<double>(rows * ctx) * width * static_cast<double>(dtype_size(cdt)) +
         4.0 * static_cast<double>(rows * cfg.num_attention_heads * cfg.head_dim);
}

std::string fmt_percent(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100.0 * v);
  return b;
}

std::string us_or_dash(double t) {
  char s[32] = "-";
  if (t > 0) std::snprintf(s, sizeof s, "%.1f", t * 1e6);
  return s;
}

// A target of the run; on the CPU printed without a verdict (FP8 is emulated there: the
// bandwidth says nothing about a device's).
Json target_json(const std::string& name, double value, double at_least, bool cpu) {
  Json t;
  t["name"] = name;
  t["value"] = number(value);
  t["relation"] = ">=";
  t["target"] = at_least;
  t["pass"] = value >= at_least;
  std::printf("target: %s %.1f%% (>= %.0f%%) %s\n", name.c_str(), 100.0 * value, 100.0 * at_least,
              cpu                 ? "(no verdict on the CPU)"
              : value >= at_least ? "PASS"
                                  : "FAIL");
  return t;
}

}  // namespace

Json bench_decode(Backend& be, const DecodeOptions& o) {
  const ModelConfig cfg = model_shape(o.model);
  check(!o.batches.empty(), "--batch: no batch size given");
  check(!o.contexts.empty(), "--contexts: no context given");
  const bool cpu = be.name() == "cpu";
  const int reps = cpu ? 1 : 20;
  const double min_s = o.seconds;
  // Each call reads operands no earlier call left in the caches (H100 / H200: 50 MB of L2).
  const size_t rotate_bytes = cpu ? 0 : size_t{512} << 20;
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf("decode kernels at %s shapes (%s)\n", o.model.c_str(), describe(cfg).c_str());
  Json run = backend_json(be);
  run["model"] = o.model;
  run["model_shape"] = describe(cfg);
  Json::Array batches_json, contexts_json;
  for (int64_t b : o.batches) batches_json.push_back(Json(b));
  for (int64_t c : o.contexts) contexts_json.push_back(Json(c));
  run["batches"] = Json(batches_json);
  run["contexts"] = Json(contexts_json);

  // The copy baseline: 256 MiB on a device (past its caches), 8 MiB on the CPU.
  const size_t copy_bytes = cpu ? size_t{8} << 20 : size_t{256} << 20;
  double copy_gbs = 0;
  {
    Buffer a = be.alloc(copy_bytes), b = be.alloc(copy_bytes);
    be.zero(a.data(), copy_bytes);
    const double t = time_op(
        be, [&] { be.copy(b.data(), a.data(), copy_bytes); }, std::max(min_s, 0.02), 3);
    copy_gbs = 2.0 * static_cast<double>(copy_bytes) / t / 1e9;
  }
  run["copy_gb_per_s"] = number(copy_gbs);
  std::printf("device copy: %.1f GB/s (%zu MiB, read + write)\n\n", copy_gbs, copy_bytes >> 20);
  std::fflush(stdout);

  const int64_t H = cfg.hidden_size, D = cfg.head_dim, I = cfg.intermediate_size;
  const int64_t Hq = cfg.num_attention_heads, Hkv = cfg.num_key_value_heads;
  // The seven linears of a layer, then q, k and v and gate and up stacked as the decoder runs
  // them in generation (FusedLinears: one GEMM each; then Backend::qkv_heads makes the heads,
  // and SwiGLU reads the gate/up halves in place).
  const LinearShape linears[] = {{"q", Hq * D, H, 1},     {"k/v", Hkv * D, H, 2},
                                 {"o", H, Hq * D, 1},     {"gate/up", I, H, 2},
                                 {"down", H, I, 1},       {"q+k+v", (Hq + 2 * Hkv) * D, H, 0},
                                 {"gate+up", 2 * I, H, 0}};
  constexpr size_t kQ = 0, kKv = 1, kGateUp = 3, kQkv = 5, kStackedGateUp = 6;
  constexpr size_t kLinears = std::size(linears);
  const size_t nb = o.batches.size();
  const int64_t max_rows = *std::max_element(o.batches.begin(), o.batches.end());
  Rng rng(11);
  Json::Array table, layers, sweeps, targets;

  // --- Linears: y [rows, N] = x [rows, K] · Wᵀ. Per linear (operands made once), each batch.
  // t8s: the split-K kernel (linear_fp8_kernel = 1) up to 8 rows, where the default runs the
  // one-stream kernel; -1 where it did not run.
  std::vector<std::vector<double>> t8(kLinears, std::vector<double>(nb)),
      t16(kLinears, std::vector<double>(nb)), t8s(kLinears, std::vector<double>(nb, -1.0));
  std::printf("%-8s %5s %6s %6s %6s %10s %9s %8s %12s %10s %9s %10s %8s\n", "linear", "rows", "N",
              "K", "copies", "fp8 us", "GB/s", "vs copy", "q+gemm us", "bf16 us", "bf16/fp8",
              "split us", "sp/copy");
  for (size_t li = 0; li < kLinears; ++li) {
    const LinearShape& l = linears[li];
    const LinearOperands ops = make_linear(be, l, max_rows, rotate_bytes, rng);
    for (size_t bi = 0; bi < nb; ++bi) {
      const int64_t rows = o.batches[bi];
      const double t = time_fp8(be, ops, rows, min_s, reps);
      double t_unfused = -1;
      {
        OptionGuard unfused(be, "linear_fp8_kernel", 2);
        if (unfused.ok()) t_unfused = time_fp8(be, ops, rows, min_s, reps);
      }
      double t_split = -1;
      if (rows <= 8) {
        OptionGuard split_k(be, "linear_fp8_kernel", 1);
        if (split_k.ok()) t_split = time_fp8(be, ops, rows, min_s, reps);
      }
      const double t_bf16 = time_bf16(be, ops, rows, min_s, reps);
      t8[li][bi] = t;
      t16[li][bi] = t_bf16;
      t8s[li][bi] = t_split;
      const double gbs = fp8_bytes(l, rows) / t / 1e9;
      std::printf(
          "%-8s %5lld %6lld %6lld %6d %10.1f %9.1f %7.0f%% %12s %10.1f %8.2fx %10s %8s\n", l.name,
          static_cast<long long>(rows), static_cast<long long>(l.N), static_cast<long long>(l.K),
          ops.copies, t * 1e6, gbs, 100.0 * gbs / copy_gbs, us_or_dash(t_unfused).c_str(),
          t_bf16 * 1e6, t_bf16 / t, us_or_dash(t_split).c_str(),
          t_split > 0 ? fmt_percent(fp8_bytes(l, rows) / t_split / 1e9 / copy_gbs).c_str() : "-");
      Json row;
      row["kernel"] = "linear_fp8";
      row["linear"] = l.name;
      row["rows"] = rows;
      row["N"] = l.N;
      row["K"] = l.K;
      row["copies"] = ops.copies;
      row["us"] = number(t * 1e6);
      row["gb_per_s"] = number(gbs);
      row["vs_copy"] = number(gbs / copy_gbs);
      if (t_unfused > 0) row["unfused_us"] = number(t_unfused * 1e6);
      if (t_split > 0) row["split_k_us"] = number(t_split * 1e6);
      row["bf16_us"] = number(t_bf16 * 1e6);
      row["bf16_over_fp8"] = number(t_bf16 / t);
      table.push_back(row);
    }
    std::fflush(stdout);
  }

  // The stacked q/k/v GEMM's heads (Backend::qkv_heads: split, QK-norm, RoPE; BF16), per batch:
  // what the stacked path runs instead of the seven GEMMs' q/k norms and ropes (which the layer
  // sums leave out, as they cost the same in both precisions: so the stacked sums carry them).
  std::vector<double> t_heads(nb);
  {
    const int64_t Nq = Hq * D, Nkv = Hkv * D, Ns = Nq + 2 * Nkv;
    Buffer ys = upload_random_bf16(be, max_rows * Ns, rng),
           norms = upload_random_bf16(be, 2 * D, rng);
    Buffer q = be.alloc(static_cast<size_t>(max_rows * Nq) * 2),
           kv = be.alloc(static_cast<size_t>(max_rows * Nkv) * 4);
    std::vector<int32_t> pos(static_cast<size_t>(max_rows));
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(1024 + i);
    Buffer positions = be.alloc(pos.size() * sizeof(int32_t));
    be.upload(positions.data(), pos.data(), pos.size() * sizeof(int32_t));
    const Matrix qn{norms.data(), 1, D, DType::bf16},
        kn{norms.as<uint16_t>() + D, 1, D, DType::bf16};
    for (size_t bi = 0; bi < nb; ++bi) {
      const int64_t rows = o.batches[bi];
      const Matrix y{ys.data(), rows, Ns, DType::bf16};
      const Matrix mq{q.data(), rows, Nq, DType::bf16}, mk{kv.data(), rows, Nkv, DType::bf16},
          mv{kv.as<uint16_t>() + rows * Nkv, rows, Nkv, DType::bf16};
      t_heads[bi] = per_call(
          be,
          [&](int) {
            be.qkv_heads(y, Hq, Hkv, qn, kn, 1e-6f, positions.as<int32_t>(), cfg.rope(), mq, mk,
                         mv);
          },
          min_s, reps);
    }
  }

  // A layer's seven linears per batch: the weight stream against the copy, BF16 over FP8; with
  // the split-K kernel where it ran for every linear; and as the decoder runs them (q, k and v
  // one stacked GEMM and its heads op, gate and up one), whose FP8 weight stream is the
  // target's.
  std::vector<double> layer8(nb, 0.0), layer16(nb, 0.0), layer_vs(nb, 0.0), layer8s(nb, 0.0),
      layer_vs_split(nb, -1.0), stacked8(nb), stacked16(nb);
  std::printf("\n%-30s %5s %10s %10s %8s %10s %10s %8s %11s %9s %12s\n", "a layer's linears",
              "rows", "fp8 us", "GB/s", "vs copy", "bf16/fp8", "split us", "sp/copy", "stacked us",
              "st/copy", "st bf16/fp8");
  for (size_t bi = 0; bi < nb; ++bi) {
    double bytes = 0;
    bool all_split = true;
    for (size_t li = 0; li < kLinears; ++li) {
      if (linears[li].count == 0) continue;
      layer8[bi] += linears[li].count * t8[li][bi];
      layer16[bi] += linears[li].count * t16[li][bi];
      layer8s[bi] += linears[li].count * t8s[li][bi];
      all_split = all_split && t8s[li][bi] > 0;
      bytes += linears[li].count * fp8_bytes(linears[li], o.batches[bi]);
    }
    const double gbs = bytes / layer8[bi] / 1e9;
    const auto stacked = [&](const std::vector<std::vector<double>>& t, double seven) {
      return seven - t[kQ][bi] - 2 * t[kKv][bi] + t[kQkv][bi] + t_heads[bi] - 2 * t[kGateUp][bi] +
             t[kStackedGateUp][bi];
    };
    stacked8[bi] = stacked(t8, layer8[bi]);
    stacked16[bi] = stacked(t16, layer16[bi]);
    layer_vs[bi] = bytes / stacked8[bi] / 1e9 / copy_gbs;
    if (all_split) layer_vs_split[bi] = bytes / layer8s[bi] / 1e9 / copy_gbs;
    std::printf("%-30s %5lld %10.1f %10.1f %7.0f%% %9.2fx %10s %8s %11.1f %8.0f%% %11.2fx\n", "",
                static_cast<long long>(o.batches[bi]), layer8[bi] * 1e6, gbs,
                100.0 * gbs / copy_gbs, layer16[bi] / layer8[bi],
                all_split ? us_or_dash(layer8s[bi]).c_str() : "-",
                all_split ? fmt_percent(layer_vs_split[bi]).c_str() : "-", stacked8[bi] * 1e6,
                100.0 * layer_vs[bi], stacked16[bi] / stacked8[bi]);
    Json row;
    row["stacked_fp8_us"] = number(stacked8[bi] * 1e6);
    row["stacked_bf16_us"] = number(stacked16[bi] * 1e6);
    row["stacked_vs_copy"] = number(layer_vs[bi]);
    row["qkv_heads_us"] = number(t_heads[bi] * 1e6);
    row["rows"] = o.batches[bi];
    row["linears_fp8_us"] = number(layer8[bi] * 1e6);
    row["linears_bf16_us"] = number(layer16[bi] * 1e6);
    row["linears_vs_copy"] = number(gbs / copy_gbs);
    row["linears_bf16_over_fp8"] = number(layer16[bi] / layer8[bi]);
    if (all_split) {
      row["linears_split_k_us"] = number(layer8s[bi] * 1e6);
      row["linears_split_k_vs_copy"] = number(layer_vs_split[bi]);
    }
    layers.push_back(row);
  }
  std::fflush(stdout);

  // --- Attention: each batch of sequences at each context, BF16 and FP8 caches, on the default
  // kernel (the tensor-core one at head dim 128), without sequence splits, on the FP32 split
  // kernel (attention_kernel = 1, the default until round 5) and on the first kernel.
  // att[bi][ci][0 bf16, 1 fp8]: the default kernel's seconds.
  std::vector<std::vector<std::array<double, 2>>> att(
      nb, std::vector<std::array<double, 2>>(o.contexts.size()));
  std::printf("\n%-10s %5s %6s %6s %10s %9s %8s %12s %12s %13s %10s\n", "attention", "rows", "ctx",
              "copies", "us", "GB/s", "vs copy", "no split us", "fp32 split us", "1st kernel us",
              "o->fp8 us");
  for (size_t bi = 0; bi < nb; ++bi)
    for (size_t ci = 0; ci < o.contexts.size(); ++ci)
      for (int di = 0; di < 2; ++di) {
        const DType cdt = di == 0 ? DType::bf16 : DType::fp8;
        const int64_t rows = o.batches[bi], ctx = o.contexts[ci];
        const AttentionOperands ops = make_attention(be, cfg, cdt, rows, ctx, rotate_bytes, rng);
        const double t = time_attention(be, cfg, ops, min_s, reps);
        // With o quantized for o_proj in the same call (FP8 linears; CUDA: in the kernel's
        // epilogue or split combine instead of a quantize launch).
        const double t_o8 = time_attention(be, cfg, ops, min_s, reps, true);
        double t_one = -1, t_split = -1, t_first = -1;
        {
          OptionGuard one(be, "attention_splits", 1);
          if (one.ok()) t_one = time_attention(be, cfg, ops, min_s, reps);
        }
        {
          OptionGuard split(be, "attention_kernel", 1);
          if (split.ok()) t_split = time_attention(be, cfg, ops, min_s, reps);
        }
        {
          OptionGuard first(be, "attention_kernel", 2);
          if (first.ok()) t_first = time_attention(be, cfg, ops, min_s, reps);
        }
        att[bi][ci][static_cast<size_t>(di)] = t;
        const double bytes = attention_bytes(cfg, cdt, rows, ctx), gbs = bytes / t / 1e9;
        const std::string name = std::string(dtype_name(cdt)) + " KV";
        std::printf("%-10s %5lld %6lld %6d %10.1f %9.1f %7.0f%% %12s %12s %13s %10.1f\n",
                    name.c_str(), static_cast<long long>(rows), static_cast<long long>(ctx),
                    ops.copies, t * 1e6, gbs, 100.0 * gbs / copy_gbs, us_or_dash(t_one).c_str(),
                    us_or_dash(t_split).c_str(), us_or_dash(t_first).c_str(), t_o8 * 1e6);
        Json row;
        row["kernel"] = "attention_cached";
        row["kv_cache"] = dtype_name(cdt);
        row["rows"] = rows;
        row["context"] = ctx;
        row["copies"] = ops.copies;
        row["us"] = number(t * 1e6);
        row["gb_per_s"] = number(gbs);
        row["vs_copy"] = number(gbs / copy_gbs);
        row["o_fp8_us"] = number(t_o8 * 1e6);
        if (t_one > 0) row["no_split_us"] = number(t_one * 1e6);
        if (t_split > 0) row["fp32_split_us"] = number(t_split * 1e6);
        if (t_first > 0) row["first_kernel_us"] = number(t_first * 1e6);
        table.push_back(row);
        std::fflush(stdout);
      }
  run["table"] = Json(table);

  // --- A decode layer's kernels: linears (q, k, v stacked, as the decoder runs them) +
  // attention, FP8 + FP8 KV against BF16 (norms, RoPE and the residual adds are left out: they
  // cost the same in both).
  Json::Array step;
  std::printf("\n%-34s %5s %6s %10s %10s %9s\n", "a layer's linears + attention", "rows", "ctx",
              "bf16 us", "fp8 us", "bf16/fp8");
  for (size_t bi = 0; bi < nb; ++bi)
    for (size_t ci = 0; ci < o.contexts.size(); ++ci) {
      const double bf16 = stacked16[bi] + att[bi][ci][0], fp8 = stacked8[bi] + att[bi][ci][1];
      std::printf("%-34s %5lld %6lld %10.1f %10.1f %8.2fx\n", "",
                  static_cast<long long>(o.batches[bi]), static_cast<long long>(o.contexts[ci]),
                  bf16 * 1e6, fp8 * 1e6, bf16 / fp8);
      Json row;
      row["rows"] = o.batches[bi];
      row["context"] = o.contexts[ci];
      row["bf16_us"] = number(bf16 * 1e6);
      row["fp8_us"] = number(fp8 * 1e6);
      row["bf16_over_fp8"] = number(bf16 / fp8);
      step.push_back(row);
    }
  run["layers"] = Json(layers);
  run["layer_step"] = Json(step);

  // --- Targets (docs/benchmarks.md): the decoder's GEMMs (q, k, v stacked) stream a layer's FP8
  // weights at ≥ 80 % of the copy bandwidth up to 256 rows; attention reads an FP8 cache of 4,096
  // positions per row at ≥ 70 % of it (from 8 rows: fewer are a few MiB, latency rather than
  // bandwidth).
  std::printf("\n");
  for (size_t bi = 0; bi < nb; ++bi) {
    const int64_t rows = o.batches[bi];
    if (rows > 256) continue;
    targets.push_back(target_json(
        "decode linears (a layer) FP8 weight stream vs copy, " + std::to_string(rows) + " rows",
        layer_vs[bi], 0.8, cpu));
  }
  for (size_t bi = 0; bi < nb; ++bi)
    for (size_t ci = 0; ci < o.contexts.size(); ++ci) {
      const int64_t rows = o.batches[bi], ctx = o.contexts[ci];
      if (ctx < 4096 || rows < 8) continue;
      const double vs =
          attention_bytes(cfg, DType::fp8, rows, ctx) / att[bi][ci][1] / 1e9 / copy_gbs;
      targets.push_back(target_json("attention FP8 KV read vs copy, " + std::to_string(rows) +
                                        " rows x " + std::to_string(ctx),
                                    vs, 0.7, cpu));
    }
  run["targets"] = Json(targets);

  // --- Sweeps of the kernel options (devices only): what the defaults should be.
  if (be.kernel_options().empty() || o.sweep_batch <= 0) {
    std::printf("(no sweeps: %s)\n\n", be.kernel_options().empty()
                                           ? "this backend has no kernel options"
                                           : "no sweep batch");
    run["sweeps"] = Json(sweeps);
    return run;
  }
  auto sweep_row = [&](const std::string& what, const std::string& option, int64_t value, double t,
                       double bytes) {
    const double gbs = bytes / t / 1e9;
    std::printf("  %-40s %-20s %6lld %10.1f us %6.0f%%\n", what.c_str(), option.c_str(),
                static_cast<long long>(value), t * 1e6, 100.0 * gbs / copy_gbs);
    Json r;
    r["what"] = what;
    r["option"] = option;
    r["value"] = value;
    r["us"] = number(t * 1e6);
    r["vs_copy"] = number(gbs / copy_gbs);
    sweeps.push_back(r);
  };
  const int64_t rows = o.sweep_batch;
  std::printf("sweeps at %lld rows (value 0: the default)\n", static_cast<long long>(rows));
  // The decode GEMMs themselves at every row count swept (by default they run up to 8 rows
  // only, and above that linear_fp8 would time quantize + cuBLASLt under every value).
  OptionGuard all_rows(be, "linear_fp8_max_rows", 256);
  // K splits and the CTA target of the split-K decode GEMM (linear_fp8_kernel 1: the default
  // takes the one-stream kernel up to 8 rows) at the widest and the narrowest linear, at 1, 8
  // and 64 rows (at 64 its FP32 partials weigh as much as the weight).
  for (size_t li : {size_t{3}, size_t{1}}) {
    OptionGuard split_k(be, "linear_fp8_kernel", 1);
    const LinearShape& l = linears[li];
    const LinearOperands ops = make_linear(be, l, std::max<int64_t>(rows, 256), rotate_bytes, rng);
    for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{64}}) {
      const std::string what = std::string("linear_fp8 ") + l.name + " " + std::to_string(m) + "x" +
                               std::to_string(l.N) + "x" + std::to_string(l.K);
      for (int64_t s : {0, 1, 2, 4, 8, 16}) {
        OptionGuard g(be, "linear_fp8_splits", s);
        sweep_row(what, "linear_fp8_splits", s, time_fp8(be, ops, m, min_s, reps), fp8_bytes(l, m));
      }
      for (int64_t c : {1, 4, 8}) {
        OptionGuard g(be, "linear_fp8_ctas_per_sm", c);
        sweep_row(what, "linear_fp8_ctas_per_sm", c, time_fp8(be, ops, m, min_s, reps),
                  fp8_bytes(l, m));
      }
    }
    // Rows up to which a decode GEMM beats quantize + cuBLASLt (linear_fp8_max_rows; round 5
    // ran this sweep without raising it, so its rows above 16 timed quantize + cuBLASLt twice):
    // split-K (1), quantize + cuBLASLt (2), and up to 8 rows the one-stream kernel (3).
    if (li != 3) continue;
    for (int64_t m : {1, 8, 16, 64, 128, 256}) {
      const std::string at = std::string("linear_fp8 ") + l.name + " " + std::to_string(m) + "x" +
                             std::to_string(l.N) + "x" + std::to_string(l.K);
      for (int64_t kernel : {1, 2, 3}) {
        if (kernel == 3 && m > 8) continue;
        OptionGuard g(be, "linear_fp8_kernel", kernel);
        sweep_row(at, "linear_fp8_kernel", kernel, time_fp8(be, ops, m, min_s, reps),
                  fp8_bytes(l, m));
      }
    }
    std::fflush(stdout);
  }
  // cuBLASLt's other algorithms for the decode-sized matmuls (its heuristic's first 8, gemm_algo):
  // quantize + the FP8 matmul (linear_fp8_kernel 2) and BF16, at the narrowest and the widest
  // linear, 1 to 256 rows. "-": cuBLASLt offers fewer.
  {
    OptionGuard cublas_path(be, "linear_fp8_kernel", 2);
    for (size_t li : {size_t{1}, size_t{3}}) {
      const LinearShape& l = linears[li];
      const LinearOperands ops = make_linear(be, l, 256, rotate_bytes, rng);
      for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{256}}) {
        const std::string at = std::string(" ") + l.name + " " + std::to_string(m) + "x" +
                               std::to_string(l.N) + "x" + std::to_string(l.K);
        for (int64_t n = 1; n <= 8; ++n) {
          OptionGuard algo(be, "gemm_algo", n);
          if (!algo.ok()) break;
          for (bool fp8 : {true, false}) {
            try {
              const double t =
                  fp8 ? time_fp8(be, ops, m, min_s, reps) : time_bf16(be, ops, m, min_s, reps);
              const double bf16_bytes = 2.0 * static_cast<double>(l.N * l.K + m * (l.K + l.N));
              sweep_row((fp8 ? "q+gemm fp8" : "gemm bf16") + at, "gemm_algo", n, t,
                        fp8 ? fp8_bytes(l, m) : bf16_bytes);
            } catch (const Error&) {
              std::printf("  %-40s %-20s %6lld          -      -\n",
                          ((fp8 ? "q+gemm fp8" : "gemm bf16") + at).c_str(), "gemm_algo",
                          static_cast<long long>(n));
            }
          }
        }
      }
      std::fflush(stdout);
    }
  }
  // Sequence splits of the attention at the longest context, FP8 cache, these rows and 4.
  const int64_t ctx = *std::max_element(o.contexts.begin(), o.contexts.end());
  for (int64_t n : {rows, std::min<int64_t>(rows, 4)}) {
    const AttentionOperands ops = make_attention(be, cfg, DType::fp8, n, ctx, rotate_bytes, rng);
    const std::string what =
        "attention fp8 KV " + std::to_string(n) + " rows x " + std::to_string(ctx);
    for (int64_t s : {0, 1, 2, 4, 8, 16, 32}) {
      OptionGuard g(be, "attention_splits", s);
      sweep_row(what, "attention_splits", s, time_attention(be, cfg, ops, min_s, reps),
                attention_bytes(cfg, DType::fp8, n, ctx));
    }
    std::fflush(stdout);
    if (n == rows && rows <= 4) break;
  }
  std::printf("\n");
  run["sweeps"] = Json(sweeps);
  return run;
}

}  // namespace fp8rl::cli::bench
