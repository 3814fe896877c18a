// Multi-head latent attention (DeepSeek-V3; mirrors engine/backend/cpu/mla.cpp): column copies,
// rotary embedding on a column range, causal attention over the per-head no-RoPE keys and the
// shared RoPE key (forward, backward), the latent cache's write and the absorbed-form attention
// over it.
//
// Shapes (Backend's MLA section): q [M, heads·(nope + rope)], kv [M, heads·(nope + v)] (each
// head's no-RoPE key, then its value), k_rope [M, rope], o [M, heads·v], lse [B, heads, T].
//
// Numerics against the reference: copy_columns and mla_cache_write are bit-exact (one rounding
// to the output dtype; FP8 codes cvt.rn.satfinite(x · (1/scale_inv)) as kv_write); rope_columns
// takes the reference's angles (rope_inv_freq in FP32, sincosf with full range reduction) and
// spells its products with _rn intrinsics; the attention kernels compute in FP32 with every
// dot product over features ascending as the reference, and differ from it by the order of
// their block reductions and expf: agreement up to FP32 rounding.
//
// Kernels, all deterministic (no atomics; reductions in a fixed order):
//  - forward: one CTA per query row (sequence, head, position): its scores against the keys
//    j ≤ t in shared memory, the block's max and sum, then each value feature summed over keys.
//  - backward: one CTA per query row for dq (and D = dO·O, kept); one CTA per key row for its
//    dk and dv, recomputing each query's probability from lse; then the shared RoPE key's
//    gradient summed over the heads in head order.
//  - mla_attention_cached: one CTA per (query row, head): q_lat = W_UKᵀ·q_nope, the scores over
//    the cached rows, the softmax, Σ p·latent, then W_UV times it.
// Shared memory holds a row's scores (T or max_len floats): contexts up to about 50,000 tokens.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <climits>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// Shared memory a CTA may take (H100: 227 KB opt-in; the rest of the kernel's needs are small).
constexpr size_t kMaxSmem = 200 * 1024;

__device__ __forceinline__ float block_max(float v, float* smem) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(cuda::kFullMask, v, off));
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = smem[0];
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, smem[w]);
  __syncthreads();
  return m;
}

// --- copy_columns, rope_columns

__global__ void __launch_bounds__(kThreads)
    copy_columns_kernel(In x, int64_t x_cols, int64_t x_col, Out out, int64_t out_cols,
                        int64_t out_col, int64_t rows, int64_t cols) {
  cuda::for_each_index<kThreads>(rows * cols, [&](int64_t i) {
    const int64_t r = i / cols, c = i - r * cols;
    out.store(r * out_cols + out_col + c, x[r * x_cols + x_col + c]);
  });
}

// One CTA per row (grid-stride), a thread per (head, pair); each element is read and written by
// one thread, so the update in place is race-free.
__global__ void __launch_bounds__(kThreads)
    rope_columns_kernel(Out x, int64_t M, int64_t cols, int64_t head_width, int64_t first, int half,
                        int pairs, const int32_t* __restrict__ pos, Rope rope, bool inverse) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const float p = static_cast<float>(pos[m]);
    for (int j = threadIdx.x; j < pairs; j += kThreads) {
      const int head = j / half, i = j - head * half;
      float angle = p * rope_inv_freq(rope, i, 2 * half);
      if (inverse) angle = -angle;
      float s, c;
      sincosf(angle, &s, &c);
      c = __fmul_rn(c, rope.attention_factor);
      s = __fmul_rn(s, rope.attention_factor);
      const int64_t base = m * cols + static_cast<int64_t>(head) * head_width + first;
      const int64_t a = base + (rope.interleaved ? 2 * i : i);
      const int64_t b = base + (rope.interleaved ? 2 * i + 1 : i + half);
      const float x1 = x.load(a), x2 = x.load(b);
      x.store(a, __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
      x.store(b, __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
    }
  }
}

// --- training attention

