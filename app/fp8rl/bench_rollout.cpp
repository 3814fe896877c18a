// fp8rl bench rollout: decode throughput of a random-init Qwen3-shaped model with BF16 linears,
// FP8 linears, and FP8 linears + FP8 KV cache, at one or several batch sizes, in one run.
#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>

#include "bench.hpp"
#include "core/error.hpp"
#include "rollout/generator.hpp"

namespace fp8rl::cli::bench {

Json bench_rollout(Backend& be, const RolloutOptions& o) {
  const ModelConfig cfg = model_shape(o.model);
  check(!o.batches.empty(), "--batch: no batch size given");
  check(o.prompt_len > 0 && o.new_tokens > 0, "--prompt-len and --new-tokens must be positive");
  check(o.prompt_len + o.new_tokens <= cfg.max_position_embeddings,
        "--prompt-len + --new-tokens (" + std::to_string(o.prompt_len + o.new_tokens) +
            ") exceeds the model's " + std::to_string(cfg.max_position_embeddings) + " positions");
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::fflush(stdout);
  Json run = backend_json(be);
  run["model"] = o.model;
  run["model_shape"] = describe(cfg);
  run["prompt_len"] = o.prompt_len;
  run["new_tokens"] = o.new_tokens;

  // The same prompts at every batch size: the first B of one seeded list.
  const int64_t most = *std::max_element(o.batches.begin(), o.batches.end());
  Rng rng(5);
  std::vector<std::vector<int32_t>> all_prompts(static_cast<size_t>(most));
  for (auto& p : all_prompts)
    for (int64_t t = 0; t < o.prompt_len; ++t)
      p.push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size)));
  SamplingParams sp;
  sp.max_new_tokens = o.new_tokens;
  sp.seed = 1;
  SamplingParams warm = sp;
  warm.max_new_tokens = 2;
  struct Mode {
    const char* name;
    Precision p;
    KvDType kv;
    DecodeGraphs graphs = DecodeGraphs::automatic;
  };
  // A backend that records graphs also gets the BF16 mode without them: the graphs' own gain.
  std::vector<Mode> modes = {{"bf16 linears, bf16 KV", Precision::bf16, KvDType::bf16},
                             {"fp8 linears, bf16 KV", Precision::fp8, KvDType::bf16},
                             {"fp8 linears, fp8 KV", Precision::fp8, KvDType::fp8}};
  {
    std::string why;
    if (be.capture([] {}, why))
      modes.push_back(
          {"bf16, no decode graphs", Precision::bf16, KvDType::bf16, DecodeGraphs::off});
  }
  const int kModes = static_cast<int>(modes.size());
  // One model (one random initialisation, the slow part for large shapes): each mode switches
  // its linears' precision, which re-makes the compute copies from the same masters.
  DecoderModel model(be, cfg, uniform_precision(cfg, Precision::bf16), 7);
  std::vector<std::vector<RolloutStats>> stats(o.batches.size(),
                                               std::vector<RolloutStats>(modes.size()));
  // Ragged lengths (--ragged): each response's drawn from [ragged_min, new_tokens], the same
  // draws in every mode; only BF16 and FP8 + FP8 KV.
  std::vector<std::vector<std::optional<RolloutStats>>> ragged(
      o.batches.size(), std::vector<std::optional<RolloutStats>>(modes.size()));
  std::vector<int64_t> ragged_lengths;
  if (o.ragged_min > 0) {
    Rng lr(11);
    for (int64_t i = 0; i < most; ++i)
      ragged_lengths.push_back(
          o.ragged_min +
          static_cast<int64_t>(lr.next() % static_cast<uint64_t>(o.new_tokens - o.ragged_min + 1)));
  }
  for (int mi = 0; mi < kModes; ++mi) {
    const Mode& m = modes[mi];
    model.set_precision(uniform_precision(cfg, m.p));
    Generator gen(model, {m.kv, 0, SamplingSite::automatic, m.graphs});
    if (m.kv == KvDType::fp8) gen.calibrate({all_prompts.front()});
    for (size_t bi = 0; bi < o.batches.size(); ++bi) {
      const std::vector<std::vector<int32_t>> prompts(
          all_prompts.begin(), all_prompts.begin() + static_cast<ptrdiff_t>(o.batches[bi]));
      gen.generate(prompts, warm);
      gen.generate(prompts, sp);
      stats[bi][static_cast<size_t>(mi)] = gen.last_stats();
      const bool ragged_mode = m.graphs == DecodeGraphs::automatic &&
                               ((m.p == Precision::bf16 && m.kv == KvDType::bf16) ||
                                (m.p == Precision::fp8 && m.kv == KvDType::fp8));
      if (!ragged_lengths.empty() && ragged_mode) {
        SamplingParams rp = sp;
        rp.response_lengths.assign(ragged_lengths.begin(),
                                   ragged_lengths.begin() + static_cast<ptrdiff_t>(o.batches[bi]));
        gen.generate(prompts, rp);
        ragged[bi][static_cast<size_t>(mi)] = gen.last_stats();
      }
    }
  }

  Json::Array rows;
  for (size_t bi = 0; bi < o.batches.size(); ++bi) {
    const int64_t batch = o.batches[bi];
    std::printf("model: %s (%s); batch %lld, prompt %lld, %lld new tokens\n", o.model.c_str(),
                describe(cfg).c_str(), static_cast<long long>(batch),
                static_cast<long long>(o.prompt_len), static_cast<long long>(o.new_tokens));
    std::printf("%-26s %12s %12s %12s %10s %12s\n", "mode", "prefill s", "decode s", "decode tok/s",
                "vs bf16", "graph steps");
    std::string unused;
    double base = 0;
    for (int mi = 0; mi < kModes; ++mi) {
      const RolloutStats& st = stats[bi][static_cast<size_t>(mi)];
      // Decode tokens: all but the first token of each sequence (that one comes from prefill).
      const double tps =
          static_cast<double>(st.generated_tokens - st.sequences) / st.decode_seconds;
      if (mi == 0) base = tps;
      const std::string graph_steps =
          std::to_string(st.graph_steps) + "/" + std::to_string(st.decode_steps);
      std::printf("%-26s %12.3f %12.3f %12.1f %9.2fx %12s\n", modes[mi].name, st.prefill_seconds,
                  st.decode_seconds, tps, tps / base, graph_steps.c_str());
      if (unused.empty()) unused = st.graphs_unused;
      Json row;
      row["batch"] = batch;
      row["mode"] = modes[mi].name;
      row["precision"] = precision_name(modes[mi].p);
      row["kv_cache"] = kv_dtype_name(modes[mi].kv);
      row["prefill_seconds"] = number(st.prefill_seconds);
      row["decode_seconds"] = number(st.decode_seconds);
      row["decode_tokens"] = st.generated_tokens - st.sequences;
      row["decode_tokens_per_s"] = number(tps);
      row["vs_bf16"] = number(tps / base);
      row["kv_cache_bytes"] = st.cache_bytes;
      row["decode_graphs"] = modes[mi].graphs == DecodeGraphs::off ? "off" : "auto";
      row["graph_steps"] = st.graph_steps;
      row["decode_steps"] = st.decode_steps;
      row["graph_recordings"] = st.graph_captures;
      row["graph_recording_seconds"] = number(st.capture_seconds);
      if (!st.graphs_unused.empty()) row["graphs_unused"] = st.graphs_unused;
      rows.push_back(row);
    }
    if (!unused.empty()) std::printf("decode graphs unused: %s\n", unused.c_str());
    if (!ragged_lengths.empty()) {
      // Finished sequences should cost nothing: the decode time per token of the ragged run over
      // the forced run's is then near 1 (above 1: the shrinking batch's smaller steps cost more
      // per token).
      std::printf("ragged lengths in [%lld, %lld]:\n%-26s %12s %12s %12s %10s %14s\n",
                  static_cast<long long>(o.ragged_min), static_cast<long long>(o.new_tokens),
                  "mode", "decode tok", "decode s", "decode tok/s", "vs bf16", "s/tok vs forced");
      double ragged_base = 0;
      for (int mi = 0; mi < kModes; ++mi) {
        const auto& r = ragged[bi][static_cast<size_t>(mi)];
        if (!r) continue;
        const RolloutStats& f = stats[bi][static_cast<size_t>(mi)];
        const double tokens = static_cast<double>(r->generated_tokens - r->sequences);
        const double tps = tokens / r->decode_seconds;
        const double forced_tps =
            static_cast<double>(f.generated_tokens - f.sequences) / f.decode_seconds;
        if (ragged_base == 0) ragged_base = tps;
        std::printf("%-26s %12.0f %12.3f %12.1f %9.2fx %13.2fx\n", modes[mi].name, tokens,
                    r->decode_seconds, tps, tps / ragged_base, forced_tps / tps);
        Json row;
        row["batch"] = batch;
        row["mode"] = std::string(modes[mi].name) + ", ragged";
        row["precision"] = precision_name(modes[mi].p);
        row["kv_cache"] = kv_dtype_name(modes[mi].kv);
        row["ragged_min"] = o.ragged_min;
        row["decode_seconds"] = number(r->decode_seconds);
        row["decode_tokens"] = r->generated_tokens - r->sequences;
        row["decode_tokens_per_s"] = number(tps);
        row["vs_bf16"] = number(tps / ragged_base);
        row["seconds_per_token_vs_forced"] = number(forced_tps / tps);
        rows.push_back(row);
      }
    }
    std::printf("\n");
  }
  run["rows"] = Json(rows);
  return run;
}

}  // namespace fp8rl::cli::bench
