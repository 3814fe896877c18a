// KV cache for generation: kv_write, attention_cached and the amax used to calibrate the FP8
// cache scales (mirrors engine/backend/cpu/kv_cache.cpp).
//
// Cache layout (Backend::kv_write): K and V are [num_slots·max_len, width] with width = Hkv·D,
// row (slot, pos) = slot·max_len + pos; values are f32 or bf16, or E4M3 codes with one
// dequantization scale per tensor (x ≈ code · scale_inv, the scale read from device memory).
//
// Numerics against the reference:
//  - amax is exact (a maximum does not depend on the order); NaN when any element is NaN.
//  - kv_write is bit-exact: values are rounded once to the cache dtype; FP8 codes are
//    cvt.rn.satfinite(x · s) with s = 1/scale_inv and both operations IEEE (no contraction).
//  - attention_cached dequantizes each cached element exactly as the reference (code → float,
//    times scale_inv, one rounding), then agrees with it up to FP32 summation order and expf.
//
// Device-side index checks (the ids are in device memory, checking them first would cost a
// synchronisation): kv_write skips rows whose slot or position lies outside the cache (the
// reference throws); attention_cached writes zeros for rows whose slot lies outside the cache
// or whose length is not in 1..max_len (the reference throws).
//
// attention_cached: one CTA per (query row, kv head, batch of up to 8 of the kv head's query
// heads), so each cached K/V row is read once for all query heads of its group. The CTA's warps
// take 32-key tiles round-robin; per tile a warp computes the scores (subgroups of L lanes per
// key, one vector chunk of the head dim per lane, reduced with xor-shuffles), updates its
// running max and sum once for the whole tile, then accumulates p·V. At the end the warps'
// partial results are merged in warp order (deterministic) through shared memory.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;      // amax and kv_write blocks
constexpr int kMaxWarps = 8;       // attention_cached CTAs: 4 or 8 warps
constexpr int kTile = 32;          // keys per warp tile (one per lane in the softmax step)
constexpr int kMaxHeadDim = 256;   // as attention_forward
constexpr int kMaxGroupBatch = 8;  // query heads per CTA
constexpr int kLaneElems = 8;      // head-dim elements per lane and key (all layouts)

enum class CacheKind { f32, bf16, fp8 };

// --- amax

// Largest |x| as float bits: for non-negative floats the bit patterns order like the values,
// and every NaN pattern lies above +inf, so an unsigned maximum is exact and keeps NaN.
__device__ __forceinline__ unsigned warp_max_bits(unsigned v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = max(v, __shfl_xor_sync(cuda::kFullMask, v, off));
  return v;
}

template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const void* __restrict__ x, int64_t n, unsigned* __restrict__ out) {
  __shared__ unsigned partial[kThreads / 32];
  unsigned m = 0;
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const unsigned bits = kBf16 ? static_cast<unsigned>(static_cast<const uint16_t*>(x)[i]) << 16
                                : __float_as_uint(static_cast<const float*>(x)[i]);
    m = max(m, bits & 0x7fffffffu);
  });
  m = warp_max_bits(m);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = max(m, partial[w]);
    if (m != 0) atomicMax(out, m);  // one atomic per block
  }
}

// --- element conversions

// E4M3 code → float, exact (every E4M3 value is a half value).
__device__ __forceinline__ float e4m3_value(uint8_t code) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
}

// Two E4M3 codes (first in the low byte) → floats, exact.
__device__ __forceinline__ float2 e4m3x2_values(unsigned pair) {
  return __half22float2(
      __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3)));
}

// --- kv_write

// Cache element dst = x rounded to the cache dtype; FP8: code of x·s (s = 1/scale_inv).
template <CacheKind K>
__device__ __forceinline__ void store_cache(void* cache, int64_t dst, float x, float s) {
  if constexpr (K == CacheKind::fp8) {
    static_cast<uint8_t*>(cache)[dst] =
        static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(x, s), __NV_SATFINITE, __NV_E4M3));
  } else {
    Out{cache, K == CacheKind::bf16}.store(dst, x);
  }
}

struct KvWriteArgs {
  In k, v;
  const int32_t* slot_ids;
  const int32_t* positions;
  void* cache_k;
  void* cache_v;
  const float* k_scale_inv;  // fp8 only
  const float* v_scale_inv;
  int64_t n, num_slots, max_len, width;
};

