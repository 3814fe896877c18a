// Op cases: the grouped GEMMs of the experts (Backend::gemm_grouped, gemm_fp8_grouped,
// group_scales, gemm_wgrad_grouped, gemm_fp8_wgrad_grouped) against the per-group single ops on
// the same backend, on random data with awkward groups: empty ones, 1, 3, 127 and 129 rows (a
// 1x128 block boundary on either side), one group, seven; K and N multiples of 128 and not.
//
// The bound. On the CPU the grouped ops are the per-group calls (Backend's defaults), so the
// outputs must be the same bits. A device may run the groups in one launch (cuBLAS's grouped
// GEMM) with another summation order: there the grouped result must agree with the per-group
// one, and with the CPU's grouped result, within the single op's bound against the CPU
// (cases_gemm.cpp: one BF16 rounding of each output 8e-3, FP32 sums 1e-4, block-scaled FP8 into
// f32 5e-4), as a norm-relative error — except the grouped FP8 GEMM into f32: 1e-3, since
// cuBLASLt's block-scaled matmuls measured 2.3e-4 to 6.8e-4 against the CPU's exact FP32 sums
// there (H200, 2026-11-27: the FP8 tensor cores' own accumulation; the single-launch kernel,
// option 3, 3e-7). group_scales only moves floats: bit-exact everywhere.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/bf16.hpp"
#include "op_case.hpp"