struct MlaArgs {
  In q, kv, k_rope;
  int64_t B, T, H, nope, rope, v;
  float scale;
  __device__ __forceinline__ int64_t qk() const { return nope + rope; }
  __device__ __forceinline__ int64_t kvw() const { return nope + v; }
  // Feature e (< nope + rope) of the key of row `row` (b·T + j) for head h.
  __device__ __forceinline__ float key(int64_t row, int64_t h, int64_t e) const {
    return e < nope ? kv[row * H * kvw() + h * kvw() + e] : k_rope[row * rope + e - nope];
  }
  __device__ __forceinline__ float value(int64_t row, int64_t h, int64_t e) const {
    return kv[row * H * kvw() + h * kvw() + nope + e];
  }
  // scale · q(row_q, h) · key(row_k, h), features ascending.
  __device__ __forceinline__ float score(int64_t row_q, int64_t h, int64_t row_k) const {
    const int64_t dqk = qk();
    float d = 0.0f;
    for (int64_t e = 0; e < dqk; ++e)
      d = __fadd_rn(d, __fmul_rn(q[row_q * H * dqk + h * dqk + e], key(row_k, h, e)));
    return __fmul_rn(d, scale);
  }
};

// CTA (b, h, t): o and lse of query t. smem: scores [T], kWarps floats.
__global__ void __launch_bounds__(kThreads) mla_forward_kernel(MlaArgs a, Out o, float* lse) {
  extern __shared__ float smem[];
  float* s = smem;
  float* red = smem + a.T;
  const int64_t t = blockIdx.x % a.T, bh = blockIdx.x / a.T, h = bh % a.H, b = bh / a.H;
  const int64_t row = b * a.T + t;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j <= t; j += kThreads) {
    s[j] = a.score(row, h, b * a.T + j);
    mx = fmaxf(mx, s[j]);
  }
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j <= t; j += kThreads) sum += expf(s[j] - mx);
  sum = cuda::block_sum(sum, red);
  const float l = mx + logf(sum);
  if (threadIdx.x == 0) lse[bh * a.T + t] = l;
  for (int64_t e = threadIdx.x; e < a.v; e += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j <= t; ++j)
      acc = __fadd_rn(acc, __fmul_rn(expf(s[j] - l), a.value(b * a.T + j, h, e)));
    o.store(row * a.H * a.v + h * a.v + e, acc);
  }
}

// CTA (b, h, t): dq of query t; D = Σ dO·O kept for the key pass. smem: ds [T], kWarps floats.
__global__ void __launch_bounds__(kThreads)
    mla_backward_q_kernel(MlaArgs a, In dout, In o, const float* lse, float* dsum, Out dq) {
  extern __shared__ float smem[];
  float* ds = smem;
  float* red = smem + a.T;
  const int64_t t = blockIdx.x % a.T, bh = blockIdx.x / a.T, h = bh % a.H, b = bh / a.H;
  const int64_t row = b * a.T + t, orow = row * a.H * a.v + h * a.v;
  float di = 0.0f;
  for (int64_t e = threadIdx.x; e < a.v; e += kThreads) di += dout[orow + e] * o[orow + e];
  di = cuda::block_sum(di, red);
  if (threadIdx.x == 0) dsum[bh * a.T + t] = di;
  const float l = lse[bh * a.T + t];
  for (int64_t j = threadIdx.x; j <= t; j += kThreads) {
    const int64_t krow = b * a.T + j;
    float dp = 0.0f;
    for (int64_t e = 0; e < a.v; ++e)
      dp = __fadd_rn(dp, __fmul_rn(dout[orow + e], a.value(krow, h, e)));
    const float p = expf(a.score(row, h, krow) - l);
    ds[j] = __fmul_rn(a.scale, __fmul_rn(p, __fsub_rn(dp, di)));
  }
  __syncthreads();
  const int64_t dqk = a.qk();
  for (int64_t e = threadIdx.x; e < dqk; e += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j <= t; ++j)
      acc = __fadd_rn(acc, __fmul_rn(ds[j], a.key(b * a.T + j, h, e)));
    dq.store(row * a.H * dqk + h * dqk + e, acc);
  }
}

