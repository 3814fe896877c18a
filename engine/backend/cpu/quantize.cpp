// CPU reference of block-wise FP8 quantization (spec: fp8/format.hpp and backend.hpp).
// The CUDA kernels (kernels/quantize.cu) must produce the same codes and scales bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/sgemm.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "fp8/codec.hpp"

namespace fp8rl {
namespace {

// The CPU quantizer works on runs of FP32 values: a block's elements are first read (BF16
// widened exactly, or for xᵀ gathered from x's columns through a small transposing buffer),
// then the amax and the codes are computed over the run. The loops over a run have no
// branches (float_to_e4m3 selects instead of branching), so they compile to vector
// instructions; each element still gets exactly the scalar code of the spec.

// Reads n elements of x from flat index i on as floats.
void load(const Matrix& x, int64_t i, int64_t n, float* dst) {
  if (x.dtype == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(x.data) + i, sizeof(float) * size_t(n));
    return;
  }
  const bf16* src = static_cast<const bf16*>(x.data) + i;
  for (int64_t k = 0; k < n; ++k) dst[k] = bf16_to_float(src[k]);
}

// Vectors of N lanes (GCC vector extensions). Lanes are independent elements, so N and the
// instruction set change the speed only. The functions passing them are internal to this
// file, so GCC's note that 32-byte vectors are passed differently with and without AVX
// (-Wpsabi) concerns no interface.
#pragma GCC diagnostic ignored "-Wpsabi"
template <int N>
struct Lanes {
  typedef float f __attribute__((vector_size(4 * N)));
  typedef int32_t i __attribute__((vector_size(4 * N)));
  typedef uint8_t b __attribute__((vector_size(N)));
  typedef uint8_t bytes __attribute__((vector_size(4 * N)));
  static f load(const float* p) {
    f v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
};

// amax of a run; NaN when any element is NaN (the block is then degenerate). Branch-free:
// comparisons with NaN are false, so NaN is tracked by its own flag. The maximum is the same
// whatever order it is taken in.
template <int N>
[[gnu::always_inline]] inline void amax_lanes(const float* v, int64_t n, float* amax, bool* nan) {
  using L = Lanes<N>;
  typename L::f m = {};
  typename L::i bad = {};
  int64_t k = 0;
  for (; k + N <= n; k += N) {
    const typename L::f a = (typename L::f)((typename L::i)L::load(v + k) & 0x7fffffff);
    bad |= a != a;
    m = a > m ? a : m;
  }
  float mx = *amax;
  bool any_nan = *nan;
  for (int l = 0; l < N; ++l) {
    mx = m[l] > mx ? m[l] : mx;
    any_nan = any_nan || bad[l] != 0;
  }
  for (; k < n; ++k) {
    const float a = std::fabs(v[k]);
    any_nan = any_nan || a != a;
    mx = a > mx ? a : mx;
  }
  *amax = mx;
  *nan = any_nan;
}

// detail::encode (fp8/codec.hpp) on N lanes: the same integer and FP32 operations, so the
// same code for every input. Magnitudes are below 2^31, so signed comparisons serve; `normal`
// is only selected for magnitudes of normal values, where it cannot have wrapped.
template <int N, int kMant, int kBias, int32_t kMaxCode>
[[gnu::always_inline]] inline typename Lanes<N>::i encode_lanes(typename Lanes<N>::f x) {
  using I = typename Lanes<N>::i;
  using F = typename Lanes<N>::f;
  const I u = (I)x;
  const I abs = u & 0x7fffffff;
  const I sign = (u >> 24) & 0x80;
  constexpr int kMinNormalExp = 1 - kBias;
  constexpr int32_t kMinNormalBits = (127 + kMinNormalExp) << 23;
  const I subnormal = abs < kMinNormalBits;
  constexpr float kSubScale = static_cast<float>(1u << (kMant - kMinNormalExp));
  const F scaled = (F)(abs & subnormal) * kSubScale;
  const I sub = __builtin_convertvector((scaled + 0x1p23f) - 0x1p23f, I);
  constexpr int kDrop = 23 - kMant;
  const I lsb = (abs >> kDrop) & 1;
  I normal = ((abs + ((1 << (kDrop - 1)) - 1) + lsb) >> kDrop) - ((127 - kBias) << kMant);
  normal = normal > kMaxCode ? kMaxCode : normal;
  const I inf_or_normal = abs >= 0x7f800000 ? kMaxCode : normal;
  const I code = sign | (subnormal ? sub : inf_or_normal);
  return abs > 0x7f800000 ? 0x7f : code;
}

template <int N, Fp8Format Fmt>
[[gnu::always_inline]] inline typename Lanes<N>::i encode_lanes(typename Lanes<N>::f x) {
  if constexpr (Fmt == Fp8Format::e4m3)
    return encode_lanes<N, 3, 7, 0x7e>(x);
  else
    return encode_lanes<N, 2, 15, 0x7b>(x);
}

template <Fp8Format Fmt>
uint8_t encode_one(float x) {
  return Fmt == Fp8Format::e4m3 ? float_to_e4m3(x) : float_to_e5m2(x);
}

// codes[k] = fp8(v[k] · s) for a run.
template <int N, Fp8Format Fmt>
[[gnu::always_inline]] inline void encode_lanes_run(const float* v, int64_t n, float s,
                                                    uint8_t* codes) {
  using L = Lanes<N>;
  int64_t k = 0;
  for (; k + N <= n; k += N) {
    // The low byte of each 32-bit lane (a byte shuffle: GCC's element-wise narrowing
    // extracts the lanes one by one).
    const auto bytes = (typename L::bytes)encode_lanes<N, Fmt>(L::load(v + k) * s);
    typename L::b c;
    if constexpr (N == 16)
      c = __builtin_shufflevector(bytes, bytes, 0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52,
                                  56, 60);
    else if constexpr (N == 8)
      c = __builtin_shufflevector(bytes, bytes, 0, 4, 8, 12, 16, 20, 24, 28);
    else
      c = __builtin_shufflevector(bytes, bytes, 0, 4, 8, 12);
    std::memcpy(codes + k, &c, N);
  }
  for (; k < n; ++k) codes[k] = encode_one<Fmt>(v[k] * s);
}

// The statistics of e4m3 codes, eight elements at a time as two halves of four lanes (the
// same on every path): element k adds to lane k % 8 of err8/ref8 (FP64, finite x only: others
// add +0) and counts saturated and flushed elements (counts[0], counts[1]). n is a multiple
// of 8. The code's value is decoded arithmetically — exactly the table's value: sign, then
// 2^(e−7)·(1 + m/8), or m·2^−9 for e = 0.
[[gnu::always_inline]] inline void e4m3_stats_lanes(const float* v, const uint8_t* codes, int64_t n,
                                                    float s, float inv, double* err8, double* ref8,
                                                    int64_t* counts) {
  typedef float f4 __attribute__((vector_size(16)));
  typedef int32_t i4 __attribute__((vector_size(16)));
  typedef uint8_t b4 __attribute__((vector_size(4)));
  typedef double d4 __attribute__((vector_size(32)));
  typedef int64_t l4 __attribute__((vector_size(32)));
  d4 err[2] = {}, ref[2] = {};
  i4 saturated = {}, flushed = {};
  for (int64_t k = 0; k < n; k += 8)
    for (int h = 0; h < 2; ++h) {
      f4 x;
      std::memcpy(&x, v + k + 4 * h, sizeof x);
      b4 cb;
      std::memcpy(&cb, codes + k + 4 * h, 4);
      const i4 c = __builtin_convertvector(cb, i4);
      const i4 sign = (c & 0x80) << 24, e = (c >> 3) & 0xf, m = c & 7;
      const f4 sub = (f4)((i4)(__builtin_convertvector(m, f4) * 0x1p-9f) | sign);
      const f4 normal = (f4)(sign | ((e + 120) << 23) | (m << 20));
      const f4 d = (e == 0 ? sub : normal) * inv;  // code 0x7f (NaN) only comes from NaN x
      const f4 ax = (f4)((i4)x & 0x7fffffff), as = (f4)((i4)(x * s) & 0x7fffffff);
      const i4 finite = ax <= 3.4028234663852886e38f;
      saturated -= as > 448.0f;
      flushed -= finite & (x != 0.0f) & ((c & 0x7f) == 0);
      const l4 keep = __builtin_convertvector(finite, l4);
      const d4 xd = keep ? __builtin_convertvector(x, d4) : 0.0;
      const d4 dd = keep ? __builtin_convertvector(d, d4) : 0.0;
      const d4 diff = xd - dd;
      err[h] += diff * diff;
      ref[h] += xd * xd;
    }
  for (int l = 0; l < 8; ++l) {
    err8[l] += err[l / 4][l % 4];
    ref8[l] += ref[l / 4][l % 4];
    counts[0] += saturated[l % 4] * (l < 4);
    counts[1] += flushed[l % 4] * (l < 4);
  }
}

// The kernels of one instruction-set path.
struct QuantKernels {
  void (*amax)(const float*, int64_t, float*, bool*);
  void (*encode[2])(const float*, int64_t, float, uint8_t*);  // e4m3, e5m2
  void (*e4m3_stats)(const float*, const uint8_t*, int64_t, float, float, double*, double*,
                     int64_t*);
};

#if defined(__x86_64__)
__attribute__((target("avx2"))) void amax_avx2(const float* v, int64_t n, float* m, bool* nan) {
  amax_lanes<8>(v, n, m, nan);
}
template <Fp8Format Fmt>
__attribute__((target("avx2"))) void encode_avx2(const float* v, int64_t n, float s, uint8_t* c) {
  encode_lanes_run<8, Fmt>(v, n, s, c);
}
__attribute__((target("avx2"))) void e4m3_stats_avx2(const float* v, const uint8_t* c, int64_t n,
                                                     float s, float inv, double* err8, double* ref8,
                                                     int64_t* counts) {
  e4m3_stats_lanes(v, c, n, s, inv, err8, ref8, counts);
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) void amax_avx512(const float* v, int64_t n,
                                                                      float* m, bool* nan) {
  amax_lanes<16>(v, n, m, nan);
}
template <Fp8Format Fmt>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void encode_avx512(const float* v, int64_t n,
                                                                        float s, uint8_t* c) {
  encode_lanes_run<16, Fmt>(v, n, s, c);
}
#endif
void amax_generic(const float* v, int64_t n, float* m, bool* nan) {
  amax_lanes<4>(v, n, m, nan);
}
template <Fp8Format Fmt>
void encode_generic(const float* v, int64_t n, float s, uint8_t* c) {
  encode_lanes_run<4, Fmt>(v, n, s, c);
}
void e4m3_stats_generic(const float* v, const uint8_t* c, int64_t n, float s, float inv,
                        double* err8, double* ref8, int64_t* counts) {
  e4m3_stats_lanes(v, c, n, s, inv, err8, ref8, counts);
}

// The quantizer follows the GEMM's instruction-set choice (FP8RL_CPU_GEMM), so that the
// tests run under every path exercise both; the codes are the same on each.
const QuantKernels& kernels() {
  static const QuantKernels k = [] {
#if defined(__x86_64__)
    if (cpu_gemm_default_path() == CpuGemmPath::avx512 && __builtin_cpu_supports("avx512bw"))
      return QuantKernels{amax_avx512,
                          {encode_avx512<Fp8Format::e4m3>, encode_avx512<Fp8Format::e5m2>},
                          e4m3_stats_avx2};
    if (cpu_gemm_default_path() != CpuGemmPath::generic)
      return QuantKernels{
          amax_avx2, {encode_avx2<Fp8Format::e4m3>, encode_avx2<Fp8Format::e5m2>}, e4m3_stats_avx2};
#endif
    return QuantKernels{amax_generic,
                        {encode_generic<Fp8Format::e4m3>, encode_generic<Fp8Format::e5m2>},
                        e4m3_stats_generic};
  }();
  return k;
}

struct Amax {
  float amax = 0.0f;
  bool nan = false;
  void add(const float* v, int64_t n) { kernels().amax(v, n, &amax, &nan); }
  float value() const { return nan ? NAN : amax; }
};

void encode_run(const float* v, int64_t n, float s, Fp8Format f, uint8_t* codes) {
  kernels().encode[f == Fp8Format::e4m3 ? 0 : 1](v, n, s, codes);
}

// The same codes with the statistics of the run (telemetry). Counts are exact; the error sums
// Σ(x − q/s)² and Σx² (FP64, finite x only) are kept per lane of 8 (element k in lane k % 8),
// then added lane by lane in order — a fixed order, so the same bits on every machine and
// path (E4M3 runs of 8 in vector lanes, the rest element by element in the same order).
void encode_run_stats(const float* v, int64_t n, float s, float inv, Fp8Format f, uint8_t* codes,
                      QuantStats& st) {
  encode_run(v, n, s, f, codes);
  constexpr int kSum = 8;
  double err[kSum] = {}, ref[kSum] = {};
  int64_t counts[2] = {0, 0};  // saturated, flushed to zero
  int64_t k0 = 0;
  if (f == Fp8Format::e4m3) {
    k0 = n / kSum * kSum;
    kernels().e4m3_stats(v, codes, k0, s, inv, err, ref, counts);
  }
  const float* table = fp8_table(f);
  const float max = fp8_max(f);
  for (int64_t k = k0; k < n; ++k) {
    const float x = v[k];
    const uint8_t code = codes[k];
    const bool finite = std::fabs(x) <= 3.4028234663852886e38f;  // false for inf and NaN
    counts[0] += std::fabs(x * s) > max;                         // false for NaN
    counts[1] += finite && x != 0.0f && (code & 0x7f) == 0;
    const double xd = finite ? static_cast<double>(x) : 0.0;
    const double e = xd - (finite ? static_cast<double>(table[code] * inv) : 0.0);
    err[k % kSum] += e * e;
    ref[k % kSum] += xd * xd;
  }
  for (int l = 0; l < kSum; ++l) {
    st.err_sq += err[l];
    st.ref_sq += ref[l];
  }
  st.saturated += counts[0];
  st.flushed_to_zero += counts[1];
}

// The scale of a block from its amax; counts the block (and its elements) in st.
float scale_of(const Amax& a, int64_t elements, const QuantOptions& opt, float* scale_inv,
               QuantStats& st) {
  bool degenerate = false;
  const float s = block_scale(a.value(), opt.format, opt.pow2_scales, &degenerate);
  *scale_inv = 1.0f / s;
  ++st.blocks;
  st.degenerate_blocks += degenerate;
  st.elements += elements;
  return s;
}

// Quantizes the run v[0..n) as one block (1x128: its values in order), writing its codes and
// scale; the statistics go to st when `stats`.
void quantize_run(const float* v, int64_t n, const QuantOptions& opt, bool stats, uint8_t* codes,
                  float* scale_inv, QuantStats& st) {
  Amax a;
  a.add(v, n);
  const float s = scale_of(a, n, opt, scale_inv, st);
  if (stats)
    encode_run_stats(v, n, s, *scale_inv, opt.format, codes, st);
  else
    encode_run(v, n, s, opt.format, codes);
}

// Sums per-row statistics in row order (deterministic whatever the thread split).
void sum_stats(const std::vector<QuantStats>& partial, QuantStats* stats) {
  if (!stats) return;
  *stats = QuantStats{};
  for (const auto& p : partial) *stats += p;
}

// x [rows, cols] → 1x128 blocks along cols. Statistics per row, blocks in column order.
void quantize_rows(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                   QuantStats* stats) {
  const int64_t rows = x.rows, cols = x.cols;
  std::vector<QuantStats> partial(static_cast<size_t>(stats ? rows : 0));
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 float v[kBlock];
                 QuantStats ignored;
                 for (int64_t r = r0; r < r1; ++r) {
                   QuantStats& st = stats ? partial[static_cast<size_t>(r)] : ignored;
                   for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
                     const int64_t n = std::min(kBlock, cols - c0);
                     load(x, r * cols + c0, n, v);
                     quantize_run(v, n, opt, stats != nullptr, out.codes + r * cols + c0,
                                  out.scale_inv + scale_index(out.block, rows, cols, r, c0), st);
                   }
                 }
               });
  sum_stats(partial, stats);
}

