// The tensor-core decode kernel over an FP8 or BF16 KV cache (kernels/attention_decode_mma.cu)
// on the CPU through the CUDA emulation (cuda_emulation.hpp: fibers for threads, ldmatrix
// (.trans) and mma.sync m16n8k16 f16 / BF16 by the PTX ISA's fragment tables, deferred or eager
// cp.async), against FP64 attention over the values the cache stands for (attention_cached's
// definition). What it checks without a GPU: the fragment layouts of both cache kinds (for FP8
// the permuted head-dim order of the scores and the byte permute that splits p·V's B fragments
// into even and odd columns), the swizzled shared rows, stages that end inside a warp's keys,
// ragged lengths in one batch, query-head batches of 8, q's power-of-two scaling (heads of very
// different magnitudes), BF16 p as two terms, splits (the partial results, combined here in FP64
// as decode_attention_combine_kernel does), splits past a row's keys, rows with an invalid slot
// or length (zeros), NaN past a row's length never read, and no unwritten shared memory read.
// With one split, the epilogue that quantizes o's blocks as it writes o (attention_cached_fp8)
// must leave o's bits as they were and make the CPU backend's codes and scales of that o, bit
// for bit (E4M3, and E5M2 with power-of-two scales).
// Bounds, relative to the largest |o| of the head: 5e-3 for the BF16 output of one split (its
// rounding: up to 2^-8 of an element), 1e-3 (FP8) and 1e-4 (BF16) for the FP32 partials. What it
// cannot check: timing, bank conflicts, the hardware's summation inside an mma.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_decode_mma.hpp"
#include "backend/backend_registry.hpp"

