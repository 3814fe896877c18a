// bench experts: one mixture-of-experts layer's expert GEMMs (gate, up and down of every expert,
// tokens routed uniformly at random to k distinct experts each, sorted by expert) per pass —
// fprop, dgrad, wgrad — one call per expert against one grouped call for all experts
// (Backend::gemm_grouped, gemm_fp8_grouped, gemm_wgrad_grouped, gemm_fp8_wgrad_grouped), in BF16
// and block-scaled FP8, on the same operands. The GEMMs alone: activations are quantized
// before the timing (the quantization has its own benchmark, bench quant).
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "bench.hpp"
#include "core/error.hpp"
#include "fp8/format.hpp"

namespace fp8rl::cli::bench {
namespace {

// Row `first` of a row-major matrix of cols elements of elem bytes at data.
void* row_ptr(const Buffer& b, int64_t first, int64_t cols, size_t elem) {
  return static_cast<uint8_t*>(b.data()) + static_cast<size_t>(first * cols) * elem;
}

Buffer alloc_fp8_scales(Backend& be, ScaleBlock blk, int64_t rows, int64_t cols) {
  return be.alloc(static_cast<size_t>(scale_count(blk, rows, cols)) * sizeof(float));
}

// Each of T tokens picks k distinct experts of E uniformly at random: the rows per expert.
std::vector<int64_t> uniform_routing(int64_t T, int64_t E, int64_t k, Rng& rng) {
  std::vector<int64_t> count(static_cast<size_t>(E), 0);
  std::vector<int32_t> ids(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(ids.begin(), ids.end(), 0);
    for (int64_t j = 0; j < k; ++j) {  // a partial Fisher-Yates shuffle
      const auto pick =
          j + static_cast<int64_t>(rng.uniform() * static_cast<double>(E - j)) % (E - j);
      std::swap(ids[static_cast<size_t>(j)], ids[static_cast<size_t>(pick)]);
      ++count[static_cast<size_t>(ids[static_cast<size_t>(j)])];
    }
  }
  return count;
}

// One linear of every expert: weight [out, in] per expert, its input x [R, in] and output
// gradient dy [R, out] (expert-sorted), with their FP8 forms.
struct ExpertLinear {
  int64_t in = 0, out = 0;
  std::vector<Buffer> w, wt;               // bf16 W_e [out, in], W_eᵀ [in, out]
  std::vector<Buffer> wq, wqs, wtq, wtqs;  // FP8 tiles of W_e and W_eᵀ, codes and scales
  std::vector<Buffer> grad;                // f32 [out, in]
  const Buffer* x = nullptr;               // bf16 [R, in]
  const Buffer* dy = nullptr;              // bf16 [R, out]
  Buffer xq, xqs, dyq, dyqs;               // 1x128 along the row, grouped layout
  std::vector<Buffer> xt, xts, dyt, dyts;  // per expert X_eᵀ [in, M_e], dY_eᵀ [out, M_e] 1x128
  std::vector<Buffer> xe, xes, dye, dyes;  // per expert X_e, dY_e 1x128 in buffers of their own
};

}  // namespace

Json bench_experts(Backend& be, const ExpertsOptions& o) {
  check(o.experts > 0 && o.top_k > 0 && o.top_k <= o.experts,
        "bench experts: --top-k must be between 1 and --experts");
  const int64_t E = o.experts, k = o.top_k, H = o.hidden, I = o.inter;
  const Fp8Format fmt8 = Fp8Format::e4m3;
  const QuantOptions qopt{fmt8, false};
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "one MoE layer's expert GEMMs: %lld experts, top %lld, hidden %lld, intermediate %lld "
      "(gate, up, down); tokens routed uniformly; per pass one call per expert vs one grouped "
      "call\n",
      static_cast<long long>(E), static_cast<long long>(k), static_cast<long long>(H),
      static_cast<long long>(I));
  const bool kernel2 =
      !be.kernel_options().empty() && be.set_kernel_option("gemm_grouped_kernel", 0);
  std::printf("%8s %6s %6s %11s %11s %11s %11s %9s%s\n", "tokens", "prec", "pass", "loop ms",
              "grouped ms", "loop TF/s", "grouped TF/s", "grouped x",
              kernel2 ? "  kernel 2 ms  kernel 3 ms (one launch, FP8 fprop/dgrad)" : "");
  std::fflush(stdout);
  Json run = backend_json(be);
  run["experts"] = E;
  run["top_k"] = k;
  run["hidden"] = H;
  run["intermediate"] = I;
  Json::Array rows_json;
  Rng rng(20261127);

