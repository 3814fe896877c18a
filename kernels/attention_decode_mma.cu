// attention_cached's decode step on the tensor cores, head dim 128, for an FP8 (E4M3) or a BF16
// KV cache. The FP32 decode kernel (attention_decode.cu) spends ~60 warp instructions a cached
// key on dot products, shuffles and dequantization: on an H200 it read an FP8 cache no faster
// than a BF16 one (17 % and 34 % of the copy bandwidth), so halving the bytes gained nothing.
// Here the query heads of a kv head (up to 8: M of the mma, rows 8-15 idle) meet 16 keys at a
// time in mma.sync m16n8k16 products, for the scores and for p·V; what remains on the CUDA cores
// is the online softmax, the merge and, for FP8, the E4M3 → binary16 conversion (exact, one
// instruction per two codes).
//
// Numbers (the reference is engine/backend/cpu/kv_cache.cpp's attention over the dequantized
// cache). FP8: f16 products; the cache codes enter them as they are, their scales multiply the
// score and the output afterwards; q (BF16) is scaled per head by a power of two 2^e that puts
// its largest magnitude in [2^14, 2^15), where binary16 holds every BF16 value exactly (elements
// more than 2^28 below the head's largest lose bits: nothing measurable in a dot product); p
// enters p·V in binary16 (relative rounding 2^-11, below the BF16 output's 2^-8). BF16: BF16
// products of q and the cache as they are; p enters p·V as two BF16 terms, its rounding and
// what the rounding left (2^-17 together). Products and sums are FP32. So the result agrees
// with the reference to about the output's rounding, not bit for bit.
//
// A CTA = (row, kv head · head batch, split), 4 warps; the split's keys stream through shared
// memory in stages of 64 (K then V rows of the kv head, cp.async, three stages in flight); warp
// w takes keys 16w .. 16w + 15 of a stage: two score tiles of 8 keys (8 k-steps of 16 over the
// head dim each), its running max and sum per head, then p·V into 16 output tiles of 8 columns.
// The warps merge in warp order at the end (deterministic), as in the FP32 kernel.
//
// Layouts relied on (PTX ISA, "Matrix fragments for mma.m16n8k16" with .f16 / .bf16, and
// "ldmatrix"): lane = threadIdx.x % 32, g = lane / 4, c = lane % 4.
//  [A] a0 = (row g, k 2c, 2c+1), a1 = (row g+8, ...), a2 = (row g, k 2c+8, 2c+9), a3 = (row g+8,
//      k 2c+8, 2c+9); [B] b0 = (k 2c, 2c+1, col g), b1 = (k 2c+8, 2c+9, col g); [C] c0, c1 =
//      (row g, cols 2c, 2c+1), c2, c3 = (row g+8, ...).
//  [L] ldmatrix .m8n8.x4.b16: lanes 8i .. 8i+7 give matrix i's 8 row addresses (16 bytes each);
//      a lane's register i holds bytes 4c .. 4c+3 of row g; with .trans, b16 element g of rows
//      2c (low half) and 2c+1 (high half).
// BF16 cache: the usual FlashAttention-2 maps. Scores: k-step s covers d 16s .. 16s+15, B from
// the ldmatrix of granules 2s (b0) and 2s+1 (b1) of 8 keys' rows; p·V: output tile t is d
// 8t .. 8t+7, B from the .trans ldmatrix of granule t of keys 0-7 (b0) and 8-15 (b1).
// FP8 cache (a granule holds 16 codes): the dot product's order over the head dim is free, so
// the k index of the score products is a permutation of d: k-step s, lane c, bytes j = 0..3 of
// its ldmatrix register stand for d = 16s + 4c + j, with k-slots 2c, 2c+1 ↔ j = 0, 1 and
// 2c+8, 2c+9 ↔ j = 2, 3 (q's fragments follow the same map). For p·V, the .trans ldmatrix of
// one granule gives a lane two codes of keys 2c and 2c+1 at d = 2g and 2g+1; a byte permute
// splits them into the B fragment of the tile of even d and that of odd d: output tile
// 2r + t (granule r, parity t) column n is d = 16r + 2n + t.
// Shared rows are swizzled: granule r of key k sits at granule r ^ (k % 8), so the 8 rows of
// every ldmatrix matrix (8 consecutive keys, one granule) hit 8 different banks.
#include "attention_decode_mma.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "cuda_check.hpp"
#include "mma_ptx.cuh"
#include "quantize.cuh"

