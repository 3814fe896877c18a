// attention_cached's decode kernel (CudaBackend::attention_decode, called by attention_cached in
// kv_cache.cu): flash-decoding over the KV cache. The numbers are attention_cached's (CPU
// reference: engine/backend/cpu/kv_cache.cpp): every cached element dequantized exactly as
// there (code → float, times scale_inv, one rounding), FP32 arithmetic, agreeing up to FP32
// summation order and expf.
//
// A decode step reads every cached key and value of every sequence once: the op is bound by
// that stream. The first kernel (kv_cache.cu) runs one CTA per (row, kv head, batch of query
// heads) whose warps load a key tile, score it, then load its values — few bytes in flight, and
// with few sequences fewer CTAs than SMs. Here:
//  - The sequence is split: CTA (row, kv head · head batches, split z) takes keys
//    [z·c, min(len, (z + 1)·c)) with c = ceil(len / splits) rounded up to the 32-key stage, from
//    the row's own length (in device memory), so every split of a short sequence still has keys
//    while lengths grow during decode. The host picks splits so that the grid has about
//    attention_ctas_per_sm CTAs per SM (one split when rows · kv heads already fill it).
//  - Its 4 warps stream the range through shared memory in stages of 32 keys (K and V rows of
//    the kv head, cp.async 16-byte copies, 2 or 3 stages in flight), each warp scoring 8 keys of
//    a stage for all query heads of the batch (lane layout of the first kernel: L lanes per key,
//    8 head-dim elements per lane, reduced with xor-shuffles), updating its running max and sum
//    once per stage, and accumulating p·V.
//  - The warps merge in warp order (deterministic). With one split the CTA writes o; with more it
//    writes its (max, sum, unnormalised output) and a second kernel combines the splits of each
//    (row, head) in split order: o = Σ acc_z e^(m_z − M) / Σ l_z e^(m_z − M).
// Rows whose slot lies outside the cache or whose length is not in 1..max_len get zeros, as in
// the first kernel.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "attention_decode_mma.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "mma_ptx.cuh"
#include "ops_common.cuh"
#include "quantize.cuh"

namespace fp8rl {
namespace {

using namespace cuda::ptx;  // cp.async (mma_ptx.cuh)

using cuda::In, cuda::Out;

enum class Kind { f32, bf16, fp8 };

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kStageKeys = 32;                  // keys per stage
constexpr int kWarpKeys = kStageKeys / kWarps;  // keys a warp scores per stage
constexpr int kMaxHeadDim = 256;
constexpr int kMaxRowBytes = 512;  // D · element size, at most
constexpr int kMaxSplits = 64;
constexpr size_t kThreeStageBytes = size_t{16} << 10;  // stages this small get a third buffer
constexpr int kMaxGroupBatch = 8;                      // query heads per CTA (as kv_cache.cu)

struct DecodeArgs {
  In q;
  Out o;
  const unsigned char* cache_k;
  const unsigned char* cache_v;
  const float* k_scale_inv;  // fp8 only
  const float* v_scale_inv;
  const int32_t* slot_ids;
  const int32_t* lengths;
  float2* part_ml;                    // [n][Hq][splits] (max, sum) when splits > 1
  float* part_acc;                    // [n][Hq][splits][D]
  int64_t num_slots, max_len, width;  // width in elements (Hkv · D)
  int Hq, group, batches, D, lanes, splits;
  float scale;
};

// Element size of a cache kind.
__host__ __device__ constexpr int elem_bytes(Kind k) {
  return k == Kind::f32 ? 4 : k == Kind::bf16 ? 2 : 1;
}

// 8 consecutive cache elements from shared memory (16-byte aligned for f32 and bf16, 8 for fp8)
// as floats, dequantized with __fmul_rn(value, scale_inv) for fp8 like the reference.
template <Kind K>
__device__ __forceinline__ void load8(const unsigned char* p, float scale_inv, float (&x)[8]) {
  if constexpr (K == Kind::f32) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 16);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else if constexpr (K == Kind::bf16) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // element 2j is the low half (little endian)
      x[2 * j] = __uint_as_float(w[j] << 16);
      x[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  } else {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const unsigned w[2] = {u.x, u.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // codes 2j, 2j + 1: bytes 2j, 2j + 1 (little endian)
      const unsigned pair = (w[j >> 1] >> (16 * (j & 1))) & 0xffffu;
      const float2 f = __half22float2(
          __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3)));
      x[2 * j] = __fmul_rn(f.x, scale_inv);
      x[2 * j + 1] = __fmul_rn(f.y, scale_inv);
    }
  }
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(cuda::kFullMask, v, off));
  return v;
}

