// The FP8 quantization kernels of kernels/quantize.cuh run on the CPU through the CUDA emulation
// (cuda_emulation.hpp: 256 fibers a CTA, shuffles and __syncthreads as yielding barriers, shared
// memory starting as NaN, FP8 conversions from the formats' definitions), bit-exact against the
// CPU backend (the reference):
//  - quantize_produced_kernel (a 128x128 tile a producer computes, staged as FP32 or as BF16
//    patterns, its rows and columns quantized), through launch_produced, with the real producers
//    of kernels/rmsnorm.cuh and swiglu.cuh: RMSNorm's (after its rstd pass, the forward kernel
//    without y, warp and block reductions), SwiGLU's, and SwiGLU's backward (two outputs, dgate
//    and dup), RMSNorm's backward (after its row-mean pass, the dx kernel without dx: the
//    gradient plus the residual, or without one), the outputs stored or not;
//  - quantize_produced_rows_kernel (forward-only, K % 128 == 0, the 16-byte path), which
//    launch_produced picks for one output without a transposed copy;
//  - rmsnorm_quantize_rows_kernel (RMSNorm's forward-only FP8 forward in one pass, warp and
//    block rows), whose rstd must also be the rstd pass's bits;
//  - quantize_transpose_kernel (x and xᵀ from one staged read) for f32 and bf16 x.
// The SwiGLU cases compare with the CPU's swiglu_forward_fp8 / swiglu_backward_fp8 (the op, then
// its quantization; the host's expf on both sides); RMSNorm's rstd is a sum in another order, so
// it is compared to the CPU's to 1e-5 and its operands with quantize_with_transpose of the
// normalized values computed from the kernel's rstd. RMSNorm's backward compares with the
// emulated dx kernel (the unfused op on a device), the CPU's add of the residual and the CPU's
// quantization. Codes and scales must equal the reference's
// bits, statistics its counts (sums to 1e-9), stored outputs its values, for E4M3 and E5M2 (with
// power-of-two scales), both stagings and both tile paths, at awkward shapes, on data with NaN,
// ±inf, huge and tiny values and all-zero blocks. A small sm_count makes each CTA take several
// tiles (the grid-stride loop's barriers). What it cannot check: timing, bank conflicts, races
// the round-robin schedule does not expose, and the device's own expf and sqrtf (the GPU round's
// op cases compare those).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_registry.hpp"
#include "fp8/codec.hpp"
#include "quantize.cuh"  // the emulated copies (emulate_kernel.py)
#include "rmsnorm.cuh"
#include "swiglu.cuh"