namespace fp8rl::cuda {
namespace {

using namespace ptx;  // cp.async, ldmatrix, mma.sync (mma_ptx.cuh)

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kD = static_cast<int>(kDecodeMmaHeadDim);
constexpr int kWarpKeys = 16;  // keys of a warp per stage (p·V's k)
constexpr int kStageKeys = static_cast<int>(kDecodeMmaStageKeys);
static_assert(kStageKeys == kWarps * kWarpKeys, "a stage is one 16-key slice per warp");
constexpr int kStages = 3;
constexpr int kRows = 8;         // query heads a CTA serves (the mma's rows 0-7)
constexpr int kSteps = kD / 16;  // k-steps of the scores over the head dim
constexpr int kTiles = kD / 8;   // output tiles of 8 columns

// A cache kind's sizes: bytes of a kv head's cache row, its 16-byte granules, a stage's K (or V)
// block, the dynamic shared memory of kStages stages.
template <bool kFp8>
struct Sizes {
  static constexpr int kRowBytes = kD * (kFp8 ? 1 : 2);
  static constexpr int kGranules = kRowBytes / 16;
  static constexpr int kTensorBytes = kStageKeys * kRowBytes;
  static constexpr int kStageBytes = 2 * kTensorBytes;
  static constexpr size_t kSmem = static_cast<size_t>(kStageBytes) * kStages;
};

// The two E4M3 codes in the low 16 bits of v as binary16 (exact), the lower code low.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t v) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;
}

// lo, hi rounded to binary16 (nearest even), lo in the low half.
__device__ __forceinline__ uint32_t f16x2(float lo, float hi) {
  return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
         static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16;
}

// lo, hi rounded to BF16 (nearest even), lo in the low half; rest: what the rounding left.
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi, float (&rest)[2]) {
  const __nv_bfloat16 l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
  rest[0] = lo - __bfloat162float(l);
  rest[1] = hi - __bfloat162float(h);
  return static_cast<uint32_t>(__bfloat16_as_ushort(l)) |
         static_cast<uint32_t>(__bfloat16_as_ushort(h)) << 16;
}

// Shared byte offset of granule r of key k's row in a K or V block (swizzled, see above).
template <bool kFp8>
__device__ __forceinline__ int row_granule(int k, int r) {
  return k * Sizes<kFp8>::kRowBytes + 16 * (r ^ (k & 7));
}

// Head h of row i's output, value(d) for d < 128, rounded to BF16 into o and quantized into the
// head's 1x128 block of a.codes / a.scale_inv, as quantize of the BF16 o makes it (the lane
// layout of quant::quantize_warp_block: lane l holds d = l, l + 32, l + 64, l + 96).
// Warp-collective.
template <class Value>
__device__ __forceinline__ void store_quantized_head(const DecodeMmaArgs& a, int64_t i, int h,
                                                     int lane, Value value) {
  const int64_t at = (i * a.Hq + h) * kD;
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int d = lane + 32 * j;
    const __nv_bfloat16 b = __float2bfloat16_rn(value(d));
    a.o[at + d] = __bfloat16_as_ushort(b);
    v[j] = __bfloat162float(b);
  }
  uint8_t* codes = a.codes + at;
  float* scale =
      a.scale_inv + scale_index(ScaleBlock::row1x128, a.n, int64_t{a.Hq} * kD, i, int64_t{h} * kD);
  quant::ThreadStats none;
  if (a.e5m2) {
    quant::quantize_warp_block<Fp8Format::e5m2, false>(v, kD, lane, a.pow2, codes, scale, none);
  } else {
    quant::quantize_warp_block<Fp8Format::e4m3, false>(v, kD, lane, a.pow2, codes, scale, none);
  }
}

