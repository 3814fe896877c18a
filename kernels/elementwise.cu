// Element-wise model ops and the optimizer's vector ops: convert, transpose, add (matrices, f32 or
// bf16) and scale, sum_squares, adamw (f32 vectors of n elements). Mirrors
// engine/backend/cpu/elementwise.cpp; all but sum_squares are bit-exact with it (one FP32
// operation per step, no contraction: the AdamW update is spelled with _rn intrinsics so nvcc
// cannot fuse it into FMAs the x86 reference does not use).
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;
constexpr int kTransposeTile = 32;  // 32x32 tile, block of 32x8 threads

// out[i] = x[i] converted (bf16 → f32 exact, f32 → bf16 rounded to nearest even).
__global__ void __launch_bounds__(kThreads) convert_kernel(In x, Out out, int64_t n) {
  cuda::for_each_index<kThreads>(n, [&](int64_t i) { out.store(i, x[i]); });
}

// out [cols, rows] = in [rows, cols]ᵀ, element bits copied (T = uint32_t for f32, uint16_t for
// bf16). A 32x32 tile goes through shared memory so both the reads and the writes are
// coalesced; 32-bit cells with an odd pitch make the column reads conflict-free. Block x covers
// 32 columns of in; row tiles grid-stride over blockIdx.y.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    transpose_kernel(const T* __restrict__ in, int64_t rows, int64_t cols, T* __restrict__ out) {
  __shared__ uint32_t tile[kTransposeTile][kTransposeTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
  const int64_t row_tiles = (rows + kTransposeTile - 1) / kTransposeTile;
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {  // block-uniform
    const int64_t r0 = rt * kTransposeTile;
#pragma unroll
    for (int i = 0; i < kTransposeTile; i += kThreads / kTransposeTile) {
      const int64_t r = r0 + ty + i, c = c0 + tx;
      if (r < rows && c < cols) tile[ty + i][tx] = in[r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTransposeTile; i += kThreads / kTransposeTile) {
      const int64_t orow = c0 + ty + i, ocol = r0 + tx;  // out is [cols, rows]
      if (orow < cols && ocol < rows) out[orow * rows + ocol] = static_cast<T>(tile[tx][ty + i]);
    }
    __syncthreads();  // the tile is refilled for the next row tile
  }
}

// out[i] = a[i] + b[i]; each thread reads its element before writing it, so out may alias a or b.
__global__ void __launch_bounds__(kThreads) add_kernel(In a, In b, Out out, int64_t n) {
  cuda::for_each_index<kThreads>(n, [&](int64_t i) { out.store(i, a[i] + b[i]); });
}

__global__ void __launch_bounds__(kThreads) scale_vector_kernel(float* x, int64_t n, float s) {
  cuda::for_each_index<kThreads>(n, [&](int64_t i) { x[i] = x[i] * s; });
}

// First pass of sum_squares: partial[blockIdx.x] = Σ x² over the block's grid-stride share, in
// FP64.
__global__ void __launch_bounds__(kThreads)
    sum_squares_partial_kernel(const float* __restrict__ x, int64_t n,
                               double* __restrict__ partial) {
  __shared__ double warp_sums[kThreads / 32];
  double acc = 0.0;
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const double v = x[i];
    acc += v * v;
  });
  acc = cuda::block_sum(acc, warp_sums);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// Second pass: *result = Σ partial[0..count), one block, fixed order.
__global__ void __launch_bounds__(kThreads)
    sum_squares_final_kernel(const double* __restrict__ partial, int count,
                             double* __restrict__ result) {
  __shared__ double warp_sums[kThreads / 32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partial[i];
  acc = cuda::block_sum(acc, warp_sums);
  if (threadIdx.x == 0) *result = acc;
}

// One AdamW step per element, in the reference's operation order (see the file comment).
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, float bc1, float bc2) {
  const float one_minus_b1 = 1.0f - beta1, one_minus_b2 = 1.0f - beta2;
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const float gi = g[i];
    const float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(one_minus_b1, gi));
    const float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(one_minus_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float mhat = __fdiv_rn(mi, bc1), vhat = __fdiv_rn(vi, bc2);
    const float pi = p[i];
    const float update =
        __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), eps)), __fmul_rn(weight_decay, pi));
    p[i] = __fsub_rn(pi, __fmul_rn(lr, update));
  });
}

