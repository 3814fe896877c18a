// Generation cases: decode steps recorded as graphs (DecodeGraphs::automatic) against the same
// generation run eagerly (DecodeGraphs::off) on the backend under test, for a small random
// Qwen3 model in bf16 and fp8 (+ fp8 KV cache), greedy and sampled. The graph path runs a padded
// bucket of rows (another GEMM M than the eager step), so trajectories may part after a rounding
// difference that bf16 activations amplify (seen on the CPU with the unrecorded step: 16 of 20
// sequences identical). What must hold is what the trainer sees: every generated token's
// log-probability g against the trainer's p for the same tokens (one full forward, no cache).
// The graph run's mean |p − g| must stay within 1.5× the eager run's + 1e-3 and its worst within
// the eager worst + 0.05: stale inputs, a wrong row or an unreplayed step give errors of order 1.
// The recordings must have been replayed (a backend that cannot record fails with the reason).
// Stop tokens make the batch shrink, usually into a second bucket while enough steps remain for
// a second recording (the count is printed). On the CPU (no graphs) the cases skip: test_rollout
// checks the padded step there, bucket changes included.
#include <cmath>

#include "core/error.hpp"
#include "model/decoder.hpp"
#include "op_case.hpp"
#include "rollout/generator.hpp"

namespace fp8rl::optest {
namespace {

ModelConfig generation_model() {
  return small_decoder(1000, 128);
}

struct PgError {
  double mean = 0, worst = 0;  // |p − g| over all generated tokens (NaN counts as worst)
  int64_t tokens = 0;
};

// The trainer's p (one forward over prompt + response) against the recorded g of every token.
PgError p_vs_g(DecoderModel& m, const std::vector<Sequence>& seqs, float inv_t) {
  PgError e;
  double sum = 0;
  for (const Sequence& s : seqs) {
    std::vector<int32_t> ids = s.prompt;
    ids.insert(ids.end(), s.response.begin(), s.response.end() - 1);
    std::vector<int32_t> targets(ids.begin() + 1, ids.end());
    targets.push_back(s.response.back());
    const auto r = m.forward(ids, targets, 1, static_cast<int64_t>(ids.size()), inv_t, false);
    const size_t first = r.logp.size() - s.response.size();
    for (size_t k = 0; k < s.response.size(); ++k) {
      const double d = std::abs(double(r.logp[first + k]) - s.logprobs[k]);
      sum += d;
      if (!(d <= e.worst)) e.worst = d;
    }
    e.tokens += static_cast<int64_t>(s.response.size());
  }
  e.mean = e.tokens > 0 ? sum / static_cast<double>(e.tokens) : 0.0;
  return e;
}

Result graphs_vs_eager(Backend& test, Rng& rng, Precision p, KvDType kv, double temperature) {
  if (test.name() == "cpu")
    return skip("the CPU backend records no graphs (test_rollout checks the padded step)");
  const ModelConfig cfg = generation_model();
  DecoderModel m(test, cfg, PrecisionMap(cfg.num_hidden_layers, p), rng.next(), 0.05);
  Generator eager(m, {kv, 0, SamplingSite::backend, DecodeGraphs::off});
  Generator graphs(m, {kv, 0, SamplingSite::backend, DecodeGraphs::automatic});
  // 20 prompts (bucket 32) of 3–17 tokens.
  std::vector<std::vector<int32_t>> prompts(20);
  for (auto& pr : prompts) {
    const int64_t len = 3 + static_cast<int64_t>(rng.next() % 15);
    for (int64_t t = 0; t < len; ++t)
      pr.push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size)));
  }
  if (kv == KvDType::fp8) {
    eager.calibrate(prompts);
    graphs.set_kv_scales(eager.kv_scales());
  }
  SamplingParams sp;
  sp.temperature = temperature;
  sp.max_new_tokens = 64;
  sp.seed = rng.next();
  // One token in 40 ends a sequence: the batch shrinks through buckets while steps remain.
  for (int32_t t = 0; t < cfg.vocab_size; t += 40) sp.stop_tokens.push_back(t);
  const auto a = eager.generate(prompts, sp);
  const auto b = graphs.generate(prompts, sp);
  const RolloutStats& st = graphs.last_stats();
  if (st.graph_steps == 0)
    return fail("no decode step replayed a graph: " +
                (st.graphs_unused.empty() ? std::string("(no reason given)") : st.graphs_unused));
  const float inv_t = temperature > 0 ? static_cast<float>(1.0 / temperature) : 1.0f;
  const PgError pe = p_vs_g(m, a, inv_t), pg = p_vs_g(m, b, inv_t);
  const std::string what =
      fmt("mean |p - g| %.3g (eager %.3g, bound %.3g), worst %.3g (eager %.3g, bound %.3g) over "
          "%lld tokens; %lld of %lld decode steps replayed, %lld recordings (%.1f ms)",
          pg.mean, pe.mean, 1.5 * pe.mean + 1e-3, pg.worst, pe.worst, pe.worst + 0.05,
          static_cast<long long>(pg.tokens), static_cast<long long>(st.graph_steps),
          static_cast<long long>(st.decode_steps), static_cast<long long>(st.graph_captures),
          st.capture_seconds * 1e3);
  if (!(pg.mean <= 1.5 * pe.mean + 1e-3) || !(pg.worst <= pe.worst + 0.05)) return fail(what);
  return pass(what);
}

}  // namespace

void add_generation_cases(Registry& reg) {
  struct Mode {
    const char* name;
    Precision p;
    KvDType kv;
  };
  for (const Mode& mode : {Mode{"bf16", Precision::bf16, KvDType::bf16},
                           Mode{"fp8_kv_fp8", Precision::fp8, KvDType::fp8}})
    for (double t : {0.0, 1.0}) {
      const std::string name =
          std::string("decode_graphs/") + mode.name + (t > 0 ? "/sampled" : "/greedy");
      reg.push_back({name, [mode, t](Backend&, Backend& test, Rng& rng) {
                       return graphs_vs_eager(test, rng, mode.p, mode.kv, t);
                     }});
    }
}

}  // namespace fp8rl::optest