// Grid (n, Hkv · batches, splits), kThreads threads, dynamic shared memory: kStages stages of
// [K rows, V rows] × kStageKeys × D · element size. CTA (i, hk · batches + b, z) serves query
// heads hk·group + b·kG + g, g < min(kG, group − b·kG), of row i, over the keys of split z.
//
// Lane layout: lane = sub·L + li; lane li holds head-dim elements 8·li .. 8·li + 7 (li < D / 8)
// of the query heads (q) and of its partial output (acc); subgroup sub scores key
// u·(32 / L) + sub of the warp's keys in step u. All subgroups share the warp's running max, so
// their partial outputs add up without rescaling.
template <Kind K, int kG, int kStages>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(DecodeArgs a) {
  constexpr int kE = elem_bytes(K);
  extern __shared__ __align__(16) unsigned char stages[];
  __shared__ float probs[kWarps][kG][kWarpKeys];
  __shared__ float warp_m[kWarps][kG], warp_l[kWarps][kG];
  __shared__ float out_acc[kG][kMaxHeadDim];

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int64_t i = blockIdx.x;
  const int hk = static_cast<int>(blockIdx.y) / a.batches;
  const int hb = static_cast<int>(blockIdx.y) - hk * a.batches;
  const int h0 = hk * a.group + hb * kG;
  const int ng = min(kG, a.group - hb * kG);
  const int z = static_cast<int>(blockIdx.z);
  const int D = a.D;
  const int64_t head0 = i * a.Hq * D + static_cast<int64_t>(h0) * D;

  const cuda::KeyRange keys = cuda::split_keys(a.slot_ids[i], a.lengths[i], a.num_slots, a.max_len,
                                               a.splits, z, kStageKeys);
  const int64_t slot = a.slot_ids[i];
  const int kbeg = keys.begin, kend = keys.end;
  if (kbeg >= kend) {  // block-uniform: an invalid row, or a split past the row's keys
    if (a.splits == 1) {
      for (int t = threadIdx.x; t < ng * D; t += kThreads) a.o.store(head0 + t, 0.0f);
    } else {
      for (int g = 0; g < ng; ++g) {
        const int64_t at = (i * a.Hq + h0 + g) * a.splits + z;
        if (threadIdx.x == 0) a.part_ml[at] = make_float2(-INFINITY, 0.0f);
        for (int d = threadIdx.x; d < D; d += kThreads) a.part_acc[at * D + d] = 0.0f;
      }
    }
    return;
  }

  const int L = a.lanes, kpi = 32 / L;  // keys per warp step
  const int sub = lane / L, li = lane - sub * L;
  const bool lane_on = li < D / 8;
  const int row_bytes = D * kE;
  const int stage_bytes = 2 * kStageKeys * row_bytes;
  float ksi = 1.0f, vsi = 1.0f;
  if constexpr (K == Kind::fp8) {
    ksi = *a.k_scale_inv;
    vsi = *a.v_scale_inv;
  }

  float q[kG][8], acc[kG][8], m_run[kG], l_run[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    m_run[g] = -INFINITY;
    l_run[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      q[g][e] = g < ng && lane_on ? a.q[head0 + static_cast<int64_t>(g) * D + 8 * li + e] : 0.0f;
      acc[g][e] = 0.0f;
    }
  }

  // Stage s: keys kbeg + 32s .. (at most 32, fewer at the end), K rows then V rows.
  const int nst = (kend - kbeg + kStageKeys - 1) / kStageKeys;
  const int64_t row0 = slot * a.max_len;
  const int64_t col_bytes = static_cast<int64_t>(hk) * row_bytes;
  const int64_t stride_bytes = a.width * kE;
  const int granules = row_bytes / 16;
  auto load_stage = [&](int s) {
    const int key0 = kbeg + s * kStageKeys, nv = min(kStageKeys, kend - key0);
    unsigned char* dst = stages + static_cast<size_t>(s % kStages) * stage_bytes;
    const int per_tensor = nv * granules;
    for (int idx = threadIdx.x; idx < 2 * per_tensor; idx += kThreads) {
      const int which = idx >= per_tensor ? 1 : 0;
      const int r = idx - which * per_tensor, key = r / granules, c = r - key * granules;
      const unsigned char* src =
          (which ? a.cache_v : a.cache_k) + (row0 + key0 + key) * stride_bytes + col_bytes + 16 * c;
      cp_async16(dst + (which * kStageKeys + key) * row_bytes + 16 * c, src);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nst) load_stage(s);
    cp_async_commit();  // empty groups keep the count uniform
  }
  for (int st = 0; st < nst; ++st) {
    if (st + kStages - 1 < nst) load_stage(st + kStages - 1);
    cp_async_commit();
    cp_async_wait<kStages - 1>();  // this thread's copies of stage st have landed
    __syncthreads();               // and everyone's

    const unsigned char* kt = stages + static_cast<size_t>(st % kStages) * stage_bytes;
    const unsigned char* vt = kt + kStageKeys * row_bytes;
    const int nv = min(kStageKeys, kend - (kbeg + st * kStageKeys));
    float* p_w = &probs[warp][0][0];  // [kG][kWarpKeys]

    // Scores of the warp's keys j = kWarpKeys·warp + jw, jw = u·kpi + sub.
    for (int u = 0; u * kpi < kWarpKeys; ++u) {  // warp-uniform (the shuffles need all lanes)
      const int jw = u * kpi + sub, j = kWarpKeys * warp + jw;
      const bool key_on = jw < kWarpKeys && j < nv;
      float kx[8];
      if (lane_on && key_on) {
        load8<K>(kt + j * row_bytes + 8 * li * kE, ksi, kx);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) kx[e] = 0.0f;
      }
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        if (g >= ng) continue;  // uniform
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += q[g][e] * kx[e];
        for (int off = L >> 1; off > 0; off >>= 1)
          dot += __shfl_xor_sync(cuda::kFullMask, dot, off);
        if (li == 0 && jw < kWarpKeys) p_w[g * kWarpKeys + jw] = key_on ? dot * a.scale : -INFINITY;
      }
    }
    __syncwarp();

    // Online softmax, once per stage: lane jw < kWarpKeys owns key jw.
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      if (g >= ng) continue;  // uniform
      const float s = lane < kWarpKeys ? p_w[g * kWarpKeys + lane] : -INFINITY;
      const float m_new = fmaxf(m_run[g], warp_max(s));
      if (m_new == -INFINITY) continue;            // no key of this warp so far (uniform)
      const float alpha = expf(m_run[g] - m_new);  // 0 on the warp's first keys
      const float p = lane < kWarpKeys ? expf(s - m_new) : 0.0f;
      if (lane < kWarpKeys) p_w[g * kWarpKeys + lane] = p;
      l_run[g] = l_run[g] * alpha + cuda::warp_sum(p);
      m_run[g] = m_new;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] *= alpha;
    }
    __syncwarp();

    // acc += p·v over the warp's keys.
    for (int u = 0; u * kpi < kWarpKeys; ++u) {
      const int jw = u * kpi + sub, j = kWarpKeys * warp + jw;
      if (!(lane_on && jw < kWarpKeys && j < nv)) continue;
      float vx[8];
      load8<K>(vt + j * row_bytes + 8 * li * kE, vsi, vx);
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        if (g >= ng) continue;
        const float p = p_w[g * kWarpKeys + jw];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] += p * vx[e];
      }
    }
    __syncthreads();  // the stage's buffer is reloaded next
  }

  // The subgroups' partial outputs (same elements at lanes li, li + L, ...) add up.
  for (int off = L; off < 32; off <<= 1) {  // warp-uniform
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      if (g >= ng) continue;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(cuda::kFullMask, acc[g][e], off);
    }
  }

  // Merge the warps in warp order: M = max_w m_w, l = Σ_w l_w·e^(m_w − M), out = Σ_w acc_w·
  // e^(m_w − M). A warp without keys has m = −inf and contributes nothing.
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      warp_m[warp][g] = m_run[g];
      warp_l[warp][g] = l_run[g];
    }
  }
  __syncthreads();
  float mx[kG], total[kG], own[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    float m = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, warp_m[w][g]);
    float l = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (warp_m[w][g] != -INFINITY) l += warp_l[w][g] * expf(warp_m[w][g] - m);
    mx[g] = m;
    total[g] = l;
    own[g] = m_run[g] == -INFINITY ? 0.0f : expf(m_run[g] - m);
  }
  for (int w = 0; w < kWarps; ++w) {  // block-uniform; warp order keeps the sum deterministic
    if (warp == w && sub == 0 && lane_on) {
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        if (g >= ng) continue;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float x = acc[g][e] * own[g];
          float& dst = out_acc[g][8 * li + e];
          dst = w == 0 ? x : dst + x;
        }
      }
    }
    __syncthreads();
  }
  if (a.splits == 1) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      if (g >= ng) continue;
      for (int d = threadIdx.x; d < D; d += kThreads)
        a.o.store(head0 + static_cast<int64_t>(g) * D + d, out_acc[g][d] / total[g]);
    }
    return;
  }
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g >= ng) continue;
    const int64_t at = (i * a.Hq + h0 + g) * a.splits + z;
    if (threadIdx.x == 0) a.part_ml[at] = make_float2(mx[g], total[g]);
    for (int d = threadIdx.x; d < D; d += kThreads) a.part_acc[at * D + d] = out_acc[g][d];
  }
}

