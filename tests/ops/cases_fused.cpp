// Op cases: the producers that quantize what they write (Backend::rmsnorm_forward_fp8,
// rmsnorm_backward_fp8, swiglu_forward_fp8, swiglu_backward_fp8). Each must give, bit for bit on
// the backend under test, what its op followed by quantize / quantize_with_transpose gives there:
// the output (when written), rstd, the codes and scales of both operands, and the statistics summed
// into opt.stats_sum (counts exact; squared sums to summation order). On the CPU the fused ops are
// the reference path itself, so the cases there check the plumbing (an output left unwritten,
// forward-only operands, two gradients with their own sums).
#include <cmath>
#include <functional>

#include "core/bf16.hpp"
#include "op_case.hpp"

namespace fp8rl::optest {
namespace {

// A backend-resident f32 or bf16 matrix with guards, filled with random values.
struct DevMatrix {
  Guarded buf;
  Matrix m;
  DevMatrix(Backend& be, Rng& rng, int64_t rows, int64_t cols, DType dt, double scale = 1.0)
      : buf(be, static_cast<size_t>(rows * cols) * dtype_size(dt)), m{buf.data(), rows, cols, dt} {
    std::vector<uint8_t> bytes(buf.bytes());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = static_cast<float>(rng.normal() * scale);
      if (dt == DType::f32) {
        std::memcpy(&bytes[static_cast<size_t>(i) * 4], &v, 4);
      } else {
        const bf16 b = float_to_bf16(v);
        std::memcpy(&bytes[static_cast<size_t>(i) * 2], &b, 2);
      }
    }
    buf.upload(bytes.data());
  }
  // An output of the same shape (zero-filled); unwritten: null data, the dtype kept.
  DevMatrix(Backend& be, int64_t rows, int64_t cols, DType dt)
      : buf(be, static_cast<size_t>(rows * cols) * dtype_size(dt)), m{buf.data(), rows, cols, dt} {
    std::vector<uint8_t> zero(buf.bytes(), 0);
    buf.upload(zero.data());
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out(buf.bytes());
    check(buf.download(out.data()), "op wrote outside its output (guard bytes changed)");
    return out;
  }
};

// The FP8 operands of an [M, K] tensor in the backend's memory, with a statistics record.
struct DevOperands {
  Guarded a, as, t, ts, sum;
  Fp8Operands ops;
  QuantOptions opt;
  DevOperands(Backend& be, int64_t M, int64_t K, bool transposed, QuantOptions o)
      : a(be, static_cast<size_t>(M * K)),
        as(be, static_cast<size_t>(scale_count(ScaleBlock::row1x128, M, K)) * 4),
        t(be, static_cast<size_t>(M * K)),
        ts(be, static_cast<size_t>(scale_count(ScaleBlock::row1x128, K, M)) * 4),
        sum(be, sizeof(QuantStatsSum)),
        opt(o) {
    const QuantStatsSum zero;
    sum.upload(&zero);
    opt.stats_sum = static_cast<QuantStatsSum*>(sum.data());
    ops.along = Fp8Matrix{static_cast<uint8_t*>(a.data()),
                          static_cast<float*>(as.data()),
                          M,
                          K,
                          ScaleBlock::row1x128,
                          o.format};
    if (transposed)
      ops.transposed = Fp8Matrix{static_cast<uint8_t*>(t.data()),
                                 static_cast<float*>(ts.data()),
                                 K,
                                 M,
                                 ScaleBlock::row1x128,
                                 o.format};
  }
  // Quantizes x as a linear's input would be without a fused producer.
  void quantize_unfused(Backend& be, const Matrix& x) {
    if (ops.transposed.codes) {
      be.quantize_with_transpose(x, ops.along, ops.transposed, opt, nullptr, nullptr);
    } else {
      be.quantize(x, ops.along, opt, nullptr);
    }
  }
};

template <class T>
std::vector<T> download(const Guarded& g) {
  std::vector<T> out(g.bytes() / sizeof(T));
  check(g.download(out.data()), "op wrote outside its output (guard bytes changed)");
  return out;
}

// "" when the operands (and their sums) are the same, else what differs.
std::string compare_operands(const DevOperands& got, const DevOperands& want, const char* what) {
  const std::string w = std::string(what) + ": ";
  if (download<uint8_t>(got.a) != download<uint8_t>(want.a)) return w + "`along` codes differ";
  if (download<uint32_t>(got.as) != download<uint32_t>(want.as)) return w + "`along` scales differ";
  if (got.ops.transposed.codes) {
    if (download<uint8_t>(got.t) != download<uint8_t>(want.t))
      return w + "`transposed` codes differ";
    if (download<uint32_t>(got.ts) != download<uint32_t>(want.ts))
      return w + "`transposed` scales differ";
  }
  QuantStatsSum g, s;
  check(got.sum.download(&g) && want.sum.download(&s), "wrote outside a statistics record");
  if (g.elements != s.elements || g.blocks != s.blocks || g.saturated != s.saturated ||
      g.flushed_to_zero != s.flushed_to_zero || g.degenerate_blocks != s.degenerate_blocks)
    return w + fmt("statistics counts differ (elements %llu vs %llu, blocks %llu vs %llu)",
                   g.elements, s.elements, g.blocks, s.blocks);
  // Sums of squares: the same terms, added in another order.
  auto close = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::fabs(b) + 1e-300; };
  if (!close(g.err_sq, s.err_sq) || !close(g.ref_sq, s.ref_sq))
    return w + fmt("squared sums differ (err %.17g vs %.17g)", g.err_sq, s.err_sq);
  return {};
}

