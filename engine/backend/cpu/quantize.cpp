// CPU reference of block-wise FP8 quantization (spec: fp8/format.hpp and backend.hpp).
// The CUDA kernels (kernels/quantize.cu) must produce the same codes and scales bit for bit.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "fp8/codec.hpp"

namespace fp8rl {
namespace {

// Reads element i of an f32 or bf16 array as float.
struct Reader {
  const void* data;
  DType dtype;
  float operator()(int64_t i) const {
    return dtype == DType::f32 ? static_cast<const float*>(data)[i]
                               : bf16_to_float(static_cast<const bf16*>(data)[i]);
  }
};

// Quantizes one element with scale s; updates the statistics when kStats.
template <bool kStats>
inline uint8_t quantize_one(float x, float s, float inv, Fp8Format f, const float* table,
                            QuantStats& st) {
  const float v = x * s;
  const uint8_t code = f == Fp8Format::e4m3 ? float_to_e4m3(v) : float_to_e5m2(v);
  if constexpr (!kStats) return code;
  if (!std::isnan(v) && std::fabs(v) > fp8_max(f)) ++st.saturated;
  if (std::isfinite(x)) {
    const float d = table[code] * inv;
    const double e = static_cast<double>(x) - static_cast<double>(d);
    st.err_sq += e * e;
    st.ref_sq += static_cast<double>(x) * static_cast<double>(x);
    if (x != 0.0f && (code & 0x7f) == 0) ++st.flushed_to_zero;
  }
  return code;
}

// Quantizes the block of x covering rows [r0, r1) × cols [c0, c1). x is [rows, cols] but read
// through `at(r, c)` so the same code serves x and xᵀ. Writes codes[r * out_cols + c].
template <bool kStats, class At>
void quantize_block(const At& at, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t out_cols,
                    uint8_t* codes, float* scale_inv, const QuantOptions& opt, QuantStats& st) {
  // amax of the block; NaN when any element is NaN (the block is then degenerate). Branch-free:
  // comparisons with NaN are false, so NaN is tracked by its own flag.
  float amax = 0.0f;
  bool nan = false;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) {
      const float a = std::fabs(at(r, c));
      nan |= a != a;
      amax = a > amax ? a : amax;
    }
  if (nan) amax = NAN;
  bool degenerate = false;
  const float s = block_scale(amax, opt.format, opt.pow2_scales, &degenerate);
  const float inv = 1.0f / s;
  *scale_inv = inv;
  ++st.blocks;
  st.degenerate_blocks += degenerate;
  st.elements += (r1 - r0) * (c1 - c0);
  const float* table = fp8_table(opt.format);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c)
      codes[r * out_cols + c] = quantize_one<kStats>(at(r, c), s, inv, opt.format, table, st);
}

// Quantizes a [rows, cols] matrix read through at(r, c) into codes/scales with the given
// blocking, in parallel over block rows.
template <class At>
void quantize_matrix(const At& at, int64_t rows, int64_t cols, ScaleBlock block, uint8_t* codes,
                     float* scale_inv, const QuantOptions& opt, QuantStats* stats) {
  const int64_t rb = block == ScaleBlock::row1x128 ? 1 : kBlock;  // rows per block
  const int64_t block_rows = (rows + rb - 1) / rb, block_cols = blocks_of(cols);
  std::vector<QuantStats> partial(static_cast<size_t>(std::max<int64_t>(block_rows, 1)));
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols * rb, 1));
  parallel_for(block_rows, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * rb, r1 = std::min(rows, r0 + rb);
      for (int64_t cb = 0; cb < block_cols; ++cb) {
        const int64_t c0 = cb * kBlock, c1 = std::min(cols, c0 + kBlock);
        float* s = scale_inv + scale_index(block, rows, cols, r0, c0);
        auto& st = partial[static_cast<size_t>(b)];
        if (stats)
          quantize_block<true>(at, r0, r1, c0, c1, cols, codes, s, opt, st);
        else
          quantize_block<false>(at, r0, r1, c0, c1, cols, codes, s, opt, st);
      }
    }
  });
  if (stats) {
    *stats = QuantStats{};
    for (const auto& p : partial) *stats += p;  // fixed order: deterministic sums
  }
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
  const Reader rd{x.data, x.dtype};
  const int64_t cols = x.cols;
  auto at = [&](int64_t r, int64_t c) { return rd(r * cols + c); };
  quantize_matrix(at, x.rows, x.cols, out.block, out.codes, out.scale_inv, opt, stats);
  if (out.block == ScaleBlock::tile128x128) fill_tile_scale_padding(out.scale_inv, x.rows, x.cols);
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
  const Reader rd{x.data, x.dtype};
  const int64_t cols = x.cols;
  auto at = [&](int64_t r, int64_t c) { return rd(r * cols + c); };
  auto at_t = [&](int64_t r, int64_t c) { return rd(c * cols + r); };
  quantize_matrix(at, x.rows, x.cols, ScaleBlock::row1x128, along.codes, along.scale_inv, opt,
                  stats_along);
  quantize_matrix(at_t, x.cols, x.rows, ScaleBlock::row1x128, transposed.codes,
                  transposed.scale_inv, opt, stats_transposed);
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

}  // namespace fp8rl