// Where the combine kernel also quantizes o (head dim 128: a (row, head) pair is one 1x128
// block): codes [rows, cols] and 1/s per block (row1x128), as quantize of the BF16 o makes
// them. codes null: o only.
struct CombineQuant {
  uint8_t* codes = nullptr;
  float* scale_inv = nullptr;
  int64_t rows = 0, cols = 0;
  int Hq = 1;
  bool pow2 = false;
};

// One warp per (row, query head): the splits combined in split order; with q.codes (F: its
// format) the pair's block quantized as well (lane l holds d = l + 32j, as
// quant::quantize_warp_block takes them).
template <Fp8Format F>
__global__ void __launch_bounds__(kThreads)
    decode_attention_combine_kernel(const float2* __restrict__ ml, const float* __restrict__ acc,
                                    int64_t pairs, int splits, int D, Out o, CombineQuant q) {
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (pair >= pairs) return;  // warp-uniform
  const int64_t base = pair * splits;
  float m = -INFINITY;
  for (int z = 0; z < splits; ++z) m = fmaxf(m, ml[base + z].x);
  float l = 0.0f;
  for (int z = 0; z < splits; ++z) {
    const float2 p = ml[base + z];
    if (p.x != -INFINITY) l += p.y * expf(p.x - m);
  }
  auto value = [&](int d) {
    float v = 0.0f;
    for (int z = 0; z < splits; ++z) {
      const float mz = ml[base + z].x;
      if (mz != -INFINITY) v += acc[(base + z) * D + d] * expf(mz - m);
    }
    // No keys at all (an invalid row): zeros, as the first kernel writes.
    return l == 0.0f ? 0.0f : v / l;
  };
  if (q.codes == nullptr) {
    for (int d = lane; d < D; d += 32) o.store(pair * D + d, value(d));
    return;
  }
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[j] = o.round(value(lane + 32 * j));
    o.store(pair * D + lane + 32 * j, v[j]);
  }
  const int64_t row = pair / q.Hq, col = (pair % q.Hq) * kBlock;
  quant::ThreadStats none;
  quant::quantize_warp_block<F, false>(
      v, static_cast<int>(kBlock), lane, q.pow2, q.codes + row * q.cols + col,
      q.scale_inv + scale_index(ScaleBlock::row1x128, q.rows, q.cols, row, col), none);
}