namespace fp8rl::optest {
namespace {

struct Groups {
  const char* name;
  std::vector<int64_t> rows;
  int64_t total() const { return std::accumulate(rows.begin(), rows.end(), int64_t{0}); }
};

const std::vector<Groups>& group_sets() {
  static const std::vector<Groups> sets = {
      {"E5 {0,1,3,127,129}", {0, 1, 3, 127, 129}},
      {"E1 {37}", {37}},
      {"E7 {5,0,130,1,64,0,17}", {5, 0, 130, 1, 64, 0, 17}},
  };
  return sets;
}

struct Dims {
  int64_t N, K;
};
const Dims kDims[] = {{256, 384}, {136, 200}};

std::vector<uint8_t> to_bytes(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> out(v.size() * dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::f32) {
      std::memcpy(&out[i * 4], &v[i], 4);
    } else {
      const bf16 b = float_to_bf16(v[i]);
      std::memcpy(&out[i * 2], &b, 2);
    }
  }
  return out;
}

std::vector<double> to_double(const std::vector<uint8_t>& bytes, DType dt) {
  std::vector<double> out(bytes.size() / dtype_size(dt));
  for (size_t i = 0; i < out.size(); ++i) {
    if (dt == DType::f32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      out[i] = f;
    } else {
      bf16 b;
      std::memcpy(&b, &bytes[i * 2], 2);
      out[i] = bf16_to_float(b);
    }
  }
  return out;
}

std::vector<int64_t> firsts(const std::vector<int64_t>& rows) {
  std::vector<int64_t> f(rows.size() + 1, 0);
  for (size_t g = 0; g < rows.size(); ++g) f[g + 1] = f[g] + rows[g];
  return f;
}

// 1x128 scales of a [total, K] matrix as quantize() lays them (s[cb·total + r]) re-laid per
// group (group g's [KB, M_g] at KB·first_g): the host's independent statement of the layout.
std::vector<float> grouped_layout(const std::vector<float>& s, const std::vector<int64_t>& rows,
                                  int64_t K) {
  const int64_t kb = blocks_of(K), total = firsts(rows).back();
  std::vector<float> out(s.size());
  int64_t f = 0;
  for (const int64_t n : rows) {
    for (int64_t cb = 0; cb < kb; ++cb)
      for (int64_t r = 0; r < n; ++r) out[kb * f + cb * n + r] = s[cb * total + f + r];
    f += n;
  }
  return out;
}

// What a case's run returns: the output bytes, or why it could not run.
struct Run {
  std::vector<uint8_t> out;
  std::string problem;  // "" when it ran; "unsupported: …" skips the case
};

// Judges grouped against per-group (same backend) and, on a device, against the CPU's grouped.
Result judge(Backend& ref, Backend& test, const std::function<Run(Backend&, bool grouped)>& run,
             DType out, double bound) {
  Run got = run(test, true);
  if (got.problem.rfind("unsupported: ", 0) == 0) return skip(got.problem.substr(13));
  if (!got.problem.empty()) return fail("grouped: " + got.problem);
  Run per = run(test, false);
  if (!per.problem.empty()) return fail("per group: " + per.problem);
  const auto g = to_double(got.out, out), p = to_double(per.out, out);
  for (double v : g)
    if (!std::isfinite(v)) return fail("non-finite output from finite inputs");
  if (&ref == &test) {
    if (got.out != per.out) return fail("the CPU's grouped op differs from its per-group calls");
    return pass("bit-exact with the per-group calls");
  }
  const double err_self = relative_error(g, p);
  if (!(err_self <= bound))
    return fail(fmt("vs per group: relative error %.3g > %.3g", err_self, bound));
  Run want = run(ref, true);
  if (!want.problem.empty()) return fail("reference: " + want.problem);
  const double err_ref = relative_error(g, to_double(want.out, out));
  if (!(err_ref <= bound)) return fail(fmt("vs CPU: relative error %.3g > %.3g", err_ref, bound));
  std::string option;
  // The device's other grouped path (one cuBLASLt matmul per group, gemm_fp8's padding).
  if (test.set_kernel_option("gemm_grouped_kernel", 2)) {
    Run other = run(test, true);
    test.set_kernel_option("gemm_grouped_kernel", 0);
    if (!other.problem.empty()) return fail("gemm_grouped_kernel=2: " + other.problem);
    const double err = relative_error(to_double(other.out, out), to_double(want.out, out));
    if (!(err <= bound))
      return fail(fmt("gemm_grouped_kernel=2: vs CPU: relative error %.3g > %.3g", err, bound));
    option = fmt(", kernel 2 vs CPU %.2g", err);
  }
  // The single-launch tensor-core kernel (gemm_grouped_kernel=3; FP8 groups, BF16 as option 1).
  // Its own bound, at least 1e-3: the tensor cores' FP8 products may sum inside an mma with less
  // than FP32's precision (the block scales are applied in FP32 after each 128 of K).
  if (test.set_kernel_option("gemm_grouped_kernel", 3)) {
    Run single = run(test, true);
    test.set_kernel_option("gemm_grouped_kernel", 0);
    if (!single.problem.empty()) return fail("gemm_grouped_kernel=3: " + single.problem);
    const double b3 = std::max(bound, 1e-3);
    const double err = relative_error(to_double(single.out, out), to_double(want.out, out));
    if (!(err <= b3))
      return fail(fmt("gemm_grouped_kernel=3: vs CPU: relative error %.3g > %.3g", err, b3));
    option += fmt(", kernel 3 vs CPU %.2g", err);
  }
  return pass(fmt("rel. err vs per group %.2g, vs CPU %.2g%s (bound %.2g)%s", err_self, err_ref,
                  option.c_str(), bound, got.out == per.out ? ", per group bit-exact" : ""));
}

// c [ΣM, N] = per group a_g · b_gᵀ + beta·c.
void add_gemm_grouped_case(Registry& reg, const Groups& gs, Dims d, DType in, DType out,
                           float beta) {
  reg.push_back(
      {fmt("gemm_grouped %s->%s %s N%lld K%lld%s", dtype_name(in), dtype_name(out), gs.name,
           (long long)d.N, (long long)d.K, beta != 0 ? " beta=1" : ""),
       [=](Backend& ref, Backend& test, Rng& rng) {
         const int64_t M = gs.total(), G = static_cast<int64_t>(gs.rows.size());
         const auto a = to_bytes(random_matrix(rng, M, d.K), in);
         const auto b = to_bytes(random_matrix(rng, G * d.N, d.K), in);  // G weights [N, K]
         const auto c0 = to_bytes(random_matrix(rng, M, d.N), out);
         const auto f = firsts(gs.rows);
         auto run = [&](Backend& be, bool grouped) {
           Guarded A(be, a.size()), B(be, b.size()), C(be, c0.size());
           A.upload(a.data());
           B.upload(b.data());
           C.upload(c0.data());
           const size_t ie = dtype_size(in), oe = dtype_size(out);
           std::vector<Matrix> w;
           for (int64_t g = 0; g < G; ++g)
             w.push_back(
                 Matrix{static_cast<uint8_t*>(B.data()) + g * d.N * d.K * ie, d.N, d.K, in});
           if (grouped) {
             be.gemm_grouped(Matrix{A.data(), M, d.K, in}, w, Matrix{C.data(), M, d.N, out},
                             gs.rows, beta);
           } else {
             for (int64_t g = 0; g < G; ++g) {
               const int64_t n = gs.rows[g], r = f[g];
               if (n == 0) continue;
               be.gemm(Matrix{static_cast<uint8_t*>(A.data()) + r * d.K * ie, n, d.K, in}, w[g],
                       Matrix{static_cast<uint8_t*>(C.data()) + r * d.N * oe, n, d.N, out}, beta);
             }
           }
           Run res;
           res.out.resize(c0.size());
           if (!C.download(res.out.data())) res.problem = "wrote outside its output";
           return res;
         };
         return judge(ref, test, run, out, out == DType::bf16 ? 8e-3 : 1e-4);
       }});
}

// c [ΣM, N] = per group dequant(a_g) · dequant(b_g)ᵀ, a 1x128 in the grouped layout (one
// quantize() of all rows and group_scales on the backend under test), b_g 128x128 tiles.
void add_gemm_fp8_grouped_case(Registry& reg, const Groups& gs, Dims d, DType out) {
  reg.push_back(
      {fmt("gemm_fp8_grouped e4m3->%s %s N%lld K%lld", dtype_name(out), gs.name, (long long)d.N,
           (long long)d.K),
       [=](Backend& ref, Backend& test, Rng& rng) {
         const int64_t M = gs.total(), G = static_cast<int64_t>(gs.rows.size());
         const QuantOptions opt{Fp8Format::e4m3, false};
         const auto x = random_matrix(rng, M, d.K);
         // The weights' tiles, quantized on the reference.
         const int64_t wsc = scale_count(ScaleBlock::tile128x128, d.N, d.K);
         std::vector<uint8_t> wc(static_cast<size_t>(G * d.N * d.K));
         std::vector<float> ws(static_cast<size_t>(G * wsc), 1.0f);
         for (int64_t g = 0; g < G; ++g) {
           const auto w = random_matrix(rng, d.N, d.K);
           ref.quantize(Matrix{const_cast<float*>(w.data()), d.N, d.K, DType::f32},
                        Fp8Matrix{wc.data() + g * d.N * d.K, ws.data() + g * wsc, d.N, d.K,
                                  ScaleBlock::tile128x128, Fp8Format::e4m3},
                        opt, nullptr);
         }
         const std::vector<uint8_t> c0(static_cast<size_t>(M * d.N) * dtype_size(out), 0xee);
         const auto f = firsts(gs.rows);
         const int64_t xsc = scale_count(ScaleBlock::row1x128, M, d.K);
         auto run = [&](Backend& be, bool grouped) {
           Run res;
           Guarded X(be, x.size() * 4), W(be, wc.size()), WS(be, ws.size() * 4),
               Q(be, static_cast<size_t>(M * d.K)), QS(be, static_cast<size_t>(xsc) * 4),
               GS(be, static_cast<size_t>(xsc) * 4), C(be, c0.size());
           X.upload(x.data());
           W.upload(wc.data());
           WS.upload(ws.data());
           C.upload(c0.data());  // not zeros: every element must be written
           std::vector<Fp8Matrix> w;
           for (int64_t g = 0; g < G; ++g)
             w.push_back(Fp8Matrix{static_cast<uint8_t*>(W.data()) + g * d.N * d.K,
                                   static_cast<float*>(WS.data()) + g * wsc, d.N, d.K,
                                   ScaleBlock::tile128x128, Fp8Format::e4m3});
           auto* codes = static_cast<uint8_t*>(Q.data());
           const Fp8Matrix whole{codes, static_cast<float*>(QS.data()), M,
                                 d.K,   ScaleBlock::row1x128,           Fp8Format::e4m3};
           if (M > 0) be.quantize(Matrix{X.data(), M, d.K, DType::f32}, whole, opt, nullptr);
           const Matrix c{C.data(), M, d.N, out};
           if (grouped) {
             auto* gsc = static_cast<float*>(GS.data());
             be.group_scales(whole, gs.rows, gsc);
             const Fp8Matrix a{codes, gsc, M, d.K, ScaleBlock::row1x128, Fp8Format::e4m3};
             be.gemm_fp8_grouped(a, w, c, gs.rows, 0.0f);
           } else {
             // Each group quantized on its own into buffers of its own (what the per-expert
             // linears did).
             for (int64_t g = 0; g < G; ++g) {
               const int64_t n = gs.rows[g], r = f[g];
               if (n == 0) continue;
               const Buffer qc = be.alloc(static_cast<size_t>(n * d.K)),
                            qs = be.alloc(
                                static_cast<size_t>(scale_count(ScaleBlock::row1x128, n, d.K)) * 4);
               const Fp8Matrix a{qc.as<uint8_t>(),     qs.as<float>(), n, d.K,
                                 ScaleBlock::row1x128, Fp8Format::e4m3};
               be.quantize(Matrix{static_cast<float*>(X.data()) + r * d.K, n, d.K, DType::f32}, a,
                           opt, nullptr);
               if (auto why = be.gemm_fp8_unsupported(a, w[g], Matrix{nullptr, n, d.N, out})) {
                 res.problem = "unsupported: " + *why;
                 return res;
               }
               be.gemm_fp8(
                   a, w[g],
                   Matrix{static_cast<uint8_t*>(C.data()) + r * d.N * dtype_size(out), n, d.N, out},
                   0.0f);
             }
           }
           res.out.resize(c0.size());
           if (!C.download(res.out.data())) res.problem = "wrote outside its output";
           return res;
         };
         return judge(ref, test, run, out, out == DType::bf16 ? 8e-3 : 1e-3);
       }});
}

// group_scales against the host's re-layout of the same scales: bit-exact.
void add_group_scales_case(Registry& reg, const Groups& gs, int64_t K) {
  reg.push_back(
      {fmt("group_scales %s K%lld", gs.name, (long long)K), [=](Backend&, Backend& test, Rng& rng) {
         const int64_t M = gs.total();
         const int64_t n = scale_count(ScaleBlock::row1x128, M, K);
         std::vector<float> s(static_cast<size_t>(n));
         for (float& v : s) v = static_cast<float>(rng.uniform()) + 0.5f;
         Guarded S(test, s.size() * 4), O(test, s.size() * 4);
         S.upload(s.data());
         const std::vector<float> poison(s.size(), -1.0f);
         O.upload(poison.data());
         test.group_scales(Fp8Matrix{nullptr, static_cast<float*>(S.data()), M, K,
                                     ScaleBlock::row1x128, Fp8Format::e4m3},
                           gs.rows, static_cast<float*>(O.data()));
         std::vector<float> got(s.size());
         if (!O.download(got.data())) return fail("wrote outside its output");
         if (got != grouped_layout(s, gs.rows, K))
           return fail("scales differ from the host's grouped layout");
         return pass("bit-exact");
       }});
}

// Weight gradients c_g [N, K] += dy_gᵀ · x_g: bf16 (gemm_wgrad_grouped) or FP8 (each group's
// quantize_with_transpose, gemm_fp8_wgrad_grouped); c_g f32, random start.
void add_wgrad_grouped_case(Registry& reg, const Groups& gs, Dims d, bool fp8) {
  reg.push_back(
      {fmt("%s %s N%lld K%lld", fp8 ? "gemm_fp8_wgrad_grouped e4m3" : "gemm_wgrad_grouped bf16",
           gs.name, (long long)d.N, (long long)d.K),
       [=](Backend& ref, Backend& test, Rng& rng) {
         const int64_t M = gs.total(), G = static_cast<int64_t>(gs.rows.size());
         const QuantOptions opt{Fp8Format::e4m3, false};
         const auto dy = to_bytes(random_matrix(rng, M, d.N), DType::bf16);
         const auto x = to_bytes(random_matrix(rng, M, d.K), DType::bf16);
         const auto c0 = to_bytes(random_matrix(rng, G * d.N, d.K), DType::f32);
         const auto f = firsts(gs.rows);
         auto run = [&](Backend& be, bool grouped) {
           Run res;
           Guarded DY(be, dy.size()), X(be, x.size()), C(be, c0.size());
           DY.upload(dy.data());
           X.upload(x.data());
           C.upload(c0.data());
           std::vector<Matrix> c;
           for (int64_t g = 0; g < G; ++g)
             c.push_back(
                 Matrix{static_cast<float*>(C.data()) + g * d.N * d.K, d.N, d.K, DType::f32});
           auto dy_rows = [&](int64_t r, int64_t n) {
             return Matrix{static_cast<uint8_t*>(DY.data()) + r * d.N * 2, n, d.N, DType::bf16};
           };
           auto x_rows = [&](int64_t r, int64_t n) {
             return Matrix{static_cast<uint8_t*>(X.data()) + r * d.K * 2, n, d.K, DType::bf16};
           };
           if (!fp8) {
             if (grouped) {
               be.gemm_wgrad_grouped(Matrix{DY.data(), M, d.N, DType::bf16},
                                     Matrix{X.data(), M, d.K, DType::bf16}, c, gs.rows);
             } else {
               for (int64_t g = 0; g < G; ++g) {
                 const int64_t n = gs.rows[g];
                 if (n == 0) continue;
                 Buffer dyt = be.alloc(static_cast<size_t>(n * d.N) * 2),
                        xt = be.alloc(static_cast<size_t>(n * d.K) * 2);
                 be.transpose(dy_rows(f[g], n), Matrix{dyt.data(), d.N, n, DType::bf16});
                 be.transpose(x_rows(f[g], n), Matrix{xt.data(), d.K, n, DType::bf16});
                 be.gemm(Matrix{dyt.data(), d.N, n, DType::bf16},
                         Matrix{xt.data(), d.K, n, DType::bf16}, c[g], 1.0f);
               }
             }
           } else {
             // Each group's transposed operands (1x128 along its own rows).
             std::vector<Buffer> bufs;
             std::vector<Fp8Matrix> a, b;
             std::vector<Matrix> cs;
             for (int64_t g = 0; g < G; ++g) {
               const int64_t n = gs.rows[g];
               if (n == 0) continue;
               auto make = [&](int64_t rows, int64_t cols) {
                 bufs.push_back(be.alloc(static_cast<size_t>(rows * cols)));
                 auto* codes = bufs.back().as<uint8_t>();
                 bufs.push_back(be.alloc(
                     static_cast<size_t>(scale_count(ScaleBlock::row1x128, rows, cols)) * 4));
                 return Fp8Matrix{codes, bufs.back().as<float>(), rows,
                                  cols,  ScaleBlock::row1x128,    Fp8Format::e4m3};
               };
               const Fp8Matrix dya = make(n, d.N), dyt = make(d.N, n), xa = make(n, d.K),
                               xt = make(d.K, n);
               be.quantize_with_transpose(dy_rows(f[g], n), dya, dyt, opt, nullptr, nullptr);
               be.quantize_with_transpose(x_rows(f[g], n), xa, xt, opt, nullptr, nullptr);
               if (auto why = be.gemm_fp8_unsupported(dyt, xt, c[g])) {
                 res.problem = "unsupported: " + *why;
                 return res;
               }
               a.push_back(dyt);
               b.push_back(xt);
               cs.push_back(c[g]);
             }
             if (grouped) {
               be.gemm_fp8_wgrad_grouped(a, b, cs);
             } else {
               for (size_t i = 0; i < a.size(); ++i) be.gemm_fp8(a[i], b[i], cs[i], 1.0f);
             }
           }
           res.out.resize(c0.size());
           if (!C.download(res.out.data())) res.problem = "wrote outside its output";
           return res;
         };
         return judge(ref, test, run, DType::f32, fp8 ? 5e-4 : 1e-4);
       }});
}

}  // namespace

void add_gemm_grouped_cases(Registry& reg) {
  for (const Groups& gs : group_sets()) {
    for (const Dims d : kDims) {
      add_gemm_grouped_case(reg, gs, d, DType::bf16, DType::bf16, 0.0f);
      add_gemm_grouped_case(reg, gs, d, DType::f32, DType::f32, 0.0f);
      add_gemm_grouped_case(reg, gs, d, DType::bf16, DType::f32, 1.0f);
      add_gemm_fp8_grouped_case(reg, gs, d, DType::bf16);
      add_gemm_fp8_grouped_case(reg, gs, d, DType::f32);
      add_wgrad_grouped_case(reg, gs, d, false);
      add_wgrad_grouped_case(reg, gs, d, true);
    }
    add_group_scales_case(reg, gs, 200);
  }
  // Every group empty: nothing to compute, nothing written outside.
  add_gemm_grouped_case(reg, {"E3 {0,0,0}", {0, 0, 0}}, {136, 200}, DType::bf16, DType::bf16, 0.0f);
  add_gemm_fp8_grouped_case(reg, {"E3 {0,0,0}", {0, 0, 0}}, {136, 200}, DType::bf16);
}

}  // namespace fp8rl::optest