// --- Multi-tensor ops: one launch over many vectors (a model's parameters). The vectors are a
// table of spans in device memory; element i of the concatenation belongs to the span whose
// [start, start + n) holds it, found by binary search over the starts.
struct DeviceSpan {
  float* p;  // the vector (the parameter for adamw)
  const float* g;
  float* m;
  float* v;
  int64_t n, start;
  float weight_decay;
};

__device__ __forceinline__ int span_of(const DeviceSpan* __restrict__ spans, int count, int64_t i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (spans[mid].start <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads)
    multi_sum_squares_partial_kernel(const DeviceSpan* __restrict__ spans, int count, int64_t total,
                                     double* __restrict__ partial) {
  __shared__ double warp_sums[kThreads / 32];
  double acc = 0.0;
  cuda::for_each_index<kThreads>(total, [&](int64_t i) {
    const DeviceSpan& s = spans[span_of(spans, count, i)];
    const double x = s.p[i - s.start];
    acc += x * x;
  });
  acc = cuda::block_sum(acc, warp_sums);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kThreads)
    multi_scale_kernel(const DeviceSpan* __restrict__ spans, int count, int64_t total, float s) {
  cuda::for_each_index<kThreads>(total, [&](int64_t i) {
    const DeviceSpan& d = spans[span_of(spans, count, i)];
    float* x = d.p + (i - d.start);
    *x = *x * s;
  });
}

// adamw_kernel's arithmetic, element by element, with each span's own weight decay.
__global__ void __launch_bounds__(kThreads)
    multi_adamw_kernel(const DeviceSpan* __restrict__ spans, int count, int64_t total, float lr,
                       float beta1, float beta2, float eps, float bc1, float bc2) {
  const float one_minus_b1 = 1.0f - beta1, one_minus_b2 = 1.0f - beta2;
  cuda::for_each_index<kThreads>(total, [&](int64_t i) {
    const DeviceSpan& d = spans[span_of(spans, count, i)];
    const int64_t k = i - d.start;
    const float gi = d.g[k];
    const float mi = __fadd_rn(__fmul_rn(beta1, d.m[k]), __fmul_rn(one_minus_b1, gi));
    const float vi =
        __fadd_rn(__fmul_rn(beta2, d.v[k]), __fmul_rn(__fmul_rn(one_minus_b2, gi), gi));
    d.m[k] = mi;
    d.v[k] = vi;
    const float mhat = __fdiv_rn(mi, bc1), vhat = __fdiv_rn(vi, bc2);
    const float pi = d.p[k];
    const float update =
        __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), eps)), __fmul_rn(d.weight_decay, pi));
    d.p[k] = __fsub_rn(pi, __fmul_rn(lr, update));
  });
}

// Blocks for a grid-stride element-wise kernel: at most 32 per SM (several waves of work each).
unsigned elementwise_grid(int64_t n, int sm_count) {
  return cuda::grid_for(n, kThreads, int64_t{32} * std::max(sm_count, 1));
}

void check_vector(const char* op, const void* p, int64_t n) {
  check(n >= 0, std::string(op) + ": negative length " + std::to_string(n));
  if (n > 0) cuda::check_data(op, "vector", p);
}

}  // namespace

void CudaBackend::convert(const Matrix& x, const Matrix& out) {
  const OpScope scope(*this, "convert");
  cuda::check_activation("convert", "x", x);
  cuda::check_activation("convert", "out", out, x.rows, x.cols);
  const int64_t n = x.rows * x.cols;
  if (n == 0) return;
  cuda::check_data("convert", "x", x.data);
  cuda::check_data("convert", "out", out.data);
  make_current();
  if (x.dtype == out.dtype) {
    if (x.data != out.data) copy(out.data, x.data, static_cast<size_t>(n) * dtype_size(x.dtype));
    return;
  }
  check(x.data != out.data, "convert: in-place conversion between dtypes is not supported");
  convert_kernel<<<elementwise_grid(n, sm_count_), kThreads, 0, stream_>>>(cuda::in_of(x),
                                                                           cuda::out_of(out), n);
  cuda::check_launch("convert_kernel");
}

