// Attention forward and backward on tensor cores (attention_mma.cu): BF16 operands, head dim 64
// or 128, behind the kernel option attention_mma (CudaBackend::attention_forward / _backward
// choose).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

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

// Operands of attention_forward_mma (shapes as Backend::attention_forward): q, o [B·T, Hq·D],
// k, v [B·T, Hkv·D], all BF16; lse [B, Hq, T] f32 (natural log), written.
struct AttentionMmaForwardArgs {
  const void *q, *k, *v;
  void* o;
  float* lse;
  int64_t B, T;
  int Hq, Hkv, D;
  float scale;
};

// Whether the tensor-core kernels take head dim D with these operand addresses (D 64 or 128;
// every address 16-byte aligned). The dtypes (all BF16) are the caller's check.
bool attention_mma_takes(int D, std::initializer_list<const void*> operands);

// o and lse on the tensor cores (one kernel on `stream`): FlashAttention-2's forward, P rounded
// to BF16 for P·V, the sums and the softmax statistics in FP32; needs attention_mma_takes.
void attention_forward_mma(const AttentionMmaForwardArgs& a, cudaStream_t stream);

// dq, dk and dv on the tensor cores (two kernels on `stream`, after di is written); needs
// attention_mma_takes. Errors name the kernel.
void attention_backward_mma(const AttentionMmaArgs& a, cudaStream_t stream);

}  // namespace fp8rl::cuda