// CTA (b, h, j): dk and dv of key j over the queries t ≥ j. dk's RoPE part goes to this head's
// row of `part` (summed over heads afterwards). smem: p [T], ds [T].
__global__ void __launch_bounds__(kThreads)
    mla_backward_kv_kernel(MlaArgs a, In dout, const float* lse, const float* dsum, Out dkv,
                           float* part) {
  extern __shared__ float smem[];
  float* p = smem;
  float* ds = smem + a.T;
  const int64_t j = blockIdx.x % a.T, bh = blockIdx.x / a.T, h = bh % a.H, b = bh / a.H;
  const int64_t krow = b * a.T + j;
  for (int64_t t = j + threadIdx.x; t < a.T; t += kThreads) {
    const int64_t row = b * a.T + t, orow = row * a.H * a.v + h * a.v;
    float dp = 0.0f;
    for (int64_t e = 0; e < a.v; ++e)
      dp = __fadd_rn(dp, __fmul_rn(dout[orow + e], a.value(krow, h, e)));
    const float pt = expf(a.score(row, h, krow) - lse[bh * a.T + t]);
    p[t] = pt;
    ds[t] = __fmul_rn(a.scale, __fmul_rn(pt, __fsub_rn(dp, dsum[bh * a.T + t])));
  }
  __syncthreads();
  const int64_t dqk = a.qk(), kvw = a.kvw();
  for (int64_t e = threadIdx.x; e < dqk + a.v; e += kThreads) {
    float acc = 0.0f;
    if (e < dqk) {
      for (int64_t t = j; t < a.T; ++t)
        acc = __fadd_rn(acc, __fmul_rn(ds[t], a.q[(b * a.T + t) * a.H * dqk + h * dqk + e]));
      if (e < a.nope)
        dkv.store(krow * a.H * kvw + h * kvw + e, acc);
      else
        part[(bh * a.T + j) * a.rope + e - a.nope] = acc;
    } else {
      const int64_t f = e - dqk;
      for (int64_t t = j; t < a.T; ++t)
        acc = __fadd_rn(acc, __fmul_rn(p[t], dout[(b * a.T + t) * a.H * a.v + h * a.v + f]));
      dkv.store(krow * a.H * kvw + h * kvw + a.nope + f, acc);
    }
  }
}

// dk_rope[m, e] = Σ_h part[(b·H + h)·T + j][e], heads in order.
__global__ void __launch_bounds__(kThreads)
    mla_rope_grad_kernel(const float* part, Out dk_rope, int64_t B, int64_t T, int64_t H,
                         int64_t rope) {
  cuda::for_each_index<kThreads>(B * T * rope, [&](int64_t i) {
    const int64_t m = i / rope, e = i - m * rope, b = m / T, j = m - b * T;
    float sum = 0.0f;
    for (int64_t h = 0; h < H; ++h) sum = __fadd_rn(sum, part[((b * H + h) * T + j) * rope + e]);
    dk_rope.store(i, sum);
  });
}

// --- the latent cache

enum class CacheKind { f32, bf16, fp8 };

struct LatentCache {
  void* data;
  int64_t num_slots, max_len, width, latent;
  const float* latent_scale_inv;  // fp8
  const float* rope_scale_inv;
};

template <CacheKind K>
__device__ __forceinline__ float cache_load(const LatentCache& c, int64_t row, int64_t e) {
  const int64_t i = row * c.width + e;
  if constexpr (K == CacheKind::f32) {
    return static_cast<const float*>(c.data)[i];
  } else if constexpr (K == CacheKind::bf16) {
    return __uint_as_float(static_cast<unsigned>(static_cast<const uint16_t*>(c.data)[i]) << 16);
  } else {
    const uint8_t code = static_cast<const uint8_t*>(c.data)[i];
    const float v = __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
    return __fmul_rn(v, e < c.latent ? *c.latent_scale_inv : *c.rope_scale_inv);
  }
}

// CTA per row (grid-stride), threads over the row's latent and rope features.
template <CacheKind K>
__global__ void __launch_bounds__(kThreads)
    mla_cache_write_kernel(In latent, In k_rope, const int32_t* slot_ids, const int32_t* positions,
                           int64_t n, int64_t rope, LatentCache c) {
  float ls = 1.0f, rs = 1.0f;
  if constexpr (K == CacheKind::fp8) {
    ls = __fdiv_rn(1.0f, *c.latent_scale_inv);  // the reference's 1.0f / scale_inv
    rs = __fdiv_rn(1.0f, *c.rope_scale_inv);
  }
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t slot = slot_ids[i], pos = positions[i];
    if (slot < 0 || slot >= c.num_slots || pos < 0 || pos >= c.max_len) continue;
    const int64_t dst = (slot * c.max_len + pos) * c.width;
    for (int64_t e = threadIdx.x; e < c.width; e += kThreads) {
      const bool lat = e < c.latent;
      const float x = lat ? latent[i * c.latent + e] : k_rope[i * rope + e - c.latent];
      if constexpr (K == CacheKind::f32) {
        static_cast<float*>(c.data)[dst + e] = x;
      } else if constexpr (K == CacheKind::bf16) {
        static_cast<uint16_t*>(c.data)[dst + e] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
      } else {
        static_cast<uint8_t*>(c.data)[dst + e] = static_cast<uint8_t>(
            __nv_cvt_float_to_fp8(__fmul_rn(x, lat ? ls : rs), __NV_SATFINITE, __NV_E4M3));
      }
    }
  }
}

