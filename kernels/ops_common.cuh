// Shared pieces of the model-op kernels (elementwise.cu, embedding.cu, rmsnorm.cu, rope.cu,
// attention.cu, swiglu.cu, logprobs.cu, sampling.cu): element access by run-time dtype, warp and
// block reductions, a row's softmax statistics, launch sizes and operand checks.
//
// Operands are f32 or bf16 (raw bits, value = bits << 16) chosen at run time: the dtype branch
// is uniform over a launch, so it costs a predictable branch per access and lets every operand
// of an op have its own dtype without a template instantiation per combination.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "grid_stride.cuh"

namespace fp8rl::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

// A read-only f32 or bf16 operand.
struct In {
  const void* p;
  bool bf16;
  __device__ __forceinline__ float operator[](int64_t i) const {
    return bf16 ? __uint_as_float(static_cast<unsigned>(static_cast<const uint16_t*>(p)[i]) << 16)
                : static_cast<const float*>(p)[i];
  }
};

// A written f32 or bf16 operand: store() rounds to nearest even for bf16 (the one rounding of
// an output). load() serves in-place ops.
struct Out {
  void* p;
  bool bf16;
  __device__ __forceinline__ void store(int64_t i, float v) const {
    if (bf16)
      static_cast<uint16_t*>(p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    else
      static_cast<float*>(p)[i] = v;
  }
  // v as store() leaves it in memory (rounded to nearest even for bf16).
  __device__ __forceinline__ float round(float v) const {
    return bf16 ? __bfloat162float(__float2bfloat16_rn(v)) : v;
  }
  __device__ __forceinline__ float load(int64_t i) const {
    return bf16 ? __uint_as_float(static_cast<unsigned>(static_cast<const uint16_t*>(p)[i]) << 16)
                : static_cast<const float*>(p)[i];
  }
};

inline In in_of(const Matrix& m) {
  return In{m.data, m.dtype == DType::bf16};
}
inline Out out_of(const Matrix& m) {
  return Out{m.data, m.dtype == DType::bf16};
}

// --- reductions (every lane / thread gets the result)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); smem holds
// blockDim.x / 32 values. Warp partials are added in warp order, so the result is the same in
// every thread and run to run. Every thread of the block must call it.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* smem) {
  v = warp_sum(v);
  const int warps = static_cast<int>(blockDim.x >> 5);
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  T total = smem[0];
  for (int w = 1; w < warps; ++w) total += smem[w];
  __syncthreads();  // smem may be reused right after
  return total;
}

// --- softmax statistics of one row (logprobs.cu, sampling.cu)

// Softmax statistics of a set of z values: m = max z, s = Σ e^(z−m), t = Σ e^(z−m)·z (only
// when kEntropy). The empty set is (−inf, 0, 0).
struct SoftmaxStats {
  float m, s, t;
  // log Σ e^z: token_logprobs and sample_tokens both take it from here (the same bits).
  __device__ __forceinline__ float lse() const { return m + logf(s); }
};

template <bool kEntropy>
__device__ __forceinline__ void softmax_add(SoftmaxStats& st, float z) {
  if (z == -INFINITY) return;  // probability 0; also keeps −inf − (−inf) out
  if (z > st.m) {
    const float c = expf(st.m - z);  // 0 while the set is empty
    st.s = st.s * c + 1.0f;
    if constexpr (kEntropy) st.t = st.t * c + z;
    st.m = z;
  } else {  // also NaN z: poisons s, as it does the reference
    const float e = expf(z - st.m);
    st.s += e;
    if constexpr (kEntropy) st.t += e * z;
  }
}

template <bool kEntropy>
__device__ __forceinline__ SoftmaxStats softmax_merge(const SoftmaxStats& a,
                                                      const SoftmaxStats& b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return a;  // both empty
  const float ca = expf(a.m - m), cb = expf(b.m - m);
  SoftmaxStats r;
  r.m = m;
  r.s = a.s * ca + b.s * cb;
  r.t = kEntropy ? a.t * ca + b.t * cb : 0.0f;
  return r;
}