// One block per row (grid-stride over rows), threads over the width.
template <CacheKind K>
__global__ void __launch_bounds__(kThreads) kv_write_kernel(KvWriteArgs a) {
  float ks = 1.0f, vs = 1.0f;
  if constexpr (K == CacheKind::fp8) {
    ks = __fdiv_rn(1.0f, *a.k_scale_inv);  // the reference's 1.0f / scale_inv
    vs = __fdiv_rn(1.0f, *a.v_scale_inv);
  }
  for (int64_t i = blockIdx.x; i < a.n; i += gridDim.x) {  // block-uniform
    const int64_t slot = a.slot_ids[i], pos = a.positions[i];
    if (slot < 0 || slot >= a.num_slots || pos < 0 || pos >= a.max_len) continue;
    const int64_t dst = (slot * a.max_len + pos) * a.width, src = i * a.width;
    for (int64_t e = threadIdx.x; e < a.width; e += kThreads) {
      store_cache<K>(a.cache_k, dst + e, a.k[src + e], ks);
      store_cache<K>(a.cache_v, dst + e, a.v[src + e], vs);
    }
  }
}

// --- attention_cached

// kV consecutive cache elements of one row: Raw is what one load moves (16 bytes for f32 and
// bf16, 8 for fp8, or one element), expand() turns it into floats, dequantized with
// __fmul_rn(value, scale_inv) for fp8 like the reference.
template <CacheKind K, int kV>
struct Chunk;

template <>
struct Chunk<CacheKind::f32, 4> {
  using Raw = float4;
  static __device__ __forceinline__ Raw load(const void* base, int64_t i) {
    return __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(base) + i));
  }
  static __device__ __forceinline__ Raw zero() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
  static __device__ __forceinline__ void expand(const Raw& r, float, float* x) {
    x[0] = r.x;
    x[1] = r.y;
    x[2] = r.z;
    x[3] = r.w;
  }
};

template <>
struct Chunk<CacheKind::bf16, 8> {
  using Raw = uint4;
  static __device__ __forceinline__ Raw load(const void* base, int64_t i) {
    return __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + i));
  }
  static __device__ __forceinline__ Raw zero() { return make_uint4(0u, 0u, 0u, 0u); }
  static __device__ __forceinline__ void expand(const Raw& r, float, float* x) {
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // element 2j is the low half (little endian)
      x[2 * j] = __uint_as_float(w[j] << 16);
      x[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  }
};

template <>
struct Chunk<CacheKind::fp8, 8> {
  using Raw = uint2;
  static __device__ __forceinline__ Raw load(const void* base, int64_t i) {
    return __ldg(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(base) + i));
  }
  static __device__ __forceinline__ Raw zero() { return make_uint2(0u, 0u); }
  static __device__ __forceinline__ void expand(const Raw& r, float scale_inv, float* x) {
    const unsigned w[2] = {r.x, r.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // codes 2j, 2j + 1: bytes 2j, 2j + 1 (little endian)
      const float2 f = e4m3x2_values((w[j >> 1] >> (16 * (j & 1))) & 0xffffu);
      x[2 * j] = __fmul_rn(f.x, scale_inv);
      x[2 * j + 1] = __fmul_rn(f.y, scale_inv);
    }
  }
};

// One element: Raw is the element itself (float, bf16 bits or an E4M3 code).
template <CacheKind K>
struct Chunk<K, 1> {
  using Raw =
      std::conditional_t<K == CacheKind::f32, float,
                         std::conditional_t<K == CacheKind::bf16, unsigned short, unsigned char>>;
  static __device__ __forceinline__ Raw load(const void* base, int64_t i) {
    return __ldg(static_cast<const Raw*>(base) + i);
  }
  static __device__ __forceinline__ Raw zero() { return Raw{}; }
  static __device__ __forceinline__ void expand(Raw r, float scale_inv, float* x) {
    if constexpr (K == CacheKind::f32) {
      x[0] = r;
    } else if constexpr (K == CacheKind::bf16) {
      x[0] = __uint_as_float(static_cast<unsigned>(r) << 16);
    } else {
      x[0] = __fmul_rn(e4m3_value(r), scale_inv);
    }
  }
};