void CudaBackend::transpose(const Matrix& x, const Matrix& out) {
  const OpScope scope(*this, "transpose");
  cuda::check_activation("transpose", "x", x);
  cuda::check_activation("transpose", "out", out, x.cols, x.rows);
  check(out.dtype == x.dtype, "transpose: " + cuda::shape_of("x", x) + " and " +
                                  cuda::shape_of("out", out) + " differ in dtype");
  if (x.rows == 0 || x.cols == 0) return;
  cuda::check_data("transpose", "x", x.data);
  cuda::check_data("transpose", "out", out.data);
  check(x.data != out.data, "transpose: in-place transposition is not supported");
  make_current();
  const int64_t col_tiles = (x.cols + kTransposeTile - 1) / kTransposeTile;
  check(col_tiles <= INT_MAX, "transpose: " + cuda::shape_of("x", x) + " has too many columns");
  const dim3 grid(static_cast<unsigned>(col_tiles),
                  static_cast<unsigned>(
                      std::min<int64_t>((x.rows + kTransposeTile - 1) / kTransposeTile, 65535)));
  const dim3 block(kTransposeTile, kThreads / kTransposeTile);
  if (x.dtype == DType::f32) {
    transpose_kernel<uint32_t><<<grid, block, 0, stream_>>>(
        static_cast<const uint32_t*>(x.data), x.rows, x.cols, static_cast<uint32_t*>(out.data));
  } else {
    transpose_kernel<uint16_t><<<grid, block, 0, stream_>>>(
        static_cast<const uint16_t*>(x.data), x.rows, x.cols, static_cast<uint16_t*>(out.data));
  }
  cuda::check_launch("transpose_kernel");
}

void CudaBackend::add(const Matrix& a, const Matrix& b, const Matrix& out) {
  const OpScope scope(*this, "add");
  cuda::check_activation("add", "a", a);
  cuda::check_activation("add", "b", b, a.rows, a.cols);
  cuda::check_activation("add", "out", out, a.rows, a.cols);
  const int64_t n = a.rows * a.cols;
  if (n == 0) return;
  cuda::check_data("add", "a", a.data);
  cuda::check_data("add", "b", b.data);
  cuda::check_data("add", "out", out.data);
  // Aliasing with a different dtype would overlap elements of different widths.
  check(
      (out.data != a.data || out.dtype == a.dtype) && (out.data != b.data || out.dtype == b.dtype),
      "add: out aliases an input of another dtype");
  make_current();
  add_kernel<<<elementwise_grid(n, sm_count_), kThreads, 0, stream_>>>(
      cuda::in_of(a), cuda::in_of(b), cuda::out_of(out), n);
  cuda::check_launch("add_kernel");
}

double CudaBackend::sum_squares(const float* x, int64_t n) {
  const OpScope scope(*this, "sum_squares");
  count_host_sync();
  check_vector("sum_squares", x, n);
  if (n == 0) return 0.0;
  make_current();
  const unsigned blocks = cuda::grid_for(n, kThreads, kReduceBlocks);
  sum_squares_partial_kernel<<<blocks, kThreads, 0, stream_>>>(x, n, reduce_dev_);
  cuda::check_launch("sum_squares_partial_kernel");
  sum_squares_final_kernel<<<1, kThreads, 0, stream_>>>(reduce_dev_, static_cast<int>(blocks),
                                                        reduce_dev_ + kReduceBlocks);
  cuda::check_launch("sum_squares_final_kernel");
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(reduce_host_, reduce_dev_ + kReduceBlocks, sizeof(double),
                                   cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *reduce_host_;
}

void CudaBackend::scale(float* x, int64_t n, float s) {
  const OpScope scope(*this, "scale");
  check_vector("scale", x, n);
  if (n == 0) return;
  make_current();
  scale_vector_kernel<<<elementwise_grid(n, sm_count_), kThreads, 0, stream_>>>(x, n, s);
  cuda::check_launch("scale_vector_kernel");
}

void CudaBackend::adamw(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  const OpScope scope(*this, "adamw");
  check(t >= 1, "adamw: step must be ≥ 1, got " + std::to_string(t));
  check_vector("adamw", p, n);
  if (n == 0) return;
  cuda::check_data("adamw", "g", g);
  cuda::check_data("adamw", "m", m);
  cuda::check_data("adamw", "v", v);
  make_current();
  // As the reference: 1 − β^t in FP64, then rounded to FP32.
  const float bc1 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t)));
  const float bc2 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t)));
  adamw_kernel<<<elementwise_grid(n, sm_count_), kThreads, 0, stream_>>>(
      p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2);
  cuda::check_launch("adamw_kernel");
}