// xᵀ [cols, rows] in 1x128 blocks along x's rows, from x [rows, cols]: a band of x's columns
// at a time, each block of 128 rows gathered (transposed) into a buffer first, so x is read
// row by row. Statistics per row of xᵀ, blocks in order.
void quantize_columns(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                      QuantStats* stats) {
  const int64_t rows = x.rows, cols = x.cols;
  constexpr int64_t kBand = 32;  // columns of x per buffer: 32 × 128 floats, 16 KiB
  std::vector<QuantStats> partial(static_cast<size_t>(stats ? cols : 0));
  const int64_t bands = (cols + kBand - 1) / kBand;
  parallel_for(bands, std::max<int64_t>(1, 16384 / std::max<int64_t>(rows * kBand, 1)),
               [&](int64_t b0, int64_t b1) {
                 std::vector<float> t(static_cast<size_t>(kBand * kBlock));
                 QuantStats ignored;
                 std::vector<float> row(static_cast<size_t>(kBand));
                 for (int64_t b = b0; b < b1; ++b) {
                   const int64_t c0 = b * kBand, nc = std::min(kBand, cols - c0);
                   for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
                     const int64_t nr = std::min(kBlock, rows - r0);
                     for (int64_t r = 0; r < nr; ++r) {
                       load(x, (r0 + r) * cols + c0, nc, row.data());
                       for (int64_t c = 0; c < nc; ++c) t[size_t(c * kBlock + r)] = row[size_t(c)];
                     }
                     for (int64_t c = 0; c < nc; ++c) {
                       const int64_t oc = c0 + c;  // the row of xᵀ
                       QuantStats& st = stats ? partial[static_cast<size_t>(oc)] : ignored;
                       quantize_run(t.data() + c * kBlock, nr, opt, stats != nullptr,
                                    out.codes + oc * rows + r0,
                                    out.scale_inv + scale_index(out.block, cols, rows, oc, r0), st);
                     }
                   }
                 }
               });
  sum_stats(partial, stats);
}