struct CachedArgs {
  In q, w;  // q [n, H·(nope + rope)], w = kv_b's weight [H·(nope + v), latent]
  Out o;
  const int32_t* slot_ids;
  const int32_t* lengths;
  int64_t H, nope, rope, v;
  float scale;
  LatentCache c;
};

// CTA (row i, head h). smem: q_lat [latent], lat [latent], scores [max_len], kWarps floats.
template <CacheKind K>
__global__ void __launch_bounds__(kThreads) mla_attention_cached_kernel(CachedArgs a) {
  extern __shared__ float smem[];
  const int64_t R = a.c.latent, dqk = a.nope + a.rope, kvw = a.nope + a.v;
  float* qlat = smem;
  float* lat = smem + R;
  float* s = smem + 2 * R;
  float* red = s + a.c.max_len;
  const int64_t i = blockIdx.x / a.H, h = blockIdx.x % a.H;
  const int64_t slot = a.slot_ids[i], len = a.lengths[i];
  const int64_t orow = i * a.H * a.v + h * a.v;
  if (slot < 0 || slot >= a.c.num_slots || len < 1 || len > a.c.max_len) {
    for (int64_t e = threadIdx.x; e < a.v; e += kThreads) a.o.store(orow + e, 0.0f);
    return;
  }
  const int64_t qrow = i * a.H * dqk + h * dqk, base = slot * a.c.max_len;
  for (int64_t r = threadIdx.x; r < R; r += kThreads) {
    float acc = 0.0f;
    for (int64_t n = 0; n < a.nope; ++n)
      acc = __fadd_rn(acc, __fmul_rn(a.q[qrow + n], a.w[(h * kvw + n) * R + r]));
    qlat[r] = acc;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < len; j += kThreads) {
    float d = 0.0f;
    for (int64_t r = 0; r < R; ++r)
      d = __fadd_rn(d, __fmul_rn(qlat[r], cache_load<K>(a.c, base + j, r)));
    for (int64_t e = 0; e < a.rope; ++e)
      d = __fadd_rn(d, __fmul_rn(a.q[qrow + a.nope + e], cache_load<K>(a.c, base + j, R + e)));
    s[j] = __fmul_rn(d, a.scale);
    mx = fmaxf(mx, s[j]);
  }
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < len; j += kThreads) sum += expf(s[j] - mx);
  sum = cuda::block_sum(sum, red);
  const float l = mx + logf(sum);
  for (int64_t r = threadIdx.x; r < R; r += kThreads) {
    float acc = 0.0f;
    for (int64_t j = 0; j < len; ++j)
      acc = __fadd_rn(acc, __fmul_rn(expf(s[j] - l), cache_load<K>(a.c, base + j, r)));
    lat[r] = acc;
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < a.v; e += kThreads) {
    float acc = 0.0f;
    for (int64_t r = 0; r < R; ++r)
      acc = __fadd_rn(acc, __fmul_rn(a.w[(h * kvw + a.nope + e) * R + r], lat[r]));
    a.o.store(orow + e, acc);
  }
}

CacheKind kind_of(DType t) {
  return t == DType::f32 ? CacheKind::f32 : t == DType::bf16 ? CacheKind::bf16 : CacheKind::fp8;
}

void check_dims(const MlaDims& d, const char* op) {
  check(d.heads > 0 && d.nope >= 0 && d.rope >= 0 && d.v > 0 && d.qk() > 0,
        std::string(op) + ": heads and head sizes must be positive");
}

// Dynamic shared memory of `floats` floats for kernel k; throws beyond what a CTA may take.
template <class Kernel>
size_t smem_for(Kernel k, int64_t floats, const char* op, const std::string& what) {
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  check(bytes <= kMaxSmem, std::string(op) + ": " + what + " needs " + std::to_string(bytes) +
                               " bytes of shared memory per CTA (at most " +
                               std::to_string(kMaxSmem) + ")");
  if (bytes > 48 * 1024)
    cuda::check_cuda(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)),
                     "cudaFuncSetAttribute(max dynamic shared memory)");
  return bytes;
}

}  // namespace