namespace {

using namespace fp8rl;
using cuda::In, cuda::Out;

// --- data

uint16_t bf16_bits(float f) {  // round to nearest even (no NaN reaches it)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// A tensor [M, K] of f32 or bf16 (raw bits) values, also kept as floats (the values).
struct Tensor {
  int64_t M = 0, K = 0;
  bool bf16 = false;
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  std::vector<float> value;
  const void* data() const { return bf16 ? static_cast<const void*>(b16.data()) : f32.data(); }
  Matrix matrix() const {
    return {const_cast<void*>(data()), M, K, bf16 ? DType::bf16 : DType::f32};
  }
  In in() const { return {data(), bf16}; }
};

// Normal values times a per-row magnitude (10^-3 .. 10^3); with specials: NaN, ±inf, huge, tiny
// (subnormal and FP8-underflowing) elements and all-zero 128-blocks along K and along M.
Tensor make_tensor(int64_t M, int64_t K, bool bf16, bool specials, std::mt19937& rng) {
  Tensor t;
  t.M = M, t.K = K, t.bf16 = bf16;
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni(-3, 3);
  std::vector<float> v(static_cast<size_t>(M * K));
  for (int64_t r = 0; r < M; ++r) {
    const float mag = std::pow(10.0f, uni(rng));
    for (int64_t c = 0; c < K; ++c) v[r * K + c] = normal(rng) * mag;
  }
  if (specials && M * K >= 4) {
    const float special[] = {NAN, INFINITY, -INFINITY, 3.0e38f, -2.5e38f, 1e-40f, -3e-42f, 1e-30f};
    std::uniform_int_distribution<int64_t> pick(0, M * K - 1);
    for (int i = 0; i < 12; ++i) v[pick(rng)] = special[i % 8];
    // Zero blocks: row 1's first 128 columns; column 2's first 128 rows.
    if (M > 1)
      for (int64_t c = 0; c < std::min<int64_t>(K, 128); ++c) v[K + c] = 0.0f;
    if (K > 2)
      for (int64_t r = 0; r < std::min<int64_t>(M, 128); ++r) v[r * K + 2] = 0.0f;
  }
  t.value.resize(v.size());
  if (bf16) t.b16.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (bf16) {
      t.b16[i] = std::isnan(v[i]) ? uint16_t{0x7fc0} : bf16_bits(v[i]);
      t.value[i] = bf16_value(t.b16[i]);
    } else {
      t.value[i] = v[i];
    }
  }
  if (!bf16) t.f32 = t.value;
  return t;
}

// --- outputs and their comparison with the reference

constexpr uint8_t kCodeFill = 0xee;
constexpr uint32_t kScaleFill = 0x7fbadbadu;  // a NaN no quantization writes
constexpr size_t kGuard = 64;

// An FP8 operand [rows, cols] 1x128 with guard entries past its end.
struct Operand {
  int64_t rows, cols;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Operand(int64_t r, int64_t c)
      : rows(r),
        cols(c),
        codes(static_cast<size_t>(r * c) + kGuard, kCodeFill),
        scales(static_cast<size_t>(scale_count(ScaleBlock::row1x128, r, c)) + kGuard) {
    for (float& s : scales) std::memcpy(&s, &kScaleFill, 4);
  }
  Fp8Matrix matrix(Fp8Format f) {
    return {codes.data(), scales.data(), rows, cols, ScaleBlock::row1x128, f};
  }
};

// Counts mismatches of got against want (codes, scale bits, guards), printing the first.
int compare(const char* what, const Operand& got, const Operand& want) {
  int bad = 0;
  const size_t n = static_cast<size_t>(got.rows * got.cols);
  for (size_t i = 0; i < got.codes.size(); ++i)
    if (got.codes[i] != (i < n ? want.codes[i] : kCodeFill)) {
      if (bad++ == 0)
        std::printf("  %s: code %zu (row %lld col %lld) is 0x%02x, want 0x%02x\n", what, i,
                    static_cast<long long>(i < n ? i / got.cols : -1),
                    static_cast<long long>(i < n ? i % got.cols : -1), got.codes[i],
                    i < n ? want.codes[i] : kCodeFill);
    }
  const size_t ns = got.scales.size() - kGuard;
  for (size_t i = 0; i < got.scales.size(); ++i) {
    uint32_t g, w = kScaleFill;
    std::memcpy(&g, &got.scales[i], 4);
    if (i < ns) std::memcpy(&w, &want.scales[i], 4);
    if (g != w && bad++ == 0)
      std::printf("  %s: scale %zu is 0x%08x (%g), want 0x%08x\n", what, i, g, got.scales[i], w);
  }
  return bad;
}

bool close(double a, double b) {
  return a == b || std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}
int compare_stats(const char* what, const QuantStatsSum& got, const QuantStats& want) {
  const bool ok = static_cast<int64_t>(got.elements) == want.elements &&
                  static_cast<int64_t>(got.blocks) == want.blocks &&
                  static_cast<int64_t>(got.saturated) == want.saturated &&
                  static_cast<int64_t>(got.flushed_to_zero) == want.flushed_to_zero &&
                  static_cast<int64_t>(got.degenerate_blocks) == want.degenerate_blocks &&
                  close(got.err_sq, want.err_sq) && close(got.ref_sq, want.ref_sq);
  if (!ok)
    std::printf(
        "  %s statistics: elements %llu/%lld blocks %llu/%lld saturated %llu/%lld flushed "
        "%llu/%lld degenerate %llu/%lld err_sq %.17g/%.17g ref_sq %.17g/%.17g (got/want)\n",
        what, got.elements, static_cast<long long>(want.elements), got.blocks,
        static_cast<long long>(want.blocks), got.saturated, static_cast<long long>(want.saturated),
        got.flushed_to_zero, static_cast<long long>(want.flushed_to_zero), got.degenerate_blocks,
        static_cast<long long>(want.degenerate_blocks), got.err_sq, want.err_sq, got.ref_sq,
        want.ref_sq);
  return ok ? 0 : 1;
}

// The reference's operands of t (and its statistics) with opt.
struct Reference {
  Operand along, transposed;
  QuantStats stats_along, stats_transposed;
  Reference(Backend& cpu, const Tensor& t, const QuantOptions& opt)
      : along(t.M, t.K), transposed(t.K, t.M) {
    cpu.quantize_with_transpose(t.matrix(), along.matrix(opt.format), transposed.matrix(opt.format),
                                opt, &stats_along, &stats_transposed);
  }
};

// --- the cases

// rmsnorm_backward: with a residual; rmsnorm_backward_final: without (the final norm's);
// rmsnorm_backward_heads: a per-head norm's (groups of norm_width(K) columns), without.
enum class Op {
  rmsnorm,
  rmsnorm_one_pass,
  rmsnorm_add_one_pass,
  swiglu,
  swiglu_stacked,
  swiglu_backward,
  rmsnorm_backward,
  rmsnorm_backward_final,
  rmsnorm_backward_heads
};
int outputs(Op op) {
  return op == Op::swiglu_backward ? 2 : 1;
}
const char* op_name(Op op) {
  switch (op) {
    case Op::rmsnorm:
      return "rmsnorm";
    case Op::rmsnorm_one_pass:
      return "rmsnorm (one pass)";
    case Op::rmsnorm_add_one_pass:
      return "rmsnorm (one pass, residual added)";
    case Op::swiglu:
      return "swiglu";
    case Op::swiglu_stacked:
      return "swiglu (stacked gate/up)";
    case Op::swiglu_backward:
      return "swiglu_backward";
    case Op::rmsnorm_backward:
      return "rmsnorm_backward";
    case Op::rmsnorm_backward_final:
      return "rmsnorm_backward (no residual)";
    case Op::rmsnorm_backward_heads:
      return "rmsnorm_backward (per head)";
  }
  return "?";
}
// RMSNorm's forward: its rstd pass and the producer, or the one-pass kernel (forward-only).
bool norm_forward(Op op) {
  return op == Op::rmsnorm || op == Op::rmsnorm_one_pass || op == Op::rmsnorm_add_one_pass;
}
bool norm_backward(Op op) {
  return op == Op::rmsnorm_backward || op == Op::rmsnorm_backward_final ||
         op == Op::rmsnorm_backward_heads;
}
// The norm's width: a head of 128 or 64 columns for the per-head norm, else the row.
int64_t norm_width(Op op, int64_t K) {
  return op != Op::rmsnorm_backward_heads ? K : K % 128 == 0 ? 128 : 64;
}

struct Case {
  int64_t M, K;
  Fp8Format format;
  bool pow2;
  Op op;
  bool out_bf16;    // the outputs' dtype
  bool stage_bf16;  // 16-bit staging (outputs bf16 only)
  bool vec;         // the 16-byte path (K % 8 == 0)
  bool transposed;  // a transposed copy (always with two outputs)
  bool stats;
  bool store;              // the outputs written (else quantized only)
  bool registers = false;  // whole tiles from registers (quantize_tile_kernel 2) where they fit
};

// Whether the register kernels take whole tiles of c (launch_produced's rule: every output
// transposed, the 16-byte path, M % 8 == 0, a whole tile).
bool registers_fit(const Case& c) {
  return c.transposed && c.vec && c.M % 8 == 0 && c.M >= 128 && c.K >= 128;
}

std::string describe(const Case& c) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "%s %lldx%lld %s%s %s %s %s%s%s%s", op_name(c.op),
      static_cast<long long>(c.M), static_cast<long long>(c.K), fp8_format_name(c.format),
      c.pow2 ? " pow2" : "", c.out_bf16 ? "bf16" : "f32",
      c.registers ? (c.stage_bf16 ? "registers, bf16-staged edges" : "registers, f32-staged edges")
      : c.stage_bf16 ? "bf16-staged"
                     : "f32-staged",
      c.vec ? "vec" : "scalar", c.transposed ? " +transposed" : "", c.stats ? " +stats" : "",
      c.store ? " +stored" : "");
  return buf;
}

