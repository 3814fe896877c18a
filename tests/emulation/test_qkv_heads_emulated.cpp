// The one-pass kernel of CudaBackend::qkv_heads (kernels/qkv_heads.cuh) on the CPU through the
// CUDA emulation, against what the ops one by one give on a device: q's and k's columns
// normalized per head by the emulated rmsnorm_forward_kernel (kernels/rmsnorm.cuh, warp rows)
// and rotated with rope_kernel's arithmetic (kernels/rope.cu: rope_inv_freq, sincosf, rounded
// products), v its columns. Bit for bit: q, k and v, BF16 and f32, with and without the QK-norm,
// head dims 64, 128 and 256, Llama 3's rope, CTAs walking several (row, head) units. What it
// cannot check: the device's own powf and sincosf (the GPU round's op cases compare the kernel
// with the ops there).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "qkv_heads.cuh"  // the emulated copies (emulate_kernel.py)
#include "rmsnorm.cuh"

namespace {

using namespace fp8rl;

uint16_t bf16_bits(float f) {  // round to nearest even (no NaN reaches it)
  const uint32_t u = __float_as_uint(f);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float bf16_value(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// An f32 or bf16 matrix on the host: its values and the bytes the kernels read and write.
struct Host {
  bool bf16;
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  int64_t rows, cols;
  Host(int64_t r, int64_t c, bool is_bf16) : bf16(is_bf16), rows(r), cols(c) {
    if (bf16)
      b16.assign(static_cast<size_t>(r * c), 0xffff);
    else
      f32.assign(static_cast<size_t>(r * c), NAN);
  }
  Matrix m() {
    return Matrix{bf16 ? static_cast<void*>(b16.data()) : f32.data(), rows, cols,
                  bf16 ? DType::bf16 : DType::f32};
  }
  float get(int64_t i) const { return bf16 ? bf16_value(b16[i]) : f32[i]; }
  void set(int64_t i, float v) {  // rounded as a store to this dtype
    if (bf16)
      b16[i] = bf16_bits(v);
    else
      f32[i] = v;
  }
  bool same(const Host& o) const { return bf16 ? b16 == o.b16 : f32 == o.f32; }
};

struct Case {
  int64_t M, hq, hkv, D;
  bool bf16, norm, llama3;
};

bool run(const Case& c, unsigned seed, int sm_count) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  const int64_t M = c.M, D = c.D, W = (c.hq + 2 * c.hkv) * D;
  Host qkv(M, W, c.bf16), qn(1, D, c.bf16), kn(1, D, c.bf16);
  for (int64_t i = 0; i < M * W; ++i) qkv.set(i, 2.0f * normal(rng));
  for (int64_t i = 0; i < D; ++i) {
    qn.set(i, 1.0f + 0.3f * normal(rng));
    kn.set(i, 1.0f + 0.3f * normal(rng));
  }
  std::vector<int32_t> pos(static_cast<size_t>(M));
  for (int32_t& p : pos) p = static_cast<int32_t>(rng() % 5000);
  Rope rope;
  if (c.llama3) {
    rope.theta = 500000.0f;
    rope.scaling = RopeScalingType::llama3;
    rope.factor = 8.0f;
  }
  Host q(M, c.hq * D, c.bf16), k(M, c.hkv * D, c.bf16), v(M, c.hkv * D, c.bf16);
  const Matrix nq = c.norm ? qn.m() : Matrix{}, nk = c.norm ? kn.m() : Matrix{};
  if (!qkv_heads_kernels::launch_qkv_heads(qkv.m(), c.hq, c.hkv, nq, nk, 1e-6f, pos.data(), rope,
                                           q.m(), k.m(), v.m(), nullptr, sm_count)) {
    std::printf("FAIL the kernel does not take heads of %lld\n", static_cast<long long>(D));
    return false;
  }

  // The ops one by one: columns, the norm kernel over the heads, rope's rotation, v's columns.
  Host q0(M, c.hq * D, c.bf16), k0(M, c.hkv * D, c.bf16), v0(M, c.hkv * D, c.bf16);
  auto part = [&](Host& out, int64_t col, int64_t heads, Host* w) {
    Host raw(M, heads * D, c.bf16);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < heads * D; ++j) raw.set(m * heads * D + j, qkv.get(m * W + col + j));
    if (w) {
      std::vector<float> rstd(static_cast<size_t>(M * heads));
      const Matrix r = raw.m(), o = out.m();
      rmsnorm_kernels::launch_rmsnorm_forward<true>(Matrix{r.data, M * heads, D, r.dtype}, w->m(),
                                                    1e-6f, Matrix{o.data, M * heads, D, o.dtype},
                                                    rstd.data(), nullptr, sm_count);
    } else {
      out = raw;
    }
    const int64_t half = D / 2;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const float angle = static_cast<float>(pos[m]) * rope_inv_freq(rope, i, D);
          float s, cs;
          sincosf(angle, &s, &cs);
          const int64_t a = m * heads * D + h * D + i, b = a + half;
          const float x1 = out.get(a), x2 = out.get(b);
          out.set(a, x1 * cs - x2 * s);
          out.set(b, x2 * cs + x1 * s);
        }
  };
  part(q0, 0, c.hq, c.norm ? &qn : nullptr);
  part(k0, c.hq * D, c.hkv, c.norm ? &kn : nullptr);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < c.hkv * D; ++j)
      v0.set(m * c.hkv * D + j, qkv.get(m * W + (c.hq + c.hkv) * D + j));

  const bool ok = q.same(q0) && k.same(k0) && v.same(v0);
  std::printf("%s qkv_heads M%lld %lld/%lld heads of %lld %s%s%s\n", ok ? "PASS" : "FAIL",
              static_cast<long long>(M), static_cast<long long>(c.hq),
              static_cast<long long>(c.hkv), static_cast<long long>(D), c.bf16 ? "bf16" : "f32",
              c.norm ? " qk-norm" : "", c.llama3 ? " llama3 rope" : "");
  if (!ok)
    std::printf("  differs in%s%s%s\n", q.same(q0) ? "" : " q", k.same(k0) ? "" : " k",
                v.same(v0) ? "" : " v");
  return ok;
}

}  // namespace

int main() {
  // {M, hq, hkv, D, bf16, norm, llama3}
  const Case cases[] = {
      {1, 4, 2, 128, true, true, false},  {3, 16, 8, 128, true, true, false},
      {5, 4, 1, 64, false, true, false},  {2, 2, 2, 256, true, true, false},
      {4, 8, 2, 128, true, false, true},  {7, 4, 4, 64, false, false, false},
      {9, 32, 8, 128, true, true, false},
  };
  int failed = 0, i = 0;
  for (const Case& c : cases)
    failed += run(c, 100u + static_cast<unsigned>(i), 1 + i % 2) ? 0 : 1, ++i;
  std::printf("%d of %d cases failed\n", failed, i);
  return failed == 0 ? 0 : 1;
}