namespace {

using namespace fp8rl;

constexpr int64_t kD = cuda::kDecodeMmaHeadDim;

struct Case {
  const char* name;
  std::vector<int32_t> lengths;  // per row; 0: an invalid row
  int Hq, Hkv, splits;
  bool bad_slot = false;  // row 0 reads slot -1
  bool fp8 = true;        // the cache: E4M3 codes with scales, else BF16
};

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool run(const Case& cs, unsigned seed, bool eager) {
  emu::eager_copies = eager;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = static_cast<int64_t>(cs.lengths.size()), slots = n + 1;
  int64_t max_len = 1;
  for (int32_t l : cs.lengths) max_len = std::max<int64_t>(max_len, l);
  max_len += 5;
  const int64_t width = cs.Hkv * kD;
  const float k_si = 0.011f, v_si = 0.013f, scale = 1.0f / std::sqrt(static_cast<float>(kD));

  // Cache: NaN everywhere (E4M3 0x7f, BF16 0xffff), random values where a row attends (kv,
  // vv: the values they stand for); row i reads slot n - i.
  const size_t cells = static_cast<size_t>(slots * max_len * width), es = cs.fp8 ? 1 : 2;
  std::vector<uint8_t> kc(cells * es, cs.fp8 ? 0x7f : 0xff), vc(kc.size(), kc[0]);
  std::vector<float> kv(cells, NAN), vv(cells, NAN);
  std::vector<int32_t> slot_of(static_cast<size_t>(n)), lengths = cs.lengths;
  auto put = [&](std::vector<uint8_t>& bytes, std::vector<float>& val, size_t at, float si) {
    if (cs.fp8) {
      bytes[at] = __nv_cvt_float_to_fp8(normal(rng) / si * 0.05f, __NV_SATFINITE, __NV_E4M3);
      val[at] = static_cast<float>(emu::fp8_value(bytes[at], true) * si);
    } else {
      const uint16_t b = to_bf16(normal(rng));
      std::memcpy(&bytes[2 * at], &b, 2);
      val[at] = from_bf16(b);
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    slot_of[i] = static_cast<int32_t>(n - i);
    const int64_t len = std::clamp<int64_t>(lengths[i], 0, max_len);
    for (int64_t j = 0; j < len; ++j)
      for (int64_t e = 0; e < width; ++e) {
        const size_t at = static_cast<size_t>((slot_of[i] * max_len + j) * width + e);
        put(kc, kv, at, k_si);
        put(vc, vv, at, v_si);
      }
  }
  if (cs.bad_slot) slot_of[0] = -1;
  // q: BF16, each head's magnitude 2^u, u in [-12, 6], so q's scaling is exercised.
  std::vector<uint16_t> q(static_cast<size_t>(n * cs.Hq * kD));
  std::uniform_int_distribution<int> mag(-12, 6);
  for (int64_t h = 0; h < n * cs.Hq; ++h) {
    const float m = std::ldexp(1.0f, mag(rng));
    for (int64_t d = 0; d < kD; ++d) q[static_cast<size_t>(h * kD + d)] = to_bf16(normal(rng) * m);
  }

  cuda::DecodeMmaArgs a;
  std::vector<uint16_t> o(q.size(), 0xffff);  // NaN: every element must be written
  std::vector<float> ml(static_cast<size_t>(n * cs.Hq * cs.splits * 2), NAN),
      acc(static_cast<size_t>(n * cs.Hq * cs.splits * kD), NAN);
  a.fp8 = cs.fp8;
  a.q = q.data();
  a.o = o.data();
  a.cache_k = kc.data();
  a.cache_v = vc.data();
  a.k_scale_inv = cs.fp8 ? &k_si : nullptr;
  a.v_scale_inv = cs.fp8 ? &v_si : nullptr;
  a.slot_ids = slot_of.data();
  a.lengths = lengths.data();
  a.part_ml = ml.data();
  a.part_acc = acc.data();
  a.n = n;
  a.num_slots = slots;
  a.max_len = max_len;
  a.width = width;
  a.Hq = cs.Hq;
  a.Hkv = cs.Hkv;
  a.splits = cs.splits;
  a.scale = scale;
  const std::string problem = cuda::decode_mma_problem(a);
  if (!problem.empty()) {
    std::printf("FAIL %s: %s\n", cs.name, problem.c_str());
    return false;
  }
  cuda::attention_decode_mma(a, 0, nullptr);

  // FP64 reference over the dequantized cache (value = code · scale_inv rounded to FP32).
  const int64_t group = cs.Hq / cs.Hkv;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < cs.Hq; ++h) {
      const int64_t slot = slot_of[i], len = lengths[i];
      const bool valid = slot >= 0 && slot < slots && len >= 1 && len <= max_len;
      std::vector<double> want(kD, 0.0);
      if (valid) {
        const int64_t col = (h / group) * kD;
        std::vector<double> sc(static_cast<size_t>(len));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < kD; ++d)
            dot += static_cast<double>(from_bf16(q[(i * cs.Hq + h) * kD + d])) *
                   kv[(slot * max_len + j) * width + col + d];
          sc[j] = dot * scale;
          mx = std::max(mx, sc[j]);
        }
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int64_t d = 0; d < kD; ++d) {
          double s = 0;
          for (int64_t j = 0; j < len; ++j) s += sc[j] * vv[(slot * max_len + j) * width + col + d];
          want[d] = s / sum;
        }
      }
      std::vector<double> got(kD);
      if (cs.splits == 1) {
        for (int64_t d = 0; d < kD; ++d) got[d] = from_bf16(o[(i * cs.Hq + h) * kD + d]);
      } else {  // decode_attention_combine_kernel's merge, in FP64
        const int64_t base = (i * cs.Hq + h) * cs.splits;
        double m = -INFINITY, l = 0;
        for (int z = 0; z < cs.splits; ++z)
          m = std::max(m, static_cast<double>(ml[2 * (base + z)]));
        for (int z = 0; z < cs.splits; ++z)
          if (ml[2 * (base + z)] != -INFINITY)
            l += ml[2 * (base + z) + 1] * std::exp(ml[2 * (base + z)] - m);
        for (int64_t d = 0; d < kD; ++d) {
          double v = 0;
          for (int z = 0; z < cs.splits; ++z)
            if (ml[2 * (base + z)] != -INFINITY)
              v += acc[(base + z) * kD + d] * std::exp(ml[2 * (base + z)] - m);
          got[d] = l == 0 ? 0.0 : v / l;
        }
      }
      double big = 0, err = 0;
      for (int64_t d = 0; d < kD; ++d) big = std::max(big, std::fabs(want[d]));
      for (int64_t d = 0; d < kD; ++d) {
        const double e = std::fabs(got[d] - want[d]);
        err = std::isnan(got[d]) ? INFINITY : std::max(err, e);
      }
      const double rel = big > 0 ? err / big : err;
      worst = std::max(worst, rel);
      const double bound = cs.splits == 1 ? 5e-3 : cs.fp8 ? 1e-3 : 1e-4;
      if (!(rel <= bound) || (!valid && err != 0)) {
        std::printf(
            "FAIL %s (%s copies): row %lld head %lld: error %.3g of the largest |o| "
            "(bound %.0e)\n",
            cs.name, eager ? "eager" : "deferred", static_cast<long long>(i),
            static_cast<long long>(h), rel, bound);
        return false;
      }
    }
  if (cs.splits == 1) {
    // The same launch quantizing o's blocks as it writes o (attention_cached_fp8): o the same
    // bits, codes and scales those of the CPU backend's quantize of that o. E4M3 on the
    // deferred copies, E5M2 with power-of-two scales on the eager ones.
    const QuantOptions opt{eager ? Fp8Format::e5m2 : Fp8Format::e4m3, eager, nullptr};
    const int64_t cols = cs.Hq * kD;
    std::vector<uint16_t> o2(q.size(), 0xffff);
    std::vector<uint8_t> codes(q.size(), 0xa5), want_codes(q.size(), 0x5a);
    std::vector<float> sc(static_cast<size_t>(scale_count(ScaleBlock::row1x128, n, cols)), NAN),
        want_sc(sc.size(), -1.0f);
    a.o = o2.data();
    a.codes = codes.data();
    a.scale_inv = sc.data();
    a.e5m2 = opt.format == Fp8Format::e5m2;
    a.pow2 = opt.pow2_scales;
    cuda::attention_decode_mma(a, 0, nullptr);
    const auto cpu = make_cpu_backend();
    cpu->quantize(
        Matrix{o.data(), n, cols, DType::bf16},
        Fp8Matrix{want_codes.data(), want_sc.data(), n, cols, ScaleBlock::row1x128, opt.format},
        opt, nullptr);
    const char* bad = o2 != o               ? "o differs from the launch without codes"
                      : codes != want_codes ? "codes differ from the CPU's quantize of o"
                      : std::memcmp(sc.data(), want_sc.data(), sc.size() * 4) != 0
                          ? "scales differ from the CPU's quantize of o"
                          : nullptr;
    if (bad) {
      std::printf("FAIL %s (%s copies, %s o): %s\n", cs.name, eager ? "eager" : "deferred",
                  fp8_format_name(opt.format), bad);
      return false;
    }
  }
  std::printf("ok   %-58s %-8s worst %.2e%s\n", cs.name, eager ? "eager" : "deferred", worst,
              cs.splits == 1 ? ", quantized o exact" : "");
  return true;
}

}  // namespace

