// The attention backward on tensor cores (attention_mma.cu): BF16 operands, head dim 64 or 128,
// behind the kernel option attention_mma (CudaBackend::attention_backward chooses).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fp8rl::cuda {

// Operands of attention_backward_mma (shapes as Backend::attention_backward): dout, q, dq
// [B·T, Hq·D], k, v, dk, dv [B·T, Hkv·D], all BF16; lse [B, Hq, T] (natural log) and
// di [B, Hq, T] = rowsum(dO ⊙ O), both f32.
struct AttentionMmaArgs {
  const void *dout, *q, *k, *v;
  const float *lse, *di;
  void *dq, *dk, *dv;
  int64_t B, T;
  int Hq, Hkv, D;
  float scale;
};

// Whether the tensor-core kernels take head dim D with these operand addresses (D 64 or 128;
// every address 16-byte aligned). The dtypes (all BF16) are the caller's check.
bool attention_mma_takes(int D, const AttentionMmaArgs& a);

// dq, dk and dv on the tensor cores (two kernels on `stream`, after di is written); needs
// attention_mma_takes. Errors name the kernel.
void attention_backward_mma(const AttentionMmaArgs& a, cudaStream_t stream);

}  // namespace fp8rl::cuda