std::string what_of(DType dt, int64_t M, int64_t K, bool transposed, bool written,
                    const QuantOptions& opt) {
  return fmt("%s %s %s%s%s%s", dtype_name(dt), shape_str(M, K).c_str(), fp8_format_name(opt.format),
             opt.pow2_scales ? " pow2" : "", transposed ? " +transposed" : " forward-only",
             written ? "" : " unwritten");
}

void add_rmsnorm_case(Registry& reg, int64_t M, int64_t H, DType dt, bool transposed, bool written,
                      QuantOptions opt) {
  reg.push_back(
      {"rmsnorm_forward_fp8 " + what_of(dt, M, H, transposed, written, opt),
       [=](Backend&, Backend& test, Rng& rng) {
         return with_tile_kernels(test, [&]() -> Result {
           const DevMatrix x(test, rng, M, H, dt, 3.0), w(test, rng, 1, H, dt);
           DevMatrix y(test, M, H, dt), y_ref(test, M, H, dt), rstd(test, M, 1, DType::f32),
               rstd_ref(test, M, 1, DType::f32);
           DevOperands got(test, M, H, transposed, opt), want(test, M, H, transposed, opt);
           const Matrix yo = written ? y.m : Matrix{nullptr, M, H, dt};
           test.rmsnorm_forward_fp8(x.m, w.m, 1e-6f, yo, static_cast<float*>(rstd.m.data), got.ops,
                                    got.opt);
           test.rmsnorm_forward(x.m, w.m, 1e-6f, y_ref.m, static_cast<float*>(rstd_ref.m.data));
           want.quantize_unfused(test, y_ref.m);
           if (rstd.bytes() != rstd_ref.bytes()) return fail("rstd differs from rmsnorm_forward's");
           if (written && y.bytes() != y_ref.bytes())
             return fail("y differs from rmsnorm_forward's");
           if (!written && y.bytes() != std::vector<uint8_t>(y.buf.bytes(), 0))
             return fail("an unwritten y changed");
           const std::string d = compare_operands(got, want, "y");
           return d.empty() ? pass("bit-exact with rmsnorm_forward + quantize") : fail(d);
         });
       }});
}