int main() {
  const std::vector<Case> cases = {
      {"lengths 1,63,64,65,130; 4 heads on 1 kv head", {1, 63, 64, 65, 130}, 4, 1, 1},
      {"lengths 200,7; 8 heads on 2 kv heads (Qwen3's group of 4)", {200, 7}, 8, 2, 1},
      {"length 77; 10 heads on 1 kv head (batches of 8 and 2)", {77}, 10, 1, 1},
      {"lengths 150,1,64; 3 splits (splits past a row's keys)", {150, 1, 64}, 2, 1, 3},
      {"lengths 129,0,40; row 0's slot -1, row 1's length 0; 2 splits",
       {129, 0, 40},
       1,
       1,
       2,
       true},
      {"lengths 5,33; one head per kv head, 1 split; a bad slot", {5, 33}, 2, 2, 1, true},
      {"bf16 cache: lengths 1,63,64,65,130; 4 heads on 1 kv head",
       {1, 63, 64, 65, 130},
       4,
       1,
       1,
       false,
       false},
      {"bf16 cache: length 77; 10 heads on 2 kv heads", {77}, 10, 2, 1, false, false},
      {"bf16 cache: lengths 150,1,64; 3 splits", {150, 1, 64}, 2, 1, 3, false, false},
      {"bf16 cache: lengths 129,0,40; a bad slot; 2 splits", {129, 0, 40}, 1, 1, 2, true, false},
  };
  bool ok = true;
  unsigned seed = 1;
  for (const Case& cs : cases)
    for (bool eager : {false, true}) ok = run(cs, seed++, eager) && ok;
  std::printf(ok ? "all passed\n" : "FAILED\n");
  return ok ? 0 : 1;
}
