// RMSNorm forward and backward (mirrors engine/backend/cpu/rmsnorm.cpp).
// Shapes: x, y, dy, dx [M, H]; w [1, H] (f32 or bf16); rstd [M] f32; dw [1, H] f32 (+=).
// Per-head norms (Qwen3's q/k norms) call these with x viewed as [M·heads, D].
//
// A row is reduced by one warp (H ≤ 1024) or one block (wider rows), so short rows do not leave
// most of a block idle. The FP8 forward of a forward-only operand is one kernel (rows up to
// 4,096: rmsnorm_quantize_rows_kernel); with a transposed copy, an rstd pass and the tiles.
// rstd = 1/sqrtf(mean + eps) with IEEE division and square root, as on the CPU; the final
// per-element expressions are spelled with _rn intrinsics so nvcc cannot contract them into FMAs
// the reference does not use. The backward reads dy and x once for dw, the row means and dx
// where a thread can hold its columns' dw sums (rows up to 8,192): rows of 8k ≤ 1,024 values,
// 16-byte aligned, with 16-byte loads, a half-warp or warp a row (rmsnorm_backward_rows_vec_kernel:
// a per-head norm's rows of 128 two to a warp), others element by element
// (rmsnorm_backward_rows_kernel); wider rows take a dw kernel and a dx kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"
#include "quantize.cuh"
#include "rmsnorm.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;
using namespace rmsnorm_kernels;

// dw[h] += Σ_m dy·x̂ over a chunk of rows: thread per column (coalesced across the block), block
// y per chunk of rows_per_chunk rows, one atomic per column per block.
__global__ void __launch_bounds__(kThreads)
    rmsnorm_backward_dw_kernel(In dy, In x, const float* __restrict__ rstd, float* __restrict__ dw,
                               int64_t M, int64_t H, int64_t rows_per_chunk) {
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (h >= H) return;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t m1 = min(M, m0 + rows_per_chunk);
  float acc = 0.0f;
  for (int64_t m = m0; m < m1; ++m) acc += dy[m * H + h] * (x[m * H + h] * rstd[m]);
  atomicAdd(dw + h, acc);
}

// Launches the dw kernel: row chunks so that about 4 blocks per SM share the column sums, each
// chunk ≥ 16 rows.
void launch_rmsnorm_backward_dw(const char* op, const Matrix& dy, const Matrix& x,
                                const float* rstd, const Matrix& dw, cudaStream_t stream,
                                int sm_count) {
  const int64_t M = x.rows, H = x.cols;
  const int64_t col_blocks = (H + kThreads - 1) / kThreads;
  check(col_blocks <= INT_MAX, std::string(op) + ": " + cuda::shape_of("x", x) + " is too wide");
  const int64_t want_chunks = std::max<int64_t>(1, int64_t{4} * sm_count / col_blocks);
  const int64_t chunks = std::clamp<int64_t>(std::min(want_chunks, (M + 15) / 16), 1, 65535);
  const int64_t rows_per_chunk = (M + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>(col_blocks),
                  static_cast<unsigned>((M + rows_per_chunk - 1) / rows_per_chunk));
  rmsnorm_backward_dw_kernel<<<grid, kThreads, 0, stream>>>(
      cuda::in_of(dy), cuda::in_of(x), rstd, static_cast<float*>(dw.data), M, H, rows_per_chunk);
  cuda::check_launch("rmsnorm_backward_dw_kernel");
}

// The shapes of add_rmsnorm_forward(_fp8): x [M, H], r [M, H], w [1, H], y [M, H] (y's data
// may be null: an unwritten FP8 input).
void check_add_norm(const char* op, const Matrix& x, const Matrix& r, const Matrix& w,
                    const Matrix& y) {
  cuda::check_activation(op, "x", x);
  cuda::check_activation(op, "r", r, x.rows, x.cols);
  cuda::check_activation(op, "w", w, 1, x.cols);
  cuda::check_activation(op, "y", y, x.rows, x.cols);
}

// Their data (for a non-empty x) and r's aliasing: r is read while x (and y) are written.
void check_add_norm_data(const char* op, const Matrix& x, const Matrix& r, const Matrix& w,
                         const Matrix& y, const float* rstd) {
  for (const auto& [name, p] : {std::pair{"x", x.data}, {"r", r.data}, {"w", w.data}})
    cuda::check_data(op, name, p);
  cuda::check_data(op, "rstd", rstd);
  check(r.data != x.data && (y.data == nullptr || r.data != y.data),
        std::string(op) + ": r may not alias x or y");
}

}  // namespace

void CudaBackend::rmsnorm_forward(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                                  float* rstd) {
  const OpScope scope(*this, "rmsnorm_forward");
  const char* op = "rmsnorm_forward";
  cuda::check_activation(op, "x", x);
  const int64_t M = x.rows, H = x.cols;
  cuda::check_activation(op, "w", w, 1, H);
  cuda::check_activation(op, "y", y, M, H);
  // H == 0 still writes rstd (NaN, as the reference's 0/0 gives).
  if (M == 0) return;
  cuda::check_data(op, "x", x.data);
  cuda::check_data(op, "w", w.data);
  cuda::check_data(op, "y", y.data);
  cuda::check_data(op, "rstd", rstd);
  // A row is read completely before it is written, so y may alias x of the same dtype.
  check(y.data != x.data || y.dtype == x.dtype, std::string(op) + ": y aliases x of another dtype");
  make_current();
  launch_rmsnorm_forward<true>(x, w, eps, y, rstd, stream_, sm_count_);
}