// The residual stream's add fused into the next norm (add_rmsnorm_forward and its FP8 form)
// against add followed by the norm on the same backend: x afterwards, y, rstd and the operands
// bit for bit.
void add_add_rmsnorm_case(Registry& reg, int64_t M, int64_t H, DType dt, bool fp8,
                          QuantOptions opt) {
  reg.push_back(
      {std::string(fp8 ? "add_rmsnorm_forward_fp8 " : "add_rmsnorm_forward ") +
           what_of(dt, M, H, false, true, opt),
       [=](Backend&, Backend& test, Rng& rng) -> Result {
         const DevMatrix x0(test, rng, M, H, dt, 3.0), r(test, rng, M, H, dt),
             w(test, rng, 1, H, dt);
         DevMatrix x(test, M, H, dt), x_ref(test, M, H, dt), y(test, M, H, dt),
             y_ref(test, M, H, dt), rstd(test, M, 1, DType::f32), rstd_ref(test, M, 1, DType::f32);
         test.copy(x.m.data, x0.m.data, x0.buf.bytes());
         test.copy(x_ref.m.data, x0.m.data, x0.buf.bytes());
         DevOperands got(test, M, H, false, opt), want(test, M, H, false, opt);
         auto* rs = static_cast<float*>(rstd.m.data);
         auto* rs_ref = static_cast<float*>(rstd_ref.m.data);
         if (fp8) {
           test.add_rmsnorm_forward_fp8(x.m, r.m, w.m, 1e-6f, y.m, rs, got.ops, got.opt);
           test.add(x_ref.m, r.m, x_ref.m);
           test.rmsnorm_forward_fp8(x_ref.m, w.m, 1e-6f, y_ref.m, rs_ref, want.ops, want.opt);
         } else {
           test.add_rmsnorm_forward(x.m, r.m, w.m, 1e-6f, y.m, rs);
           test.add(x_ref.m, r.m, x_ref.m);
           test.rmsnorm_forward(x_ref.m, w.m, 1e-6f, y_ref.m, rs_ref);
         }
         if (x.bytes() != x_ref.bytes()) return fail("x differs from add's");
         if (rstd.bytes() != rstd_ref.bytes()) return fail("rstd differs from the norm's");
         if (y.bytes() != y_ref.bytes()) return fail("y differs from the norm's");
         if (fp8) {
           const std::string d = compare_operands(got, want, "y");
           if (!d.empty()) return fail(d);
         }
         return pass("bit-exact with add + the norm");
       }});
}

// The values of an f32 or bf16 matrix's bytes.
std::vector<float> values_of(const std::vector<uint8_t>& bytes, DType dt) {
  const size_t n = bytes.size() / dtype_size(dt);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (dt == DType::f32) {
      std::memcpy(&v[i], &bytes[i * 4], 4);
    } else {
      uint16_t b = 0;
      std::memcpy(&b, &bytes[i * 2], 2);
      const uint32_t u = static_cast<uint32_t>(b) << 16;
      std::memcpy(&v[i], &u, 4);
    }
  }
  return v;
}

// The norm's weight gradient dw [D] = Σ_r dy·x̂ over rows [R, D]: the same terms summed in
// another order (atomics), so within 1e-5 of the sum of the terms' magnitudes.
std::string compare_dw(const std::vector<float>& got, const std::vector<float>& want,
                       const std::vector<float>& dy, const std::vector<float>& x,
                       const std::vector<float>& rstd) {
  const size_t D = got.size(), R = rstd.size();
  for (size_t h = 0; h < D; ++h) {
    double scale = 0;
    for (size_t r = 0; r < R; ++r)
      scale += std::fabs(double{dy[r * D + h]} * x[r * D + h] * rstd[r]);
    if (!(std::fabs(double{got[h]} - want[h]) <= 1e-5 * scale + 1e-30))
      return fmt("dw[%zu] is %g, rmsnorm_backward's %g (terms' magnitudes %g)", h, got[h], want[h],
                 scale);
  }
  return {};
}