// Elements per vector load for a cache dtype (when the head dim and pointers allow it).
constexpr int vector_elems(CacheKind k) {
  return k == CacheKind::f32 ? 4 : 8;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(cuda::kFullMask, v, off));
  return v;
}

struct CachedArgs {
  In q;
  Out o;
  const void* cache_k;
  const void* cache_v;
  const float* k_scale_inv;  // fp8 only
  const float* v_scale_inv;
  const int32_t* slot_ids;
  const int32_t* lengths;
  int64_t num_slots, max_len, width;
  int Hq, group, batches, D;
  int lanes;  // L: lanes per key, a power of two ≥ the chunks per row (D / kV), at most 32
  float scale;
};

// Grid (n, Hkv·batches), blockDim 32·warps (warps ≤ kMaxWarps). CTA (i, hk·batches + b) computes
// query heads hk·group + b·kG + g, g < min(kG, group − b·kG), of row i.
//
// Lane layout: lane = sub·L + li. Subgroup `sub` takes key j ≡ sub (mod 32/L) of an iteration;
// lane li holds the chunks ci = li + L·c (c < kNc, ci < D/kV), i.e. elements ci·kV + t, of the
// query heads (q) and of its partial output (acc). Every subgroup shares the warp's running max,
// so the partial outputs of the subgroups add up without rescaling.
template <CacheKind K, int kV, int kG>
__global__ void __launch_bounds__(kMaxWarps * 32) attention_cached_kernel(CachedArgs a) {
  using C = Chunk<K, kV>;
  constexpr int kNc = kLaneElems / kV;                 // chunk slots per lane
  constexpr int kU = kNc == 1 ? 4 : kNc == 2 ? 2 : 1;  // key loads in flight per lane
  __shared__ float probs[kMaxWarps][kG][kTile];        // a warp's scores, then probabilities
  __shared__ float warp_m[kMaxWarps][kG], warp_l[kMaxWarps][kG];
  __shared__ float out_acc[kG][kMaxHeadDim];

  const int warps = static_cast<int>(blockDim.x >> 5);
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int64_t i = blockIdx.x;
  const int hk = static_cast<int>(blockIdx.y) / a.batches;
  const int hb = static_cast<int>(blockIdx.y) - hk * a.batches;
  const int h0 = hk * a.group + hb * kG;
  const int ng = min(kG, a.group - hb * kG);
  const int D = a.D;
  // (row i, head h0) in q and o; the CTA's heads are contiguous from there.
  const int64_t head0 = i * a.Hq * D + static_cast<int64_t>(h0) * D;

  const int64_t slot = a.slot_ids[i];
  const int len = a.lengths[i];
  if (slot < 0 || slot >= a.num_slots || len < 1 || len > a.max_len) {  // block-uniform
    for (int t = threadIdx.x; t < ng * D; t += blockDim.x) a.o.store(head0 + t, 0.0f);
    return;
  }

  const int L = a.lanes, kpi = 32 / L;  // keys per warp iteration
  const int sub = lane / L, li = lane - sub * L;
  const int chunks = D / kV;
  float ksi = 1.0f, vsi = 1.0f;
  if constexpr (K == CacheKind::fp8) {
    ksi = *a.k_scale_inv;
    vsi = *a.v_scale_inv;
  }

  float q[kG][kLaneElems], acc[kG][kLaneElems], m_run[kG], l_run[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    m_run[g] = -INFINITY;
    l_run[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < kNc; ++c) {
      const int ci = li + L * c;
#pragma unroll
      for (int t = 0; t < kV; ++t) {
        q[g][c * kV + t] =
            g < ng && ci < chunks ? a.q[head0 + static_cast<int64_t>(g) * D + ci * kV + t] : 0.0f;
        acc[g][c * kV + t] = 0.0f;
      }
    }
  }

  const int64_t row0 = slot * a.max_len, col0 = static_cast<int64_t>(hk) * D;
  const int tiles = (len + kTile - 1) / kTile;
  float* p_tile = &probs[warp][0][0];  // [kG][kTile]

  // Raw chunks of keys j = jb + u·kpi + sub (u < kU) of the tile from key j0 (nv keys) in cache K
  // or V: lane li's chunks ci = li + L·c (c < kNc), zero past the tile's keys or the row's chunks.
  auto load_cache_rows = [&](const void* cache, int j0, int nv, int jb,
                             typename C::Raw(&raw)[kU][kNc]) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int j = jb + u * kpi + sub;
#pragma unroll
      for (int c = 0; c < kNc; ++c) {
        const int ci = li + L * c;
        raw[u][c] = j < nv && ci < chunks
                        ? C::load(cache, (row0 + j0 + j) * a.width + col0 + ci * kV)
                        : C::zero();
      }
    }
  };

  for (int tile = warp; tile < tiles; tile += warps) {  // warp-uniform
    const int j0 = tile * kTile, nv = min(kTile, len - j0);

    // Scores of the tile's keys: s = (q·k)·scale into p_tile.
    for (int jb = 0; jb < nv; jb += kpi * kU) {  // warp-uniform (the shuffles need all lanes)
      typename C::Raw raw[kU][kNc];
      load_cache_rows(a.cache_k, j0, nv, jb, raw);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        float kx[kLaneElems];
#pragma unroll
        for (int c = 0; c < kNc; ++c) C::expand(raw[u][c], ksi, &kx[c * kV]);
        const int j = jb + u * kpi + sub;
#pragma unroll
        for (int g = 0; g < kG; ++g) {
          if (g >= ng) continue;  // uniform
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < kLaneElems; ++e) dot += q[g][e] * kx[e];
          for (int off = L >> 1; off > 0; off >>= 1)
            dot += __shfl_xor_sync(cuda::kFullMask, dot, off);
          if (li == 0 && j < nv) p_tile[g * kTile + j] = dot * a.scale;
        }
      }
    }
    __syncwarp();

    // Online softmax, once per tile: lane j owns key j.
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      if (g >= ng) continue;  // uniform
      const float s = lane < nv ? p_tile[g * kTile + lane] : -INFINITY;
      const float m_new = fmaxf(m_run[g], warp_max(s));
      const float alpha = expf(m_run[g] - m_new);  // 0 on the warp's first tile
      const float p = lane < nv ? expf(s - m_new) : 0.0f;
      p_tile[g * kTile + lane] = p;
      l_run[g] = l_run[g] * alpha + cuda::warp_sum(p);
      m_run[g] = m_new;