// x [rows, cols] → 128x128 tiles (weights). Statistics per band of 128 rows, tiles in column
// order, elements of a tile row by row.
void quantize_tiles(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                    QuantStats* stats) {
  const int64_t rows = x.rows, cols = x.cols, bands = blocks_of(rows);
  std::vector<QuantStats> partial(static_cast<size_t>(std::max<int64_t>(bands, 1)));
  parallel_for(bands, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> t(static_cast<size_t>(kBlock * kBlock));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kBlock, nr = std::min(kBlock, rows - r0);
      QuantStats& st = partial[static_cast<size_t>(b)];
      for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
        const int64_t nc = std::min(kBlock, cols - c0);
        Amax a;
        for (int64_t r = 0; r < nr; ++r) {
          load(x, (r0 + r) * cols + c0, nc, t.data() + r * nc);
          a.add(t.data() + r * nc, nc);
        }
        float* scale_inv = out.scale_inv + scale_index(out.block, rows, cols, r0, c0);
        const float s = scale_of(a, nr * nc, opt, scale_inv, st);
        for (int64_t r = 0; r < nr; ++r) {
          uint8_t* codes = out.codes + (r0 + r) * cols + c0;
          if (stats)
            encode_run_stats(t.data() + r * nc, nc, s, *scale_inv, opt.format, codes, st);
          else
            encode_run(t.data() + r * nc, nc, s, opt.format, codes);
        }
      }
    }
  });
  sum_stats(partial, stats);
}

