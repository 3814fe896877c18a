// The CPU backend's FP32 GEMM: one fixed order of operations per output element, so results
// are bit-identical for any batch layout, thread count and x86-64 instruction set.
#pragma once

#include <cstdint>
#include <vector>

namespace fp8rl {

// Instruction-set paths of the kernel. They differ in speed only: every path computes the
// same bits (tested), and FP8RL_CPU_GEMM=generic|avx2|avx512 picks one for the process.
enum class CpuGemmPath { generic, avx2, avx512 };
const char* cpu_gemm_path_name(CpuGemmPath p);
// The paths this CPU can run, slowest first (generic always).
std::vector<CpuGemmPath> cpu_gemm_paths();
// FP8RL_CPU_GEMM when set (an error naming the choices if this CPU lacks it), else the fastest.
CpuGemmPath cpu_gemm_default_path();

// C[M,N] = A[M,K] · B[N,K]ᵀ + beta·C in FP32 (row-major, K contiguous in A and B). Each element:
//   acc = (beta == 0 ? 0 : beta · C[i][j]);  for k = 0 … K−1: acc = acc + A[i][k] · B[j][k]
// with every product and sum rounded to FP32 (no FMA). beta == 0 never reads C.
void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C);
void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C, CpuGemmPath path);

}  // namespace fp8rl