// An f32 or bf16 output [M, K], NaN at first.
struct Output {
  bool bf16 = false;
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  Output(int64_t M, int64_t K, bool is_bf16) : bf16(is_bf16) {
    if (bf16)
      b16.assign(static_cast<size_t>(M * K), 0xffff);
    else
      f32.assign(static_cast<size_t>(M * K), NAN);
  }
  void* data() { return bf16 ? static_cast<void*>(b16.data()) : f32.data(); }
  float at(size_t i) const { return bf16 ? bf16_value(b16[i]) : f32[i]; }
};

// got's values equal want's (NaN where want is NaN).
int compare_outputs(const char* what, const Output& got, const Output& want) {
  const size_t n = got.bf16 ? got.b16.size() : got.f32.size();
  for (size_t i = 0; i < n; ++i) {
    const float g = got.at(i), w = want.at(i);
    if (std::isnan(w) ? !std::isnan(g) : std::memcmp(&g, &w, 4) != 0) {
      std::printf("  %s: stored element %zu is %g, want %g\n", what, i, g, w);
      return 1;
    }
  }
  return 0;
}

bool run_produced(Backend& cpu, const Case& c, unsigned seed, int sm_count) {
  std::mt19937 rng(seed);
  const int64_t M = c.M, K = c.K;
  const int n_out = outputs(c.op);
  const DType out_dtype = c.out_bf16 ? DType::bf16 : DType::f32;
  const float eps = 1e-6f;
  // Inputs, f32 or bf16 each: x and w (rmsnorm), gate and up (swiglu), dh, gate and up.
  std::vector<Tensor> in;
  if (norm_forward(c.op)) {
    // Specials in x: a NaN or inf makes its whole row NaN, so the one pass's block rows (wider
    // than 1,024) go without them.
    const bool one = c.op != Op::rmsnorm;
    in.push_back(make_tensor(M, K, !c.out_bf16, !(one && K > 1024), rng));
    in.push_back(make_tensor(1, K, c.out_bf16, false, rng));
    // The residual added to x (x's dtype), without specials.
    if (c.op == Op::rmsnorm_add_one_pass) in.push_back(make_tensor(M, K, !c.out_bf16, false, rng));
  } else if (c.op == Op::swiglu || c.op == Op::swiglu_stacked) {
    // Stacked: gate and up halves of one [M, 2K] tensor, so one dtype.
    in.push_back(make_tensor(M, K, c.out_bf16, true, rng));
    in.push_back(
        make_tensor(M, K, c.op == Op::swiglu_stacked ? c.out_bf16 : !c.out_bf16, true, rng));
  } else if (norm_backward(c.op)) {
    // dy, x, w, the residual; specials only in the residual (in dy or x one spreads over the
    // whole row through its mean) — and in dy of the final norm's cases.
    in.push_back(make_tensor(M, K, c.out_bf16, c.op == Op::rmsnorm_backward_final, rng));
    in.push_back(make_tensor(M, K, !c.out_bf16, false, rng));
    in.push_back(make_tensor(1, norm_width(c.op, K), c.out_bf16, false, rng));
    in.push_back(make_tensor(M, K, !c.out_bf16, true, rng));
  } else {
    in.push_back(make_tensor(M, K, c.out_bf16, true, rng));
    in.push_back(make_tensor(M, K, !c.out_bf16, false, rng));
    in.push_back(make_tensor(M, K, c.out_bf16, true, rng));
  }

  // The kernels: outputs (stored or only quantized), targets, statistics.
  std::vector<Output> out, want;
  std::vector<Operand> along, trans, ref_along, ref_trans;
  for (int o = 0; o < n_out; ++o) {
    out.emplace_back(M, K, c.out_bf16);
    want.emplace_back(M, K, c.out_bf16);
    along.emplace_back(M, K);
    trans.emplace_back(K, M);
    ref_along.emplace_back(M, K);
    ref_trans.emplace_back(K, M);
  }
  QuantStatsSum sums[2], ref_sums[2];
  quant::QuantTarget tg[2];
  Out dst[2];
  for (int o = 0; o < n_out; ++o) {
    tg[o].q = along[o].codes.data();
    tg[o].qs = along[o].scales.data();
    if (c.transposed) {
      tg[o].qt = trans[o].codes.data();
      tg[o].qts = trans[o].scales.data();
    }
    tg[o].stats = c.stats ? &sums[o] : nullptr;
    dst[o] = {c.store ? out[o].data() : nullptr, c.out_bf16};
  }
  const QuantOptions opt{c.format, c.pow2, c.stats ? &sums[0] : nullptr};
  const quant::TileChoice tiles{c.registers, c.stage_bf16};
  // The norm's rows R of width D (per head: the [M·heads, D] view of the [M, K] tensors).
  const int64_t D = norm_width(c.op, K), R = M * (K / D);
  auto norm_view = [&](const Matrix& m) { return Matrix{m.data, R, D, m.dtype}; };
  std::vector<float> rstd(static_cast<size_t>(R), NAN), mean(static_cast<size_t>(R), NAN);
  std::vector<float> dw(static_cast<size_t>(D), 0.0f);  // the norm weight's gradient (+=)
  const bool residual = c.op == Op::rmsnorm_backward;
  if (norm_backward(c.op)) {
    // Any rstd serves (the CPU's of x); then the row-mean pass and the producer.
    Output y(M, K, c.out_bf16);
    cpu.rmsnorm_forward(norm_view(in[1].matrix()), in[2].matrix(), eps,
                        Matrix{y.data(), R, D, out_dtype}, rstd.data());
    if (!rmsnorm_kernels::launch_rmsnorm_backward_rows<false>(
            norm_view(in[0].matrix()), norm_view(in[1].matrix()), in[2].matrix(), rstd.data(),
            Matrix{nullptr, R, D, out_dtype}, mean.data(), dw.data(), nullptr, sm_count)) {
      std::printf("  the row pass does not take rows of %lld\n", static_cast<long long>(D));
      return false;
    }
    const rmsnorm_kernels::RmsnormGradProducer prod{in[0].in(),
                                                    in[1].in(),
                                                    in[2].in(),
                                                    residual ? in[3].in() : In{nullptr, false},
                                                    rstd.data(),
                                                    mean.data(),
                                                    dst[0],
                                                    K,
                                                    static_cast<int>(D),
                                                    static_cast<int>(K / D)};
    quant::launch_produced(prod, M, K, opt, tg[0], quant::QuantTarget{}, c.vec, tiles, nullptr,
                           sm_count);
  } else if (c.op == Op::rmsnorm_one_pass || c.op == Op::rmsnorm_add_one_pass) {
    const bool add = c.op == Op::rmsnorm_add_one_pass;
    Tensor sum = in[0];  // x + r as the CPU's add makes it: what x must hold afterwards
    if (add) cpu.add(in[0].matrix(), in[2].matrix(), sum.matrix());
    if (!rmsnorm_kernels::launch_rmsnorm_quantize_rows(
            in[0].matrix(), in[1].matrix(), eps, Matrix{dst[0].p, M, K, out_dtype}, rstd.data(),
            opt, tg[0], nullptr, sm_count, add ? in[2].matrix() : Matrix{})) {
      std::printf("  the one-pass kernel does not take rows of %lld\n", static_cast<long long>(K));
      return false;
    }
    if (add) {
      // Bits (NaN compares unequal to itself).
      if (in[0].bf16 ? in[0].b16 != sum.b16
                     : std::memcmp(in[0].f32.data(), sum.f32.data(), sum.f32.size() * 4) != 0) {
        std::printf("  x after the pass differs from the CPU's x + r\n");
        return false;
      }
      for (size_t i = 0; i < in[0].value.size(); ++i)  // the reference reads the sum
        in[0].value[i] = in[0].bf16 ? bf16_value(in[0].b16[i]) : in[0].f32[i];
    }
  } else if (c.op == Op::rmsnorm) {
    rmsnorm_kernels::launch_rmsnorm_forward<false>(in[0].matrix(), in[1].matrix(), eps,
                                                   Matrix{nullptr, M, K, out_dtype}, rstd.data(),
                                                   nullptr, sm_count);
    const rmsnorm_kernels::RmsnormProducer prod{in[0].in(), in[1].in(), rstd.data(), dst[0], K};
    quant::launch_produced(prod, M, K, opt, tg[0], quant::QuantTarget{}, c.vec, tiles, nullptr,
                           sm_count);
  } else if (c.op == Op::swiglu_stacked) {
    // gu [M, 2K]: each row gate's K values, then up's; the producer reads the halves in place.
    std::vector<float> gu32;
    std::vector<uint16_t> gu16;
    for (int64_t r = 0; r < M; ++r)
      for (int h = 0; h < 2; ++h)
        for (int64_t k = 0; k < K; ++k) {
          const size_t i = static_cast<size_t>(r * K + k);
          if (c.out_bf16)
            gu16.push_back(in[h].b16[i]);
          else
            gu32.push_back(in[h].f32[i]);
        }
    const void* gu = c.out_bf16 ? static_cast<const void*>(gu16.data()) : gu32.data();
    const size_t es = c.out_bf16 ? 2 : 4;
    const swiglu_kernels::SwigluProducer prod{
        In{gu, c.out_bf16}, In{static_cast<const uint8_t*>(gu) + K * es, c.out_bf16}, dst[0], K,
        2 * K};
    quant::launch_produced(prod, M, K, opt, tg[0], quant::QuantTarget{}, c.vec, tiles, nullptr,
                           sm_count);
  } else if (c.op == Op::swiglu) {
    const swiglu_kernels::SwigluProducer prod{in[0].in(), in[1].in(), dst[0], K, K};
    quant::launch_produced(prod, M, K, opt, tg[0], quant::QuantTarget{}, c.vec, tiles, nullptr,
                           sm_count);
  } else {
    const swiglu_kernels::SwigluGradProducer prod{in[0].in(), in[1].in(), in[2].in(),
                                                  dst[0],     dst[1],     K};
    quant::launch_produced(prod, M, K, opt, tg[0], tg[1], c.vec, tiles, nullptr, sm_count);
  }

  // The reference.
  int bad = 0;
  Fp8Operands ref_out[2];
  QuantOptions ref_opt[2];
  for (int o = 0; o < n_out; ++o) {
    ref_out[o].along = ref_along[o].matrix(c.format);
    if (c.transposed) ref_out[o].transposed = ref_trans[o].matrix(c.format);
    ref_opt[o] = {c.format, c.pow2, &ref_sums[o]};
  }
  auto matrix = [&](Output& t) { return Matrix{t.data(), M, K, out_dtype}; };
  if (norm_forward(c.op)) {
    // rstd against the CPU's (another summation order), then the normalized values from the
    // kernel's rstd with the producer's formula, quantized by the CPU. The one pass's rstd must
    // be the rstd pass's bits (the same threads and sum).
    if (c.op != Op::rmsnorm) {
      std::vector<float> rstd_pass(static_cast<size_t>(M), NAN);
      rmsnorm_kernels::launch_rmsnorm_forward<false>(in[0].matrix(), in[1].matrix(), eps,
                                                     Matrix{nullptr, M, K, out_dtype},
                                                     rstd_pass.data(), nullptr, sm_count);
      if (std::memcmp(rstd_pass.data(), rstd.data(), rstd.size() * sizeof(float)) != 0) {
        std::printf("  the one pass's rstd differs from the rstd pass's\n");
        ++bad;
      }
    }
    std::vector<float> rstd_ref(static_cast<size_t>(M));
    Output y_cpu(M, K, c.out_bf16);
    cpu.rmsnorm_forward(in[0].matrix(), in[1].matrix(), eps, matrix(y_cpu), rstd_ref.data());
    for (int64_t r = 0; r < M; ++r) {
      const float g = rstd[r], w = rstd_ref[r];
      if (std::isnan(w) ? !std::isnan(g) : !(std::fabs(g - w) <= 1e-5f * std::fabs(w))) {
        std::printf("  rstd[%lld] is %g, the CPU's %g\n", static_cast<long long>(r), g, w);
        ++bad;
        break;
      }
    }
    for (int64_t r = 0; r < M; ++r)
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = static_cast<size_t>(r * K + k);
        const float v = rmsnorm_kernels::normalized(in[0].value[i], rstd[r], in[1].value[k]);
        if (c.out_bf16)
          want[0].b16[i] = std::isnan(v) ? uint16_t{0x7fc0} : bf16_bits(v);
        else
          want[0].f32[i] = v;
      }
    const Matrix y = matrix(want[0]);
    if (c.transposed) {
      cpu.quantize_with_transpose(y, ref_out[0].along, ref_out[0].transposed, ref_opt[0], nullptr,
                                  nullptr);
    } else {
      cpu.quantize(y, ref_out[0].along, ref_opt[0], nullptr);
    }
  } else if (norm_backward(c.op)) {
    // dw: the CPU's sums in another order, to 1e-5 of the sum of the terms' magnitudes.
    std::vector<float> dw_ref(static_cast<size_t>(D), 0.0f), scale(static_cast<size_t>(D), 0.0f);
    Output d_cpu(M, K, c.out_bf16);
    cpu.rmsnorm_backward(norm_view(in[0].matrix()), norm_view(in[1].matrix()), in[2].matrix(),
                         rstd.data(), norm_view(matrix(d_cpu)),
                         Matrix{dw_ref.data(), 1, D, DType::f32});
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < D; ++h) {
        const size_t i = static_cast<size_t>(r * D + h);
        scale[h] += std::fabs(in[0].value[i] * in[1].value[i] * rstd[r]);
      }
    auto check_dw = [&](const char* what, const std::vector<float>& got) {
      for (int64_t h = 0; h < D; ++h) {
        const float g = got[h], w = dw_ref[h];
        const bool ok = std::isfinite(w) ? std::fabs(g - w) <= 1e-5f * scale[h] + 1e-30f
                                         : (std::isnan(w) ? std::isnan(g) : g == w);
        if (!ok) {
          std::printf("  %s dw[%lld] is %g, the CPU's %g\n", what, static_cast<long long>(h), g, w);
          ++bad;
          return;
        }
      }
    };
    check_dw("fused", dw);
    // dx against the CPU's: the row means are sums in another order, so to 1e-3 (BF16) or 1e-5
    // of the tensor's norm, NaN where the CPU has NaN.
    auto check_dx = [&](const char* what, const Output& got) {
      double err = 0, norm = 0;
      const size_t n = static_cast<size_t>(M * K);
      for (size_t i = 0; i < n; ++i) {
        const double g = got.at(i), w = d_cpu.at(i);
        if (std::isnan(w) != std::isnan(g)) {
          std::printf("  %s dx[%zu] is %g, the CPU's %g\n", what, i, g, w);
          ++bad;
          return;
        }
        if (std::isfinite(w)) err += (g - w) * (g - w), norm += w * w;
      }
      if (!(std::sqrt(err) <= (c.out_bf16 ? 1e-3 : 1e-5) * std::sqrt(norm) + 1e-30)) {
        std::printf("  %s dx: error %.3g of the CPU's norm\n", what,
                    norm > 0 ? std::sqrt(err / norm) : std::sqrt(err));
        ++bad;
      }
    };
    // The unfused op on a device: rmsnorm_backward's one pass (dw and dx; the row means of the
    // fused producer's row pass, so its bits), then the CPU's add.
    Output d(M, K, c.out_bf16);
    std::vector<float> dw1(static_cast<size_t>(D), 0.0f);
    rmsnorm_kernels::launch_rmsnorm_backward_rows<true>(
        norm_view(in[0].matrix()), norm_view(in[1].matrix()), in[2].matrix(), rstd.data(),
        norm_view(matrix(d)), nullptr, dw1.data(), nullptr, sm_count);
    check_dw("rmsnorm_backward's one-pass", dw1);
    check_dx("rmsnorm_backward's one-pass", d);
    // The dx kernel (rows too wide for the one pass) has its own row means: the CPU's to the
    // same bound.
    Output d2(M, K, c.out_bf16);
    rmsnorm_kernels::launch_rmsnorm_backward_dx<true>(
        norm_view(in[0].matrix()), norm_view(in[1].matrix()), in[2].matrix(), rstd.data(),
        norm_view(matrix(d2)), nullptr, nullptr, sm_count);
    check_dx("the dx kernel's", d2);
    if (residual) {
      cpu.add(in[3].matrix(), matrix(d), matrix(want[0]));
    } else {
      want[0] = d;
    }
    const Matrix dx = matrix(want[0]);
    if (c.transposed) {
      cpu.quantize_with_transpose(dx, ref_out[0].along, ref_out[0].transposed, ref_opt[0], nullptr,
                                  nullptr);
    } else {
      cpu.quantize(dx, ref_out[0].along, ref_opt[0], nullptr);
    }
  } else if (c.op == Op::swiglu || c.op == Op::swiglu_stacked) {
    cpu.swiglu_forward_fp8(in[0].matrix(), in[1].matrix(), matrix(want[0]), ref_out[0], ref_opt[0]);
  } else {
    cpu.swiglu_backward_fp8(in[0].matrix(), in[1].matrix(), in[2].matrix(), matrix(want[0]),
                            matrix(want[1]), ref_out[0], ref_opt[0], ref_out[1], ref_opt[1]);
  }

  QuantStats seen;  // the reference's statistics: what the data held
  for (int o = 0; o < n_out; ++o) {
    const std::string name = norm_forward(c.op)                                 ? "y"
                             : c.op == Op::swiglu || c.op == Op::swiglu_stacked ? "h"
                             : norm_backward(c.op)                              ? "dx"
                             : o == 0                                           ? "dgate"
                                                                                : "dup";
    bad += compare((name + " along").c_str(), along[o], ref_along[o]);
    if (c.transposed) bad += compare((name + " transposed").c_str(), trans[o], ref_trans[o]);
    if (c.stats) bad += compare_stats(name.c_str(), sums[o], ref_sums[o].stats());
    if (c.store) bad += compare_outputs(name.c_str(), out[o], want[o]);
    seen += ref_sums[o].stats();
  }
  std::printf("%s %s (%lld blocks: %lld degenerate, %lld saturated, %lld flushed)\n",
              bad ? "FAIL" : "PASS", describe(c).c_str(), static_cast<long long>(seen.blocks),
              static_cast<long long>(seen.degenerate_blocks),
              static_cast<long long>(seen.saturated), static_cast<long long>(seen.flushed_to_zero));
  return bad == 0;
}