// 1.0 in the padding entries of a tile scale array (see fp8/format.hpp).
void fill_tile_scale_padding(float* s, int64_t rows, int64_t cols) {
  const int64_t stride = tile_scale_stride(cols);
  for (int64_t rb = 0; rb < blocks_of(rows); ++rb)
    for (int64_t cb = blocks_of(cols); cb < stride; ++cb) s[rb * stride + cb] = 1.0f;
}

}  // namespace

void CpuBackend::quantize(const Matrix& x, const Fp8Matrix& out, const QuantOptions& opt,
                          QuantStats* stats) {
  check_quantize_operands(x, out);
  check(out.format == opt.format, "quantize: output format differs from the options' format");
  if (stats) count_host_sync();  // a device waits to hand the statistics over
  // Statistics summed into opt.stats_sum (host memory here) are those a caller would receive;
  // a device sums them where they are, without a wait.
  QuantStats local;
  QuantStats* st = stats ? stats : opt.stats_sum ? &local : nullptr;
  if (out.block == ScaleBlock::row1x128) {
    quantize_rows(x, out, opt, st);
  } else {
    quantize_tiles(x, out, opt, st);
    fill_tile_scale_padding(out.scale_inv, x.rows, x.cols);
  }
  if (opt.stats_sum) *opt.stats_sum += *st;
}