void CudaBackend::rmsnorm_forward_fp8(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                                      float* rstd, const Fp8Operands& out,
                                      const QuantOptions& opt) {
  const OpScope scope(*this, "rmsnorm_forward_fp8");
  const char* op = "rmsnorm_forward_fp8";
  cuda::check_activation(op, "x", x);
  const int64_t M = x.rows, H = x.cols;
  cuda::check_activation(op, "w", w, 1, H);
  cuda::check_activation(op, "y", y, M, H);
  if (M == 0) return;
  cuda::check_data(op, "rstd", rstd);
  if (H == 0) {  // no elements to quantize; rstd (NaN) as rmsnorm_forward writes it
    make_current();
    launch_rmsnorm_forward<false>(x, w, eps, y, rstd, stream_, sm_count_);
    return;
  }
  cuda::check_data(op, "x", x.data);
  cuda::check_data(op, "w", w.data);
  // The tiles read x after the rstd pass, so y must not overwrite it.
  check(y.data == nullptr || y.data != x.data, std::string(op) + ": y may not alias x");
  const quant::QuantTarget tg = quant::produced_target(op, M, H, out, opt);
  make_current();
  // A forward-only operand (generation, the log-prob pass): one pass, x read once.
  if (launch_rmsnorm_quantize_rows(x, w, eps, y, rstd, opt, tg, stream_, sm_count_)) return;
  launch_rmsnorm_forward<false>(x, w, eps, y, rstd, stream_, sm_count_);
  const bool vec = H % 8 == 0 && cuda::pointer_alignment(x.data) >= 16 &&
                   cuda::pointer_alignment(w.data) >= 16 &&
                   (y.data == nullptr || cuda::pointer_alignment(y.data) >= 16);
  const RmsnormProducer prod{cuda::in_of(x), cuda::in_of(w), rstd, cuda::out_of(y), H};
  const quant::TileChoice tiles = tile_choice(y.dtype == DType::bf16);
  quant::launch_produced(prod, M, H, opt, tg, quant::QuantTarget{}, vec, tiles, stream_, sm_count_);
}

void CudaBackend::add_rmsnorm_forward(const Matrix& x, const Matrix& r, const Matrix& w, float eps,
                                      const Matrix& y, float* rstd) {
  const OpScope scope(*this, "add_rmsnorm_forward");
  const char* op = "add_rmsnorm_forward";
  const int64_t M = x.rows, H = x.cols;
  check_add_norm(op, x, r, w, y);
  if (M == 0) return;
  if (H == 0) {  // nothing to add; rstd as rmsnorm_forward writes it
    rmsnorm_forward(x, w, eps, y, rstd);
    return;
  }
  check_add_norm_data(op, x, r, w, y, rstd);
  cuda::check_data(op, "y", y.data);
  // Each element of x is read, summed and written by one thread, which reads it again for y.
  check(y.data != x.data || y.dtype == x.dtype, std::string(op) + ": y aliases x of another dtype");
  make_current();
  launch_rmsnorm_forward<true>(x, w, eps, y, rstd, stream_, sm_count_, r);
}

void CudaBackend::add_rmsnorm_forward_fp8(const Matrix& x, const Matrix& r, const Matrix& w,
                                          float eps, const Matrix& y, float* rstd,
                                          const Fp8Operands& out, const QuantOptions& opt) {
  const char* op = "add_rmsnorm_forward_fp8";
  const int64_t M = x.rows, H = x.cols;
  const bool one_pass =
      out.transposed.codes == nullptr && H > 0 && H <= int64_t{kThreads} * kMaxVals;
  if (!one_pass || M == 0) {  // add, then the two-pass forward (or nothing to do)
    Backend::add_rmsnorm_forward_fp8(x, r, w, eps, y, rstd, out, opt);
    return;
  }
  const OpScope scope(*this, op);
  check_add_norm(op, x, r, w, y);
  check_add_norm_data(op, x, r, w, y, rstd);
  check(y.data == nullptr || y.data != x.data, std::string(op) + ": y may not alias x");
  const quant::QuantTarget tg = quant::produced_target(op, M, H, out, opt);
  make_current();
  launch_rmsnorm_quantize_rows(x, w, eps, y, rstd, opt, tg, stream_, sm_count_, r);
}