// Statistics of row `row` of logits·inv_t, returned to every thread of the block: one read of
// the row, thread i taking elements i, i + kThreads, …, merged across lanes and then warps in a
// fixed order (deterministic). The block must have kThreads threads, all of which call it (it
// synchronises the block); warp_stats holds kThreads / 32 entries in shared memory.
// Block size of the row-softmax kernels (token_logprobs, sample_tokens): one size, so both take
// the same per-thread statistics and get the same lse bit for bit.
constexpr int kSoftmaxRowThreads = 512;
constexpr int kSoftmaxRowWarps = kSoftmaxRowThreads / 32;

template <int kThreads, bool kEntropy>
__device__ SoftmaxStats row_softmax_stats(In logits, int64_t row, int64_t V, float inv_t,
                                          SoftmaxStats* warp_stats) {
  SoftmaxStats st{-INFINITY, 0.0f, 0.0f};
  for (int64_t j = threadIdx.x; j < V; j += kThreads)
    softmax_add<kEntropy>(st, logits[row * V + j] * inv_t);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    SoftmaxStats o;
    o.m = __shfl_xor_sync(kFullMask, st.m, off);
    o.s = __shfl_xor_sync(kFullMask, st.s, off);
    o.t = __shfl_xor_sync(kFullMask, st.t, off);
    st = softmax_merge<kEntropy>(st, o);
  }
  if ((threadIdx.x & 31) == 0) warp_stats[threadIdx.x >> 5] = st;
  __syncthreads();
  st = warp_stats[0];
  for (int w = 1; w < kThreads / 32; ++w) st = softmax_merge<kEntropy>(st, warp_stats[w]);
  __syncthreads();  // warp_stats is rewritten for the next row
  return st;
}

// --- host helpers

// Blocks for a grid-stride loop over `items` work items, `per_block` per block, at most cap.
inline unsigned grid_for(int64_t items, int64_t per_block, int64_t cap) {
  return static_cast<unsigned>(std::clamp<int64_t>((items + per_block - 1) / per_block, 1, cap));
}

inline std::string shape_of(const char* name, const Matrix& m) {
  return std::string(name) + " [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "] " +
         dtype_name(m.dtype);
}

// Throws unless m is an f32 or bf16 matrix.
inline void check_activation(const char* op, const char* name, const Matrix& m) {
  check(m.dtype == DType::f32 || m.dtype == DType::bf16,
        std::string(op) + ": " + shape_of(name, m) + " must be f32 or bf16");
  check(m.rows >= 0 && m.cols >= 0,
        std::string(op) + ": " + shape_of(name, m) + " has a negative size");
}

// Throws unless m is an f32 or bf16 matrix of shape [rows, cols].
inline void check_activation(const char* op, const char* name, const Matrix& m, int64_t rows,
                             int64_t cols) {
  check_activation(op, name, m);
  check(m.rows == rows && m.cols == cols, std::string(op) + ": " + shape_of(name, m) +
                                              ", expected [" + std::to_string(rows) + ", " +
                                              std::to_string(cols) + "]");
}

// Throws unless m is an f32 matrix of shape [rows, cols] (parameter gradients).
inline void check_f32(const char* op, const char* name, const Matrix& m, int64_t rows,
                      int64_t cols) {
  check(m.dtype == DType::f32, std::string(op) + ": " + shape_of(name, m) + " must be f32");
  check(m.rows == rows && m.cols == cols, std::string(op) + ": " + shape_of(name, m) +
                                              ", expected [" + std::to_string(rows) + ", " +
                                              std::to_string(cols) + "]");
}

// Throws when a pointer a non-empty op needs is null.
inline void check_data(const char* op, const char* name, const void* p) {
  check(p != nullptr, std::string(op) + ": " + name + " is a null pointer");
}

// The same for each (name, pointer), in the listed order.
inline void check_data(const char* op,
                       std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, p] : pointers) check_data(op, name, p);
}

}  // namespace fp8rl::cuda