// quantize_transpose_kernel: x [M, K] f32 or bf16 against the reference's
// quantize_with_transpose, statistics of both outputs.
template <typename T, Fp8Format F, bool kStats, class S>
int transpose_case(const Tensor& x, bool pow2, bool registers, int sm_count, const Reference& ref) {
  Operand along(x.M, x.K), trans(x.K, x.M);
  QuantStatsSum sums[2];
  quant::launch_quantize_transpose<T, F, kStats, S>(
      static_cast<const T*>(x.data()), x.M, x.K, pow2, along.codes.data(), along.scales.data(),
      trans.codes.data(), trans.scales.data(), kStats ? sums : nullptr, registers, nullptr,
      sm_count);
  int bad = compare("along", along, ref.along) + compare("transposed", trans, ref.transposed);
  if (kStats)
    bad += compare_stats("along", sums[0], ref.stats_along) +
           compare_stats("transposed", sums[1], ref.stats_transposed);
  return bad;
}

bool run_transpose(Backend& cpu, int64_t M, int64_t K, bool bf16, bool stage_bf16, bool registers,
                   Fp8Format f, bool pow2, bool stats, unsigned seed, int sm_count) {
  std::mt19937 rng(seed);
  const Tensor x = make_tensor(M, K, bf16, true, rng);
  const Reference ref(cpu, x, QuantOptions{f, pow2, nullptr});
  int bad = 0;
  using E4 = std::integral_constant<Fp8Format, Fp8Format::e4m3>;
  using E5 = std::integral_constant<Fp8Format, Fp8Format::e5m2>;
  auto go = [&](auto fmt) {
    constexpr Fp8Format F = decltype(fmt)::value;
    if (!bf16) {
      bad += stats ? transpose_case<float, F, true, float>(x, pow2, registers, sm_count, ref)
                   : transpose_case<float, F, false, float>(x, pow2, registers, sm_count, ref);
    } else if (stage_bf16) {
      bad += stats
                 ? transpose_case<uint16_t, F, true, uint16_t>(x, pow2, registers, sm_count, ref)
                 : transpose_case<uint16_t, F, false, uint16_t>(x, pow2, registers, sm_count, ref);
    } else {
      bad += stats ? transpose_case<uint16_t, F, true, float>(x, pow2, registers, sm_count, ref)
                   : transpose_case<uint16_t, F, false, float>(x, pow2, registers, sm_count, ref);
    }
  };
  f == Fp8Format::e4m3 ? go(E4{}) : go(E5{});
  std::printf("%s transpose %lldx%lld %s x, %s%s-staged, %s%s%s (%s path)\n", bad ? "FAIL" : "PASS",
              static_cast<long long>(M), static_cast<long long>(K), bf16 ? "bf16" : "f32",
              registers ? "registers, edges " : "", stage_bf16 ? "bf16" : "f32", fp8_format_name(f),
              pow2 ? " pow2" : "", stats ? " +stats" : "", K % 8 == 0 ? "16-byte" : "scalar");
  return bad == 0;
}

