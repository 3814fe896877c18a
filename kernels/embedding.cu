// Token embedding lookup and its gradient (mirrors engine/backend/cpu/embedding.cpp).
// Shapes: ids [M] int32 (device), table / dtable [V, H], out / dout [M, H].
//
// The CPU reference rejects ids outside [0, V) before it starts; here the ids live in device
// memory and checking them first would cost a synchronisation, so the kernels guard each id
// instead: forward writes a NaN row (the bug stays visible downstream), backward skips the row.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;

// One block per output row (grid-stride over rows), threads along H: coalesced row copies.
__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(const int32_t* __restrict__ ids, In table, int64_t V, int64_t H,
                             Out out, int64_t M) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const int64_t id = ids[m];
    const bool valid = id >= 0 && id < V;
    for (int64_t h = threadIdx.x; h < H; h += kThreads)
      out.store(m * H + h, valid ? table[id * H + h] : NAN);
  }
}

// dtable[ids[m]] += dout[m]: repeated ids meet in FP32 atomics (their order is not fixed).
__global__ void __launch_bounds__(kThreads)
    embedding_backward_kernel(const int32_t* __restrict__ ids, In dout, int64_t V, int64_t H,
                              float* dtable, int64_t M) {
  for (int64_t m = blockIdx.x; m < M; m += gridDim.x) {
    const int64_t id = ids[m];
    if (id < 0 || id >= V) continue;  // block-uniform
    for (int64_t h = threadIdx.x; h < H; h += kThreads)
      atomicAdd(dtable + id * H + h, dout[m * H + h]);
  }
}

}  // namespace

void CudaBackend::embedding_forward(const int32_t* ids, const Matrix& table, const Matrix& out) {
  const OpScope scope(*this, "embedding_forward");
  cuda::check_activation("embedding_forward", "table", table);
  cuda::check_activation("embedding_forward", "out", out, out.rows, table.cols);
  const int64_t M = out.rows, V = table.rows, H = table.cols;
  if (M == 0 || H == 0) return;
  check(V > 0, "embedding_forward: " + cuda::shape_of("table", table) + " has no rows");
  cuda::check_data("embedding_forward", "ids", ids);
  cuda::check_data("embedding_forward", "table", table.data);
  cuda::check_data("embedding_forward", "out", out.data);
  make_current();
  embedding_forward_kernel<<<cuda::grid_for(M, 1, int64_t{64} * sm_count_), kThreads, 0, stream_>>>(
      ids, cuda::in_of(table), V, H, cuda::out_of(out), M);
  cuda::check_launch("embedding_forward_kernel");
}

void CudaBackend::embedding_backward(const int32_t* ids, const Matrix& dout, const Matrix& dtable) {
  const OpScope scope(*this, "embedding_backward");
  cuda::check_activation("embedding_backward", "dout", dout);
  cuda::check_f32("embedding_backward", "dtable", dtable, dtable.rows, dout.cols);
  const int64_t M = dout.rows, V = dtable.rows, H = dtable.cols;
  if (M == 0 || H == 0 || V == 0) return;
  cuda::check_data("embedding_backward", "ids", ids);
  cuda::check_data("embedding_backward", "dout", dout.data);
  cuda::check_data("embedding_backward", "dtable", dtable.data);
  make_current();
  embedding_backward_kernel<<<cuda::grid_for(M, 1, int64_t{64} * sm_count_), kThreads, 0,
                              stream_>>>(ids, cuda::in_of(dout), V, H,
                                         static_cast<float*>(dtable.data), M);
  cuda::check_launch("embedding_backward_kernel");
}

}  // namespace fp8rl
