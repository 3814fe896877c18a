// Op cases for sample_tokens. On the CPU: the op against host sampling (sample_token, which
// shares its code: identical tokens and log-probabilities for the same uniform) and against
// references written here (the inverse-CDF definition on the CPU's exponentials, FP64
// log-softmax). Another backend against the CPU: log-probabilities within 1e-5 (plus the CPU's
// own FP32 rounding of lse, which grows with V), tokens equal except ties — rows where the CPU's
// cumulative sum at the boundary between the two choices lies within 1e-5·Σ e of u·Σ e, the
// float summation orders differing — which are counted and printed; any other difference fails.
//
// Rows cover uniforms 0, 0.999999, the largest Rng value (1 − 2⁻⁵³) and 1 (the last token with a
// non-zero probability), one dominant logit, trailing −inf logits, and rows that must draw no
// token (a NaN or +inf logit, every logit −inf).
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/sampling_rules.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "op_case.hpp"
#include "rollout/sampling.hpp"

namespace fp8rl::optest {
namespace {

constexpr double kLargestUniform = 1.0 - 0x1.0p-53;  // the largest Rng::uniform()

struct SamplingInput {
  int64_t M = 0, V = 0;
  double temperature = 1.0;  // ≤ 0: greedy (uniforms = nullptr, inv_t = 1)
  DType dtype = DType::f32;
  std::vector<float> logits;     // [M, V] as the backend sees them (bf16-representable for bf16)
  std::vector<double> uniforms;  // [M]
  std::vector<uint64_t> seeds;   // per row: Rng(seeds[m]).uniform() == uniforms[m] when drawn[m]
  std::vector<uint8_t> drawn;
  bool greedy() const { return temperature <= 0; }
  float inv_t() const { return greedy() ? 1.0f : static_cast<float>(1.0 / temperature); }
  const float* row(int64_t m) const { return logits.data() + m * V; }
};

struct SamplingOutput {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

// Rows: m < 8 special kinds (when M > 1), then random rows with every 16th dominated by one logit;
// in M = 64 rows 14 and 22 hold +inf and only −inf.
SamplingInput make_input(Rng& rng, int64_t M, int64_t V, double temperature, DType dt) {
  SamplingInput in;
  in.M = M;
  in.V = V;
  in.temperature = temperature;
  in.dtype = dt;
  in.logits.resize(static_cast<size_t>(M * V));
  in.uniforms.resize(static_cast<size_t>(M));
  in.seeds.resize(static_cast<size_t>(M));
  in.drawn.assign(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m) {
    float* x = in.logits.data() + m * V;
    const double scale = std::exp2(rng.uniform() * 5.0 - 2.0);  // 1/4 … 8: flat to peaked
    for (int64_t j = 0; j < V; ++j) x[j] = static_cast<float>(rng.normal() * scale);
    const int64_t kind = M == 1 ? 7 : m < 8 ? m : (m % 16 == 9 ? 2 : 7);
    const int64_t hot = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(V));
    if (kind == 2 || kind == 3) x[hot] = 40.0f;  // one dominant logit
    if (kind == 5)
      for (int64_t j = V - V / 4; j < V; ++j) x[j] = -INFINITY;
    if (kind == 6) x[hot] = NAN;
    if (M == 64 && m == 14) x[hot] = INFINITY;
    if (M == 64 && m == 22)
      for (int64_t j = 0; j < V; ++j) x[j] = -INFINITY;
    if (dt == DType::bf16)
      for (int64_t j = 0; j < V; ++j) x[j] = round_to_bf16(x[j]);
    const uint64_t seed = rng.next();
    in.seeds[static_cast<size_t>(m)] = seed;
    double u = Rng(seed).uniform();
    switch (kind) {
      case 0:
        u = 0.0;
        break;
      case 1:
      case 3:
        u = 0.999999;
        break;
      case 4:
        u = kLargestUniform;
        break;
      case 5:
        u = 1.0;
        break;
      default:
        in.drawn[static_cast<size_t>(m)] = 1;
        break;
    }
    in.uniforms[static_cast<size_t>(m)] = u;
  }
  return in;
}

// Uploads the case's logits into L in its dtype (BF16 rounded from the FP32 values).
void upload_logits(Guarded& L, const SamplingInput& in) {
  if (in.dtype == DType::f32) {
    L.upload(in.logits.data());
    return;
  }
  std::vector<bf16> b(in.logits.size());
  for (size_t i = 0; i < b.size(); ++i) b[i] = float_to_bf16(in.logits[i]);
  L.upload(b.data());
}

SamplingOutput run_op(Backend& be, const SamplingInput& in) {
  const size_t n = in.logits.size();
  Guarded L(be, n * dtype_size(in.dtype)), U(be, in.uniforms.size() * 8),
      T(be, static_cast<size_t>(in.M) * 4), P(be, static_cast<size_t>(in.M) * 4);
  upload_logits(L, in);
  U.upload(in.uniforms.data());
  be.sample_tokens(Matrix{L.data(), in.M, in.V, in.dtype}, in.inv_t(),
                   in.greedy() ? nullptr : static_cast<const double*>(U.data()),
                   static_cast<int32_t*>(T.data()), static_cast<float*>(P.data()));
  SamplingOutput out{std::vector<int32_t>(static_cast<size_t>(in.M)),
                     std::vector<float>(static_cast<size_t>(in.M))};
  check(T.download(out.tokens.data()) && P.download(out.logprobs.data()),
        "sample_tokens wrote outside its outputs (guard bytes changed)");
  return out;
}

// token_logprobs of the chosen tokens (row m's target: tokens[m], or 0 for a row without one) on
// the same logits: the trainer's p for those tokens.
std::vector<float> trainer_logprobs(Backend& be, const SamplingInput& in,
                                    const std::vector<int32_t>& tokens) {
  const size_t n = in.logits.size();
  Guarded L(be, n * dtype_size(in.dtype)), T(be, static_cast<size_t>(in.M) * 4),
      P(be, static_cast<size_t>(in.M) * 4);
  upload_logits(L, in);
  std::vector<int32_t> targets(tokens);
  for (auto& t : targets) t = std::max(t, 0);
  T.upload(targets.data());
  be.token_logprobs(Matrix{L.data(), in.M, in.V, in.dtype}, static_cast<const int32_t*>(T.data()),
                    in.inv_t(), static_cast<float*>(P.data()), nullptr);
  std::vector<float> lp(static_cast<size_t>(in.M));
  check(P.download(lp.data()), "token_logprobs wrote outside its output");
  return lp;
}

// The CPU's view of one row: its exponentials, FP64 cumulative sums in index order, FP32 lse,
// and the FP64 log-sum-exp.
struct RowRef {
  bool valid = false;
  std::vector<float> e;
  std::vector<double> cdf;
  double target = 0;
  float lse32 = 0;
  double lse64 = 0;
};

RowRef row_ref(const SamplingInput& in, int64_t m) {
  RowRef r;
  const int64_t V = in.V;
  const float* x = in.row(m);
  r.e.resize(static_cast<size_t>(V));
  r.lse32 = softmax_exps(x, V, in.inv_t(), r.e.data());
  r.valid = std::isfinite(r.lse32);
  if (!r.valid) return r;
  double mx = -INFINITY, s = 0;
  for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(x[j]) * in.inv_t());
  for (int64_t j = 0; j < V; ++j) s += std::exp(double(x[j]) * in.inv_t() - mx);
  r.lse64 = mx + std::log(s);
  r.cdf.resize(static_cast<size_t>(V));
  double acc = 0;
  for (int64_t j = 0; j < V; ++j)
    r.cdf[static_cast<size_t>(j)] = acc += r.e[static_cast<size_t>(j)];
  const double u = in.uniforms[static_cast<size_t>(m)];
  r.target = (u > 0 ? u : 0.0) * acc;
  return r;
}

// The token the definition gives: greedy, the first largest logit; otherwise the smallest j with
// cdf[j] > target, else the last j with e_j > 0.
int64_t defined_token(const SamplingInput& in, const RowRef& r, int64_t m) {
  const int64_t V = in.V;
  if (in.greedy()) {
    const float* x = in.row(m);
    int64_t best = 0;
    for (int64_t j = 1; j < V; ++j)
      if (x[j] > x[best]) best = j;
    return best;
  }
  for (int64_t j = 0; j < V; ++j)
    if (r.target < r.cdf[static_cast<size_t>(j)]) return j;
  int64_t last = V - 1;
  while (last > 0 && !(r.e[static_cast<size_t>(last)] > 0)) --last;
  return last;
}

// The CPU on its own: against the definition, FP64 log-softmax and host sampling.
Result self_check(Backend& cpu, const SamplingInput& in) {
  const SamplingOutput got = run_op(cpu, in);
  const std::vector<float> p = trainer_logprobs(cpu, in, got.tokens);
  const int64_t V = in.V;
  // lse comes from the FP32 sequential sum of token_logprobs, whose error bound is (V − 1)·2⁻²⁴
  // relative (near-equal terms in a flat row do round the same way: ~1e-4 at V = 151,936); the
  // check that matters is the bit-for-bit equality with token_logprobs.
  const double lp_tol = 1e-5 + double(V) * 0x1.0p-24;
  SamplingParams sp;
  sp.temperature = in.temperature;
  int64_t compared = 0;
  double worst = 0;
  for (int64_t m = 0; m < in.M; ++m) {
    const RowRef r = row_ref(in, m);
    const int32_t tok = got.tokens[static_cast<size_t>(m)];
    const float lp = got.logprobs[static_cast<size_t>(m)];
    if (!r.valid) {
      if (tok != -1 || !std::isnan(lp))
        return fail(fmt("row %lld: non-finite logits gave token %d, logprob %g (want -1, NaN)",
                        (long long)m, tok, lp));
      Rng rng(in.seeds[static_cast<size_t>(m)]);
      try {
        sample_token(in.row(m), V, sp, rng);
        return fail(fmt("row %lld: sample_token drew from non-finite logits", (long long)m));
      } catch (const Error&) {
      }
      continue;
    }
    const int64_t want = defined_token(in, r, m);
    if (tok != want)
      return fail(fmt("row %lld: token %d, the definition gives %lld (u %.17g)", (long long)m, tok,
                      (long long)want, in.uniforms[static_cast<size_t>(m)]));
    if (!(r.e[static_cast<size_t>(tok)] > 0) && !in.greedy())
      return fail(fmt("row %lld: token %d has probability 0", (long long)m, tok));
    if (std::memcmp(&lp, &p[static_cast<size_t>(m)], sizeof lp) != 0)
      return fail(fmt("row %lld: logprob %.9g, token_logprobs %.9g", (long long)m, lp,
                      p[static_cast<size_t>(m)]));
    const double want_lp = double(in.row(m)[tok]) * in.inv_t() - r.lse64;
    worst = std::max(worst, std::fabs(lp - want_lp));
    if (!(std::fabs(lp - want_lp) <= lp_tol))
      return fail(fmt("row %lld: logprob %.9g vs FP64 %.9g", (long long)m, lp, want_lp));
    if (in.drawn[static_cast<size_t>(m)] || in.greedy()) {  // host sampling: the same draw
      Rng rng(in.seeds[static_cast<size_t>(m)]);
      const Sampled s = sample_token(in.row(m), V, sp, rng);
      if (s.token != tok || std::memcmp(&s.logprob, &lp, sizeof lp) != 0)
        return fail(fmt("row %lld: sample_token gives %d (%.9g), the op %d (%.9g)", (long long)m,
                        s.token, s.logprob, tok, lp));
      ++compared;
    }
  }
  return pass(
      fmt("%lld rows identical to sample_token, logp = token_logprobs, max |logp - FP64| %.1e",
          (long long)compared, worst));
}

// Another backend against the CPU.
Result compare(Backend& cpu, Backend& test, const SamplingInput& in) {
  const SamplingOutput want = run_op(cpu, in), got = run_op(test, in);
  const SamplingOutput again = run_op(test, in);
  if (again.tokens != got.tokens ||
      std::memcmp(again.logprobs.data(), got.logprobs.data(), got.logprobs.size() * 4) != 0)
    return fail("two runs on the same inputs differ");
  const std::vector<float> p = trainer_logprobs(test, in, got.tokens);
  const int64_t V = in.V;
  int64_t ties = 0;
  double worst = 0, worst_p = 0;
  for (int64_t m = 0; m < in.M; ++m) {
    const int32_t a = got.tokens[static_cast<size_t>(m)], b = want.tokens[static_cast<size_t>(m)];
    const float lp = got.logprobs[static_cast<size_t>(m)];
    if (b < 0) {
      if (a != -1 || !std::isnan(lp))
        return fail(fmt("row %lld: non-finite logits gave token %d, logprob %g (want -1, NaN)",
                        (long long)m, a, lp));
      continue;
    }
    if (a < 0 || a >= V)
      return fail(
          fmt("row %lld: token %d outside [0, %lld) (CPU %d)", (long long)m, a, (long long)V, b));
    const RowRef r = row_ref(in, m);
    if (a != b) {
      // A tie: the CPU's cumulative sum at the boundary between a and b within 1e-5·Σ e of the
      // target, and a token of non-zero probability.
      if (in.greedy()) return fail(fmt("row %lld: greedy token %d, CPU %d", (long long)m, a, b));
      if (!(r.e[static_cast<size_t>(a)] > 0))
        return fail(fmt("row %lld: token %d has probability 0 (CPU %d)", (long long)m, a, b));
      const int64_t k = a < b ? a : a - 1;
      const double total = r.cdf.back();
      const double gap = std::fabs(r.cdf[static_cast<size_t>(k)] - r.target);
      if (!(gap <= 1e-5 * total))
        return fail(fmt("row %lld: token %d, CPU %d; the boundary is %.3g·Σe from u·Σe (u %.17g)",
                        (long long)m, a, b, gap / total, in.uniforms[static_cast<size_t>(m)]));
      ++ties;
    }
    // The trainer's p on this backend: the same lse, z rounded alike up to FMA contraction.
    const double z = double(in.row(m)[a] * in.inv_t());
    const double dp = std::fabs(double(lp) - p[static_cast<size_t>(m)]);
    worst_p = std::max(worst_p, dp);
    if (!(dp <= 1e-6 + std::fabs(z) * 0x1.0p-24))
      return fail(fmt("row %lld: logprob %.9g, this backend's token_logprobs %.9g", (long long)m,
                      lp, p[static_cast<size_t>(m)]));
    // The CPU's lse carries its FP32 sequential sum's error: allowed on top of 1e-5.
    const double want_lp = z - double(r.lse32);
    const double tol = 1e-5 + std::fabs(double(r.lse32) - r.lse64);
    worst = std::max(worst, std::fabs(lp - want_lp));
    if (!(std::fabs(lp - want_lp) <= tol))
      return fail(
          fmt("row %lld: logprob %.9g, CPU %.9g (tolerance %.2g)", (long long)m, lp, want_lp, tol));
  }
  return pass(
      fmt("ties %lld/%lld, max |logp - CPU| %.1e (bound 1e-5 + the CPU's FP32 lse error), "
          "max |logp - token_logprobs| %.1e",
          (long long)ties, (long long)in.M, worst, worst_p));
}

void add_case(Registry& reg, int64_t M, int64_t V, double temperature, DType dt) {
  const std::string mode = temperature <= 0 ? std::string("greedy") : fmt("T=%.2f", temperature);
  reg.push_back({fmt("sample_tokens %s [%lld,%lld] %s", dtype_name(dt), (long long)M, (long long)V,
                     mode.c_str()),
                 [=](Backend& ref, Backend& test, Rng& rng) {
                   const SamplingInput in = make_input(rng, M, V, temperature, dt);
                   return &ref == &test ? self_check(ref, in) : compare(ref, test, in);
                 }});
}

}  // namespace

void add_sampling_cases(Registry& reg) {
  const double temperatures[] = {1.0, 0.7, 1.3};
  int i = 0;
  for (int64_t V : {1, 15, 1000, 4097, 151936})
    for (int64_t M : {1, 7, 64}) add_case(reg, M, V, temperatures[i++ % 3], DType::f32);
  add_case(reg, 64, 151936, 0.6, DType::f32);
  add_case(reg, 7, 4097, 1.0, DType::bf16);
  add_case(reg, 64, 1000, 0.0, DType::f32);  // greedy
  add_case(reg, 7, 151936, 0.0, DType::bf16);
}

}  // namespace fp8rl::optest
