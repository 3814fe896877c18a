// fp8rl bench gemm|quant: BF16 vs block-scaled FP8 GEMMs (fprop, dgrad, wgrad) and the
// quantization kernels, as ratios against the strongest baseline measured in the same run.
#include <algorithm>
#include <array>
#include <cstdio>

#include "bench.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace fp8rl::cli::bench {
namespace {

struct Fp8Buffers {
  Buffer codes, scales;
  Fp8Matrix m;
};

Fp8Buffers alloc_fp8(Backend& be, int64_t rows, int64_t cols, ScaleBlock block) {
  Fp8Buffers f;
  f.codes = be.alloc(static_cast<size_t>(rows * cols));
  f.scales = be.alloc(static_cast<size_t>(scale_count(block, rows, cols)) * 4);
  f.m = Fp8Matrix{f.codes.as<uint8_t>(), f.scales.as<float>(), rows, cols, block, Fp8Format::e4m3};
  return f;
}

double tflops(const GemmShape& s, double t) {
  return 2.0 * s.M * s.N * s.K / t / 1e12;
}

}  // namespace

// Linear-layer shapes at M tokens. Qwen3-8B: hidden 4096, 32 q heads / 8 kv heads of 128,
// intermediate 12288. Llama-3.1-8B: intermediate 14336. Qwen3-1.7B: hidden 2048, 16 q / 8 kv
// heads of 128, intermediate 6144. Qwen3-0.6B: hidden 1024, 16 q / 8 kv heads of 128,
// intermediate 3072.
std::vector<GemmShape> gemm_gpu_shapes() {
  const int64_t M = 8192;
  return {{"square 8192^3", 8192, 8192, 8192}, {"qwen3-8b q/o", M, 4096, 4096},
          {"qwen3-8b k/v", M, 1024, 4096},     {"qwen3-8b gate/up", M, 12288, 4096},
          {"qwen3-8b down", M, 4096, 12288},   {"llama-8b gate/up", M, 14336, 4096},
          {"llama-8b down", M, 4096, 14336},   {"qwen3-1.7b q/o", M, 2048, 2048},
          {"qwen3-1.7b k/v", M, 1024, 2048},   {"qwen3-1.7b gate/up", M, 6144, 2048},
          {"qwen3-1.7b down", M, 2048, 6144}};
}

std::vector<GemmShape> gemm_cpu_shapes() {
  return {{"square 1024^3", 1024, 1024, 1024},
          {"qwen3-0.6b q/o", 512, 2048, 1024},
          {"qwen3-0.6b gate/up", 512, 3072, 1024},
          {"qwen3-0.6b down", 512, 1024, 3072}};
}

std::vector<GemmShape> parse_gemm_shapes(const std::string& spec) {
  // "M,N,K;M,N,K". A shape of the default lists keeps its name ("square 8192^3").
  std::vector<GemmShape> known = gemm_gpu_shapes();
  for (const auto& s : gemm_cpu_shapes()) known.push_back(s);
  std::vector<GemmShape> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(';', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string one = spec.substr(pos, end - pos);
    long long m = 0, n = 0, k = 0;
    char tail = 0;
    check(std::sscanf(one.c_str(), "%lld,%lld,%lld%c", &m, &n, &k, &tail) == 3 && m > 0 && n > 0 &&
              k > 0,
          "--shapes: '" + one + "' is not M,N,K with positive integers");
    const auto same = std::find_if(known.begin(), known.end(), [&](const GemmShape& g) {
      return g.M == m && g.N == n && g.K == k;
    });
    out.push_back({same != known.end() ? same->name : one, m, n, k});
    pos = end + 1;
  }
  return out;
}