// kFp8: an E4M3 cache (f16 products, the scales applied afterwards); else a BF16 one.
template <bool kFp8>
__global__ void __launch_bounds__(kThreads) decode_mma_kernel(DecodeMmaArgs a) {
  using Sz = Sizes<kFp8>;
  extern __shared__ __align__(16) unsigned char stages[];
  __shared__ float warp_m[kWarps * kRows];  // each warp's running max and sum per row
  __shared__ float warp_l[kWarps * kRows];
  __shared__ float row_max[kRows];  // the merged max and sum per row
  __shared__ float row_sum[kRows];
  __shared__ float out_acc[kRows * kD];  // the merged, unnormalised output

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, c = lane & 3;
  const int64_t i = blockIdx.x;
  const int group = a.Hq / a.Hkv, batches = (group + kRows - 1) / kRows;
  const int hk = static_cast<int>(blockIdx.y) / batches;
  const int h0 = hk * group + (static_cast<int>(blockIdx.y) - hk * batches) * kRows;
  const int ng = min(kRows, hk * group + group - h0);  // rows of this CTA with a head
  const int z = static_cast<int>(blockIdx.z);
  const int64_t head0 = (i * a.Hq + h0) * kD;

  const KeyRange keys =
      split_keys(a.slot_ids[i], a.lengths[i], a.num_slots, a.max_len, a.splits, z, kStageKeys);
  const int64_t slot = a.slot_ids[i];
  const int kbeg = keys.begin, kend = keys.end;
  if (kbeg >= kend) {  // block-uniform: an invalid row, or a split past the row's keys
    if (a.splits == 1 && a.codes) {  // zeros, quantized
      for (int r = warp; r < ng; r += kWarps)
        store_quantized_head(a, i, h0 + r, lane, [](int) { return 0.0f; });
      return;
    }
    for (int t = static_cast<int>(threadIdx.x); t < ng * kD; t += kThreads) {
      if (a.splits == 1) {
        a.o[head0 + t] = 0;  // BF16 +0
      } else {
        const int64_t at = (i * a.Hq + h0 + t / kD) * a.splits + z;
        if (t % kD == 0) a.part_ml[2 * at] = -INFINITY, a.part_ml[2 * at + 1] = 0.0f;
        a.part_acc[at * kD + t % kD] = 0.0f;
      }
    }
    return;
  }

  // q of head row g (zeros for rows without a head): a0 and a2 of each k-step s. FP8: d
  // 16s+4c+{0,1} and 16s+4c+{2,3} (the order of the ldmatrix bytes), times 2^e; the score's
  // multiplier undoes 2^e and applies the key scale. BF16: d 16s+2c+{0,1} and 16s+2c+{8,9}.
  uint32_t qa[kSteps][2];
  float smul = a.scale;
  if constexpr (kFp8) {
    float qv[kSteps][4];
    float mx = 0.0f;
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned bits = g < ng ? a.q[head0 + g * kD + 16 * s + 4 * c + j] : 0u;
        qv[s][j] = __uint_as_float(bits << 16);
        mx = fmaxf(mx, fabsf(qv[s][j]));
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const int e = mx > 0.0f && mx <= 3.4e38f ? 14 - ilogbf(mx) : 0;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      qa[s][0] = f16x2(ldexpf(qv[s][0], e), ldexpf(qv[s][1], e));
      qa[s][1] = f16x2(ldexpf(qv[s][2], e), ldexpf(qv[s][3], e));
    }
    smul = ldexpf(*a.k_scale_inv * a.scale, -e);
  } else {
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t at = head0 + g * kD + 16 * s + 2 * c + 8 * j;
        qa[s][j] =
            g < ng ? static_cast<uint32_t>(a.q[at]) | static_cast<uint32_t>(a.q[at + 1]) << 16 : 0u;
      }
  }

  // Stage s: keys kbeg + 64s .., K rows then V rows; V rows past the range are zeros (their
  // p is 0, which must not meet a NaN), K rows past it are masked by index.
  const int nst = (kend - kbeg + kStageKeys - 1) / kStageKeys;
  const int64_t row0 = slot * a.max_len;
  const int64_t pos_bytes = a.width * (kFp8 ? 1 : 2);  // a cache position's bytes
  const int64_t col = static_cast<int64_t>(hk) * Sz::kRowBytes;
  auto load_stage = [&](int s) {
    const int key0 = kbeg + s * kStageKeys, nv = min(kStageKeys, kend - key0);
    unsigned char* dst = stages + static_cast<size_t>(s % kStages) * Sz::kStageBytes;
    constexpr int kPerTensor = kStageKeys * Sz::kGranules;
    for (int idx = static_cast<int>(threadIdx.x); idx < 2 * kPerTensor; idx += kThreads) {
      const int which = idx / kPerTensor;
      const int r = idx - which * kPerTensor, key = r / Sz::kGranules, gr = r % Sz::kGranules;
      unsigned char* d = dst + which * Sz::kTensorBytes + row_granule<kFp8>(key, gr);
      if (key < nv)
        cp_async16(
            d, (which ? a.cache_v : a.cache_k) + (row0 + key0 + key) * pos_bytes + col + 16 * gr);
      else if (which)
        *reinterpret_cast<uint4*>(d) = make_uint4(0u, 0u, 0u, 0u);
    }
  };

  float m_run = -INFINITY;    // row g's running max (the same in its four lanes)
  float l_part = 0.0f;        // this lane's share of row g's running sum
  float acc[kTiles][4] = {};  // output tiles (maps above); c2, c3 (rows 8-15) stay 0

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nst) load_stage(s);
    cp_async_commit();  // empty groups keep the count uniform
  }
  const int wk0 = warp * kWarpKeys;  // the warp's first key of a stage
  for (int st = 0; st < nst; ++st) {
    if (st + kStages - 1 < nst) load_stage(st + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // this thread's copies of stage st have landed
    __syncthreads();               // and everyone's

    const unsigned char* kt = stages + static_cast<size_t>(st % kStages) * Sz::kStageBytes;
    const unsigned char* vt = kt + Sz::kTensorBytes;
    const int nv = min(kStageKeys, kend - (kbeg + st * kStageKeys));
    if (wk0 < nv) {  // warp-uniform
      // Scores of keys wk0 + 8u + (2c, 2c+1), u = 0, 1 (row g): two tiles of 8 keys; an
      // ldmatrix.x4 takes granules 4h .. 4h + 3 of the tile's 8 rows.
      float sc[2][4];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        sc[u][0] = sc[u][1] = sc[u][2] = sc[u][3] = 0.0f;
        const int key = wk0 + 8 * u + (lane & 7);
#pragma unroll
        for (int h = 0; h < Sz::kGranules / 4; ++h) {
          uint32_t kr[4];
          ldsm_x4(kr, smem_addr(kt + row_granule<kFp8>(key, 4 * h + (lane >> 3))));
          if constexpr (kFp8) {  // granule = k-step
#pragma unroll
            for (int m = 0; m < 4; ++m) {
              const uint32_t qf[4] = {qa[4 * h + m][0], 0u, qa[4 * h + m][1], 0u};
              mma_f16(sc[u], qf, e4m3x2_to_f16x2(kr[m]), e4m3x2_to_f16x2(kr[m] >> 16));
            }
          } else {  // granules 2s, 2s + 1 = k-step s
#pragma unroll
            for (int m = 0; m < 2; ++m) {
              const uint32_t qf[4] = {qa[2 * h + m][0], 0u, qa[2 * h + m][1], 0u};
              mma_bf16(sc[u], qf, kr[2 * m], kr[2 * m + 1]);
            }
          }
        }
      }
      // Online softmax for row g over the warp's 16 keys (its four lanes hold them).
      float mx = -INFINITY;
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = wk0 + 8 * u + 2 * c + e;
          sc[u][e] = key < nv ? sc[u][e] * smul : -INFINITY;
          mx = fmaxf(mx, sc[u][e]);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run, mx);
      const float alpha = m_run == -INFINITY ? 0.0f : expf(m_run - m_new);
      float p[2][2];
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int e = 0; e < 2; ++e) p[u][e] = sc[u][e] == -INFINITY ? 0.0f : expf(sc[u][e] - m_new);
      l_part = l_part * alpha + ((p[0][0] + p[0][1]) + (p[1][0] + p[1][1]));
      m_run = m_new;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) acc[t][0] *= alpha, acc[t][1] *= alpha;

      // acc += p·V: A = p (row g, keys 2c, 2c+1 of tile 0 and of tile 1); ldmatrix .trans of
      // matrices (keys 0-7, granule r), (keys 8-15, r), (0-7, r+1), (8-15, r+1).
      const int mat = lane >> 3, vkey = wk0 + 8 * (mat & 1) + (lane & 7);
      if constexpr (kFp8) {
        const uint32_t pa[4] = {f16x2(p[0][0], p[0][1]), 0u, f16x2(p[1][0], p[1][1]), 0u};
#pragma unroll
        for (int r = 0; r < Sz::kGranules; r += 2) {
          uint32_t vr[4];
          ldsm_x4_trans(vr, smem_addr(vt + row_granule<kFp8>(vkey, r + (mat >> 1))));
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // bytes: (key 2c, d even), (2c, odd), (2c+1, even), (2c+1, odd) → even pair low,
            // odd pair high.
            const uint32_t k0 = __byte_perm(vr[2 * h], 0u, 0x3120u);
            const uint32_t k8 = __byte_perm(vr[2 * h + 1], 0u, 0x3120u);
            const int t = 2 * (r + h);
            mma_f16(acc[t], pa, e4m3x2_to_f16x2(k0), e4m3x2_to_f16x2(k8));
            mma_f16(acc[t + 1], pa, e4m3x2_to_f16x2(k0 >> 16), e4m3x2_to_f16x2(k8 >> 16));
          }
        }
      } else {
        float rest[2][2];
        const uint32_t ph[4] = {bf16x2(p[0][0], p[0][1], rest[0]), 0u,
                                bf16x2(p[1][0], p[1][1], rest[1]), 0u};
        float unused[2];
        const uint32_t pl[4] = {bf16x2(rest[0][0], rest[0][1], unused), 0u,
                                bf16x2(rest[1][0], rest[1][1], unused), 0u};
#pragma unroll
        for (int r = 0; r < Sz::kGranules; r += 2) {
          uint32_t vr[4];
          ldsm_x4_trans(vr, smem_addr(vt + row_granule<kFp8>(vkey, r + (mat >> 1))));
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            mma_bf16(acc[r + h], ph, vr[2 * h], vr[2 * h + 1]);
            mma_bf16(acc[r + h], pl, vr[2 * h], vr[2 * h + 1]);
          }
        }
      }
    }
    __syncthreads();  // the stage's buffer is reloaded next
  }
  cp_async_wait<0>();  // the trailing groups are empty: nothing is left in flight at the exit

  // Row g's sum over its four lanes; then the warps merge in warp order: M = max_w m_w,
  // l = Σ_w l_w·e^(m_w − M), out = Σ_w acc_w·e^(m_w − M). A warp without keys has m = −inf.
  l_part += __shfl_xor_sync(0xffffffffu, l_part, 1);
  l_part += __shfl_xor_sync(0xffffffffu, l_part, 2);
  if (c == 0) {
    warp_m[warp * kRows + g] = m_run;
    warp_l[warp * kRows + g] = l_part;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, warp_m[w * kRows + g]);
  const float own = m_run == -INFINITY ? 0.0f : expf(m_run - mx);
  if (warp == 0 && c == 0) {
    float l = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (warp_m[w * kRows + g] != -INFINITY)
        l += warp_l[w * kRows + g] * expf(warp_m[w * kRows + g] - mx);
    row_max[g] = mx;
    row_sum[g] = l;
  }
  for (int w = 0; w < kWarps; ++w) {  // block-uniform
    if (warp == w && g < ng) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int d = kFp8 ? 16 * (t >> 1) + 4 * c + 2 * e + (t & 1) : 8 * t + 2 * c + e;
          const float x = acc[t][e] * own;
          float& dst = out_acc[g * kD + d];
          dst = w == 0 ? x : dst + x;
        }
    }
    __syncthreads();
  }

  float vsi = 1.0f;
  if constexpr (kFp8) vsi = *a.v_scale_inv;
  if (a.splits == 1 && a.codes) {  // block-uniform: o and its blocks, a warp per head
    for (int r = warp; r < ng; r += kWarps)
      store_quantized_head(a, i, h0 + r, lane,
                           [&](int d) { return out_acc[r * kD + d] * vsi / row_sum[r]; });
    return;
  }
  for (int t = static_cast<int>(threadIdx.x); t < ng * kD; t += kThreads) {
    const int r = t / kD;
    if (a.splits == 1) {
      a.o[head0 + t] = __bfloat16_as_ushort(__float2bfloat16_rn(out_acc[t] * vsi / row_sum[r]));
    } else {
      const int64_t at = (i * a.Hq + h0 + r) * a.splits + z;
      if (t % kD == 0) a.part_ml[2 * at] = row_max[r], a.part_ml[2 * at + 1] = row_sum[r];
      a.part_acc[at * kD + t % kD] = out_acc[t] * vsi;
    }
  }
}

