// Op cases: gemm (f32 / bf16) and gemm_fp8 in the fprop, dgrad and wgrad forms of a linear layer.
#include <cmath>
#include <functional>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "fp8/codec.hpp"
#include "op_case.hpp"

namespace fp8rl::optest {
namespace {

struct Shape {
  int64_t M, N, K;
};
// Awkward sizes (not multiples of 8/16/128) next to aligned ones.
const Shape kShapes[] = {{1, 1, 1},       {8, 8, 16},      {16, 24, 128},   {33, 17, 129},
                         {128, 256, 384}, {257, 259, 300}, {64, 96, 16385}, {200, 136, 1000}};

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

// C = A·Bᵀ + beta·C0 in FP64 (A [M,K], B [N,K] already as the values the op sees).
std::vector<double> reference_nt(const std::vector<double>& A, const std::vector<double>& B,
                                 int64_t M, int64_t N, int64_t K, double beta,
                                 const std::vector<double>& C0) {
  std::vector<double> C(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[j * K + k];
      C[i * N + j] = acc + (beta != 0 ? beta * C0[i * N + j] : 0.0);
    }
  return C;
}

// ‖got − want‖ / ‖|A|·|B|ᵀ + |β·C0|‖: the error against the size of the terms summed, so that
// an output near zero by cancellation (a 1×1×1 product plus C0 with beta = 1) is not judged
// relative to itself; never looser than ‖got − want‖ / ‖want‖ is strict.
double error_vs_terms(const std::vector<double>& got, const std::vector<double>& want,
                      std::vector<double> A, std::vector<double> B, int64_t M, int64_t N, int64_t K,
                      double beta, std::vector<double> C0) {
  for (auto* v : {&A, &B, &C0})
    for (double& x : *v) x = std::fabs(x);
  const auto terms = reference_nt(A, B, M, N, K, std::fabs(beta), C0);
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += terms[i] * terms[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

bool all_finite(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// Tolerance against the reference: FP32 accumulation (and one BF16 rounding of the output).
double tolerance(DType out, bool vs_fp64, int64_t K) {
  if (out == DType::bf16) return 8e-3;  // one BF16 rounding of each output (2^-9 relative)
  // FP32 accumulation error grows like sqrt(K)·2^-24 in the norm; the bound is the spec's 1e-4
  // between backends and 1e-6 for the CPU against FP64 of the same inputs.
  return vs_fp64 ? std::max(1e-6, 4.0 * std::sqrt(static_cast<double>(K)) * 0x1p-24) : 1e-4;
}

// Tolerance of a device's FP8 GEMM against the CPU. Hopper's FP8 tensor-core instructions
// (wgmma, QGMMA in SASS) do not accumulate in full FP32: the sum of each 128-long block of the
// contraction keeps about 14 fraction bits before cuBLASLt promotes it to FP32 and applies the
// block's scales (DeepSeek-V3 report, section 3.3.2; FAST_ACCUM off does not change this for
// block-scaled FP8). Measured on an H200 (2026-11-26), f32 outputs: 1.1e-4 to 1.6e-4 of the
// terms' size for K from 129 to 1000, not growing with K (the promotion bounds it) — above the
// 1e-4 that FP32 accumulation meets. The bound is 5e-4, three times the worst measured; a wrong
// block, scale or layout gives errors of order 1. BF16 outputs keep their rounding bound.
double fp8_tolerance(DType out, int64_t K) {
  return out == DType::bf16 ? tolerance(out, false, K) : 5e-4;
}

// A product c [rows, cols] = A·Bᵀ + beta·c0 computed by `op` from the uploaded inputs (its two
// operands' bytes, in dtype `in`) on the backend under test, against the reference backend's
// result or — checking the reference itself — the FP64 NT product of a_nt [rows, k] and b_nt
// [cols, k] (the same values, laid out as the NT form reads them), relative to the terms' size.
using ProductOp = std::function<void(Backend& be, void* a, void* b, void* c)>;
Result check_product(Backend& ref, Backend& test, const std::vector<uint8_t>& a,
                     const std::vector<uint8_t>& b, const std::vector<uint8_t>& c0, DType out,
                     const ProductOp& op, const std::vector<double>& a_nt,
                     const std::vector<double>& b_nt, int64_t rows, int64_t cols, int64_t k,
                     float beta) {
  auto run = [&](Backend& be, std::vector<uint8_t>& c) {
    Guarded A(be, a.size()), B(be, b.size()), C(be, c0.size());
    A.upload(a.data());
    B.upload(b.data());
    C.upload(c0.data());
    op(be, A.data(), B.data(), C.data());
    c.resize(c0.size());
    return C.download(c.data());
  };
  std::vector<uint8_t> got;
  if (!run(test, got)) return fail("wrote outside its output (guard bytes changed)");
  const auto g = to_double(got, out);
  if (!all_finite(g)) return fail("non-finite output from finite inputs");
  std::vector<double> want;
  const bool self = &ref == &test;
  if (self) {
    want = reference_nt(a_nt, b_nt, rows, cols, k, beta, to_double(c0, out));
  } else {
    std::vector<uint8_t> w;
    run(ref, w);
    want = to_double(w, out);
  }
  const double err = error_vs_terms(g, want, a_nt, b_nt, rows, cols, k, beta, to_double(c0, out));
  const double tol = tolerance(out, self, k);
  if (!(err <= tol)) return fail(fmt("relative error %.3g > %.3g", err, tol));
  return pass(fmt("rel. err %.2g (bound %.2g)", err, tol));
}

void add_gemm_case(Registry& reg, Shape s, DType in, DType out, float beta) {
  reg.push_back({fmt("gemm %s->%s M%lld N%lld K%lld%s", dtype_name(in), dtype_name(out),
                     (long long)s.M, (long long)s.N, (long long)s.K, beta != 0 ? " beta=1" : ""),
                 [=](Backend& ref, Backend& test, Rng& rng) {
                   const auto a = to_bytes(random_matrix(rng, s.M, s.K), in),
                              b = to_bytes(random_matrix(rng, s.N, s.K), in),
                              c0 = to_bytes(random_matrix(rng, s.M, s.N), out);
                   const ProductOp op = [&](Backend& be, void* A, void* B, void* C) {
                     be.gemm(Matrix{A, s.M, s.K, in}, Matrix{B, s.N, s.K, in},
                             Matrix{C, s.M, s.N, out}, beta);
                   };
                   return check_product(ref, test, a, b, c0, out, op, to_double(a, in),
                                        to_double(b, in), s.M, s.N, s.K, beta);
                 }});
}

// The weight gradient of a BF16 or FP32 linear, c [N, K] = dyᵀ·x + beta·c with dy [M, N] and
// x [M, K] as stored (s: M rows, N = dy's columns, K = x's).
void add_gemm_wgrad_case(Registry& reg, Shape s, DType in, DType out, float beta) {
  reg.push_back({fmt("gemm_wgrad %s->%s M%lld N%lld K%lld%s", dtype_name(in), dtype_name(out),
                     (long long)s.M, (long long)s.N, (long long)s.K, beta != 0 ? " beta=1" : ""),
                 [=](Backend& ref, Backend& test, Rng& rng) {
                   const auto dy = to_bytes(random_matrix(rng, s.M, s.N), in),
                              x = to_bytes(random_matrix(rng, s.M, s.K), in),
                              c0 = to_bytes(random_matrix(rng, s.N, s.K), out);
                   // dyᵀ [N, M] and xᵀ [K, M]: the NT reference's operands.
                   auto transposed = [](const std::vector<double>& v, int64_t rows, int64_t cols) {
                     std::vector<double> t(v.size());
                     for (int64_t r = 0; r < rows; ++r)
                       for (int64_t c = 0; c < cols; ++c)
                         t[static_cast<size_t>(c * rows + r)] =
                             v[static_cast<size_t>(r * cols + c)];
                     return t;
                   };
                   const ProductOp op = [&](Backend& be, void* D, void* X, void* C) {
                     be.gemm_wgrad(Matrix{D, s.M, s.N, in}, Matrix{X, s.M, s.K, in},
                                   Matrix{C, s.N, s.K, out}, beta);
                   };
                   return check_product(
                       ref, test, dy, x, c0, out, op, transposed(to_double(dy, in), s.M, s.N),
                       transposed(to_double(x, in), s.M, s.K), s.N, s.K, s.M, beta);
                 }});
}

// The three GEMMs of a linear layer with X [M,K], W [N,K], dY [M,N]:
//   fprop Y  [M,N] = X(1x128 along K) · W(128x128)ᵀ
//   dgrad dX [M,K] = dY(1x128 along N) · (Wᵀ)(128x128)ᵀ, Wᵀ from transpose_fp8
//   wgrad dW [N,K] += dYᵀ(1x128 along M) · Xᵀ(1x128 along M)ᵀ, f32 output, beta 1
enum class Form { fprop, dgrad, wgrad };

void add_gemm_fp8_case(Registry& reg, Shape s, Form form, DType out, Fp8Format format) {
  const char* fname = form == Form::fprop ? "fprop" : form == Form::dgrad ? "dgrad" : "wgrad";
  reg.push_back(
      {fmt("gemm_fp8 %s %s->%s M%lld N%lld K%lld", fname, fp8_format_name(format), dtype_name(out),
           (long long)s.M, (long long)s.N, (long long)s.K),
       [=](Backend& ref, Backend& test, Rng& rng) {
         const QuantOptions opt{format, false};
         // Operand shapes of the GEMM call c[m,n] = a[m,k] · b[n,k]ᵀ.
         int64_t m, n, k;
         ScaleBlock bblock;
         if (form == Form::fprop) {
           m = s.M, n = s.N, k = s.K, bblock = ScaleBlock::tile128x128;
         } else if (form == Form::dgrad) {
           m = s.M, n = s.K, k = s.N, bblock = ScaleBlock::tile128x128;
         } else {
           m = s.N, n = s.K, k = s.M, bblock = ScaleBlock::row1x128;
         }
         const float beta = form == Form::wgrad ? 1.0f : 0.0f;
         // Quantize on the reference (quantization itself is checked by its own cases), then
         // give both backends the same codes and scales.
         auto quantized = [&](int64_t rows, int64_t cols, ScaleBlock blk,
                              std::vector<uint8_t>& codes, std::vector<float>& scales) {
           auto x = random_matrix(rng, rows, cols);
           Buffer xb = ref.alloc(x.size() * 4);
           ref.upload(xb.data(), x.data(), x.size() * 4);
           codes.resize(rows * cols);
           scales.assign(scale_count(blk, rows, cols), 1.0f);
           ref.quantize(Matrix{xb.data(), rows, cols, DType::f32},
                        Fp8Matrix{codes.data(), scales.data(), rows, cols, blk, format}, opt,
                        nullptr);
         };
         std::vector<uint8_t> ac, bc;
         std::vector<float> as, bs;
         quantized(m, k, ScaleBlock::row1x128, ac, as);
         if (form == Form::dgrad) {
           // Wᵀ [K,N] by transposing a quantized W [N,K] (k = N here, n = K).
           std::vector<uint8_t> wc;
           std::vector<float> ws;
           quantized(k, n, ScaleBlock::tile128x128, wc, ws);
           bc.resize(wc.size());
           bs.assign(scale_count(ScaleBlock::tile128x128, n, k), 1.0f);
           ref.transpose_fp8(
               Fp8Matrix{wc.data(), ws.data(), k, n, ScaleBlock::tile128x128, format},
               Fp8Matrix{bc.data(), bs.data(), n, k, ScaleBlock::tile128x128, format});
         } else {
           quantized(n, k, bblock, bc, bs);
         }
         const auto c0 = to_bytes(random_matrix(rng, m, n), out);
         const Fp8Matrix qa_host{ac.data(), as.data(), m, k, ScaleBlock::row1x128, format};
         const Fp8Matrix qb_host{bc.data(), bs.data(), n, k, bblock, format};
         auto run = [&](Backend& be, std::vector<uint8_t>& c) -> std::optional<std::string> {
           Guarded A(be, ac.size()), AS(be, as.size() * 4), B(be, bc.size()), BS(be, bs.size() * 4),
               C(be, c0.size());
           A.upload(ac.data());
           AS.upload(as.data());
           B.upload(bc.data());
           BS.upload(bs.data());
           C.upload(c0.data());
           const Fp8Matrix qa{static_cast<uint8_t*>(A.data()),
                              static_cast<float*>(AS.data()),
                              m,
                              k,
                              ScaleBlock::row1x128,
                              format};
           const Fp8Matrix qb{static_cast<uint8_t*>(B.data()),
                              static_cast<float*>(BS.data()),
                              n,
                              k,
                              bblock,
                              format};
           const Matrix cm{C.data(), m, n, out};
           if (auto why = be.gemm_fp8_unsupported(qa, qb, cm)) return "unsupported: " + *why;
           be.gemm_fp8(qa, qb, cm, beta);
           c.resize(c0.size());
           if (!C.download(c.data())) return std::string("wrote outside its output");
           return std::nullopt;
         };
         std::vector<uint8_t> got;
         if (auto problem = run(test, got)) {
           if (problem->rfind("unsupported: ", 0) == 0) return skip(problem->substr(13));
           return fail(*problem);
         }
         const auto g = to_double(got, out);
         if (!all_finite(g)) return fail("non-finite output from finite inputs");
         const bool self = &ref == &test;
         auto deq = [&](const Fp8Matrix& q) {
           std::vector<double> v(static_cast<size_t>(q.rows * q.cols));
           for (int64_t r = 0; r < q.rows; ++r)
             for (int64_t c = 0; c < q.cols; ++c)
               v[r * q.cols + c] =
                   static_cast<double>(fp8_to_float(q.codes[r * q.cols + c], format)) *
                   q.scale_inv[scale_index(q.block, q.rows, q.cols, r, c)];
           return v;
         };
         const auto da = deq(qa_host), db = deq(qb_host), dc = to_double(c0, out);
         if (self) {
           // Against FP64 of the dequantized inputs (the same math), and against FP64 of the
           // unquantized values the FP8 format can only approximate (bounded by its precision).
           const auto want = reference_nt(da, db, m, n, k, beta, dc);
           const double err = error_vs_terms(g, want, da, db, m, n, k, beta, dc);
           const double tol = tolerance(out, true, k);
           if (!(err <= tol))
             return fail(fmt("vs FP64 of dequantized inputs: %.3g > %.3g", err, tol));
           return pass(fmt("rel. err vs FP64 %.2g (bound %.2g), global diff %.2g", err, tol,
                           global_difference(g, want)));
         }
         std::vector<uint8_t> w;
         if (auto problem = run(ref, w)) return fail("reference: " + *problem);
         const auto want = to_double(w, out);
         const double err = error_vs_terms(g, want, da, db, m, n, k, beta, dc);
         const double tol = fp8_tolerance(out, k);
         if (!(err <= tol)) return fail(fmt("vs CPU: relative error %.3g > %.3g", err, tol));
         return pass(fmt("rel. err vs CPU %.2g (bound %.2g), global diff %.2g", err, tol,
                         global_difference(g, want)));
       }});
}

// Sets kernel options on a backend for the life of the guard, then back to their defaults.
class KernelOptions {
 public:
  explicit KernelOptions(Backend& be) : be_(be) {}
  ~KernelOptions() {
    for (const auto& n : set_) be_.set_kernel_option(n, 0);
  }
  KernelOptions(const KernelOptions&) = delete;
  KernelOptions& operator=(const KernelOptions&) = delete;
  // False when the backend has no such option (the CPU has none).
  bool set(const std::string& name, int64_t value) {
    if (!be_.set_kernel_option(name, value)) return false;
    set_.push_back(name);
    return true;
  }

 private:
  Backend& be_;
  std::vector<std::string> set_;
};

// linear_fp8: y [M, N] = q(x) · w(128x128 tiles)ᵀ with x's 1x128 quantization inside the op. On
// the CPU against FP64 of the dequantized operands (q(x) from quantize(): the op must quantize
// exactly so); on a device against the CPU, under its kernel options: the defaults, the split-K
// kernel up to 256 rows (with one K split and three: its reduction), the unfused path, the
// one-stream kernel and cuBLASLt's second algorithm.
void add_linear_fp8_case(Registry& reg, Shape s, DType xdt, DType out, bool pow2) {
  reg.push_back(
      {fmt("linear_fp8 %s->%s M%lld N%lld K%lld%s", dtype_name(xdt), dtype_name(out),
           (long long)s.M, (long long)s.N, (long long)s.K, pow2 ? " pow2" : ""),
       [=](Backend& ref, Backend& test, Rng& rng) {
         const QuantOptions opt{Fp8Format::e4m3, pow2};
         const auto xb = to_bytes(random_matrix(rng, s.M, s.K), xdt);
         // The weight's tiles, quantized on the reference.
         const auto wf = random_matrix(rng, s.N, s.K);
         std::vector<uint8_t> wc(static_cast<size_t>(s.N * s.K));
         std::vector<float> ws(scale_count(ScaleBlock::tile128x128, s.N, s.K), 1.0f);
         ref.quantize(
             Matrix{const_cast<float*>(wf.data()), s.N, s.K, DType::f32},
             Fp8Matrix{wc.data(), ws.data(), s.N, s.K, ScaleBlock::tile128x128, Fp8Format::e4m3},
             opt, nullptr);
         const std::vector<uint8_t> y0(static_cast<size_t>(s.M * s.N) * dtype_size(out), 0xee);
         auto run = [&](Backend& be, std::vector<uint8_t>& y) {
           Guarded X(be, xb.size()), W(be, wc.size()), WS(be, ws.size() * 4), Y(be, y0.size());
           X.upload(xb.data());
           W.upload(wc.data());
           WS.upload(ws.data());
           Y.upload(y0.data());  // not zeros: every element must be written
           be.linear_fp8(Matrix{X.data(), s.M, s.K, xdt},
                         Fp8Matrix{static_cast<uint8_t*>(W.data()), static_cast<float*>(WS.data()),
                                   s.N, s.K, ScaleBlock::tile128x128, Fp8Format::e4m3},
                         Matrix{Y.data(), s.M, s.N, out}, opt);
           y.resize(y0.size());
           return Y.download(y.data());
         };
         // The operands as the GEMM sees them: q(x) from quantize() on the reference, w's tiles.
         std::vector<uint8_t> xc(static_cast<size_t>(s.M * s.K));
         std::vector<float> xs(scale_count(ScaleBlock::row1x128, s.M, s.K), 1.0f);
         ref.quantize(
             Matrix{const_cast<uint8_t*>(xb.data()), s.M, s.K, xdt},
             Fp8Matrix{xc.data(), xs.data(), s.M, s.K, ScaleBlock::row1x128, Fp8Format::e4m3}, opt,
             nullptr);
         auto deq = [](const std::vector<uint8_t>& c, const std::vector<float>& sc, int64_t rows,
                       int64_t cols, ScaleBlock blk) {
           std::vector<double> v(c.size());
           for (int64_t r = 0; r < rows; ++r)
             for (int64_t k = 0; k < cols; ++k)
               v[r * cols + k] = static_cast<double>(e4m3_to_float(c[r * cols + k])) *
                                 sc[scale_index(blk, rows, cols, r, k)];
           return v;
         };
         const auto da = deq(xc, xs, s.M, s.K, ScaleBlock::row1x128);
         const auto db = deq(wc, ws, s.N, s.K, ScaleBlock::tile128x128);
         const std::vector<double> none(static_cast<size_t>(s.M * s.N), 0.0);
         std::vector<uint8_t> got;
         if (&ref == &test) {
           if (!run(test, got)) return fail("wrote outside its output (guard bytes changed)");
           const auto g = to_double(got, out);
           if (!all_finite(g)) return fail("non-finite output from finite inputs");
           const auto want = reference_nt(da, db, s.M, s.N, s.K, 0.0, none);
           const double err = error_vs_terms(g, want, da, db, s.M, s.N, s.K, 0.0, none);
           const double tol = tolerance(out, true, s.K);
           if (!(err <= tol)) return fail(fmt("vs FP64 of q(x)·w: %.3g > %.3g", err, tol));
           return pass(fmt("rel. err vs FP64 %.2g (bound %.2g)", err, tol));
         }
         std::vector<uint8_t> w;
         run(ref, w);
         const auto want = to_double(w, out);
         const double tol = fp8_tolerance(out, s.K);
         std::string detail;
         using Options = std::vector<std::pair<const char*, int64_t>>;
         const std::vector<std::pair<const char*, Options>> variants = {
             {"defaults", {}},
             // The split-K kernel at every row count of these shapes (by default up to 8 rows
             // of f32 x only), with its own split count, one split and three.
             {"split-K", {{"linear_fp8_kernel", 1}, {"linear_fp8_max_rows", 256}}},
             {"split-K, 1 split",
              {{"linear_fp8_kernel", 1}, {"linear_fp8_max_rows", 256}, {"linear_fp8_splits", 1}}},
             {"split-K, 3 splits",
              {{"linear_fp8_kernel", 1}, {"linear_fp8_max_rows", 256}, {"linear_fp8_splits", 3}}},
             {"unfused", {{"linear_fp8_kernel", 2}}},
             // Up to 8 rows of bf16 x: the one-stream kernel (the default there).
             {"one stream", {{"linear_fp8_kernel", 3}}},
             // cuBLASLt's second algorithm for the matmul (gemm_algo, which bench decode sweeps),
             // where its heuristic offers one.
             {"unfused, 2nd algorithm", {{"linear_fp8_kernel", 2}, {"gemm_algo", 2}}}};
         for (const auto& [label, options] : variants) {
           KernelOptions guard(test);
           bool known = true;
           for (const auto& [name, value] : options) known = known && guard.set(name, value);
           if (!known) continue;
           try {
             if (!run(test, got)) return fail(std::string(label) + ": wrote outside its output");
           } catch (const Error& e) {
             if (std::string(e.what()).find("gemm_algo") == std::string::npos) throw;
             detail += fmt("%s%s: not offered", detail.empty() ? "" : ", ", label);
             continue;
           }
           const auto g = to_double(got, out);
           if (!all_finite(g)) return fail(std::string(label) + ": non-finite output");
           const double err = error_vs_terms(g, want, da, db, s.M, s.N, s.K, 0.0, none);
           if (!(err <= tol))
             return fail(fmt("%s: vs CPU: relative error %.3g > %.3g", label, err, tol));
           detail += fmt("%s%s %.2g", detail.empty() ? "" : ", ", label, err);
         }
         return pass("rel. err vs CPU " + detail + fmt(" (bound %.2g)", tol));
       }});
}

}  // namespace

void add_gemm_cases(Registry& reg) {
  for (const auto& s : kShapes) {
    add_gemm_case(reg, s, DType::f32, DType::f32, 0.0f);
    add_gemm_case(reg, s, DType::bf16, DType::bf16, 0.0f);
    add_gemm_case(reg, s, DType::bf16, DType::f32, 1.0f);
    add_gemm_wgrad_case(reg, s, DType::bf16, DType::f32, 1.0f);
    add_gemm_wgrad_case(reg, s, DType::f32, DType::f32, 0.0f);
    add_gemm_fp8_case(reg, s, Form::fprop, DType::bf16, Fp8Format::e4m3);
    add_gemm_fp8_case(reg, s, Form::fprop, DType::f32, Fp8Format::e4m3);
    add_gemm_fp8_case(reg, s, Form::dgrad, DType::bf16, Fp8Format::e4m3);
    add_gemm_fp8_case(reg, s, Form::wgrad, DType::f32, Fp8Format::e4m3);
  }
  add_gemm_wgrad_case(reg, {33, 17, 129}, DType::bf16, DType::bf16, 0.0f);
  add_gemm_wgrad_case(reg, {1000, 40, 24}, DType::f32, DType::bf16, 0.0f);  // via f32 scratch
  add_gemm_fp8_case(reg, {64, 64, 256}, Form::fprop, DType::f32, Fp8Format::e5m2);
  add_gemm_fp8_case(reg, {64, 64, 256}, Form::wgrad, DType::f32, Fp8Format::e5m2);
  // The decode GEMM: M = 1, 3, 255 (two m tiles), 256, beyond the fused rows (300); K a multiple
  // of 128, of 16 only (a partial last block), and of neither (1000: the unfused path); N not a
  // multiple of the 128-row tile; K long enough for many splits (4096; and for 8 blocks a warp
  // of the one-stream kernel at 4 rows).
  const Shape linear_shapes[] = {{1, 136, 384},   {3, 257, 1008},  {8, 128, 128},
                                 {33, 200, 4096}, {255, 259, 512}, {256, 384, 1024},
                                 {300, 128, 256}, {17, 136, 1000}, {4, 200, 4096}};
  for (const auto& s : linear_shapes) {
    add_linear_fp8_case(reg, s, DType::bf16, DType::bf16, false);
    add_linear_fp8_case(reg, s, DType::bf16, DType::f32, false);
  }
  add_linear_fp8_case(reg, {5, 130, 640}, DType::f32, DType::f32, true);
}

}  // namespace fp8rl::optest
