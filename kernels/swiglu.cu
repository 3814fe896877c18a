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
#include "quantize.cuh"
#include "swiglu.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;
using namespace swiglu_kernels;

constexpr int kThreads = 256;

// gate and up rows ld elements apart (I, or 2I: the halves of a stacked gate/up projection).
__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(In gate, In up, Out h, int64_t n, int64_t I, int64_t ld) {
  if (ld == I) {  // kernel-uniform
    cuda::for_each_index<kThreads>(n, [&](int64_t i) { h.store(i, swiglu_value(gate[i], up[i])); });
    return;
  }
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const int64_t s = i / I * ld + i % I;
    h.store(i, swiglu_value(gate[s], up[s]));
  });
}

// Every input element is read before the thread writes its outputs, so an output may alias an
// input of the same dtype (e.g. dgate over gate).
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(In dh, In gate, In up, Out dgate, Out dup, int64_t n) {
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const SwigluGrads r = swiglu_grads(dh[i], gate[i], up[i]);
    dgate.store(i, r.dgate);
    dup.store(i, r.dup);
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
      cuda::in_of(gate), cuda::in_of(up), cuda::out_of(h), n, gate.cols, gate.cols);
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

namespace {

// Whether the 16-byte path applies: I % 8 == 0 and every operand with data 16-byte aligned.
bool vector_ok(int64_t I, std::initializer_list<const Matrix*> operands) {
  if (I % 8 != 0) return false;
  for (const Matrix* m : operands)
    if (m->data && cuda::pointer_alignment(m->data) < 16) return false;
  return true;
}

// Throws unless out (data may be null: not written) is an f32 or bf16 [M, I] that does not
// alias any input (the fused kernels read the inputs after writing some outputs).
void check_output(const char* op, const char* name, const Matrix& out, const Matrix& gate,
                  std::initializer_list<const Matrix*> inputs) {
  cuda::check_activation(op, name, out, gate.rows, gate.cols);
  for (const Matrix* in : inputs)
    check(out.data == nullptr || out.data != in->data,
          std::string(op) + ": " + name + " may not alias an input");
}

}  // namespace

void CudaBackend::swiglu_forward_fp8(const Matrix& gate, const Matrix& up, const Matrix& h,
                                     const Fp8Operands& out, const QuantOptions& opt) {
  const OpScope scope(*this, "swiglu_forward_fp8");
  const char* op = "swiglu_forward_fp8";
  const int64_t n = check_operands(op, gate, {{"gate", &gate}, {"up", &up}});
  check_output(op, "h", h, gate, {&gate, &up});
  if (n == 0) return;
  const int64_t M = gate.rows, I = gate.cols;
  const quant::QuantTarget tg = quant::produced_target(op, M, I, out, opt);
  make_current();
  const SwigluProducer prod{cuda::in_of(gate), cuda::in_of(up), cuda::out_of(h), I, I};
  const quant::TileChoice tiles = tile_choice(h.dtype == DType::bf16);
  quant::launch_produced(prod, M, I, opt, tg, quant::QuantTarget{}, vector_ok(I, {&gate, &up, &h}),
                         tiles, stream_, sm_count_);
}

namespace {

// gu's halves as the kernels read them in place: gate at gu's start, up I elements on, rows 2I
// apart. Throws unless gu is an f32 or bf16 [M, 2I] with data (for M, I > 0).
std::pair<In, In> halves(const char* op, const Matrix& gu) {
  cuda::check_activation(op, "gu", gu);
  check(gu.cols % 2 == 0, std::string(op) + ": " + cuda::shape_of("gu", gu) + " has an odd width");
  if (gu.rows > 0 && gu.cols > 0) cuda::check_data(op, "gu", gu.data);
  const In g = cuda::in_of(gu);
  const In u{static_cast<const uint8_t*>(gu.data) +
                 static_cast<size_t>(gu.cols / 2) * dtype_size(gu.dtype),
             g.bf16};
  return {g, u};
}

}  // namespace