Json bench_gemm(Backend& be, const std::vector<GemmShape>& shapes, double min_s, int64_t algos) {
  const bool cpu = be.name() == "cpu";
  Json run = backend_json(be);
  Json::Array rows;
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf("%-20s %6s %6s %6s  %-6s %10s %10s %10s %10s %9s\n", "shape", "M", "N", "K", "gemm",
              cpu ? "f32 TF/s" : "", "bf16 TF/s", "fp8 TF/s", "fp8 ms", "fp8/best");
  Rng rng(1234);
  for (const auto& s : shapes) {
    // Operands of one linear layer: X [M,K], W [N,K], dY [M,N].
    Buffer x = upload_random_bf16(be, s.M * s.K, rng), w = upload_random_bf16(be, s.N * s.K, rng),
           dy = upload_random_bf16(be, s.M * s.N, rng);
    const Matrix X{x.data(), s.M, s.K, DType::bf16}, W{w.data(), s.N, s.K, DType::bf16},
        dY{dy.data(), s.M, s.N, DType::bf16};
    auto xq = alloc_fp8(be, s.M, s.K, ScaleBlock::row1x128);
    auto xtq = alloc_fp8(be, s.K, s.M, ScaleBlock::row1x128);
    auto wq = alloc_fp8(be, s.N, s.K, ScaleBlock::tile128x128);
    auto wtq = alloc_fp8(be, s.K, s.N, ScaleBlock::tile128x128);
    auto dyq = alloc_fp8(be, s.M, s.N, ScaleBlock::row1x128);
    auto dytq = alloc_fp8(be, s.N, s.M, ScaleBlock::row1x128);
    const QuantOptions opt;
    be.quantize_with_transpose(X, xq.m, xtq.m, opt, nullptr, nullptr);
    be.quantize(W, wq.m, opt, nullptr);
    be.transpose_fp8(wq.m, wtq.m);
    be.quantize_with_transpose(dY, dyq.m, dytq.m, opt, nullptr, nullptr);
    // Transposed BF16 operands for the BF16 dgrad/wgrad baselines (same TN call form).
    Buffer wt = upload_random_bf16(be, s.K * s.N, rng), xt = upload_random_bf16(be, s.K * s.M, rng),
           dyt = upload_random_bf16(be, s.N * s.M, rng);
    const Matrix Wt{wt.data(), s.K, s.N, DType::bf16}, Xt{xt.data(), s.K, s.M, DType::bf16},
        dYt{dyt.data(), s.N, s.M, DType::bf16};
    Buffer y = be.alloc(static_cast<size_t>(s.M * s.N) * 4), dx = be.alloc(s.M * s.K * 4),
           dw = be.alloc(static_cast<size_t>(s.N * s.K) * 4);
    struct Op {
      const char* name;
      Matrix a, b, c;
      const Fp8Matrix *qa, *qb;
      float beta;
    };
    const Op ops[] = {
        {"fprop", X, W, {y.data(), s.M, s.N, DType::bf16}, &xq.m, &wq.m, 0.0f},
        {"dgrad", dY, Wt, {dx.data(), s.M, s.K, DType::bf16}, &dyq.m, &wtq.m, 0.0f},
        {"wgrad", dYt, Xt, {dw.data(), s.N, s.K, DType::f32}, &dytq.m, &xtq.m, 1.0f},
    };
    for (const auto& op : ops) {
      const GemmShape g{s.name, op.c.rows, op.c.cols, op.a.cols};
      Json row;
      row["shape"] = s.name;
      row["gemm"] = op.name;
      row["M"] = g.M;
      row["N"] = g.N;
      row["K"] = g.K;
      double t_f32 = 0;
      if (cpu) {
        // f32 copies for the CPU's FP32 baseline (what the FP8 emulation wraps).
        std::vector<float> a(static_cast<size_t>(op.a.rows * op.a.cols)),
            b(static_cast<size_t>(op.b.rows * op.b.cols)),
            c(static_cast<size_t>(op.c.rows * op.c.cols));
        const Matrix A{a.data(), op.a.rows, op.a.cols, DType::f32},
            B{b.data(), op.b.rows, op.b.cols, DType::f32},
            C{c.data(), op.c.rows, op.c.cols, DType::f32};
        t_f32 = time_op(
            be, [&] { be.gemm(A, B, C, 0.0f); }, min_s, 3);
        row["f32_tflops"] = number(tflops(g, t_f32));
      }
      const double t_bf16 = time_op(
          be, [&] { be.gemm(op.a, op.b, op.c, op.beta); }, min_s, 3);
      row["bf16_tflops"] = number(tflops(g, t_bf16));
      row["bf16_ms"] = number(t_bf16 * 1e3);
      if (auto why = be.gemm_fp8_unsupported(*op.qa, *op.qb, op.c)) {
        std::printf("%-20s %6lld %6lld %6lld  %-6s SKIP: %s\n", s.name.c_str(), (long long)g.M,
                    (long long)g.N, (long long)g.K, op.name, why->c_str());
        row["skipped"] = *why;
        rows.push_back(row);
        continue;
      }
      const double t_fp8 = time_op(
          be, [&] { be.gemm_fp8(*op.qa, *op.qb, op.c, op.beta); }, min_s, 3);
      const double best = cpu ? std::min(t_f32, t_bf16) : t_bf16;
      char f32col[16] = "";
      if (cpu) std::snprintf(f32col, sizeof f32col, "%10.3f", tflops(g, t_f32));
      std::printf("%-20s %6lld %6lld %6lld  %-6s %10s %10.3f %10.3f %10.3f %8.2fx\n",
                  s.name.c_str(), (long long)g.M, (long long)g.N, (long long)g.K, op.name, f32col,
                  tflops(g, t_bf16), tflops(g, t_fp8), t_fp8 * 1e3, best / t_fp8);
      row["fp8_tflops"] = number(tflops(g, t_fp8));
      row["fp8_ms"] = number(t_fp8 * 1e3);
      row["fp8_vs_bf16"] = number(t_bf16 / t_fp8);
      row["fp8_vs_best"] = number(best / t_fp8);
      // cuBLASLt's other algorithms (gemm_algo n: the heuristic's n-th), each precision's best:
      // whether the heuristic's first choice leaves speed behind (shorter timings).
      if (algos > 1 && be.set_kernel_option("gemm_algo", 1)) {
        double best16 = t_bf16, best8 = t_fp8;
        int64_t algo16 = 1, algo8 = 1;
        for (int64_t n = 2; n <= algos; ++n) {
          be.set_kernel_option("gemm_algo", n);
          try {
            const double t = time_op(
                be, [&] { be.gemm(op.a, op.b, op.c, op.beta); }, std::min(min_s, 0.05), 3);
            if (t < best16) best16 = t, algo16 = n;
          } catch (const Error&) {  // cuBLASLt offers fewer
          }
          try {
            const double t = time_op(
                be, [&] { be.gemm_fp8(*op.qa, *op.qb, op.c, op.beta); }, std::min(min_s, 0.05), 3);
            if (t < best8) best8 = t, algo8 = n;
          } catch (const Error&) {
          }
        }
        be.set_kernel_option("gemm_algo", 0);
        std::printf(
            "%-20s %6s %6s %6s  %-6s best of %lld algorithms: bf16 %.3f TF/s (#%lld), fp8 "
            "%.3f TF/s (#%lld), fp8/bf16 %.2fx\n",
            "", "", "", "", "", static_cast<long long>(algos), tflops(g, best16),
            static_cast<long long>(algo16), tflops(g, best8), static_cast<long long>(algo8),
            best16 / best8);
        row["bf16_best_algo"] = algo16;
        row["bf16_best_tflops"] = number(tflops(g, best16));
        row["fp8_best_algo"] = algo8;
        row["fp8_best_tflops"] = number(tflops(g, best8));
        row["fp8_vs_bf16_best_algos"] = number(best16 / best8);
      }
      rows.push_back(row);
    }
  }
  std::printf(
      "fp8/best = time of the fastest baseline (%s) / time of the FP8 GEMM; > 1 is faster.\n\n",
      cpu ? "f32 sgemm or bf16" : "cuBLASLt bf16");
  run["rows"] = Json(rows);
  return run;
}