// The emulation's FP8 conversion (from the formats' definitions) against the CPU codec, which
// the reference uses: every 257th float bit pattern and every float near an FP8 value or a
// midpoint between two (ties). Returns the number of disagreements.
int check_conversions() {
  int bad = 0;
  auto one = [&](float x) {
    for (const Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
      const uint8_t emu =
          __nv_cvt_float_to_fp8(x, __NV_SATFINITE, f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2);
      const uint8_t ref = float_to_fp8(x, f);
      if (emu != ref && bad++ < 5)
        std::printf("  %s of %a: emulation 0x%02x, codec 0x%02x\n", fp8_format_name(f), x, emu,
                    ref);
    }
  };
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 257)
    one(__uint_as_float(static_cast<unsigned>(u)));
  for (const bool e4m3 : {true, false})
    for (unsigned c = 0; c < 0x7f; ++c) {
      const double v = emu::fp8_value(c, e4m3), next = emu::fp8_value(c + 1, e4m3);
      for (const double p : {v, (v + next) / 2}) {  // the midpoint: a tie when a float
        const float x = static_cast<float>(p);
        for (const float y : {x, std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)}) {
          one(y);
          one(-y);
        }
      }
    }
  std::printf("%s FP8 conversions of the emulation and the CPU codec agree\n",
              bad ? "FAIL" : "PASS");
  return bad;
}

}  // namespace