// rmsnorm_backward_fp8 against rmsnorm_backward, add and the quantization; without residual
// (the final norm's) against rmsnorm_backward and the quantization. D: the norm's width (H, or a
// head's for a per-head norm over the [M·H/D, D] view of the [M, H] gradient).
void add_rmsnorm_backward_case(Registry& reg, int64_t M, int64_t H, DType dt, bool transposed,
                               bool residual, DType residual_dt, bool written, QuantOptions opt,
                               int64_t D = 0) {
  std::string what = what_of(dt, M, H, transposed, written, opt);
  what += residual ? (residual_dt == dt ? " +residual"
                                        : " +residual " + std::string(dtype_name(residual_dt)))
                   : " no residual";
  if (D > 0) what += fmt(" heads of %lld", static_cast<long long>(D));
  if (D <= 0) D = H;
  reg.push_back(
      {"rmsnorm_backward_fp8 " + what, [=](Backend&, Backend& test, Rng& rng) {
         return with_tile_kernels(test, [&]() -> Result {
           const int64_t R = M * (H / D);
           auto view = [&](const DevMatrix& t) { return Matrix{t.m.data, R, D, t.m.dtype}; };
           const DevMatrix x(test, rng, M, H, dt, 3.0), w(test, rng, 1, D, dt),
               dy(test, rng, M, H, dt), res(test, rng, M, H, residual_dt, 2.0);
           DevMatrix rstd(test, R, 1, DType::f32), y(test, M, H, dt), dx(test, M, H, dt),
               dx_ref(test, M, H, dt), d_ref(test, M, H, dt), dw(test, 1, D, DType::f32),
               dw_ref(test, 1, D, DType::f32);
           test.rmsnorm_forward(view(x), w.m, 1e-6f, view(y), static_cast<float*>(rstd.m.data));
           const auto* r = static_cast<const float*>(rstd.m.data);
           DevOperands got(test, M, H, transposed, opt), want(test, M, H, transposed, opt);
           const Matrix resm = residual ? view(res) : Matrix{nullptr, R, D, residual_dt};
           test.rmsnorm_backward_fp8(view(dy), view(x), w.m, r, resm,
                                     written ? view(dx) : Matrix{nullptr, R, D, dt}, dw.m, got.ops,
                                     got.opt);
           if (residual) {
             test.rmsnorm_backward(view(dy), view(x), w.m, r, view(d_ref), dw_ref.m);
             test.add(res.m, d_ref.m, dx_ref.m);
           } else {
             test.rmsnorm_backward(view(dy), view(x), w.m, r, view(dx_ref), dw_ref.m);
           }
           want.quantize_unfused(test, dx_ref.m);
           if (written && dx.bytes() != dx_ref.bytes())
             return fail("dx differs from rmsnorm_backward's (+ add)");
           if (!written && dx.bytes() != std::vector<uint8_t>(dx.buf.bytes(), 0))
             return fail("an unwritten dx changed");
           std::string d =
               compare_dw(values_of(dw.bytes(), DType::f32), values_of(dw_ref.bytes(), DType::f32),
                          values_of(dy.bytes(), dt), values_of(x.bytes(), dt),
                          values_of(rstd.bytes(), DType::f32));
           if (d.empty()) d = compare_operands(got, want, "dx");
           return d.empty() ? pass("bit-exact with rmsnorm_backward + add + quantize") : fail(d);
         });
       }});
}

void add_swiglu_case(Registry& reg, int64_t M, int64_t I, DType dt, bool transposed, bool written,
                     QuantOptions opt) {
  reg.push_back({"swiglu_forward_fp8 " + what_of(dt, M, I, transposed, written, opt),
                 [=](Backend&, Backend& test, Rng& rng) {
                   return with_tile_kernels(test, [&]() -> Result {
                     const DevMatrix g(test, rng, M, I, dt, 2.0), u(test, rng, M, I, dt);
                     DevMatrix h(test, M, I, dt), h_ref(test, M, I, dt);
                     DevOperands got(test, M, I, transposed, opt),
                         want(test, M, I, transposed, opt);
                     test.swiglu_forward_fp8(g.m, u.m, written ? h.m : Matrix{nullptr, M, I, dt},
                                             got.ops, got.opt);
                     test.swiglu_forward(g.m, u.m, h_ref.m);
                     want.quantize_unfused(test, h_ref.m);
                     if (written && h.bytes() != h_ref.bytes())
                       return fail("h differs from swiglu_forward's");
                     if (!written && h.bytes() != std::vector<uint8_t>(h.buf.bytes(), 0))
                       return fail("an unwritten h changed");
                     const std::string d = compare_operands(got, want, "h");
                     return d.empty() ? pass("bit-exact with swiglu_forward + quantize") : fail(d);
                   });
                 }});
}