// Sequence splits of a decode launch of `ctas` CTAs before splitting: `option` when set, else
// enough for ctas_per_sm CTAs per SM; at most kMaxSplits and one per stage of the cache.
int64_t decode_splits(int64_t option, int64_t ctas_per_sm, int sm_count, int64_t ctas,
                      int64_t max_len, int64_t stage_keys) {
  int64_t splits = option;
  if (splits == 0) {
    const int64_t target = ctas_per_sm * std::max(sm_count, 1);
    splits = ctas >= target ? 1 : (target + ctas - 1) / ctas;
  }
  return std::clamp<int64_t>(
      splits, 1, std::min<int64_t>(kMaxSplits, (max_len + stage_keys - 1) / stage_keys));
}

// o from the splits' partial results: one warp per (row, query head); with q.codes (D = 128)
// o's blocks quantized in format f too.
void combine_splits(const float2* ml, const float* acc, int64_t pairs, int splits, int D, Out o,
                    cudaStream_t s, const CombineQuant& q = {}, Fp8Format f = Fp8Format::e4m3) {
  const unsigned blocks = static_cast<unsigned>((pairs + kWarps - 1) / kWarps);
  if (f == Fp8Format::e5m2) {
    decode_attention_combine_kernel<Fp8Format::e5m2>
        <<<blocks, kThreads, 0, s>>>(ml, acc, pairs, splits, D, o, q);
  } else {
    decode_attention_combine_kernel<Fp8Format::e4m3>
        <<<blocks, kThreads, 0, s>>>(ml, acc, pairs, splits, D, o, q);
  }
  cuda::check_launch("decode_attention_combine_kernel");
}