int main() {
  const auto cpu = make_cpu_backend();
  if (check_conversions() != 0) {
    std::printf("the emulation's FP8 conversion disagrees with the codec: nothing else is run\n");
    return 1;
  }
  using F = Fp8Format;
  const F e4 = F::e4m3, e5 = F::e5m2;
  const Op norm = Op::rmsnorm, one = Op::rmsnorm_one_pass, add1 = Op::rmsnorm_add_one_pass,
           sst = Op::swiglu_stacked, fwd = Op::swiglu, bwd = Op::swiglu_backward,
           nbwd = Op::rmsnorm_backward, nfin = Op::rmsnorm_backward_final,
           nhead = Op::rmsnorm_backward_heads;
  // {M, K, format, pow2, op, out_bf16, stage_bf16, vec, transposed, stats, store}
  const std::vector<Case> cases = {
      // quantize_produced_kernel, one output with its transposed copy.
      {1, 1, e4, false, norm, false, false, false, true, true, true},
      {3, 129, e4, false, norm, true, true, false, true, true, true},
      {128, 128, e4, false, fwd, false, false, true, true, true, false},
      {128, 128, e5, true, norm, true, true, true, true, false, true},
      {130, 300, e5, false, fwd, true, false, false, true, true, true},
      {257, 1024, e4, false, norm, true, true, true, true, true, true},
      {257, 1024, e4, true, fwd, false, false, true, true, false, false},
      {64, 256, e5, false, norm, false, false, false, true, true, false},
      {5, 1100, e4, false, norm, true, true, false, true, true, true},  // rstd: block reduction
      // One output, no transposed copy, K % 128 ≠ 0 or scalar: still the staged kernel.
      {130, 264, e4, false, norm, false, false, true, false, true, true},
      {64, 256, e4, false, fwd, true, true, false, false, true, true},
      // quantize_produced_rows_kernel: forward-only, K % 128 == 0, vec (odd block counts too).
      {1, 128, e4, false, norm, true, false, true, false, true, true},
      {3, 384, e5, false, fwd, false, false, true, false, true, true},
      {257, 1024, e4, true, norm, true, false, true, false, true, false},
      {65, 256, e5, true, fwd, false, false, true, false, false, true},
      {9, 1280, e4, false, norm, true, false, true, false, true, true},  // rstd: block reduction
      // rmsnorm_quantize_rows_kernel: forward-only, any K up to 4,096 (warp rows to 1,024).
      {1, 1, e4, false, one, false, false, false, false, true, true},
      {3, 129, e5, true, one, true, false, false, false, true, true},
      {130, 300, e4, false, one, true, false, false, false, true, false},
      {65, 1024, e4, false, one, false, false, false, false, false, true},
      {5, 1100, e5, false, one, true, false, false, false, true, true},  // block: a partial block
      {3, 4096, e4, true, one, true, false, false, false, true, true},
      {2, 2048, e4, false, one, false, false, false, false, true, false},
      // The same with the residual stream's add in the pass (x += r, written back).
      {3, 129, e4, false, add1, true, false, false, false, true, true},
      {65, 1024, e5, true, add1, false, false, false, false, true, true},
      {3, 4096, e4, false, add1, true, false, false, false, false, false},
      // SwiGLU reading the halves of a stacked gate/up projection (rows 2K apart): the row
      // kernel, the staged kernel (scalar, a partial block; with a transposed copy).
      {64, 256, e4, false, sst, true, false, true, false, true, true},
      {3, 129, e5, false, sst, false, false, false, false, true, true},
      {130, 300, e4, true, sst, true, true, false, true, true, false},
      {257, 1024, e4, false, sst, true, true, true, true, false, true},
      // Two outputs (dgate, dup), both with transposed copies.
      {1, 1, e5, false, bwd, true, true, false, true, true, true},
      {3, 129, e4, false, bwd, false, false, false, true, true, false},
      {128, 128, e4, false, bwd, true, true, true, true, true, true},
      {130, 300, e4, true, bwd, true, true, false, true, true, true},
      {257, 1024, e5, false, bwd, true, true, true, true, true, false},
      {257, 1024, e4, false, bwd, false, false, true, true, true, true},
      {64, 256, e5, true, bwd, true, false, true, true, false, true},
      // RMSNorm's backward: with the residual, then without.
      {1, 1, e4, false, nbwd, true, true, false, true, true, true},
      {3, 129, e5, false, nbwd, false, false, false, true, true, true},
      {128, 128, e4, false, nbwd, true, true, true, true, true, false},
      {130, 300, e4, true, nbwd, true, false, false, true, true, true},
      {257, 1024, e4, false, nbwd, true, true, true, true, true, true},
      {9, 1280, e5, false, nbwd, false, false, true, true, false, true},   // block reduction
      {257, 1024, e4, false, nbwd, true, false, true, false, true, true},  // the row kernel
      {130, 300, e4, false, nfin, true, true, false, true, true, true},
      {257, 1024, e5, true, nfin, false, false, true, true, true, false},
      // Per-head norms: heads of 128 (8 a row), of 64 (3 a row, a partial block of K).
      {130, 1024, e4, false, nhead, true, true, true, true, true, false},
      {65, 192, e4, false, nhead, true, false, false, true, true, true},
      {64, 256, e5, true, nhead, false, false, true, true, true, true},
      // Several whole tiles and edges (rows and columns past the last whole tile): from
      // registers, the edges staged (each case also runs staged throughout, as all above).
      {264, 1032, e4, false, norm, true, false, true, true, true, true},
      {136, 256, e5, true, fwd, false, false, true, true, true, true},
      {136, 264, e4, false, sst, true, false, true, true, true, false},
      {256, 136, e4, false, bwd, true, true, true, true, true, true},
      {256, 256, e5, false, nbwd, false, false, true, true, true, true},
      {136, 1024, e4, false, nhead, true, false, true, true, true, true},
  };
  int failed = 0, runs = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].vec && cases[i].K % 8 != 0) {  // the backends' rule: whole 16-byte vectors
      std::printf("case %zu: the 16-byte path needs K %% 8 == 0\n", i);
      return 1;
    }
    failed += run_produced(*cpu, cases[i], 1000 + static_cast<unsigned>(i), 1 + i % 2) ? 0 : 1;
    ++runs;
    if (registers_fit(cases[i])) {  // the same case from registers (the default on a device)
      Case r = cases[i];
      r.registers = true;
      failed += run_produced(*cpu, r, 1000 + static_cast<unsigned>(i), 1 + i % 2) ? 0 : 1;
      ++runs;
    }
  }
  // quantize_transpose_kernel: {M, K, bf16 x, 16-bit staging, format, pow2, stats}.
  struct TCase {
    int64_t M, K;
    bool bf16, stage_bf16;
    F f;
    bool pow2, stats;
  };
  const std::vector<TCase> tcases = {
      {1, 1, false, false, e4, false, true},      {3, 129, true, true, e5, false, true},
      {128, 128, true, true, e4, true, true},     {130, 300, false, false, e5, true, false},
      {257, 1024, false, false, e4, false, true}, {257, 1024, true, true, e4, false, true},
      {257, 1024, true, false, e5, false, true},  {64, 256, true, true, e5, false, false},
      {130, 300, true, false, e4, false, true},   {136, 264, true, false, e4, false, true},
      {256, 384, false, false, e5, true, true},   {256, 136, true, true, e4, false, true},
  };
  for (size_t i = 0; i < tcases.size(); ++i) {
    const TCase& t = tcases[i];
    for (const bool registers : {false, true}) {
      if (registers && !(t.K % 8 == 0 && t.M % 8 == 0 && t.M >= 128 && t.K >= 128)) continue;
      failed += run_transpose(*cpu, t.M, t.K, t.bf16, t.stage_bf16, registers, t.f, t.pow2, t.stats,
                              2000 + static_cast<unsigned>(i), 1 + i % 2)
                    ? 0
                    : 1;
      ++runs;
    }
  }
  std::printf("%d of %d runs failed\n", failed, runs);
  return failed == 0 ? 0 : 1;
}