void CpuBackend::quantize_with_transpose(const Matrix& x, const Fp8Matrix& along,
                                         const Fp8Matrix& transposed, const QuantOptions& opt,
                                         QuantStats* stats_along, QuantStats* stats_transposed) {
  check_quantize_operands(x, along);
  check(transposed.rows == x.cols && transposed.cols == x.rows,
        "quantize_with_transpose: the transposed output must be [" + std::to_string(x.cols) + ", " +
            std::to_string(x.rows) + "]");
  check(along.block == ScaleBlock::row1x128 && transposed.block == ScaleBlock::row1x128,
        "quantize_with_transpose: both outputs must use 1x128 blocks");
  check(along.format == opt.format && transposed.format == opt.format,
        "quantize_with_transpose: output formats differ from the options' format");
  if (stats_along || stats_transposed) count_host_sync();
  QuantStats local;
  QuantStats* st = stats_along ? stats_along : opt.stats_sum ? &local : nullptr;
  quantize_rows(x, along, opt, st);
  quantize_columns(x, transposed, opt, stats_transposed);
  if (opt.stats_sum) *opt.stats_sum += *st;
}

void CpuBackend::dequantize(const Fp8Matrix& q, const Matrix& out) {
  check(q.rows == out.rows && q.cols == out.cols, "dequantize: input and output shapes differ");
  check(out.dtype != DType::fp8, "dequantize: output must be f32 or bf16");
  const float* table = fp8_table(q.format);
  parallel_for(q.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(q.cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t c = 0; c < q.cols; ++c) {
                     const int64_t i = r * q.cols + c;
                     const float v = table[q.codes[i]] *
                                     q.scale_inv[scale_index(q.block, q.rows, q.cols, r, c)];
                     if (out.dtype == DType::f32)
                       static_cast<float*>(out.data)[i] = v;
                     else
                       static_cast<bf16*>(out.data)[i] = float_to_bf16(v);
                   }
               });
}