#pragma unroll
      for (int e = 0; e < kLaneElems; ++e) acc[g][e] *= alpha;
    }
    __syncwarp();

    // acc += p·v over the tile's keys.
    for (int jb = 0; jb < nv; jb += kpi * kU) {
      typename C::Raw raw[kU][kNc];
      load_cache_rows(a.cache_v, j0, nv, jb, raw);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int j = jb + u * kpi + sub;
        if (j >= nv) continue;
        float vx[kLaneElems];
#pragma unroll
        for (int c = 0; c < kNc; ++c) C::expand(raw[u][c], vsi, &vx[c * kV]);
#pragma unroll
        for (int g = 0; g < kG; ++g) {
          if (g >= ng) continue;
          const float p = p_tile[g * kTile + j];
#pragma unroll
          for (int e = 0; e < kLaneElems; ++e) acc[g][e] += p * vx[e];
        }
      }
    }
    __syncwarp();  // the next tile overwrites p_tile
  }

  // The subgroups' partial outputs (same chunks at lanes li, li + L, ...) add up.
  for (int off = L; off < 32; off <<= 1) {  // warp-uniform
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      if (g >= ng) continue;
#pragma unroll
      for (int e = 0; e < kLaneElems; ++e)
        acc[g][e] += __shfl_xor_sync(cuda::kFullMask, acc[g][e], off);
    }
  }

  // Merge the warps: o = Σ_w acc_w·e^(m_w − M) / Σ_w l_w·e^(m_w − M), M = max_w m_w. A warp
  // without tiles has m = −inf, l = 0 and contributes nothing; warp 0 always has a tile.
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      warp_m[warp][g] = m_run[g];
      warp_l[warp][g] = l_run[g];
    }
  }
  __syncthreads();
  const int active = min(warps, tiles);
  float own[kG], total[kG];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    float mx = -INFINITY;
    for (int w = 0; w < active; ++w) mx = fmaxf(mx, warp_m[w][g]);
    float l = 0.0f;
    for (int w = 0; w < active; ++w) l += warp_l[w][g] * expf(warp_m[w][g] - mx);
    own[g] = expf(m_run[g] - mx);
    total[g] = l;
  }
  for (int w = 0; w < active; ++w) {  // block-uniform; warp order keeps the sum deterministic
    if (warp == w && sub == 0) {
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        if (g >= ng) continue;
#pragma unroll
        for (int c = 0; c < kNc; ++c) {
          const int ci = li + L * c;
          if (ci >= chunks) continue;
#pragma unroll
          for (int t = 0; t < kV; ++t) {
            const float x = acc[g][c * kV + t] * own[g];
            float& dst = out_acc[g][ci * kV + t];
            dst = w == 0 ? x : dst + x;
          }
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g >= ng) continue;
    for (int d = threadIdx.x; d < D; d += blockDim.x)
      a.o.store(head0 + static_cast<int64_t>(g) * D + d, out_acc[g][d] / total[g]);
  }
}