void CudaBackend::rmsnorm_backward(const Matrix& dy, const Matrix& x, const Matrix& w,
                                   const float* rstd, const Matrix& dx, const Matrix& dw) {
  const OpScope scope(*this, "rmsnorm_backward");
  const char* op = "rmsnorm_backward";
  cuda::check_activation(op, "x", x);
  const int64_t M = x.rows, H = x.cols;
  cuda::check_activation(op, "dy", dy, M, H);
  cuda::check_activation(op, "w", w, 1, H);
  cuda::check_activation(op, "dx", dx, M, H);
  cuda::check_f32(op, "dw", dw, 1, H);
  if (M == 0 || H == 0) return;
  cuda::check_data(op, "dy", dy.data);
  cuda::check_data(op, "x", x.data);
  cuda::check_data(op, "w", w.data);
  cuda::check_data(op, "rstd", rstd);
  cuda::check_data(op, "dx", dx.data);
  cuda::check_data(op, "dw", dw.data);
  check((dx.data != dy.data || dx.dtype == dy.dtype) && (dx.data != x.data || dx.dtype == x.dtype),
        std::string(op) + ": dx aliases an input of another dtype");
  make_current();
  // dw and dx in one pass over the rows where a thread can hold its columns' sums (dx may alias
  // dy or x of the same dtype, as on the CPU: a row is read before it is written).
  if (launch_rmsnorm_backward_rows<true>(dy, x, w, rstd, dx, nullptr, static_cast<float*>(dw.data),
                                         stream_, sm_count_))
    return;
  // Wider rows: dw first, as it reads dy and x, which dx may overwrite; then dx.
  launch_rmsnorm_backward_dw(op, dy, x, rstd, dw, stream_, sm_count_);
  launch_rmsnorm_backward_dx<true>(dy, x, w, rstd, dx, nullptr, stream_, sm_count_);
}

void CudaBackend::rmsnorm_backward_fp8(const Matrix& dy, const Matrix& x, const Matrix& w,
                                       const float* rstd, const Matrix& residual, const Matrix& dx,
                                       const Matrix& dw, const Fp8Operands& out,
                                       const QuantOptions& opt) {
  const OpScope scope(*this, "rmsnorm_backward_fp8");
  const char* op = "rmsnorm_backward_fp8";
  cuda::check_activation(op, "x", x);
  const int64_t R = x.rows, D = x.cols;  // the norm's rows and width
  cuda::check_activation(op, "dy", dy, R, D);
  cuda::check_activation(op, "w", w, 1, D);
  cuda::check_activation(op, "dx", dx, R, D);
  if (residual.data) cuda::check_activation(op, "residual", residual, R, D);
  cuda::check_f32(op, "dw", dw, 1, D);
  if (R == 0 || D == 0) return;  // nothing to quantize (rmsnorm_backward's dw: nothing to add)
  // The operands' view: M rows of K = heads·D.
  const int64_t M = out.along.rows, K = out.along.cols;
  check(M * K == R * D && K % D == 0 && K <= INT_MAX,
        std::string(op) + ": operands [" + std::to_string(M) + ", " + std::to_string(K) +
            "] are not a view of dx [" + std::to_string(R) + ", " + std::to_string(D) +
            "] as rows of whole groups");
  cuda::check_data(op, "dy", dy.data);
  cuda::check_data(op, "x", x.data);
  cuda::check_data(op, "w", w.data);
  cuda::check_data(op, "rstd", rstd);
  cuda::check_data(op, "dw", dw.data);
  // The inputs are read through the read-only cache while the tiles write dx.
  check(dx.data == nullptr || (dx.data != dy.data && dx.data != x.data && dx.data != residual.data),
        std::string(op) + ": dx may not alias dy, x or the residual");
  const quant::QuantTarget tg = quant::produced_target(op, M, K, out, opt);
  make_current();
  // One read of dy and x for the row means and dw (two passes for rows too wide for that).
  auto* mean = static_cast<float*>(scratch(sizeof(float) * static_cast<size_t>(R)));
  if (!launch_rmsnorm_backward_rows<false>(dy, x, w, rstd, Matrix{nullptr, R, D, dx.dtype}, mean,
                                           static_cast<float*>(dw.data), stream_, sm_count_)) {
    launch_rmsnorm_backward_dw(op, dy, x, rstd, dw, stream_, sm_count_);
    launch_rmsnorm_backward_dx<false>(dy, x, w, rstd, Matrix{nullptr, R, D, dx.dtype}, mean,
                                      stream_, sm_count_);
  }
  auto aligned = [](const Matrix& m) { return cuda::pointer_alignment(m.data) >= 16; };
  const bool vec = D % 8 == 0 && aligned(dy) && aligned(x) && aligned(w) &&
                   (residual.data == nullptr || aligned(residual)) &&
                   (dx.data == nullptr || aligned(dx));
  const RmsnormGradProducer prod{cuda::in_of(dy),
                                 cuda::in_of(x),
                                 cuda::in_of(w),
                                 cuda::in_of(residual),
                                 rstd,
                                 mean,
                                 cuda::out_of(dx),
                                 K,
                                 static_cast<int>(D),
                                 static_cast<int>(K / D)};
  const quant::TileChoice tiles = tile_choice(dx.dtype == DType::bf16);
  quant::launch_produced(prod, M, K, opt, tg, quant::QuantTarget{}, vec, tiles, stream_, sm_count_);
}

}  // namespace fp8rl