// Launches one instantiation. Static and dynamic shared memory together above 48 KB need the
// attribute (once per device): it is set for the largest dynamic size before the first launch
// whatever this launch's size, since the kernel's static arrays count too (found on an H200:
// a 40 KB dynamic request with the static arrays failed as an invalid argument).
template <Kind K, int kG, int kStages>
void launch_one(const DecodeArgs& a, dim3 grid, size_t smem, int device, cudaStream_t s) {
  static uint64_t attribute_set = 0;  // bit d: set on device d
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (attribute_set & bit) == 0) {
    FP8RL_CUDA_CHECK(cudaFuncSetAttribute(decode_attention_kernel<K, kG, kStages>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          2 * kStageKeys * kMaxRowBytes * kStages));
    attribute_set |= bit;
  }
  decode_attention_kernel<K, kG, kStages><<<grid, kThreads, smem, s>>>(a);
  cuda::check_launch("decode_attention_kernel");
}

template <Kind K, int kG>
void launch_stages(const DecodeArgs& a, int stages, dim3 grid, size_t smem, int device,
                   cudaStream_t s) {
  if (stages == 3)
    launch_one<K, kG, 3>(a, grid, smem, device, s);
  else
    launch_one<K, kG, 2>(a, grid, smem, device, s);
}

template <Kind K>
void launch_kind(const DecodeArgs& a, int kg, int stages, dim3 grid, size_t smem, int device,
                 cudaStream_t s) {
  switch (kg) {
    case 1:
      launch_stages<K, 1>(a, stages, grid, smem, device, s);
      break;
    case 2:
      launch_stages<K, 2>(a, stages, grid, smem, device, s);
      break;
    case 4:
      launch_stages<K, 4>(a, stages, grid, smem, device, s);
      break;
    default:
      launch_stages<K, kMaxGroupBatch>(a, stages, grid, smem, device, s);
      break;
  }
}

}  // namespace

bool CudaBackend::attention_decode(const Matrix& q, const KvCacheView& cache,
                                   const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                                   int64_t Hkv, const Matrix& o) {
  // attention_cached has checked the operands and the head counts.
  const int64_t D = cache.width / Hkv, group = Hq / Hkv, n = q.rows;
  const int E = static_cast<int>(dtype_size(cache.dtype));
  if (D > kMaxHeadDim || D % 8 != 0 || (D * E) % 16 != 0 || D * E > kMaxRowBytes ||
      cuda::pointer_alignment(cache.k) < 16 || cuda::pointer_alignment(cache.v) < 16 ||
      cache.max_len > INT_MAX)
    return false;
  if (options_.attention_kernel == 3 &&
      attention_decode_mma(q, cache, slot_ids, lengths, Hq, Hkv, o))
    return true;
  const int64_t kg = group > 4 ? kMaxGroupBatch : group > 2 ? 4 : group;
  const int64_t batches = (group + kg - 1) / kg;
  int lanes = 1;
  while (lanes < D / 8) lanes <<= 1;

  const int64_t splits = decode_splits(options_.attention_splits, options_.attention_ctas_per_sm,
                                       sm_count_, n * Hkv * batches, cache.max_len, kStageKeys);

  const size_t stage_bytes = static_cast<size_t>(2 * kStageKeys * D * E);
  const int stages = stage_bytes <= kThreeStageBytes ? 3 : 2;
  DecodeArgs a{};
  a.q = cuda::in_of(q);
  a.o = cuda::out_of(o);
  a.cache_k = static_cast<const unsigned char*>(cache.k);
  a.cache_v = static_cast<const unsigned char*>(cache.v);
  a.k_scale_inv = cache.k_scale_inv;
  a.v_scale_inv = cache.v_scale_inv;
  a.slot_ids = slot_ids;
  a.lengths = lengths;
  a.num_slots = cache.num_slots;
  a.max_len = cache.max_len;
  a.width = cache.width;
  a.Hq = static_cast<int>(Hq);
  a.group = static_cast<int>(group);
  a.batches = static_cast<int>(batches);
  a.D = static_cast<int>(D);
  a.lanes = lanes;
  a.splits = static_cast<int>(splits);
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  if (splits > 1) {
    const size_t ml_bytes = static_cast<size_t>(n * Hq * splits) * sizeof(float2);
    const size_t ml_round = (ml_bytes + 255) / 256 * 256;
    auto* base = static_cast<char*>(
        scratch(ml_round + static_cast<size_t>(n * Hq * splits * D) * sizeof(float)));
    a.part_ml = reinterpret_cast<float2*>(base);
    a.part_acc = reinterpret_cast<float*>(base + ml_round);
  }
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(Hkv * batches),
                  static_cast<unsigned>(splits));
  const size_t smem = stage_bytes * stages;
  const int g = static_cast<int>(kg);
  switch (cache.dtype) {
    case DType::f32:
      launch_kind<Kind::f32>(a, g, stages, grid, smem, device_, stream_);
      break;
    case DType::bf16:
      launch_kind<Kind::bf16>(a, g, stages, grid, smem, device_, stream_);
      break;
    case DType::fp8:
      launch_kind<Kind::fp8>(a, g, stages, grid, smem, device_, stream_);
      break;
  }
  if (splits > 1) combine_splits(a.part_ml, a.part_acc, n * Hq, a.splits, a.D, a.o, stream_);
  return true;
}