// --- host side

void check_cache(const KvCacheView& c, const char* op) {
  check(c.k && c.v && c.num_slots > 0 && c.max_len > 0 && c.width > 0,
        std::string(op) + ": empty KV cache");
  check(c.dtype == DType::f32 || c.dtype == DType::bf16 || c.dtype == DType::fp8,
        std::string(op) + ": unknown KV cache dtype");
  check(c.dtype != DType::fp8 || (c.k_scale_inv && c.v_scale_inv),
        std::string(op) + ": an fp8 KV cache needs its K and V scales");
}

CacheKind kind_of(DType t) {
  return t == DType::f32 ? CacheKind::f32 : t == DType::bf16 ? CacheKind::bf16 : CacheKind::fp8;
}

template <CacheKind K, int kV>
void launch_cached_group(const CachedArgs& a, int kg, dim3 grid, int threads, cudaStream_t s) {
  switch (kg) {
    case 1:
      attention_cached_kernel<K, kV, 1><<<grid, threads, 0, s>>>(a);
      break;
    case 2:
      attention_cached_kernel<K, kV, 2><<<grid, threads, 0, s>>>(a);
      break;
    case 4:
      attention_cached_kernel<K, kV, 4><<<grid, threads, 0, s>>>(a);
      break;
    default:
      attention_cached_kernel<K, kV, kMaxGroupBatch><<<grid, threads, 0, s>>>(a);
      break;
  }
  cuda::check_launch("attention_cached_kernel");
}

template <CacheKind K>
void launch_cached(const CachedArgs& a, bool vec, int kg, dim3 grid, int threads, cudaStream_t s) {
  if (vec)
    launch_cached_group<K, vector_elems(K)>(a, kg, grid, threads, s);
  else
    launch_cached_group<K, 1>(a, kg, grid, threads, s);
}

}  // namespace

