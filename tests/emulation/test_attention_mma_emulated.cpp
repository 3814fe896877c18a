// The tensor-core attention kernels (kernels/attention_mma.cu) run on the CPU through the CUDA
// emulation (cuda_emulation.hpp: fibers for threads, ldmatrix and mma.sync by the PTX ISA's
// fragment tables, deferred cp.async), forward and backward, against FP64 attention over the
// same BF16 inputs. What it checks without a GPU: the fragment layouts, the ldmatrix addresses,
// the causal mask, rows past T, GQA, several sequences, the double buffering's waits, the
// online softmax, and that no unwritten shared memory is read (it starts as NaN). Bounds:
// 1e-2 relative per output (the op cases' bound for the tensor cores; P and dS are rounded to
// BF16, ~3e-3 expected), lse 1e-5. What it cannot check: timing, bank conflicts, the hardware's
// own summation order inside an mma, and races the round-robin schedule does not expose.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "attention_mma.hpp"

namespace {

struct Case {
  int64_t B, T;
  int Hq, Hkv, D;
};

double norm(const std::vector<double>& x) {
  double s = 0;
  for (double y : x) s += y * y;
  return std::sqrt(s);
}

// ‖got − want‖ / ‖want‖, or ‖got‖ / ‖scale‖ where want is zero (dq, dk at T = 1: softmax over one
// key has no gradient); infinite when got has a non-finite value.
double error(const std::vector<double>& got, const std::vector<double>& want,
             const std::vector<double>& scale) {
  double d = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    d += (got[i] - want[i]) * (got[i] - want[i]);
  }
  const double n = norm(want);
  return n > 1e-9 * norm(scale) ? std::sqrt(d) / n : norm(got) / norm(scale);
}

std::vector<double> values(const std::vector<uint16_t>& bf16) {
  std::vector<double> out(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) out[i] = emu_bf2f(bf16[i]);
  return out;
}