void CudaBackend::copy_columns(const Matrix& x, int64_t x_col, const Matrix& out, int64_t out_col,
                               int64_t cols) {
  const OpScope scope(*this, "copy_columns");
  cuda::check_activation("copy_columns", "x", x);
  cuda::check_activation("copy_columns", "out", out, x.rows, out.cols);
  check(cols >= 0 && x_col >= 0 && out_col >= 0 && x_col + cols <= x.cols &&
            out_col + cols <= out.cols,
        "copy_columns: columns [" + std::to_string(x_col) + ", " + std::to_string(x_col + cols) +
            ") of " + cuda::shape_of("x", x) + " into [" + std::to_string(out_col) + ", " +
            std::to_string(out_col + cols) + ") of " + cuda::shape_of("out", out) +
            " are out of range");
  if (x.rows == 0 || cols == 0) return;
  cuda::check_data("copy_columns", {{"x", x.data}, {"out", out.data}});
  make_current();
  copy_columns_kernel<<<cuda::grid_for(x.rows * cols, kThreads, int64_t{64} * sm_count_), kThreads,
                        0, stream_>>>(cuda::in_of(x), x.cols, x_col, cuda::out_of(out), out.cols,
                                      out_col, x.rows, cols);
  cuda::check_launch("copy_columns_kernel");
}

void CudaBackend::rope_columns(const Matrix& x, int64_t heads, int64_t head_width, int64_t first,
                               int64_t dims, const int32_t* positions, const Rope& rope,
                               bool inverse) {
  const OpScope scope(*this, "rope_columns");
  cuda::check_activation("rope_columns", "x", x, x.rows, heads * head_width);
  check(heads > 0 && dims > 0 && dims % 2 == 0 && first >= 0 && first + dims <= head_width,
        "rope_columns: an even range of " + std::to_string(dims) + " columns from " +
            std::to_string(first) + " must lie inside each head of " + std::to_string(head_width));
  check(heads * (dims / 2) <= INT_MAX, "rope_columns: " + cuda::shape_of("x", x) + " is too wide");
  if (x.rows == 0) return;
  cuda::check_data("rope_columns", {{"x", x.data}, {"positions", positions}});
  make_current();
  rope_columns_kernel<<<cuda::grid_for(x.rows, 1, int64_t{64} * sm_count_), kThreads, 0, stream_>>>(
      cuda::out_of(x), x.rows, x.cols, head_width, first, static_cast<int>(dims / 2),
      static_cast<int>(heads * (dims / 2)), positions, rope, inverse);
  cuda::check_launch("rope_columns_kernel");
}

void CudaBackend::mla_attention_forward(const Matrix& q, const Matrix& kv, const Matrix& k_rope,
                                        int64_t B, int64_t T, const MlaDims& d, float scale,
                                        const Matrix& o, float* lse) {
  const char* op = "mla_attention_forward";
  const OpScope scope(*this, op);
  check_dims(d, op);
  const int64_t M = B * T, H = d.heads;
  cuda::check_activation(op, "q", q, M, H * d.qk());
  cuda::check_activation(op, "kv", kv, M, H * (d.nope + d.v));
  cuda::check_activation(op, "k_rope", k_rope, M, d.rope);
  cuda::check_activation(op, "o", o, M, H * d.v);
  if (M == 0) return;
  cuda::check_data(
      op, {{"q", q.data}, {"kv", kv.data}, {"k_rope", k_rope.data}, {"o", o.data}, {"lse", lse}});
  check(B * H * T <= INT_MAX, std::string(op) + ": too many query rows for one launch");
  make_current();
  const size_t smem = smem_for(mla_forward_kernel, T + kWarps, op, "T = " + std::to_string(T));
  const MlaArgs a{
      cuda::in_of(q), cuda::in_of(kv), cuda::in_of(k_rope), B, T, H, d.nope, d.rope, d.v, scale};
  mla_forward_kernel<<<static_cast<unsigned>(B * H * T), kThreads, smem, stream_>>>(
      a, cuda::out_of(o), lse);
  cuda::check_launch("mla_forward_kernel");
}