void CpuBackend::transpose_fp8(const Fp8Matrix& w, const Fp8Matrix& wt) {
  check(w.block == ScaleBlock::tile128x128 && wt.block == ScaleBlock::tile128x128,
        "transpose_fp8: only 128x128-tile matrices can be transposed without re-quantizing");
  check(wt.rows == w.cols && wt.cols == w.rows,
        "transpose_fp8: output must be the transposed shape");
  check(wt.format == w.format, "transpose_fp8: formats differ");
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) wt.codes[c * w.rows + r] = w.codes[r * w.cols + c];
  const int64_t stride = tile_scale_stride(w.cols), stride_t = tile_scale_stride(wt.cols);
  for (int64_t rb = 0; rb < blocks_of(w.rows); ++rb)
    for (int64_t cb = 0; cb < blocks_of(w.cols); ++cb)
      wt.scale_inv[cb * stride_t + rb] = w.scale_inv[rb * stride + cb];
  fill_tile_scale_padding(wt.scale_inv, wt.rows, wt.cols);
}

void CpuBackend::scale_log2_histogram(const Fp8Matrix& q, int lo, int hi, int64_t* counts) {
  check(lo < hi && hi - lo <= 256, "scale_log2_histogram: bins from 2^" + std::to_string(lo) +
                                       " to 2^" + std::to_string(hi) +
                                       " (lo < hi, at most 256 bins)");
  if (q.rows == 0 || q.cols == 0) return;
  check(q.scale_inv && counts, "scale_log2_histogram: null data pointer");
  const int64_t rstep = q.block == ScaleBlock::row1x128 ? 1 : kBlock;
  for (int64_t r = 0; r < q.rows; r += rstep)
    for (int64_t c = 0; c < q.cols; c += kBlock)
      ++counts[scale_log2_bin(q.scale_inv[scale_index(q.block, q.rows, q.cols, r, c)], lo, hi)];
}

}  // namespace fp8rl
