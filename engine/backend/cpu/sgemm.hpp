// The CPU backend's GEMM: one fixed order of FP32 operations per output element, so results
// are bit-identical for any batch layout, thread count and x86-64 instruction set. Operands may
// be FP32, BF16 or block-scaled FP8: the kernel reads each element as the FP32 value it stands
// for while packing its panels (no separate widening or dequantization pass over the matrix).
#pragma once

#include <cstdint>
#include <vector>

#include "fp8/format.hpp"

namespace fp8rl {

// Instruction-set paths of the kernel. They differ in speed only: every path computes the
// same bits (tested), and FP8RL_CPU_GEMM=generic|avx2|avx512 picks one for the process.
enum class CpuGemmPath { generic, avx2, avx512 };
const char* cpu_gemm_path_name(CpuGemmPath p);
// The paths this CPU can run, slowest first (generic always).
std::vector<CpuGemmPath> cpu_gemm_paths();
// FP8RL_CPU_GEMM when set (an error naming the choices if this CPU lacks it), else the fastest.
CpuGemmPath cpu_gemm_default_path();

// One operand of cpu_gemm_nt, [rows, cols] row-major with the contracted dimension contiguous.
// Element (r, c) is read as the FP32 value it stands for:
//   f32:  data[r·cols + c]
//   bf16: the BF16 value data[r·cols + c] widened (exact)
//   fp8:  table[codes[r·cols + c]] · scale_inv[scale_index(block, rows, cols, r, c)], one
//         rounded FP32 product — the value Backend::dequantize writes.
struct CpuGemmOperand {
  enum class Kind : uint8_t { f32, bf16, fp8 };
  Kind kind = Kind::f32;
  const void* data = nullptr;
  int64_t rows = 0, cols = 0;
  const float* scale_inv = nullptr;  // fp8
  const float* table = nullptr;      // fp8: the format's 256 decoded codes
  ScaleBlock block = ScaleBlock::row1x128;
};

// C[M,N] = A[M,K] · B[N,K]ᵀ + beta·C. Each element:
//   acc = (beta == 0 ? 0 : beta · C[i][j]);  for k = 0 … K−1: acc = acc + A[i][k] · B[j][k]
// with every product and sum rounded to FP32 (no FMA), A and B read as above. beta == 0 never
// reads C. C is FP32, or BF16 (c_bf16: the FP32 result rounded once to nearest even; C read as
// its widened value when beta != 0).
void cpu_gemm_nt(int64_t M, int64_t N, int64_t K, const CpuGemmOperand& A, const CpuGemmOperand& B,
                 float beta, void* C, bool c_bf16, CpuGemmPath path);

// What cpu_gemm_nt has done since the process started: calls, floating-point operations
// (2·M·N·K each) and wall seconds inside it (benchmarks take differences).
struct CpuGemmTotals {
  int64_t calls = 0;
  double flops = 0, seconds = 0;
};
CpuGemmTotals cpu_gemm_totals();

// The FP32 case: A[M,K], B[N,K], C[M,N] row-major FP32.
void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C);
void cpu_sgemm_nt(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                  float* C, CpuGemmPath path);

}  // namespace fp8rl