Json bench_quant(Backend& be, const std::vector<std::pair<int64_t, int64_t>>& shapes,
                 double min_s) {
  Json run = backend_json(be);
  Json::Array rows;
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf("%-24s %6s %6s %10s %10s %9s\n", "op", "rows", "cols", "ms", "GB/s", "vs copy");
  Rng rng(99);
  for (auto [R, C] : shapes) {
    Buffer x = upload_random_bf16(be, R * C, rng);
    const Matrix X{x.data(), R, C, DType::bf16};
    Buffer copy_dst = be.alloc(static_cast<size_t>(R * C) * 2);
    Buffer out = be.alloc(static_cast<size_t>(R * C) * 2);
    auto q = alloc_fp8(be, R, C, ScaleBlock::row1x128);
    auto qt = alloc_fp8(be, C, R, ScaleBlock::row1x128);
    auto qw = alloc_fp8(be, R, C, ScaleBlock::tile128x128);
    const QuantOptions opt;
    const double bytes_copy = 2.0 * R * C * 2;  // read + write
    const double t_copy = time_op(
        be, [&] { be.copy(copy_dst.data(), x.data(), static_cast<size_t>(R * C) * 2); }, min_s, 3);
    const double copy_gbs = bytes_copy / t_copy / 1e9;
    auto record = [&](const char* name, double t, double gbs) {
      Json row;
      row["op"] = name;
      row["rows"] = R;
      row["cols"] = C;
      row["ms"] = number(t * 1e3);
      row["gb_per_s"] = number(gbs);
      row["vs_copy"] = number(gbs / copy_gbs);
      rows.push_back(row);
    };
    auto row = [&](const char* name, double bytes, const std::function<void()>& fn) {
      const double t = time_op(be, fn, min_s, 3);
      const double gbs = bytes / t / 1e9;
      std::printf("%-24s %6lld %6lld %10.3f %10.1f %8.0f%%\n", name, (long long)R, (long long)C,
                  t * 1e3, gbs, 100.0 * gbs / copy_gbs);
      record(name, t, gbs);
      return t;
    };
    std::printf("%-24s %6lld %6lld %10.3f %10.1f %8s\n", "copy bf16 (baseline)", (long long)R,
                (long long)C, t_copy * 1e3, copy_gbs, "100%");
    record("copy bf16 (baseline)", t_copy, copy_gbs);
    const double scales = 4.0 * R * blocks_of(C);
    row("quantize 1x128", 2.0 * R * C + R * C + scales, [&] { be.quantize(X, q.m, opt, nullptr); });
    row("quantize 128x128", 2.0 * R * C + R * C, [&] { be.quantize(X, qw.m, opt, nullptr); });
    row("quantize x and x^T", 2.0 * R * C + 2.0 * R * C + 2 * scales,
        [&] { be.quantize_with_transpose(X, q.m, qt.m, opt, nullptr, nullptr); });
    row("dequantize 1x128", R * C + scales + 2.0 * R * C, [&] {
      be.dequantize(q.m, Matrix{out.data(), R, C, DType::bf16});
    });

    // The producers that quantize what they write (RMSNorm -> x, x^T; SwiGLU -> h, h^T; its
    // backward -> dgate, dup and their transposes; RMSNorm's backward below), the tensor itself
    // not written unless said, against the op
    // followed by its quantization. GB/s counts the fused pass's bytes for both.
    Buffer x2 = upload_random_bf16(be, R * C, rng), x3 = upload_random_bf16(be, R * C, rng);
    Buffer w = upload_random_bf16(be, C, rng), rstd = be.alloc(static_cast<size_t>(R) * 4);
    Buffer out2 = be.alloc(static_cast<size_t>(R * C) * 2);
    auto q2 = alloc_fp8(be, R, C, ScaleBlock::row1x128);
    auto qt2 = alloc_fp8(be, C, R, ScaleBlock::row1x128);
    const Matrix X2{x2.data(), R, C, DType::bf16}, X3{x3.data(), R, C, DType::bf16};
    const Matrix Wn{w.data(), 1, C, DType::bf16}, Y{out.data(), R, C, DType::bf16};
    const Matrix Y2{out2.data(), R, C, DType::bf16}, none{nullptr, R, C, DType::bf16};
    auto* rs = rstd.as<float>();
    const Fp8Operands ops{q.m, qt.m}, ops2{q2.m, qt2.m};
    const double operands = 2.0 * R * C + 2 * scales;  // x and x^T codes and scales
    auto pair = [&](const char* fused_name, const char* unfused_name, double bytes,
                    const std::function<void()>& fused, const std::function<void()>& unfused) {
      const double tf = row(fused_name, bytes, fused), tu = row(unfused_name, bytes, unfused);
      std::printf("%-24s %6lld %6lld %10s %10s %8.2fx\n", "  fused vs unfused", (long long)R,
                  (long long)C, "", "", tu / tf);
      Json r;
      r["op"] = std::string(fused_name) + " vs unfused";
      r["rows"] = R;
      r["cols"] = C;
      r["speedup"] = number(tu / tf);
      rows.push_back(r);
    };
    pair(
        "rmsnorm->fp8 x, x^T", "rmsnorm, quantize x, x^T", 2.0 * R * C + operands,
        [&] { be.rmsnorm_forward_fp8(X, Wn, 1e-6f, none, rs, ops, opt); },
        [&] {
          be.rmsnorm_forward(X, Wn, 1e-6f, Y, rs);
          be.quantize_with_transpose(Y, q.m, qt.m, opt, nullptr, nullptr);
        });
    pair(
        "swiglu->fp8 h, h^T", "swiglu, quantize h, h^T", 4.0 * R * C + operands,
        [&] { be.swiglu_forward_fp8(X, X2, none, ops, opt); },
        [&] {
          be.swiglu_forward(X, X2, Y);
          be.quantize_with_transpose(Y, q.m, qt.m, opt, nullptr, nullptr);
        });
    pair(
        "swiglu bwd->fp8 x2", "swiglu bwd, quantize x2", 6.0 * R * C + 2 * operands,
        [&] { be.swiglu_backward_fp8(X3, X, X2, none, none, ops, opt, ops2, opt); },
        [&] {
          be.swiglu_backward(X3, X, X2, Y, Y2);
          be.quantize_with_transpose(Y, q.m, qt.m, opt, nullptr, nullptr);
          be.quantize_with_transpose(Y2, q2.m, qt2.m, opt, nullptr, nullptr);
        });
    // The residual stream's gradient: RMSNorm's backward plus the residual, quantized for the
    // linear reading it (o_proj, down_proj), dx written (the next residual add reads it).
    Buffer dw = be.alloc(static_cast<size_t>(C) * 4);
    be.zero(dw.data(), dw.bytes());
    const Matrix DW{dw.data(), 1, C, DType::f32};
    // The plain backward alone (dw and dx from one read of dy and x on a device): its share of
    // the copy bandwidth, bytes of dy and x read and dx written.
    row("rmsnorm backward", 6.0 * R * C, [&] { be.rmsnorm_backward(X3, X, Wn, rs, Y2, DW); });
    pair(
        "rmsnorm bwd->fp8 dx,dx^T", "rmsnorm bwd,add,quantize", 8.0 * R * C + operands,
        [&] { be.rmsnorm_backward_fp8(X3, X, Wn, rs, X2, Y, DW, ops, opt); },
        [&] {
          be.rmsnorm_backward(X3, X, Wn, rs, Y2, DW);
          be.add(X2, Y2, Y);
          be.quantize_with_transpose(Y, q.m, qt.m, opt, nullptr, nullptr);
        });

    // The tile kernels the backend's default does not run (CUDA: every tile staged in shared
    // memory, a warp per 1x128 line — as FP32 values, then BF16 ones as 16-bit patterns — where
    // the default holds whole tiles in registers), so one run compares them.
    auto staged_rows = [&](const std::string& suffix) {
      auto name = [&](const char* op) { return std::string(op) + suffix; };
      row(name("quantize x, x^T").c_str(), 2.0 * R * C + operands,
          [&] { be.quantize_with_transpose(X, q.m, qt.m, opt, nullptr, nullptr); });
      row(name("rmsnorm->fp8").c_str(), 2.0 * R * C + operands,
          [&] { be.rmsnorm_forward_fp8(X, Wn, 1e-6f, none, rs, ops, opt); });
      row(name("swiglu->fp8").c_str(), 4.0 * R * C + operands,
          [&] { be.swiglu_forward_fp8(X, X2, none, ops, opt); });
      row(name("swiglu bwd->fp8").c_str(), 6.0 * R * C + 2 * operands,
          [&] { be.swiglu_backward_fp8(X3, X, X2, none, none, ops, opt, ops2, opt); });
      row(name("rmsnorm bwd->fp8").c_str(), 8.0 * R * C + operands,
          [&] { be.rmsnorm_backward_fp8(X3, X, Wn, rs, X2, Y, DW, ops, opt); });
    };
    if (be.set_kernel_option("quantize_tile_kernel", 1)) {
      staged_rows(" staged");
      if (be.set_kernel_option("quantize_stage_bf16", 1)) {
        staged_rows(" stage16");
        be.set_kernel_option("quantize_stage_bf16", 0);
      }
      be.set_kernel_option("quantize_tile_kernel", 0);
    }
  }
  std::printf(
      "GB/s counts bytes read + written; 'vs copy' is against a plain copy of the BF16 input\n"
      "measured in the same run; 'fused vs unfused' is the time of the op and its quantization\n"
      "one after the other over the time of the producer that quantizes as it writes.\n\n");
  run["rows"] = Json(rows);
  return run;
}

}  // namespace fp8rl::cli::bench
