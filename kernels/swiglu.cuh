// SwiGLU's element formulas and the producers that quantize_produced_kernel runs, shared by
// swiglu.cu and the CUDA emulation's test (tests/emulation/test_quantize_emulated.cpp). Shapes
// as in swiglu.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops_common.cuh"
#include "quantize.cuh"

namespace fp8rl::swiglu_kernels {

using cuda::In, cuda::Out;

// The element formulas, one spelling for the plain kernels and the fused producers below (so
// that both round the same operations).
__device__ __forceinline__ float swiglu_value(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}
struct SwigluGrads {
  float dgate, dup;
};
__device__ __forceinline__ SwigluGrads swiglu_grads(float d, float g, float u) {
  const float sig = 1.0f / (1.0f + expf(-g));
  return {d * u * sig * __fadd_rn(1.0f, __fmul_rn(g, 1.0f - sig)), d * (g * sig)};
}

// h = SwiGLU(gate, up) [M, I] for quantize_produced_kernel, stored to h when it has data. gate
// and up rows ld elements apart (I; 2I for the halves of a stacked gate/up projection).
struct SwigluProducer {
  static constexpr int kOutputs = 1;
  In gate, up;
  Out h;
  int64_t I, ld;
  __device__ __forceinline__ float value(int, int64_t r, int64_t c) const {
    const int64_t i = r * I + c, s = r * ld + c;
    const float v = h.round(swiglu_value(gate[s], up[s]));
    if (h.p) h.store(i, v);
    return v;
  }
  __device__ __forceinline__ void value8(int, int64_t r, int64_t c, float (&v)[8]) const {
    const int64_t i = r * I + c, s = r * ld + c;
    float g[8], u[8];
    quant::load8(gate, s, g);
    quant::load8(up, s, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = h.round(swiglu_value(g[j], u[j]));
    if (h.p) quant::store8(h, i, v);
  }
};

// Output 0: dgate, output 1: dup of SwiGLU's backward [M, I], each stored when it has data. The
// second output recomputes from the inputs the first just read (cached).
struct SwigluGradProducer {
  static constexpr int kOutputs = 2;
  In dh, gate, up;
  Out dgate, dup;
  int64_t I;
  __device__ __forceinline__ float value(int o, int64_t r, int64_t c) const {
    const int64_t i = r * I + c;
    const SwigluGrads g = swiglu_grads(dh[i], gate[i], up[i]);
    const Out& out = o == 0 ? dgate : dup;
    const float v = out.round(o == 0 ? g.dgate : g.dup);
    if (out.p) out.store(i, v);
    return v;
  }
  __device__ __forceinline__ void value8(int o, int64_t r, int64_t c, float (&v)[8]) const {
    const int64_t i = r * I + c;
    float d[8], g[8], u[8];
    quant::load8(dh, i, d);
    quant::load8(gate, i, g);
    quant::load8(up, i, u);
    const Out& out = o == 0 ? dgate : dup;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const SwigluGrads gr = swiglu_grads(d[j], g[j], u[j]);
      v[j] = out.round(o == 0 ? gr.dgate : gr.dup);
    }
    if (out.p) quant::store8(out, i, v);
  }
};

}  // namespace fp8rl::swiglu_kernels
