// SwiGLU forward and backward (mirrors engine/backend/cpu/swiglu.cpp). Shapes: gate, up, h, dh,
// dgate, dup [M, I], each f32 or bf16 on its own.
//   h     = silu(g)·u,  silu(g) = g / (1 + e^−g)
//   dgate = dh·u·σ·(1 + g·(1 − σ)),  dup = dh·(g·σ),  σ = 1 / (1 + e^−g)
// In the reference's operation order; the one place nvcc would contract (1 + g·(1 − σ)) is
// spelled with _rn intrinsics. expf is the device's (within an ulp or two of the CPU's).
#include <cuda_runtime.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(In gate, In up, Out h, int64_t n) {
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const float g = gate[i];
    h.store(i, g / (1.0f + expf(-g)) * up[i]);
  });
}

// Every input element is read before the thread writes its outputs, so an output may alias an
// input of the same dtype (e.g. dgate over gate).
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(In dh, In gate, In up, Out dgate, Out dup, int64_t n) {
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const float g = gate[i], u = up[i], d = dh[i];
    const float sig = 1.0f / (1.0f + expf(-g));
    dgate.store(i, d * u * sig * __fadd_rn(1.0f, __fmul_rn(g, 1.0f - sig)));
    dup.store(i, d * (g * sig));
  });
}

unsigned swiglu_grid(int64_t n, int sm_count) {
  return cuda::grid_for(n, kThreads, int64_t{32} * std::max(sm_count, 1));
}

// Throws unless gate and each operand are f32 or bf16 matrices of gate's shape and, for a non-empty
// shape, have data (each checked in the listed order). Returns the element count.
int64_t check_operands(const char* op, const Matrix& gate,
                       std::initializer_list<std::pair<const char*, const Matrix*>> operands) {
  cuda::check_activation(op, "gate", gate);
  for (const auto& [name, m] : operands) cuda::check_activation(op, name, *m, gate.rows, gate.cols);
  const int64_t n = gate.rows * gate.cols;
  if (n != 0)
    for (const auto& [name, m] : operands) cuda::check_data(op, name, m->data);
  return n;
}

// Same storage with different element widths would overlap unrelated elements.
void check_alias(const char* op, const char* out_name, const Matrix& out, const char* in_name,
                 const Matrix& in) {
  check(out.data != in.data || out.dtype == in.dtype,
        std::string(op) + ": " + out_name + " aliases " + in_name + " of another dtype");
}

}  // namespace

void CudaBackend::swiglu_forward(const Matrix& gate, const Matrix& up, const Matrix& h) {
  const OpScope scope(*this, "swiglu_forward");
  const char* op = "swiglu_forward";
  const int64_t n = check_operands(op, gate, {{"gate", &gate}, {"up", &up}, {"h", &h}});
  if (n == 0) return;
  check_alias(op, "h", h, "gate", gate);
  check_alias(op, "h", h, "up", up);
  make_current();
  swiglu_forward_kernel<<<swiglu_grid(n, sm_count_), kThreads, 0, stream_>>>(
      cuda::in_of(gate), cuda::in_of(up), cuda::out_of(h), n);
  cuda::check_launch("swiglu_forward_kernel");
}

void CudaBackend::swiglu_backward(const Matrix& dh, const Matrix& gate, const Matrix& up,
                                  const Matrix& dgate, const Matrix& dup) {
  const OpScope scope(*this, "swiglu_backward");
  const char* op = "swiglu_backward";
  const int64_t n = check_operands(
      op, gate, {{"dh", &dh}, {"gate", &gate}, {"up", &up}, {"dgate", &dgate}, {"dup", &dup}});
  if (n == 0) return;
  check(dgate.data != dup.data, std::string(op) + ": dgate and dup must be distinct");
  for (const Matrix* out : {&dgate, &dup}) {
    const char* name = out == &dgate ? "dgate" : "dup";
    check_alias(op, name, *out, "dh", dh);
    check_alias(op, name, *out, "gate", gate);
    check_alias(op, name, *out, "up", up);
  }
  make_current();
  swiglu_backward_kernel<<<swiglu_grid(n, sm_count_), kThreads, 0, stream_>>>(
      cuda::in_of(dh), cuda::in_of(gate), cuda::in_of(up), cuda::out_of(dgate), cuda::out_of(dup),
      n);
  cuda::check_launch("swiglu_backward_kernel");
}

}  // namespace fp8rl