  // The weights, shared by every token count: gate and up [I, H], down [H, I] per expert.
  std::vector<ExpertLinear> lin(3);
  for (size_t l = 0; l < 3; ++l) {
    ExpertLinear& L = lin[l];
    L.in = l < 2 ? H : I;
    L.out = l < 2 ? I : H;
    for (int64_t e = 0; e < E; ++e) {
      L.w.push_back(upload_random_bf16(be, L.out * L.in, rng));
      L.wt.push_back(be.alloc(static_cast<size_t>(L.out * L.in) * 2));
      be.transpose(Matrix{L.w.back().data(), L.out, L.in, DType::bf16},
                   Matrix{L.wt.back().data(), L.in, L.out, DType::bf16});
      L.wq.push_back(be.alloc(static_cast<size_t>(L.out * L.in)));
      L.wqs.push_back(alloc_fp8_scales(be, ScaleBlock::tile128x128, L.out, L.in));
      L.wtq.push_back(be.alloc(static_cast<size_t>(L.out * L.in)));
      L.wtqs.push_back(alloc_fp8_scales(be, ScaleBlock::tile128x128, L.in, L.out));
      const Fp8Matrix wq{L.wq.back().as<uint8_t>(),
                         L.wqs.back().as<float>(),
                         L.out,
                         L.in,
                         ScaleBlock::tile128x128,
                         fmt8};
      be.quantize(Matrix{L.w.back().data(), L.out, L.in, DType::bf16}, wq, qopt, nullptr);
      be.transpose_fp8(wq, Fp8Matrix{L.wtq.back().as<uint8_t>(), L.wtqs.back().as<float>(), L.in,
                                     L.out, ScaleBlock::tile128x128, fmt8});
      L.grad.push_back(be.alloc(static_cast<size_t>(L.out * L.in) * 4));
      be.zero(L.grad.back().data(), L.grad.back().bytes());
    }
  }