namespace {

// The spans' table in device memory (a fresh stream-ordered allocation: freed in order after the
// kernel that reads it); total: the elements of all spans.
Buffer upload_spans(CudaBackend& be, std::vector<DeviceSpan>& spans, int64_t* total) {
  int64_t at = 0;
  for (DeviceSpan& s : spans) {
    s.start = at;
    at += s.n;
  }
  *total = at;
  Buffer table = be.alloc(spans.size() * sizeof(DeviceSpan));
  be.upload(table.data(), spans.data(), spans.size() * sizeof(DeviceSpan));
  return table;
}

}  // namespace

double CudaBackend::sum_squares(const std::vector<FloatSpan>& xs) {
  const OpScope scope(*this, "sum_squares");
  count_host_sync();
  std::vector<DeviceSpan> spans;
  for (const FloatSpan& x : xs) {
    check_vector("sum_squares", x.data, x.n);
    if (x.n > 0) spans.push_back({x.data, nullptr, nullptr, nullptr, x.n, 0, 0.0f});
  }
  if (spans.empty()) return 0.0;
  check(spans.size() <= INT_MAX, "sum_squares: too many vectors");
  make_current();
  int64_t total = 0;
  const Buffer table = upload_spans(*this, spans, &total);
  const unsigned blocks = cuda::grid_for(total, kThreads, kReduceBlocks);
  multi_sum_squares_partial_kernel<<<blocks, kThreads, 0, stream_>>>(
      table.as<DeviceSpan>(), static_cast<int>(spans.size()), total, reduce_dev_);
  cuda::check_launch("multi_sum_squares_partial_kernel");
  sum_squares_final_kernel<<<1, kThreads, 0, stream_>>>(reduce_dev_, static_cast<int>(blocks),
                                                        reduce_dev_ + kReduceBlocks);
  cuda::check_launch("sum_squares_final_kernel");
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(reduce_host_, reduce_dev_ + kReduceBlocks, sizeof(double),
                                   cudaMemcpyDeviceToHost, stream_));
  FP8RL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *reduce_host_;
}

void CudaBackend::scale(const std::vector<FloatSpan>& xs, float s) {
  const OpScope scope(*this, "scale");
  std::vector<DeviceSpan> spans;
  for (const FloatSpan& x : xs) {
    check_vector("scale", x.data, x.n);
    if (x.n > 0) spans.push_back({x.data, nullptr, nullptr, nullptr, x.n, 0, 0.0f});
  }
  if (spans.empty()) return;
  check(spans.size() <= INT_MAX, "scale: too many vectors");
  make_current();
  int64_t total = 0;
  const Buffer table = upload_spans(*this, spans, &total);
  multi_scale_kernel<<<elementwise_grid(total, sm_count_), kThreads, 0, stream_>>>(
      table.as<DeviceSpan>(), static_cast<int>(spans.size()), total, s);
  cuda::check_launch("multi_scale_kernel");
}

void CudaBackend::adamw(const std::vector<AdamWParam>& params, float lr, float beta1, float beta2,
                        float eps, int64_t t) {
  const OpScope scope(*this, "adamw");
  check(t >= 1, "adamw: step must be ≥ 1, got " + std::to_string(t));
  std::vector<DeviceSpan> spans;
  for (const AdamWParam& q : params) {
    check_vector("adamw", q.p, q.n);
    if (q.n == 0) continue;
    cuda::check_data("adamw", "g", q.g);
    cuda::check_data("adamw", "m", q.m);
    cuda::check_data("adamw", "v", q.v);
    spans.push_back({q.p, q.g, q.m, q.v, q.n, 0, q.weight_decay});
  }
  if (spans.empty()) return;
  check(spans.size() <= INT_MAX, "adamw: too many vectors");
  make_current();
  // As the reference: 1 − β^t in FP64, then rounded to FP32.
  const float bc1 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t)));
  const float bc2 =
      static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t)));
  int64_t total = 0;
  const Buffer table = upload_spans(*this, spans, &total);
  multi_adamw_kernel<<<elementwise_grid(total, sm_count_), kThreads, 0, stream_>>>(
      table.as<DeviceSpan>(), static_cast<int>(spans.size()), total, lr, beta1, beta2, eps, bc1,
      bc2);
  cuda::check_launch("multi_adamw_kernel");
}

}  // namespace fp8rl