bool CudaBackend::attention_decode_mma(const Matrix& q, const KvCacheView& cache,
                                       const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                                       int64_t Hkv, const Matrix& o, const Fp8Matrix* fp8,
                                       const QuantOptions* opt) {
  const int64_t n = q.rows, group = Hq / Hkv;
  if ((cache.dtype != DType::fp8 && cache.dtype != DType::bf16) || q.dtype != DType::bf16 ||
      o.dtype != DType::bf16 || cache.width != Hkv * cuda::kDecodeMmaHeadDim ||
      cache.max_len > INT_MAX)
    return false;
  cuda::DecodeMmaArgs m;
  m.fp8 = cache.dtype == DType::fp8;
  m.q = static_cast<const uint16_t*>(q.data);
  m.o = static_cast<uint16_t*>(o.data);
  m.cache_k = static_cast<const uint8_t*>(cache.k);
  m.cache_v = static_cast<const uint8_t*>(cache.v);
  m.k_scale_inv = cache.k_scale_inv;
  m.v_scale_inv = cache.v_scale_inv;
  m.slot_ids = slot_ids;
  m.lengths = lengths;
  m.n = n;
  m.num_slots = cache.num_slots;
  m.max_len = cache.max_len;
  m.width = cache.width;
  m.Hq = static_cast<int>(Hq);
  m.Hkv = static_cast<int>(Hkv);
  m.scale = 1.0f / std::sqrt(static_cast<float>(cuda::kDecodeMmaHeadDim));
  // CTAs: rows × kv heads × batches of 8 query heads.
  m.splits = static_cast<int>(
      decode_splits(options_.attention_splits, options_.attention_ctas_per_sm, sm_count_,
                    n * Hkv * ((group + 7) / 8), cache.max_len, cuda::kDecodeMmaStageKeys));
  if (!cuda::decode_mma_problem(m).empty()) return false;
  CombineQuant cq;
  if (fp8) {  // o's blocks (a head each) quantized where o is written
    m.codes = fp8->codes;
    m.scale_inv = fp8->scale_inv;
    m.e5m2 = opt->format == Fp8Format::e5m2;
    m.pow2 = opt->pow2_scales;
    cq = {fp8->codes,           fp8->scale_inv,  n, Hq * cuda::kDecodeMmaHeadDim,
          static_cast<int>(Hq), opt->pow2_scales};
  }
  if (m.splits > 1) {
    const int64_t parts = n * Hq * m.splits, D = cuda::kDecodeMmaHeadDim;
    const size_t ml_round = (static_cast<size_t>(parts) * sizeof(float2) + 255) / 256 * 256;
    auto* base = static_cast<char*>(scratch(ml_round + static_cast<size_t>(parts * D) * 4));
    m.part_ml = reinterpret_cast<float*>(base);
    m.part_acc = reinterpret_cast<float*>(base + ml_round);
  }
  cuda::attention_decode_mma(m, device_, stream_);
  if (m.splits > 1)
    combine_splits(reinterpret_cast<const float2*>(m.part_ml), m.part_acc, n * Hq, m.splits,
                   static_cast<int>(cuda::kDecodeMmaHeadDim), cuda::out_of(o), stream_, cq,
                   fp8 ? opt->format : Fp8Format::e4m3);
  return true;
}

}  // namespace fp8rl