// SwiGLU of a stacked gate/up projection gu [M, 2I] (swiglu_forward_stacked and its FP8
// producer, reading the halves in place on a device) against the ops on the halves copied out:
// h, and the operands bit for bit.
void add_swiglu_stacked_case(Registry& reg, int64_t M, int64_t I, DType dt, bool written,
                             QuantOptions opt) {
  reg.push_back(
      {"swiglu_forward_stacked(_fp8) " + what_of(dt, M, I, false, written, opt),
       [=](Backend&, Backend& test, Rng& rng) {
         return with_tile_kernels(test, [&]() -> Result {
           const DevMatrix gu(test, rng, M, 2 * I, dt, 2.0);
           DevMatrix g(test, M, I, dt), u(test, M, I, dt), h(test, M, I, dt), h8(test, M, I, dt),
               h_ref(test, M, I, dt);
           test.copy_columns(gu.m, 0, g.m, 0, I);
           test.copy_columns(gu.m, I, u.m, 0, I);
           test.swiglu_forward_stacked(gu.m, h.m);
           test.swiglu_forward(g.m, u.m, h_ref.m);
           if (h.bytes() != h_ref.bytes()) return fail("h differs from swiglu_forward's");
           DevOperands got(test, M, I, false, opt), want(test, M, I, false, opt);
           test.swiglu_forward_stacked_fp8(gu.m, written ? h8.m : Matrix{nullptr, M, I, dt},
                                           got.ops, got.opt);
           test.swiglu_forward_fp8(g.m, u.m, Matrix{nullptr, M, I, dt}, want.ops, want.opt);
           if (written && h8.bytes() != h_ref.bytes())
             return fail("the FP8 producer's h differs from swiglu_forward's");
           const std::string d = compare_operands(got, want, "h");
           return d.empty() ? pass("bit-exact with the halves' swiglu_forward(_fp8)") : fail(d);
         });
       }});
}

void add_swiglu_backward_case(Registry& reg, int64_t M, int64_t I, DType dt, bool written,
                              QuantOptions opt_gate, QuantOptions opt_up) {
  reg.push_back({"swiglu_backward_fp8 " + what_of(dt, M, I, true, written, opt_gate) +
                     (opt_up.format != opt_gate.format
                          ? " (up in " + std::string(fp8_format_name(opt_up.format)) + ")"
                          : std::string()),
                 [=](Backend&, Backend& test, Rng& rng) {
                   return with_tile_kernels(test, [&]() -> Result {
                     const DevMatrix dh(test, rng, M, I, dt, 0.5), g(test, rng, M, I, dt, 2.0),
                         u(test, rng, M, I, dt);
                     DevMatrix dg(test, M, I, dt), du(test, M, I, dt), dg_ref(test, M, I, dt),
                         du_ref(test, M, I, dt);
                     DevOperands got_g(test, M, I, true, opt_gate), got_u(test, M, I, true, opt_up),
                         want_g(test, M, I, true, opt_gate), want_u(test, M, I, true, opt_up);
                     const Matrix none{nullptr, M, I, dt};
                     test.swiglu_backward_fp8(dh.m, g.m, u.m, written ? dg.m : none,
                                              written ? du.m : none, got_g.ops, got_g.opt,
                                              got_u.ops, got_u.opt);
                     test.swiglu_backward(dh.m, g.m, u.m, dg_ref.m, du_ref.m);
                     want_g.quantize_unfused(test, dg_ref.m);
                     want_u.quantize_unfused(test, du_ref.m);
                     const std::vector<uint8_t> zero(dg.buf.bytes(), 0);
                     if (written && (dg.bytes() != dg_ref.bytes() || du.bytes() != du_ref.bytes()))
                       return fail("dgate / dup differ from swiglu_backward's");
                     if (!written && (dg.bytes() != zero || du.bytes() != zero))
                       return fail("an unwritten gradient changed");
                     std::string d = compare_operands(got_g, want_g, "dgate");
                     if (d.empty()) d = compare_operands(got_u, want_u, "dup");
                     return d.empty()
                                ? pass("bit-exact with swiglu_backward + quantize_with_transpose")
                                : fail(d);
                   });
                 }});
}

}  // namespace