float CudaBackend::amax(const Matrix& x) {
  const OpScope scope(*this, "amax");
  count_host_sync();
  cuda::check_activation("amax", "x", x);
  const int64_t n = x.rows * x.cols;
  if (n == 0) return 0.0f;
  // The 32-bit result lives in the result slot of the sum_squares reduction buffer.
  auto* bits_dev = reinterpret_cast<unsigned*>(reduce_dev_ + kReduceBlocks);
  amax_into(x, reinterpret_cast<float*>(bits_dev));
  FP8RL_CUDA_CHECK(
      cudaMemcpyAsync(reduce_host_, bits_dev, sizeof(unsigned), cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  unsigned bits = 0;
  std::memcpy(&bits, reduce_host_, sizeof bits);
  return bits > 0x7f800000u ? std::numeric_limits<float>::quiet_NaN() : std::bit_cast<float>(bits);
}

void CudaBackend::amax_into(const Matrix& x, float* out) {
  const OpScope scope(*this, "amax_into");
  cuda::check_activation("amax_into", "x", x);
  cuda::check_data("amax_into", "out", out);
  make_current();
  // The kernels take the max of |x|'s bits as unsigned (a NaN's are above +inf's), so the
  // result's bits read as a float are amax, or a NaN.
  auto* bits_dev = reinterpret_cast<unsigned*>(out);
  FP8RL_CUDA_CHECK(cudaMemsetAsync(bits_dev, 0, sizeof(unsigned), stream_));
  const int64_t n = x.rows * x.cols;
  if (n == 0) return;
  cuda::check_data("amax_into", "x", x.data);
  const unsigned blocks = cuda::grid_for(n, kThreads, int64_t{4} * std::max(sm_count_, 1));
  if (x.dtype == DType::bf16)
    amax_kernel<true><<<blocks, kThreads, 0, stream_>>>(x.data, n, bits_dev);
  else
    amax_kernel<false><<<blocks, kThreads, 0, stream_>>>(x.data, n, bits_dev);
  cuda::check_launch("amax_kernel");
}

void CudaBackend::kv_write(const Matrix& k, const Matrix& v, const int32_t* slot_ids,
                           const int32_t* positions, const KvCacheView& cache) {
  const OpScope scope(*this, "kv_write");
  const char* op = "kv_write";
  check_cache(cache, op);
  cuda::check_activation(op, "k", k, k.rows, cache.width);
  cuda::check_activation(op, "v", v, k.rows, cache.width);
  const int64_t n = k.rows;
  if (n == 0) return;
  cuda::check_data(op, "k", k.data);
  cuda::check_data(op, "v", v.data);
  cuda::check_data(op, "slot_ids", slot_ids);
  cuda::check_data(op, "positions", positions);
  make_current();
  const KvWriteArgs a{
      cuda::in_of(k),    cuda::in_of(v),    slot_ids, positions,       cache.k,       cache.v,
      cache.k_scale_inv, cache.v_scale_inv, n,        cache.num_slots, cache.max_len, cache.width};
  const unsigned blocks = cuda::grid_for(n, 1, int64_t{32} * std::max(sm_count_, 1));
  switch (kind_of(cache.dtype)) {
    case CacheKind::f32:
      kv_write_kernel<CacheKind::f32><<<blocks, kThreads, 0, stream_>>>(a);
      break;
    case CacheKind::bf16:
      kv_write_kernel<CacheKind::bf16><<<blocks, kThreads, 0, stream_>>>(a);
      break;
    case CacheKind::fp8:
      kv_write_kernel<CacheKind::fp8><<<blocks, kThreads, 0, stream_>>>(a);
      break;
  }
  cuda::check_launch("kv_write_kernel");
}

void CudaBackend::check_attention_cached(const char* op, const Matrix& q, const KvCacheView& cache,
                                         const int32_t* slot_ids, const int32_t* lengths,
                                         int64_t Hq, int64_t Hkv, const Matrix& o) const {
  const std::string p = std::string(op) + ": ";
  check_cache(cache, op);
  check(Hq > 0 && Hkv > 0 && Hq % Hkv == 0, p + "query heads " + std::to_string(Hq) +
                                                " must be a positive multiple of kv heads " +
                                                std::to_string(Hkv));
  check(cache.width % Hkv == 0, p + "cache width " + std::to_string(cache.width) +
                                    " is not a multiple of " + std::to_string(Hkv) + " kv heads");
  const int64_t D = cache.width / Hkv, group = Hq / Hkv;
  check(D <= kMaxHeadDim, p + "head dim " + std::to_string(D) + " (width " +
                              std::to_string(cache.width) + ", " + std::to_string(Hkv) +
                              " kv heads) above " + std::to_string(kMaxHeadDim));
  cuda::check_activation(op, "q", q, q.rows, Hq * D);
  cuda::check_activation(op, "o", o, q.rows, Hq * D);
  const int64_t n = q.rows;
  check(n <= INT_MAX, p + std::to_string(n) + " query rows: at most " + std::to_string(INT_MAX));
  // Query heads per CTA: 1, 2, 4 or 8 (a group of 5..7 takes one CTA with idle head slots
  // rather than reading the cache twice).
  const int64_t kg = group > 4 ? kMaxGroupBatch : group > 2 ? 4 : group;
  const int64_t batches = (group + kg - 1) / kg;
  check(Hkv * batches <= 65535, p + std::to_string(Hq) + " query heads: too many for one launch");
  if (n == 0) return;
  cuda::check_data(op, "q", q.data);
  cuda::check_data(op, "o", o.data);
  cuda::check_data(op, "slot_ids", slot_ids);
  cuda::check_data(op, "lengths", lengths);
  // Each CTA reads its heads of q before it writes them to o, so exact aliasing is fine.
  check(o.data != q.data || o.dtype == q.dtype, p + "o aliases q with another dtype");
}

void CudaBackend::attention_cached_fp8(const Matrix& q, const KvCacheView& cache,
                                       const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                                       int64_t Hkv, const Matrix& o, const Fp8Operands& out,
                                       const QuantOptions& opt) {
  const char* op = "attention_cached_fp8";
  if (options_.attention_kernel == 3 && opt.stats_sum == nullptr && q.rows > 0 &&
      out.transposed.codes == nullptr) {
    const OpScope scope(*this, op);
    check_attention_cached(op, q, cache, slot_ids, lengths, Hq, Hkv, o);
    check_quantize_operands(o, out.along);
    check(out.along.block == ScaleBlock::row1x128 && out.along.format == opt.format,
          std::string(op) + ": `along` must be 1x128 in the options' format");
    check(out.along.codes && out.along.scale_inv, std::string(op) + ": null `along` data");
    make_current();
    if (attention_decode_mma(q, cache, slot_ids, lengths, Hq, Hkv, o, &out.along, &opt)) return;
  }
  Backend::attention_cached_fp8(q, cache, slot_ids, lengths, Hq, Hkv, o, out, opt);
}

void CudaBackend::attention_cached(const Matrix& q, const KvCacheView& cache,
                                   const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                                   int64_t Hkv, const Matrix& o) {
  const OpScope scope(*this, "attention_cached");
  check_attention_cached("attention_cached", q, cache, slot_ids, lengths, Hq, Hkv, o);
  const int64_t n = q.rows;
  if (n == 0) return;
  const int64_t D = cache.width / Hkv, group = Hq / Hkv;
  const int64_t kg = group > 4 ? kMaxGroupBatch : group > 2 ? 4 : group;
  const int64_t batches = (group + kg - 1) / kg;
  make_current();
  if (options_.attention_kernel != 2 &&
      attention_decode(q, cache, slot_ids, lengths, Hq, Hkv, o))  // attention_decode.cu
    return;

  const CacheKind kind = kind_of(cache.dtype);
  const int kv = vector_elems(kind);
  const uint32_t vec_bytes = static_cast<uint32_t>(kv * dtype_size(cache.dtype));
  const bool vec = D % kv == 0 && cuda::pointer_alignment(cache.k) >= vec_bytes &&
                   cuda::pointer_alignment(cache.v) >= vec_bytes;
  const int64_t chunks = vec ? D / kv : D;
  int lanes = 1;
  while (lanes < chunks && lanes < 32) lanes <<= 1;

  const CachedArgs a{.q = cuda::in_of(q),
                     .o = cuda::out_of(o),
                     .cache_k = cache.k,
                     .cache_v = cache.v,
                     .k_scale_inv = cache.k_scale_inv,
                     .v_scale_inv = cache.v_scale_inv,
                     .slot_ids = slot_ids,
                     .lengths = lengths,
                     .num_slots = cache.num_slots,
                     .max_len = cache.max_len,
                     .width = cache.width,
                     .Hq = static_cast<int>(Hq),
                     .group = static_cast<int>(group),
                     .batches = static_cast<int>(batches),
                     .D = static_cast<int>(D),
                     .lanes = lanes,
                     .scale = 1.0f / std::sqrt(static_cast<float>(D))};

  // 8 warps when the grid alone cannot fill the device (long decode contexts, few sequences),
  // else 4; never more warps than the longest possible prefix has tiles.
  const int64_t ctas = n * Hkv * batches;
  int64_t warps = ctas >= int64_t{2} * sm_count_ ? 4 : kMaxWarps;
  warps = std::min<int64_t>(warps, (cache.max_len + kTile - 1) / kTile);
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(Hkv * batches));
  const int threads = static_cast<int>(warps) * 32;
  const int g = static_cast<int>(kg);
  switch (kind) {
    case CacheKind::f32:
      launch_cached<CacheKind::f32>(a, vec, g, grid, threads, stream_);
      break;
    case CacheKind::bf16:
      launch_cached<CacheKind::bf16>(a, vec, g, grid, threads, stream_);
      break;
    case CacheKind::fp8:
      launch_cached<CacheKind::fp8>(a, vec, g, grid, threads, stream_);
      break;
  }
}

}  // namespace fp8rl