  for (const int64_t T : o.tokens) {
    const std::vector<int64_t> rows = uniform_routing(T, E, k, rng);
    const int64_t R = T * k;
    std::vector<int64_t> first(static_cast<size_t>(E), 0);
    for (int64_t e = 1; e < E; ++e)
      first[static_cast<size_t>(e)] =
          first[static_cast<size_t>(e - 1)] + rows[static_cast<size_t>(e - 1)];
    // Activations: x [R, H] (gate, up in), a [R, I] (down in); gradients dg [R, I] (gate, up
    // out), dy [R, H] (down out); one output buffer as wide as the widest.
    const Buffer x = upload_random_bf16(be, R * H, rng), a = upload_random_bf16(be, R * I, rng),
                 dg = upload_random_bf16(be, R * I, rng), dy = upload_random_bf16(be, R * H, rng);
    const Buffer out = be.alloc(static_cast<size_t>(R * std::max(H, I)) * 2);
    lin[0].x = lin[1].x = &x;
    lin[2].x = &a;
    lin[0].dy = lin[1].dy = &dg;
    lin[2].dy = &dy;
    // FP8 operands: x and dy along their rows in the grouped layout (one quantize of all rows
    // + group_scales), per expert X_eᵀ and dY_eᵀ along M_e.
    auto grouped_q = [&](const Buffer& src, int64_t cols, Buffer& codes, Buffer& scales) {
      codes = be.alloc(static_cast<size_t>(R * cols));
      scales = alloc_fp8_scales(be, ScaleBlock::row1x128, R, cols);
      const Buffer tmp = alloc_fp8_scales(be, ScaleBlock::row1x128, R, cols);
      const Fp8Matrix whole{
          codes.as<uint8_t>(), tmp.as<float>(), R, cols, ScaleBlock::row1x128, fmt8};
      be.quantize(Matrix{src.data(), R, cols, DType::bf16}, whole, qopt, nullptr);
      be.group_scales(whole, rows, scales.as<float>());
    };
    auto transposed_q = [&](const Buffer& src, int64_t cols, std::vector<Buffer>& codes,
                            std::vector<Buffer>& scales) {
      codes.clear();
      scales.clear();
      const Buffer along = be.alloc(static_cast<size_t>(R * cols));
      const Buffer along_s = alloc_fp8_scales(be, ScaleBlock::row1x128, R, cols);
      for (int64_t e = 0; e < E; ++e) {
        const int64_t n = rows[static_cast<size_t>(e)], f = first[static_cast<size_t>(e)];
        codes.push_back(be.alloc(static_cast<size_t>(n * cols)));
        scales.push_back(alloc_fp8_scales(be, ScaleBlock::row1x128, cols, n));
        if (n == 0) continue;
        be.quantize_with_transpose(Matrix{row_ptr(src, f, cols, 2), n, cols, DType::bf16},
                                   Fp8Matrix{static_cast<uint8_t*>(row_ptr(along, f, cols, 1)),
                                             along_s.as<float>() + blocks_of(cols) * f, n, cols,
                                             ScaleBlock::row1x128, fmt8},
                                   Fp8Matrix{codes.back().as<uint8_t>(), scales.back().as<float>(),
                                             cols, n, ScaleBlock::row1x128, fmt8},
                                   qopt, nullptr, nullptr);
      }
    };
    // The per-expert calls' operands: each expert's rows quantized into buffers of their own (as
    // the linears one by one had them).
    auto per_expert_q = [&](const Buffer& src, int64_t cols, std::vector<Buffer>& codes,
                            std::vector<Buffer>& scales) {
      codes.clear();
      scales.clear();
      for (int64_t e = 0; e < E; ++e) {
        const int64_t n = rows[static_cast<size_t>(e)], f = first[static_cast<size_t>(e)];
        codes.push_back(be.alloc(static_cast<size_t>(n * cols)));
        scales.push_back(alloc_fp8_scales(be, ScaleBlock::row1x128, n, cols));
        if (n > 0)
          be.quantize(Matrix{row_ptr(src, f, cols, 2), n, cols, DType::bf16},
                      Fp8Matrix{codes.back().as<uint8_t>(), scales.back().as<float>(), n, cols,
                                ScaleBlock::row1x128, fmt8},
                      qopt, nullptr);
      }
    };
    for (ExpertLinear& L : lin) {
      per_expert_q(*L.x, L.in, L.xe, L.xes);
      per_expert_q(*L.dy, L.out, L.dye, L.dyes);
      grouped_q(*L.x, L.in, L.xq, L.xqs);
      grouped_q(*L.dy, L.out, L.dyq, L.dyqs);
      transposed_q(*L.x, L.in, L.xt, L.xts);
      transposed_q(*L.dy, L.out, L.dyt, L.dyts);
    }
    be.synchronize();

    // The passes of one linear, per expert (loop) or grouped. The contraction and output widths:
    // fprop x [R, in] → [R, out]; dgrad dy [R, out] → [R, in]; wgrad dW [out, in] += dyᵀ·x.
    auto pass = [&](const ExpertLinear& L, bool fp8, int p, bool grouped) {
      const int64_t K = p == 0 ? L.in : L.out, N = p == 0 ? L.out : L.in;
      if (p == 2) {
        if (!fp8) {
          std::vector<Matrix> c;
          for (const Buffer& g : L.grad) c.push_back(Matrix{g.data(), L.out, L.in, DType::f32});
          if (grouped) {
            be.gemm_wgrad_grouped(Matrix{L.dy->data(), R, L.out, DType::bf16},
                                  Matrix{L.x->data(), R, L.in, DType::bf16}, c, rows);
            return;
          }
          for (int64_t e = 0; e < E; ++e) {  // what Linear::backward does per expert
            const int64_t n = rows[static_cast<size_t>(e)], f = first[static_cast<size_t>(e)];
            if (n == 0) continue;
            const Buffer dyt = be.alloc(static_cast<size_t>(n * L.out) * 2),
                         xt = be.alloc(static_cast<size_t>(n * L.in) * 2);
            be.transpose(Matrix{row_ptr(*L.dy, f, L.out, 2), n, L.out, DType::bf16},
                         Matrix{dyt.data(), L.out, n, DType::bf16});
            be.transpose(Matrix{row_ptr(*L.x, f, L.in, 2), n, L.in, DType::bf16},
                         Matrix{xt.data(), L.in, n, DType::bf16});
            be.gemm(Matrix{dyt.data(), L.out, n, DType::bf16},
                    Matrix{xt.data(), L.in, n, DType::bf16}, c[static_cast<size_t>(e)], 1.0f);
          }
          return;
        }
        std::vector<Fp8Matrix> qa, qb;
        std::vector<Matrix> c;
        for (int64_t e = 0; e < E; ++e) {
          const int64_t n = rows[static_cast<size_t>(e)];
          if (n == 0) continue;
          const size_t i = static_cast<size_t>(e);
          qa.push_back(Fp8Matrix{L.dyt[i].as<uint8_t>(), L.dyts[i].as<float>(), L.out, n,
                                 ScaleBlock::row1x128, fmt8});
          qb.push_back(Fp8Matrix{L.xt[i].as<uint8_t>(), L.xts[i].as<float>(), L.in, n,
                                 ScaleBlock::row1x128, fmt8});
          c.push_back(Matrix{L.grad[i].data(), L.out, L.in, DType::f32});
        }
        if (grouped) {
          be.gemm_fp8_wgrad_grouped(qa, qb, c);
        } else {
          for (size_t i = 0; i < qa.size(); ++i) be.gemm_fp8(qa[i], qb[i], c[i], 1.0f);
        }
        return;
      }
      const Buffer& src = p == 0 ? *L.x : *L.dy;
      if (!fp8) {
        std::vector<Matrix> w;
        for (int64_t e = 0; e < E; ++e)
          w.push_back(
              Matrix{(p == 0 ? L.w : L.wt)[static_cast<size_t>(e)].data(), N, K, DType::bf16});
        if (grouped) {
          be.gemm_grouped(Matrix{src.data(), R, K, DType::bf16}, w,
                          Matrix{out.data(), R, N, DType::bf16}, rows, 0.0f);
          return;
        }
        for (int64_t e = 0; e < E; ++e) {
          const int64_t n = rows[static_cast<size_t>(e)], f = first[static_cast<size_t>(e)];
          if (n > 0)
            be.gemm(Matrix{row_ptr(src, f, K, 2), n, K, DType::bf16}, w[static_cast<size_t>(e)],
                    Matrix{row_ptr(out, f, N, 2), n, N, DType::bf16}, 0.0f);
        }
        return;
      }
      const Buffer& codes = p == 0 ? L.xq : L.dyq;
      const Buffer& scales = p == 0 ? L.xqs : L.dyqs;
      std::vector<Fp8Matrix> w;
      for (int64_t e = 0; e < E; ++e) {
        const size_t i = static_cast<size_t>(e);
        w.push_back(p == 0 ? Fp8Matrix{L.wq[i].as<uint8_t>(), L.wqs[i].as<float>(), N, K,
                                       ScaleBlock::tile128x128, fmt8}
                           : Fp8Matrix{L.wtq[i].as<uint8_t>(), L.wtqs[i].as<float>(), N, K,
                                       ScaleBlock::tile128x128, fmt8});
      }
      if (grouped) {
        be.gemm_fp8_grouped(
            Fp8Matrix{codes.as<uint8_t>(), scales.as<float>(), R, K, ScaleBlock::row1x128, fmt8}, w,
            Matrix{out.data(), R, N, DType::bf16}, rows, 0.0f);
        return;
      }
      const std::vector<Buffer>& ec = p == 0 ? L.xe : L.dye;
      const std::vector<Buffer>& es = p == 0 ? L.xes : L.dyes;
      for (int64_t e = 0; e < E; ++e) {
        const int64_t n = rows[static_cast<size_t>(e)], f = first[static_cast<size_t>(e)];
        const size_t i = static_cast<size_t>(e);
        if (n > 0)
          be.gemm_fp8(
              Fp8Matrix{ec[i].as<uint8_t>(), es[i].as<float>(), n, K, ScaleBlock::row1x128, fmt8},
              w[i], Matrix{row_ptr(out, f, N, 2), n, N, DType::bf16}, 0.0f);
      }
    };

    // 2·R·(H·I) per linear and pass, three linears.
    const double flop = 2.0 * static_cast<double>(R) * static_cast<double>(H * I) * 3.0;
    const char* pass_name[3] = {"fprop", "dgrad", "wgrad"};
    double grouped_s[2][3] = {};
    for (int prec = 0; prec < 2; ++prec) {
      const bool fp8 = prec == 1;
      for (int p = 0; p < 3; ++p) {
        auto timed = [&](bool grouped) {
          return time_op(
              be,
              [&] {
                for (const ExpertLinear& L : lin) pass(L, fp8, p, grouped);
              },
              o.seconds, 3);
        };
        const double loop = timed(false), grouped = timed(true);
        // A device's other grouped path, where it has one (gemm_grouped_kernel=2: one matmul
        // per expert from the one call, without cuBLAS's grouped GEMM or the FP8 over-read).
        double other = -1, single = -1;
        if (be.set_kernel_option("gemm_grouped_kernel", 2)) {
          other = timed(true);
          be.set_kernel_option("gemm_grouped_kernel", 0);
        }
        // FP8 fprop and dgrad in one launch of the tensor-core grouped kernel
        // (gemm_grouped_kernel=3; wgrad's per-expert form has no such kernel yet).
        if (fp8 && p < 2 && be.set_kernel_option("gemm_grouped_kernel", 3)) {
          single = timed(true);
          be.set_kernel_option("gemm_grouped_kernel", 0);
        }
        grouped_s[prec][p] = grouped;
        std::printf("%8lld %6s %6s %11.3f %11.3f %11.4g %11.4g %8.2fx", static_cast<long long>(T),
                    fp8 ? "fp8" : "bf16", pass_name[p], loop * 1e3, grouped * 1e3,
                    flop / loop / 1e12, flop / grouped / 1e12, loop / grouped);
        if (other > 0) std::printf(" %11.3f", other * 1e3);
        if (single > 0) std::printf(" %11.3f (%.4g TF/s)", single * 1e3, flop / single / 1e12);
        std::printf("\n");
        std::fflush(stdout);
        Json row;
        row["tokens"] = T;
        row["precision"] = fp8 ? "fp8" : "bf16";
        row["pass"] = pass_name[p];
        row["loop_seconds"] = number(loop);
        row["grouped_seconds"] = number(grouped);
        row["loop_tflops"] = number(flop / loop / 1e12);
        row["grouped_tflops"] = number(flop / grouped / 1e12);
        row["grouped_speedup"] = number(loop / grouped);
        if (other > 0) row["grouped_kernel2_seconds"] = number(other);
        if (single > 0) {
          row["grouped_kernel3_seconds"] = number(single);
          row["grouped_kernel3_tflops"] = number(flop / single / 1e12);
        }
        rows_json.push_back(row);
      }
    }
    const double b = grouped_s[0][0] + grouped_s[0][1] + grouped_s[0][2];
    const double f = grouped_s[1][0] + grouped_s[1][1] + grouped_s[1][2];
    std::printf("%8lld grouped, fprop + dgrad + wgrad: bf16 %.3f ms, fp8 %.3f ms: fp8 %.2fx bf16\n",
                static_cast<long long>(T), b * 1e3, f * 1e3, b / f);
    std::fflush(stdout);
  }
  run["rows"] = rows_json;
  return run;
}

}  // namespace fp8rl::cli::bench