// Backend::qkv_heads (a generation step's heads from the stacked q/k/v projection: split,
// QK-norm, RoPE) against its default on the same backend (copy_columns, rmsnorm_forward of the
// heads, rope): the same bits in q, k and v. Positions up to 5,000, norm weights and values of
// a BF16 or f32 step; a Llama 3 rope too.
void add_qkv_heads_case(Registry& reg, int64_t M, int64_t hq, int64_t hkv, int64_t D, DType dt,
                        bool norm, Rope rope) {
  reg.push_back(
      {fmt("qkv_heads %s M%lld %lld/%lld heads of %lld%s%s", dtype_name(dt), (long long)M,
           (long long)hq, (long long)hkv, (long long)D, norm ? " qk-norm" : "",
           rope.scaling == RopeScalingType::llama3 ? " llama3 rope" : ""),
       [=](Backend&, Backend& test, Rng& rng) -> Result {
         const DevMatrix qkv(test, rng, M, (hq + 2 * hkv) * D, dt, 2.0), qn(test, rng, 1, D, dt),
             kn(test, rng, 1, D, dt);
         std::vector<int32_t> pos(static_cast<size_t>(M));
         for (int32_t& p : pos) p = static_cast<int32_t>(rng.next() % 5000);
         Guarded P(test, pos.size() * sizeof(int32_t));
         P.upload(pos.data());
         const auto* positions = static_cast<const int32_t*>(P.data());
         DevMatrix q(test, M, hq * D, dt), k(test, M, hkv * D, dt), v(test, M, hkv * D, dt),
             q0(test, M, hq * D, dt), k0(test, M, hkv * D, dt), v0(test, M, hkv * D, dt);
         const Matrix nq = norm ? qn.m : Matrix{}, nk = norm ? kn.m : Matrix{};
         test.qkv_heads(qkv.m, hq, hkv, nq, nk, 1e-6f, positions, rope, q.m, k.m, v.m);
         test.Backend::qkv_heads(qkv.m, hq, hkv, nq, nk, 1e-6f, positions, rope, q0.m, k0.m, v0.m);
         if (q.bytes() != q0.bytes()) return fail("q differs from the ops one by one");
         if (k.bytes() != k0.bytes()) return fail("k differs from the ops one by one");
         if (v.bytes() != v0.bytes()) return fail("v differs from its columns");
         return pass("bit-exact with copy_columns + rmsnorm_forward + rope");
       }});
}