void CudaBackend::mla_attention_backward(const Matrix& dout, const Matrix& q, const Matrix& kv,
                                         const Matrix& k_rope, const Matrix& o, const float* lse,
                                         int64_t B, int64_t T, const MlaDims& d, float scale,
                                         const Matrix& dq, const Matrix& dkv,
                                         const Matrix& dk_rope) {
  const char* op = "mla_attention_backward";
  const OpScope scope(*this, op);
  check_dims(d, op);
  const int64_t M = B * T, H = d.heads;
  cuda::check_activation(op, "q", q, M, H * d.qk());
  cuda::check_activation(op, "kv", kv, M, H * (d.nope + d.v));
  cuda::check_activation(op, "k_rope", k_rope, M, d.rope);
  cuda::check_activation(op, "o", o, M, H * d.v);
  cuda::check_activation(op, "dout", dout, M, H * d.v);
  cuda::check_activation(op, "dq", dq, M, H * d.qk());
  cuda::check_activation(op, "dkv", dkv, M, H * (d.nope + d.v));
  cuda::check_activation(op, "dk_rope", dk_rope, M, d.rope);
  if (M == 0) return;
  cuda::check_data(op, {{"q", q.data},
                        {"kv", kv.data},
                        {"k_rope", k_rope.data},
                        {"o", o.data},
                        {"dout", dout.data},
                        {"lse", lse},
                        {"dq", dq.data},
                        {"dkv", dkv.data},
                        {"dk_rope", dk_rope.data}});
  check(B * H * T <= INT_MAX, std::string(op) + ": too many rows for one launch");
  make_current();
  const Buffer dsum = alloc(static_cast<size_t>(B * H * T) * sizeof(float));
  const Buffer part =
      alloc(static_cast<size_t>(std::max<int64_t>(B * H * T * d.rope, 1)) * sizeof(float));
  const MlaArgs a{
      cuda::in_of(q), cuda::in_of(kv), cuda::in_of(k_rope), B, T, H, d.nope, d.rope, d.v, scale};
  const unsigned rows = static_cast<unsigned>(B * H * T);
  const size_t smem_q = smem_for(mla_backward_q_kernel, T + kWarps, op, "T = " + std::to_string(T));
  mla_backward_q_kernel<<<rows, kThreads, smem_q, stream_>>>(
      a, cuda::in_of(dout), cuda::in_of(o), lse, dsum.as<float>(), cuda::out_of(dq));
  cuda::check_launch("mla_backward_q_kernel");
  const size_t smem_kv = smem_for(mla_backward_kv_kernel, 2 * T, op, "T = " + std::to_string(T));
  mla_backward_kv_kernel<<<rows, kThreads, smem_kv, stream_>>>(
      a, cuda::in_of(dout), lse, dsum.as<float>(), cuda::out_of(dkv), part.as<float>());
  cuda::check_launch("mla_backward_kv_kernel");
  if (d.rope > 0) {
    mla_rope_grad_kernel<<<cuda::grid_for(M * d.rope, kThreads, int64_t{64} * sm_count_), kThreads,
                           0, stream_>>>(part.as<float>(), cuda::out_of(dk_rope), B, T, H, d.rope);
    cuda::check_launch("mla_rope_grad_kernel");
  }
}

