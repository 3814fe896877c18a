// The PTX the tensor-core kernels share (attention_mma.cu, attention_decode.cu,
// attention_decode_mma.cu, gemm_grouped_mma.cu, linear_fp8.cuh, linear_fp8_stream.cu): cp.async
// 16-byte copies, ldmatrix, and the mma.sync shapes. One definition each, so that the CUDA
// emulation (tests/emulation/emulate_kernel.py) replaces them in one place: its host copy of this
// header stands in for it in every emulated kernel.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16" / "mma.m16n8k32", "ldmatrix"):
// lane = threadIdx.x % 32, g = lane / 4, c = lane % 4.
//  m16n8k16 (.bf16, .f16: two values a register, the lower k low): a0 = (row g, k 2c, 2c+1),
//    a1 = (row g+8, k 2c, 2c+1), a2 = (row g, k 2c+8, 2c+9), a3 = (row g+8, k 2c+8, 2c+9);
//    b0 = (k 2c, 2c+1, col g), b1 = (k 2c+8, 2c+9, col g).
//  m16n8k32 (.e4m3, .e5m2: four a register, the lowest k in the lowest byte): a0 = (row g,
//    k 4c..4c+3), a1 = (row g+8, the same), a2 = (row g, k 16+4c..), a3 = (row g+8, k 16+4c..);
//    b0 = (k 4c..4c+3, col g), b1 = (k 16+4c.., col g).
//  C / D (f32): c0, c1 = (row g, cols 2c, 2c+1), c2, c3 = (row g+8, cols 2c, 2c+1).
//  ldmatrix .m8n8.x4.b16: lanes 8i .. 8i+7 give matrix i's 8 row addresses (16 bytes each); a
//    lane's register i holds bytes 4c .. 4c+3 of row g; with .trans, b16 element g of rows 2c
//    (low half) and 2c+1 (high half).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fp8rl::cuda::ptx {

// A shared-memory address as the PTX state space sees it.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async.cg of 16 bytes (global → shared, bypassing L1), its commit and wait (all but the N
// most recent groups landed).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8x8 b16 matrices from shared memory (addr: this lane's row address), and transposed.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a·b, one m16n8k16 product of BF16 operands with FP32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a·b, one m16n8k16 product of binary16 operands with FP32 accumulators.
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a·b, one m16n8k32 FP8 product with FP32 accumulators; both operands E4M3 (true) or both
// E5M2 (false), as Backend::gemm_fp8 pairs them.
template <bool kE4m3>
__device__ __forceinline__ void mma_fp8(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  if constexpr (kE4m3) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace fp8rl::cuda::ptx