void CudaBackend::swiglu_forward_stacked(const Matrix& gu, const Matrix& h) {
  const OpScope scope(*this, "swiglu_forward_stacked");
  const char* op = "swiglu_forward_stacked";
  const auto [g, u] = halves(op, gu);
  const int64_t M = gu.rows, I = gu.cols / 2, n = M * I;
  cuda::check_activation(op, "h", h, M, I);
  if (n == 0) return;
  cuda::check_data(op, "h", h.data);
  check(h.data != gu.data, std::string(op) + ": h may not alias gu");
  make_current();
  swiglu_forward_kernel<<<swiglu_grid(n, sm_count_), kThreads, 0, stream_>>>(g, u, cuda::out_of(h),
                                                                             n, I, 2 * I);
  cuda::check_launch("swiglu_forward_kernel");
}

void CudaBackend::swiglu_forward_stacked_fp8(const Matrix& gu, const Matrix& h,
                                             const Fp8Operands& out, const QuantOptions& opt) {
  const OpScope scope(*this, "swiglu_forward_stacked_fp8");
  const char* op = "swiglu_forward_stacked_fp8";
  const auto [g, u] = halves(op, gu);
  const int64_t M = gu.rows, I = gu.cols / 2;
  cuda::check_activation(op, "h", h, M, I);
  check(h.data == nullptr || h.data != gu.data, std::string(op) + ": h may not alias gu");
  if (M == 0 || I == 0) return;
  const quant::QuantTarget tg = quant::produced_target(op, M, I, out, opt);
  make_current();
  const SwigluProducer prod{g, u, cuda::out_of(h), I, 2 * I};
  const quant::TileChoice tiles = tile_choice(h.dtype == DType::bf16);
  // The 16-byte path: up's start (I elements on) and the rows (2I apart) stay 16-byte aligned.
  const Matrix up_view{const_cast<void*>(u.p), M, I, gu.dtype};
  quant::launch_produced(prod, M, I, opt, tg, quant::QuantTarget{},
                         vector_ok(I, {&gu, &up_view, &h}), tiles, stream_, sm_count_);
}

void CudaBackend::swiglu_backward_fp8(const Matrix& dh, const Matrix& gate, const Matrix& up,
                                      const Matrix& dgate, const Matrix& dup,
                                      const Fp8Operands& out_gate, const QuantOptions& opt_gate,
                                      const Fp8Operands& out_up, const QuantOptions& opt_up) {
  const char* op = "swiglu_backward_fp8";
  check(out_gate.transposed.codes && out_up.transposed.codes,
        std::string(op) + ": the gradients' operands need their transposed copies (wgrad)");
  if (opt_gate.format != opt_up.format || opt_gate.pow2_scales != opt_up.pow2_scales) {
    // One kernel quantizes both with one format: otherwise the unfused path.
    Backend::swiglu_backward_fp8(dh, gate, up, dgate, dup, out_gate, opt_gate, out_up, opt_up);
    return;
  }
  const OpScope scope(*this, "swiglu_backward_fp8");
  const int64_t n = check_operands(op, gate, {{"dh", &dh}, {"gate", &gate}, {"up", &up}});
  check_output(op, "dgate", dgate, gate, {&dh, &gate, &up});
  check_output(op, "dup", dup, gate, {&dh, &gate, &up});
  check(dgate.data == nullptr || dgate.data != dup.data,
        std::string(op) + ": dgate and dup must be distinct");
  if (n == 0) return;
  const int64_t M = gate.rows, I = gate.cols;
  const quant::QuantTarget tg = quant::produced_target(op, M, I, out_gate, opt_gate);
  const quant::QuantTarget tu = quant::produced_target(op, M, I, out_up, opt_up);
  make_current();
  const SwigluGradProducer prod{cuda::in_of(dh),     cuda::in_of(gate), cuda::in_of(up),
                                cuda::out_of(dgate), cuda::out_of(dup), I};
  const quant::TileChoice tiles =
      tile_choice(dgate.dtype == DType::bf16 && dup.dtype == DType::bf16);
  quant::launch_produced(prod, M, I, opt_gate, tg, tu,
                         vector_ok(I, {&dh, &gate, &up, &dgate, &dup}), tiles, stream_, sm_count_);
}

}  // namespace fp8rl