void CudaBackend::mla_cache_write(const Matrix& latent, const Matrix& k_rope,
                                  const int32_t* slot_ids, const int32_t* positions,
                                  const MlaDims& d, const KvCacheView& cache) {
  const char* op = "mla_cache_write";
  const OpScope scope(*this, op);
  check(cache.k && cache.num_slots > 0 && cache.max_len > 0 && cache.width == d.latent + d.rope,
        std::string(op) + ": a latent cache of rows latent " + std::to_string(d.latent) +
            " + rope " + std::to_string(d.rope) + " expected, got width " +
            std::to_string(cache.width));
  check(cache.dtype != DType::fp8 || (cache.k_scale_inv && cache.v_scale_inv),
        std::string(op) + ": an fp8 latent cache needs its two scales");
  cuda::check_activation(op, "latent", latent, latent.rows, d.latent);
  cuda::check_activation(op, "k_rope", k_rope, latent.rows, d.rope);
  const int64_t n = latent.rows;
  if (n == 0) return;
  cuda::check_data(op, {{"latent", latent.data},
                        {"k_rope", k_rope.data},
                        {"slot_ids", slot_ids},
                        {"positions", positions}});
  make_current();
  const LatentCache c{cache.k,  cache.num_slots,   cache.max_len,    cache.width,
                      d.latent, cache.k_scale_inv, cache.v_scale_inv};
  const unsigned blocks = cuda::grid_for(n, 1, int64_t{64} * sm_count_);
  switch (kind_of(cache.dtype)) {
    case CacheKind::f32:
      mla_cache_write_kernel<CacheKind::f32><<<blocks, kThreads, 0, stream_>>>(
          cuda::in_of(latent), cuda::in_of(k_rope), slot_ids, positions, n, d.rope, c);
      break;
    case CacheKind::bf16:
      mla_cache_write_kernel<CacheKind::bf16><<<blocks, kThreads, 0, stream_>>>(
          cuda::in_of(latent), cuda::in_of(k_rope), slot_ids, positions, n, d.rope, c);
      break;
    case CacheKind::fp8:
      mla_cache_write_kernel<CacheKind::fp8><<<blocks, kThreads, 0, stream_>>>(
          cuda::in_of(latent), cuda::in_of(k_rope), slot_ids, positions, n, d.rope, c);
      break;
  }
  cuda::check_launch("mla_cache_write_kernel");
}

void CudaBackend::mla_attention_cached(const Matrix& q, const Matrix& w_kv_b,
                                       const KvCacheView& cache, const int32_t* slot_ids,
                                       const int32_t* lengths, const MlaDims& d, float scale,
                                       const Matrix& o) {
  const char* op = "mla_attention_cached";
  const OpScope scope(*this, op);
  check_dims(d, op);
  check(cache.k && cache.num_slots > 0 && cache.max_len > 0 && cache.width == d.latent + d.rope,
        std::string(op) + ": a latent cache of rows latent " + std::to_string(d.latent) +
            " + rope " + std::to_string(d.rope) + " expected, got width " +
            std::to_string(cache.width));
  check(cache.dtype != DType::fp8 || (cache.k_scale_inv && cache.v_scale_inv),
        std::string(op) + ": an fp8 latent cache needs its two scales");
  const int64_t H = d.heads;
  cuda::check_activation(op, "q", q, q.rows, H * d.qk());
  cuda::check_activation(op, "o", o, q.rows, H * d.v);
  cuda::check_activation(op, "w_kv_b", w_kv_b, H * (d.nope + d.v), d.latent);
  if (q.rows == 0) return;
  cuda::check_data(op, {{"q", q.data},
                        {"o", o.data},
                        {"w_kv_b", w_kv_b.data},
                        {"slot_ids", slot_ids},
                        {"lengths", lengths}});
  check(q.rows * H <= INT_MAX, std::string(op) + ": too many rows for one launch");
  make_current();
  const CachedArgs a{cuda::in_of(q),
                     cuda::in_of(w_kv_b),
                     cuda::out_of(o),
                     slot_ids,
                     lengths,
                     H,
                     d.nope,
                     d.rope,
                     d.v,
                     scale,
                     LatentCache{cache.k, cache.num_slots, cache.max_len, cache.width, d.latent,
                                 cache.k_scale_inv, cache.v_scale_inv}};
  const int64_t floats = 2 * d.latent + cache.max_len + kWarps;
  const std::string what = "a latent of " + std::to_string(d.latent) + " over " +
                           std::to_string(cache.max_len) + " positions";
  const unsigned blocks = static_cast<unsigned>(q.rows * H);
  switch (kind_of(cache.dtype)) {
    case CacheKind::f32:
      mla_attention_cached_kernel<CacheKind::f32>
          <<<blocks, kThreads,
             smem_for(mla_attention_cached_kernel<CacheKind::f32>, floats, op, what), stream_>>>(a);
      break;
    case CacheKind::bf16:
      mla_attention_cached_kernel<CacheKind::bf16>
          <<<blocks, kThreads,
             smem_for(mla_attention_cached_kernel<CacheKind::bf16>, floats, op, what), stream_>>>(
              a);
      break;
    case CacheKind::fp8:
      mla_attention_cached_kernel<CacheKind::fp8>
          <<<blocks, kThreads,
             smem_for(mla_attention_cached_kernel<CacheKind::fp8>, floats, op, what), stream_>>>(a);
      break;
  }
  cuda::check_launch("mla_attention_cached_kernel");
}

}  // namespace fp8rl