bool run(const Case& cs, unsigned seed, bool eager) {
  emu::eager_copies = eager;
  const int64_t B = cs.B, T = cs.T, rows = B * T;
  const int Hq = cs.Hq, Hkv = cs.Hkv, D = cs.D, group = Hq / Hkv;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  auto make = [&](int64_t n) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = emu_f2bf(normal(rng));
    return v;
  };
  const std::vector<uint16_t> q = make(rows * Hq * D), k = make(rows * Hkv * D),
                              v = make(rows * Hkv * D), dout = make(rows * Hq * D);
  const std::vector<double> qd = values(q), kd = values(k), vd = values(v), gd = values(dout);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  // FP64 attention and its gradients.
  const auto n_q = static_cast<size_t>(rows * Hq * D), n_kv = static_cast<size_t>(rows * Hkv * D);
  std::vector<double> o_ref(n_q), lse_ref(static_cast<size_t>(B * Hq * T)), dq_ref(n_q, 0),
      dk_ref(n_kv, 0), dv_ref(n_kv, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t qi = (b * T + t) * Hq * D + h * D;
        auto key = [&](int64_t j) { return (b * T + j) * Hkv * D + (h / group) * D; };
        std::vector<double> s(static_cast<size_t>(t + 1)), p(s.size());
        double mx = -INFINITY, sum = 0, di = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int e = 0; e < D; ++e) dot += qd[qi + e] * kd[key(j) + e];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        for (double x : s) sum += std::exp(x - mx);
        const double lse = mx + std::log(sum);
        lse_ref[(b * Hq + h) * T + t] = lse;
        for (int64_t j = 0; j <= t; ++j) p[j] = std::exp(s[j] - lse);
        for (int e = 0; e < D; ++e) {
          double acc = 0;
          for (int64_t j = 0; j <= t; ++j) acc += p[j] * vd[key(j) + e];
          o_ref[qi + e] = acc;
          di += acc * gd[qi + e];
        }
        for (int64_t j = 0; j <= t; ++j) {
          double dp = 0;
          for (int e = 0; e < D; ++e) dp += gd[qi + e] * vd[key(j) + e];
          const double ds = p[j] * (dp - di);
          for (int e = 0; e < D; ++e) {
            dq_ref[qi + e] += scale * ds * kd[key(j) + e];
            dk_ref[key(j) + e] += scale * ds * qd[qi + e];
            dv_ref[key(j) + e] += p[j] * gd[qi + e];
          }
        }
      }

  // The kernels: the forward, di = rowsum(dO ⊙ O) in FP32 from its o (as attention.cu's di
  // kernel), the backward. Outputs start as NaN: every element must be written.
  std::vector<uint16_t> o(n_q, 0xffff), dq(n_q, 0xffff), dk(n_kv, 0xffff), dv(n_kv, 0xffff);
  std::vector<float> lse(lse_ref.size(), NAN), di(lse_ref.size());
  fp8rl::cuda::attention_forward_mma(
      {q.data(), k.data(), v.data(), o.data(), lse.data(), B, T, Hq, Hkv, D, scale}, nullptr);
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < Hq; ++h) {
      float acc = 0;
      for (int e = 0; e < D; ++e) {
        const size_t i = static_cast<size_t>((r * Hq + h) * D + e);
        acc += emu_bf2f(dout[i]) * emu_bf2f(o[i]);
      }
      di[static_cast<size_t>(((r / T) * Hq + h) * T + r % T)] = acc;
    }
  fp8rl::cuda::attention_backward_mma(
      {dout.data(), q.data(), k.data(), v.data(), lse.data(), di.data(), dq.data(), dk.data(),
       dv.data(), B, T, Hq, Hkv, D, scale},
      nullptr);

  const std::vector<double> lse_got(lse.begin(), lse.end()), dv_got = values(dv);
  const double e_o = error(values(o), o_ref, o_ref), e_lse = error(lse_got, lse_ref, lse_ref),
               e_dq = error(values(dq), dq_ref, dv_ref), e_dk = error(values(dk), dk_ref, dv_ref),
               e_dv = error(dv_got, dv_ref, dv_ref);
  const bool ok = e_o <= 1e-2 && e_lse <= 1e-5 && e_dq <= 1e-2 && e_dk <= 1e-2 && e_dv <= 1e-2;
  std::printf(
      "%s attention_mma B%lld T%lld Hq%d Hkv%d D%d, cp.async %s: rel. err o %.1e lse "
      "%.1e dq %.1e dk %.1e dv %.1e (bounds 1e-2, lse 1e-5)\n",
      ok ? "PASS" : "FAIL", static_cast<long long>(B), static_cast<long long>(T), Hq, Hkv, D,
      eager ? "eager" : "deferred", e_o, e_lse, e_dq, e_dk, e_dv);
  return ok;
}

}  // namespace

int main() {
  // Head dims 64 and 128; T: one token, less than a 64-row tile, one tile, two, a tile and one,
  // two and two, four and one; 1, 2, 4 and 8 query heads per kv head; 1-3 sequences.
  const std::vector<Case> cases = {{2, 7, 4, 2, 64},    {2, 1, 8, 1, 128},  {2, 64, 2, 2, 64},
                                   {1, 128, 2, 1, 128}, {1, 65, 8, 1, 128}, {3, 130, 4, 2, 64},
                                   {1, 257, 4, 2, 128}, {2, 257, 8, 1, 64}};
  // Each case with cp.async's copies deferred to their wait (a missing wait shows) and eager (a
  // missing barrier before a buffer's refill shows).
  int failed = 0, runs = 0;
  for (size_t i = 0; i < cases.size(); ++i)
    for (bool eager : {false, true}) {
      failed += run(cases[i], 100 + static_cast<unsigned>(i), eager) ? 0 : 1;
      ++runs;
    }
  std::printf("%d of %d runs failed\n", failed, runs);
  return failed == 0 ? 0 : 1;
}