void add_fused_cases(Registry& reg) {
  const QuantOptions e4m3;
  QuantOptions e5m2_pow2;
  e5m2_pow2.format = Fp8Format::e5m2;
  e5m2_pow2.pow2_scales = true;
  // Awkward shapes: one element, partial blocks both ways, one whole tile, rows past a tile,
  // a Qwen-like width; the 16-byte path needs K % 8 == 0 and whole tiles; whole tiles with edges
  // both ways where the CUDA register kernel takes them (M % 8 == 0).
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1},     {3, 129},    {128, 128},
                                                {130, 300}, {257, 1024}, {264, 1032}};
  for (const auto& [M, K] : shapes)
    for (DType dt : {DType::bf16, DType::f32}) {
      add_rmsnorm_case(reg, M, K, dt, true, true, e4m3);
      add_rmsnorm_backward_case(reg, M, K, dt, true, true, dt, true, e4m3);
      add_swiglu_case(reg, M, K, dt, true, true, e4m3);
      add_swiglu_backward_case(reg, M, K, dt, true, e4m3, e4m3);
    }
  // The residual add in the next norm's pass: warp rows, block rows (Qwen3-8B's 4,096), f32,
  // and rows past the one-pass kernel's 4,096 (the FP8 form's add + two passes).
  for (bool fp8 : {false, true}) {
    add_add_rmsnorm_case(reg, 64, 1024, DType::bf16, fp8, e4m3);
    add_add_rmsnorm_case(reg, 5, 4096, DType::bf16, fp8, e4m3);
    add_add_rmsnorm_case(reg, 3, 300, DType::f32, fp8, e5m2_pow2);
    add_add_rmsnorm_case(reg, 2, 5000, DType::bf16, fp8, e4m3);
  }
  // The stacked gate/up halves: whole blocks (the row kernel), a partial block, f32, E5M2.
  add_swiglu_stacked_case(reg, 64, 3072, DType::bf16, false, e4m3);
  add_swiglu_stacked_case(reg, 3, 1024, DType::bf16, true, e4m3);
  add_swiglu_stacked_case(reg, 5, 300, DType::bf16, true, e4m3);
  add_swiglu_stacked_case(reg, 9, 256, DType::f32, true, e5m2_pow2);
  // The heads of a generation step: head dims the one-pass kernel takes (64, 128, 256) and one
  // it leaves to the default (32); Qwen3 (QK-norm) and Llama (none, Llama 3's rope) shapes.
  Rope llama3;
  llama3.theta = 500000.0f;
  llama3.scaling = RopeScalingType::llama3;
  llama3.factor = 8.0f;
  for (DType dt : {DType::bf16, DType::f32}) {
    add_qkv_heads_case(reg, 3, 4, 2, 128, dt, true, Rope{});
    add_qkv_heads_case(reg, 64, 16, 8, 128, dt, true, Rope{});
  }
  add_qkv_heads_case(reg, 1, 32, 8, 128, DType::bf16, false, llama3);
  add_qkv_heads_case(reg, 5, 4, 1, 64, DType::bf16, true, Rope{});
  add_qkv_heads_case(reg, 2, 2, 2, 256, DType::bf16, true, Rope{});
  add_qkv_heads_case(reg, 3, 4, 2, 32, DType::bf16, true, Rope{});
  add_rmsnorm_case(reg, 257, 1024, DType::bf16, true, false, e4m3);
  add_rmsnorm_case(reg, 130, 300, DType::bf16, false, true, e4m3);
  add_rmsnorm_case(reg, 200, 2048, DType::bf16, false, false, e4m3);  // row wider than a warp's
  add_rmsnorm_case(reg, 129, 256, DType::bf16, true, true, e5m2_pow2);
  // Forward-only: on CUDA the one-pass kernel up to rows of 4,096 (warp rows, block rows holding
  // 8 or 16 values a thread: Qwen3-8B's decode rows), the rstd pass and the unstaged row kernel
  // beyond (an odd block count leaves the last half-warp idle).
  add_rmsnorm_case(reg, 257, 1024, DType::bf16, false, true, e4m3);
  add_rmsnorm_case(reg, 3, 128, DType::f32, false, true, e4m3);
  add_rmsnorm_case(reg, 64, 4096, DType::bf16, false, true, e4m3);
  add_rmsnorm_case(reg, 5, 3000, DType::bf16, false, false, e5m2_pow2);
  add_rmsnorm_case(reg, 3, 4224, DType::bf16, false, true, e4m3);
  // The final norm's (no residual), a row wider than a warp's, an f32 residual, the gradient
  // only quantized, forward-only, another format.
  add_rmsnorm_backward_case(reg, 130, 300, DType::bf16, true, false, DType::bf16, true, e4m3);
  add_rmsnorm_backward_case(reg, 200, 2048, DType::bf16, true, true, DType::bf16, true, e4m3);
  add_rmsnorm_backward_case(reg, 257, 1024, DType::bf16, true, true, DType::f32, true, e4m3);
  add_rmsnorm_backward_case(reg, 257, 1024, DType::bf16, true, true, DType::bf16, false, e4m3);
  add_rmsnorm_backward_case(reg, 257, 1024, DType::bf16, false, true, DType::bf16, true, e4m3);
  add_rmsnorm_backward_case(reg, 129, 256, DType::bf16, true, true, DType::bf16, true, e5m2_pow2);
  // Per-head norms (Qwen3's q/k norms): heads of 128 and of 64 (a partial block of H).
  add_rmsnorm_backward_case(reg, 130, 1024, DType::bf16, true, false, DType::bf16, false, e4m3,
                            128);
  add_rmsnorm_backward_case(reg, 65, 192, DType::bf16, true, false, DType::bf16, true, e4m3, 64);
  add_rmsnorm_backward_case(reg, 3, 256, DType::f32, true, false, DType::f32, true, e5m2_pow2, 128);
  add_swiglu_case(reg, 130, 384, DType::bf16, false, true, e4m3);
  add_swiglu_case(reg, 65, 256, DType::f32, false, false, e5m2_pow2);
  add_swiglu_case(reg, 257, 1024, DType::bf16, true, false, e4m3);
  add_swiglu_case(reg, 3, 129, DType::bf16, false, false, e4m3);
  add_swiglu_case(reg, 129, 256, DType::bf16, true, true, e5m2_pow2);
  add_swiglu_backward_case(reg, 257, 1024, DType::bf16, false, e4m3, e4m3);
  add_swiglu_backward_case(reg, 130, 300, DType::bf16, false, e5m2_pow2, e5m2_pow2);
  add_swiglu_backward_case(reg, 64, 256, DType::bf16, false, e4m3, e5m2_pow2);
}

}  // namespace fp8rl::optest
