// FP8 formats and the block-scaling rules shared by the CPU reference and the CUDA kernels.
// Everything here is host+device code so both backends compute scales with the same
// instructions (bit-identical results).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FP8RL_HD __host__ __device__ __forceinline__
#else
#define FP8RL_HD inline
#endif

namespace fp8rl {

enum class Fp8Format : uint8_t { e4m3, e5m2 };

// Largest finite value: 448 for E4M3, 57344 for E5M2.
FP8RL_HD float fp8_max(Fp8Format f) {
  return f == Fp8Format::e4m3 ? 448.0f : 57344.0f;
}

inline const char* fp8_format_name(Fp8Format f) {
  return f == Fp8Format::e4m3 ? "e4m3" : "e5m2";
}

// Block size of the recipe: 1x128 for activations/gradients, 128x128 for weights.
inline constexpr int64_t kBlock = 128;

// The quantization scale of a block: q = fp8(x * s) and x ≈ q * (1/s).
// s = max/amax (current amax, no history). amax 0, inf or NaN, or an s that is not finite,
// gives s = 1 ("degenerate" block, counted by the caller). pow2 rounds s down to a power of
// two by clearing the mantissa, which is exact and identical on host and device.
FP8RL_HD float block_scale(float amax, Fp8Format f, bool pow2, bool* degenerate) {
  float s = 1.0f;
  bool bad = !(amax > 0.0f) || !(amax <= 3.4028234663852886e38f);  // 0, NaN, inf
  if (!bad) {
    s = fp8_max(f) / amax;
    if (!(s <= 3.4028234663852886e38f)) {
      bad = true;
      s = 1.0f;
    }
  }
  if (bad) s = 1.0f;
  if (pow2) {
    uint32_t u;
    memcpy(&u, &s, 4);
    u &= 0xff800000u;  // s is a positive normal float here; keep sign and exponent
    memcpy(&s, &u, 4);
  }
  if (degenerate) *degenerate = bad;
  return s;
}

// Number of 128-blocks covering n elements.
FP8RL_HD int64_t blocks_of(int64_t n) {
  return (n + kBlock - 1) / kBlock;
}

// Scale layouts: the ones cuBLASLt reads, used by every backend so scales move without a
// re-layout. For a [rows, cols] matrix whose contiguous dimension is cols:
//  - row1x128 (cuBLASLt VEC128_32F): block (r, cb) at s[cb * rows + r] — rows contiguous.
//  - tile128x128 (cuBLASLt BLK128x128_32F): tile (rb, cb) at s[rb * L4 + cb], where
//    L4 = blocks_of(cols) rounded up to a multiple of 4 (cuBLASLt requires the padding). Every
//    backend writes 1.0 into the padding entries (cb ≥ blocks_of(cols)): nothing documents
//    that cuBLASLt never reads them, and fresh device memory may hold NaN bits.
enum class ScaleBlock : uint8_t { row1x128, tile128x128 };

inline const char* scale_block_name(ScaleBlock b) {
  return b == ScaleBlock::row1x128 ? "1x128" : "128x128";
}

FP8RL_HD int64_t tile_scale_stride(int64_t cols) {
  return (blocks_of(cols) + 3) / 4 * 4;
}

// Number of floats in the scale array of a [rows, cols] matrix.
FP8RL_HD int64_t scale_count(ScaleBlock b, int64_t rows, int64_t cols) {
  return b == ScaleBlock::row1x128 ? blocks_of(cols) * rows
                                   : blocks_of(rows) * tile_scale_stride(cols);
}

// Index in the scale array of the block holding element (r, c).
FP8RL_HD int64_t scale_index(ScaleBlock b, int64_t rows, int64_t cols, int64_t r, int64_t c) {
  return b == ScaleBlock::row1x128 ? (c / kBlock) * rows + r
                                   : (r / kBlock) * tile_scale_stride(cols) + c / kBlock;
}

// The bin of a scale's log2 in a histogram with one bin per power of two from 2^lo to 2^hi:
// 0 underflow, 1 + floor(log2 v) − lo, hi − lo + 1 overflow; read off the float's exponent bits,
// so exact for every float (v ≤ 0, NaN and subnormals fall under, +inf over) and the same on
// host and device. The FP8 telemetry's scale histograms count 1/s this way. lo < hi.
FP8RL_HD int64_t scale_log2_bin(float v, int lo, int hi) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  const uint32_t exp = (bits >> 23) & 0xffu;
  const int64_t over = static_cast<int64_t>(hi - lo) + 1;
  if ((bits >> 31) != 0u || exp == 0u) return 0;
  if (exp == 0xffu) return (bits & 0x7fffffu) != 0u ? 0 : over;
  const int e = static_cast<int>(exp) - 127;  // floor(log2 v)
  if (e < lo) return 0;
  if (e >= hi) return over;
  return static_cast<int64_t>(e - lo) + 1;
}

}  // namespace fp8rl