// One launch of the cache kind's kernel. Static and dynamic shared memory together pass 48 KB:
// the opt-in attribute, once per device (not in every step of a graph capture; as
// attention_decode.cu).
template <bool kFp8>
void launch(const DecodeMmaArgs& a, dim3 grid, int device, cudaStream_t stream) {
  static uint64_t attribute_set = 0;  // bit d: set on device d
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (attribute_set & bit) == 0) {
    FP8RL_CUDA_CHECK(cudaFuncSetAttribute(decode_mma_kernel<kFp8>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(Sizes<kFp8>::kSmem)));
    attribute_set |= bit;
  }
  decode_mma_kernel<kFp8><<<grid, kThreads, Sizes<kFp8>::kSmem, stream>>>(a);
  check_launch("decode_mma_kernel");
}

}  // namespace

std::string decode_mma_problem(const DecodeMmaArgs& a) {
  if (a.Hkv <= 0 || a.Hq <= 0 || a.Hq % a.Hkv != 0)
    return "query heads " + std::to_string(a.Hq) + " not a multiple of kv heads " +
           std::to_string(a.Hkv);
  if (a.width != a.Hkv * kD)
    return "head dim " + std::to_string(a.width / a.Hkv) + " (the kernel takes " +
           std::to_string(kD) + ")";
  if (a.fp8 && (!a.k_scale_inv || !a.v_scale_inv)) return "an FP8 cache without its scales";
  if (a.codes && !a.scale_inv) return "o's FP8 codes without their scales";
  if (reinterpret_cast<uintptr_t>(a.cache_k) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(a.cache_v) % 16 != 0)
    return "the caches are not 16-byte aligned";
  if (a.splits < 1 || a.splits > (a.max_len + kStageKeys - 1) / kStageKeys)
    return "splits " + std::to_string(a.splits) + " outside 1.." +
           std::to_string((a.max_len + kStageKeys - 1) / kStageKeys);
  return "";
}

void attention_decode_mma(const DecodeMmaArgs& a, int device, cudaStream_t stream) {
  const std::string problem = decode_mma_problem(a);
  check(problem.empty(), "attention_decode_mma: " + problem);
  if (a.n == 0) return;
  const int group = a.Hq / a.Hkv, batches = (group + kRows - 1) / kRows;
  check(a.n <= INT32_MAX && static_cast<int64_t>(a.Hkv) * batches <= 65535 && a.splits <= 65535,
        "attention_decode_mma: grid too large");
  const dim3 grid(static_cast<unsigned>(a.n), static_cast<unsigned>(a.Hkv * batches),
                  static_cast<unsigned>(a.splits));
  if (a.fp8)
    launch<true>(a, grid, device, stream);
  else
    launch<false>(a, grid, device, stream);
}

}  // namespace fp8rl::cuda
