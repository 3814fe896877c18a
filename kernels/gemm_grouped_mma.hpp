// Block-scaled FP8 grouped GEMM in one launch on the tensor cores (gemm_grouped_mma.cu), behind
// the kernel option gemm_grouped_kernel = 3 (CudaBackend::gemm_fp8_grouped chooses).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fp8rl::cuda {

// Operands of Backend::gemm_fp8_grouped: a [ΣM_g, K] 1x128 codes with their scales in the
// grouped layout (group g's [KB, M_g] at a_scales + KB·first_g), b[g] [N, K] 128x128 tiles
// (codes, scales as scale_index lays them), c [ΣM_g, N] f32 or bf16; rows: M_g per group.
struct GroupedMmaArgs {
  const uint8_t* a = nullptr;
  const float* a_scales = nullptr;
  std::vector<const uint8_t*> b;
  std::vector<const float*> b_scales;
  std::vector<int64_t> rows;
  void* c = nullptr;
  bool c_bf16 = false;
  int64_t N = 0, K = 0;
  float beta = 0.0f;
  bool e4m3 = true;  // both operands' format: E4M3, else E5M2
};

// Why the kernel cannot take these operands, "" when it can: K a multiple of 16 and the codes
// 16-byte aligned (cp.async), beta 0 for a bf16 c.
std::string grouped_mma_problem(const GroupedMmaArgs& a);

// c = per group a_g · b[g]ᵀ + beta·c_g with FP32 accumulation: one kernel on `stream` per 128
// groups, no host synchronisation. Needs grouped_mma_problem(a) == "".
void gemm_fp8_grouped_mma(const GroupedMmaArgs& a, cudaStream_t stream);

}  // namespace fp8rl::cuda
