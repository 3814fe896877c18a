#include "rollout/generator.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.hpp"
#include "core/parallel.hpp"

namespace fp8rl {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

// Samples the next token of sequences rows[r] from logits row r, rows in parallel (each
// sequence has its own Rng, so the result does not depend on the thread count). With a large
// vocabulary this host-side step is a real share of a decode step.
void sample_rows(const float* logits, int64_t V, const std::vector<int64_t>& rows,
                 const SamplingParams& params, std::vector<Rng>& rngs, std::vector<Sequence>& out) {
  std::vector<Sampled> got(rows.size());
  const int64_t n = static_cast<int64_t>(rows.size());
  // Chunks of at least ~64k logits, so small vocabularies are not split into tiny tasks.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(V, 1));
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      got[static_cast<size_t>(r)] =
          sample_token(logits + r * V, V, params, rngs[static_cast<size_t>(rows[r])]);
  });
  for (int64_t r = 0; r < n; ++r) {
    Sequence& s = out[static_cast<size_t>(rows[r])];
    s.response.push_back(got[static_cast<size_t>(r)].token);
    s.logprobs.push_back(got[static_cast<size_t>(r)].logprob);
  }
}

// Whether the next tokens are sampled on the backend (Backend::sample_tokens) instead of the
// host (see SamplingSite): only the modes the op has, greedy and the whole distribution (no
// top-k / top-p); automatically on any backend but the CPU, where the host path is the same
// code without the copies.
bool samples_on_backend(Backend& be, SamplingSite site, const SamplingParams& params) {
  const bool op_has_mode = params.greedy() || (params.top_k <= 0 && params.top_p >= 1.0);
  switch (site) {
    case SamplingSite::host:
      return false;
    case SamplingSite::backend:
      return op_has_mode;
    case SamplingSite::automatic:
      break;
  }
  return op_has_mode && be.name() != "cpu";
}

// Appends what a device sampling step downloaded to sequences seqs: got holds `stride` tokens,
// then `stride` log-probabilities' bits; entry r belongs to seqs[r]. A token of −1 means the
// row's logits could not be sampled.
void append_device_samples(const std::vector<int32_t>& got, size_t stride,
                           const std::vector<int64_t>& seqs, std::vector<Sequence>& out) {
  for (size_t r = 0; r < seqs.size(); ++r) {
    const int64_t i = seqs[r];
    check(got[r] >= 0, "generate: the logits of sequence " + std::to_string(i) +
                           " hold a NaN or +inf, or are all −inf: no token can be drawn");
    float logprob;
    std::memcpy(&logprob, &got[stride + r], sizeof logprob);
    Sequence& s = out[static_cast<size_t>(i)];
    s.response.push_back(got[r]);
    s.logprobs.push_back(logprob);
  }
}

// sample_rows on the backend: logits [rows.size(), V] stay in backend memory; each sequence's
// uniform is drawn from its own Rng (the draw sample_token makes; none when greedy) and uploaded,
// the tokens and log-probabilities come back (8 bytes per row instead of 4·V). io is reused
// across steps: uniforms [cap] f64, then tokens [n] int32 and log-probs [n] f32 contiguous.
void sample_rows_device(Backend& be, const Tensor& logits, const std::vector<int64_t>& rows,
                        const SamplingParams& params, std::vector<Rng>& rngs,
                        std::vector<Sequence>& out, Buffer& io) {
  const size_t n = rows.size(), cap = out.size();
  check(static_cast<int64_t>(n) == logits.rows,
        "generate: one row of logits per sequence expected");
  if (io.bytes() < cap * 16) io = be.alloc(cap * 16);
  auto* uniforms = static_cast<double*>(io.data());
  auto* tokens = reinterpret_cast<int32_t*>(static_cast<char*>(io.data()) + cap * 8);
  auto* logprobs = reinterpret_cast<float*>(tokens + n);
  const bool greedy = params.greedy();
  const float inv_t = params.inv_temperature();
  if (!greedy) {
    std::vector<double> u(n);
    for (size_t r = 0; r < n; ++r) u[r] = rngs[static_cast<size_t>(rows[r])].uniform();
    be.upload(uniforms, u.data(), n * sizeof(double));
  }
  be.sample_tokens(logits.m(), inv_t, greedy ? nullptr : uniforms, tokens, logprobs);
  std::vector<int32_t> got(2 * n);  // tokens, then the log-probabilities' bits: one download
  be.download(got.data(), tokens, n * 8);
  append_device_samples(got, n, rows, out);
}
// Position of a sequence's next decode row: that of its last sampled token.
int32_t last_position(const Sequence& s) {
  return static_cast<int32_t>(s.prompt.size() + s.response.size() - 1);
}

// Batch bucket of the graph path: the next power of two ≥ n, at least 8 (cuBLASLt wants M % 8
// for FP8 without padding copies; small buckets cost next to nothing more).
int64_t graph_bucket(int64_t n) {
  int64_t b = 8;
  while (b < n) b *= 2;
  return b;
}

// The graph path's decode step (see DecodeGraphs): `rows` rows whose inputs live in device
// buffers, recorded once and replayed per step, or run directly when unrecorded. Rows beyond
// the active sequences are padding: token 0 at position 0 of the cache's extra slot pad_slot.
class GraphStep {
 public:
  GraphStep(DecoderModel& model, KvCache& cache, int64_t rows, int32_t pad_slot,
            const SamplingParams& params)
      : model_(model),
        cache_(cache),
        rows_(rows),
        pad_slot_(pad_slot),
        greedy_(params.greedy()),
        inv_t_(params.inv_temperature()) {
    Backend& be = model_.backend();
    in_ = be.alloc(static_cast<size_t>(rows_) * (8 + 5 * 4));
    out_ = be.alloc(static_cast<size_t>(rows_) * 8);
  }
  int64_t rows() const { return rows_; }
  bool recorded() const { return graph_ != nullptr; }

  // Records the step; false (why set) when the backend cannot.
  bool record(std::string& why) {
    graph_ = model_.backend().capture([this] { work(); }, why);
    return graph_ != nullptr;
  }

  // One decode step of sequences seqs (at most rows): the same tokens and log-probabilities as
  // sample_rows_device after forward_cached_device on these rows.
  void run(const std::vector<int64_t>& seqs, std::vector<Sequence>& out, std::vector<Rng>& rngs) {
    const size_t n = seqs.size(), rows = static_cast<size_t>(rows_);
    check(n <= rows, "generate: more active sequences than the graph step's rows");
    std::vector<char> host(rows * (8 + 5 * 4));
    auto* uniforms = reinterpret_cast<double*>(host.data());
    auto* ints = reinterpret_cast<int32_t*>(host.data() + rows * 8);
    int32_t *tok = ints, *slot = ints + rows, *pos = ints + 2 * rows, *len = ints + 3 * rows,
            *row = ints + 4 * rows;
    for (size_t r = 0; r < rows; ++r) {
      const bool real = r < n;
      const int64_t i = real ? seqs[r] : 0;
      uniforms[r] = real && !greedy_ ? rngs[static_cast<size_t>(i)].uniform() : 0.0;
      tok[r] = real ? out[i].response.back() : 0;
      slot[r] = real ? static_cast<int32_t>(i) : pad_slot_;
      pos[r] = real ? last_position(out[i]) : 0;
      len[r] = pos[r] + 1;
      row[r] = static_cast<int32_t>(r);
    }
    Backend& be = model_.backend();
    be.upload(in_.data(), host.data(), host.size());
    if (graph_)
      graph_->replay();
    else
      work();
    std::vector<int32_t> got(2 * rows);  // tokens, then the log-probabilities' bits
    be.download(got.data(), out_.data(), rows * 8);
    append_device_samples(got, rows, seqs, out);
  }

 private:
  // The step on the device buffers: no host work, so it can be recorded.
  void work() {
    const auto* base = static_cast<const char*>(in_.data());
    const auto* uniforms = reinterpret_cast<const double*>(base);
    const auto* ints = reinterpret_cast<const int32_t*>(base + rows_ * 8);
    const DecoderModel::CachedStepInputs in{
        ints, ints + rows_, ints + 2 * rows_, ints + 3 * rows_, ints + 4 * rows_, rows_, rows_};
    const Tensor logits = model_.forward_cached_step(in, cache_);
    auto* tokens = static_cast<int32_t*>(out_.data());
    model_.backend().sample_tokens(logits.m(), inv_t_, greedy_ ? nullptr : uniforms, tokens,
                                   reinterpret_cast<float*>(tokens + rows_));
  }

  DecoderModel& model_;
  KvCache& cache_;
  int64_t rows_;
  int32_t pad_slot_;
  bool greedy_;
  float inv_t_;
  Buffer in_;   // f64 uniforms [rows], then int32 tokens, slots, positions, lengths, output rows
  Buffer out_;  // int32 tokens [rows], then f32 log-probs [rows]
  std::unique_ptr<BackendGraph> graph_;  // after the buffers: destroyed first
};
}  // namespace

Generator::Generator(DecoderModel& model, GeneratorOptions opt) : model_(model), opt_(opt) {
  check(opt_.kv_dtype != KvDType::fp32 || model_.activation_dtype() == DType::f32,
        "an fp32 KV cache needs the fp32 model (use bf16 or fp8)");
  check(opt_.kv_dtype == KvDType::fp32 || model_.activation_dtype() == DType::bf16,
        "the fp32 model generates with an fp32 KV cache");
}

std::vector<std::pair<float, float>> Generator::kv_scales() const {
  return scales_;
}

void Generator::set_kv_scales(const std::vector<std::pair<float, float>>& s) {
  check(static_cast<int64_t>(s.size()) == model_.config().num_hidden_layers,
        "KV scales: one (k, v) pair per layer expected");
  scales_ = s;
  if (cache_ && cache_->dtype() == KvDType::fp8) cache_->set_scales(scales_);
}

void Generator::calibrate(const std::vector<std::vector<int32_t>>& prompts) {
  const auto t0 = std::chrono::steady_clock::now();
  KvScaleCalibrator cal;
  model_.set_kv_calibrator(&cal);
  try {
    for (const auto& p : prompts) {
      if (p.empty()) continue;
      model_.logits(p, 1, static_cast<int64_t>(p.size()));
    }
  } catch (...) {
    model_.drop_kv_amax();
    model_.set_kv_calibrator(nullptr);
    throw;
  }
  model_.set_kv_calibrator(nullptr);
  set_kv_scales(cal.scales());
  stats_.calibration_seconds += seconds_since(t0);
}

int64_t Generator::wave_capacity(int64_t max_len, bool graphs) const {
  const ModelConfig& cfg = model_.config();
  int64_t cap = opt_.max_batch > 0 ? opt_.max_batch : INT64_MAX;
  const int64_t avail = model_.backend().memory_available();  // generate() holds no cache here
  if (avail < 0 || opt_.max_batch > 0) return cap;
  // A prefill pass's activations, bounded by f32 of x, q, k, v, o, gate, up, h per token (they
  // are BF16: the norms' outputs, the FP8 copies and the stacked q/k/v GEMM's output fit in the
  // slack), and per sequence its KV cache and the decode step's logits (f32, with the sampler's
  // copy).
  const int64_t qkv = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim;
  const int64_t inter =
      std::max(cfg.intermediate_size,
               cfg.moe.intermediate_size * (cfg.moe.experts_per_token + cfg.moe.shared_experts));
  const int64_t prefill =
      std::max<int64_t>(opt_.prefill_tokens, max_len) * (3 * cfg.hidden_size + qkv + 3 * inter) * 4;
  const int64_t per_sequence =
      KvCache::bytes_needed(cfg, 1, max_len, opt_.kv_dtype) + 8 * cfg.vocab_size;
  const int64_t left = avail - kWorkReserve - prefill - (graphs ? per_sequence : 0);
  return std::min(cap, std::max<int64_t>(0, left / per_sequence));
}

std::vector<Sequence> Generator::generate(const std::vector<std::vector<int32_t>>& prompts,
                                          const SamplingParams& params) {
  params.validate();
  const ModelConfig& cfg = model_.config();
  const int64_t n = static_cast<int64_t>(prompts.size());
  stats_ = RolloutStats{};
  if (n == 0) return {};
  int64_t longest = 0;
  for (const auto& p : prompts) {
    check(!p.empty(), "generate: empty prompt");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  const int64_t max_len = longest + params.max_new_tokens;
  check(max_len <= cfg.max_position_embeddings,
        "generate: prompt (" + std::to_string(longest) + ") + max_new_tokens (" +
            std::to_string(params.max_new_tokens) + ") exceeds max_position_embeddings (" +
            std::to_string(cfg.max_position_embeddings) + ")");
  check(params.sequence_ids.empty() || static_cast<int64_t>(params.sequence_ids.size()) == n,
        "generate: sequence_ids must have one index per prompt");
  check(
      params.response_lengths.empty() || static_cast<int64_t>(params.response_lengths.size()) == n,
      "generate: response_lengths must have one length per prompt");
  // Sampling on the backend (greedy or the whole distribution) allows the graph path, whose
  // padding rows use one extra cache slot (slot n).
  const bool on_device = samples_on_backend(model_.backend(), opt_.sampling, params);
  // Experts route on the host between the step's GEMMs: no graph can hold such a step.
  const bool graphs = on_device && opt_.graphs != DecodeGraphs::off && !model_.has_experts();
  if (opt_.kv_dtype == KvDType::fp8 && scales_.empty()) calibrate(prompts);  // first step

  // Waves of equal size (the last may be smaller) that fit the memory.
  const int64_t fit = wave_capacity(max_len, graphs);
  if (fit <= 0) {
    cache_.reset();
    check(false, "generate: not even one sequence of " + std::to_string(max_len) +
                     " positions fits the backend's free memory (" +
                     gib(model_.backend().memory_available()) + ") with its " +
                     std::string(kv_dtype_name(opt_.kv_dtype)) + " KV cache (" +
                     gib(KvCache::bytes_needed(cfg, 1, max_len, opt_.kv_dtype)) +
                     "), a prefill pass and a reserve of " + gib(kWorkReserve));
  }
  const int64_t waves = fit >= n ? 1 : (n + fit - 1) / fit;
  const int64_t wave = (n + waves - 1) / waves;
  std::vector<Sequence> out;
  RolloutStats total;
  total.calibration_seconds = stats_.calibration_seconds;
  try {
    for (int64_t b = 0; b < n; b += wave) {
      const int64_t e = std::min(n, b + wave);
      std::vector<Sequence> part;
      if (waves == 1) {
        part = generate_wave(prompts, params, max_len, on_device, graphs);
      } else {
        const std::vector<std::vector<int32_t>> sub(prompts.begin() + b, prompts.begin() + e);
        SamplingParams p = params;
        p.sequence_ids.clear();
        for (int64_t i = b; i < e; ++i)
          p.sequence_ids.push_back(
              params.sequence_ids.empty() ? i : params.sequence_ids[static_cast<size_t>(i)]);
        if (!params.response_lengths.empty())
          p.response_lengths.assign(params.response_lengths.begin() + b,
                                    params.response_lengths.begin() + e);
        part = generate_wave(sub, p, max_len, on_device, graphs);
      }
      for (auto& s : part) out.push_back(std::move(s));
      const RolloutStats& w = stats_;
      total.sequences += w.sequences;
      total.prompt_tokens += w.prompt_tokens;
      total.generated_tokens += w.generated_tokens;
      total.decode_steps += w.decode_steps;
      total.prefill_seconds += w.prefill_seconds;
      total.decode_seconds += w.decode_seconds;
      total.cache_bytes = std::max(total.cache_bytes, w.cache_bytes);
      total.prefill_passes += w.prefill_passes;
      total.graph_steps += w.graph_steps;
      total.graph_captures += w.graph_captures;
      total.capture_seconds += w.capture_seconds;
      if (total.graphs_unused.empty()) total.graphs_unused = w.graphs_unused;
      ++total.waves;
    }
  } catch (...) {
    cache_.reset();
    throw;
  }
  cache_.reset();  // training (or the next step's other work) gets the memory
  stats_ = total;
  return out;
}

std::vector<Sequence> Generator::generate_wave(const std::vector<std::vector<int32_t>>& prompts,
                                               const SamplingParams& params, int64_t max_len,
                                               bool on_device, bool graphs) {
  const ModelConfig& cfg = model_.config();
  const int64_t n = static_cast<int64_t>(prompts.size());
  stats_ = RolloutStats{};
  const bool moe = model_.has_experts();
  const int64_t num_slots = n + (graphs ? 1 : 0);
  // Plan the cache up front.
  const int64_t bytes = KvCache::bytes_needed(cfg, num_slots, max_len, opt_.kv_dtype);
  check(opt_.max_cache_bytes <= 0 || bytes <= opt_.max_cache_bytes,
        "generate: the " + std::string(kv_dtype_name(opt_.kv_dtype)) + " KV cache for " +
            std::to_string(n) + " sequences × " + std::to_string(max_len) + " positions needs " +
            gib(bytes) + "; the limit is " + gib(opt_.max_cache_bytes));
  if (!cache_ || cache_->num_slots() < num_slots || cache_->max_len() < max_len) {
    cache_.reset();  // before the new one: both may not fit
    cache_ = std::make_unique<KvCache>(model_.backend(), cfg, num_slots, max_len, opt_.kv_dtype);
    if (opt_.kv_dtype == KvDType::fp8 && !scales_.empty()) cache_->set_scales(scales_);
  }
  stats_.cache_bytes = bytes;
  stats_.sequences = n;
  std::vector<Sequence> out(static_cast<size_t>(n));
  std::vector<Rng> rngs;
  for (int64_t i = 0; i < n; ++i) {
    out[i].prompt = prompts[i];
    const int64_t id =
        params.sequence_ids.empty() ? i : params.sequence_ids[static_cast<size_t>(i)];
    rngs.emplace_back(params.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(id) + 1);
  }
  auto finished = [&](int64_t i, int32_t tok) -> bool {
    Sequence& s = out[i];
    if (!params.response_lengths.empty()) {  // forced: only the length ends it
      const int64_t want =
          std::min(params.response_lengths[static_cast<size_t>(i)], params.max_new_tokens);
      if (static_cast<int64_t>(s.response.size()) >= want) s.finish_reason = "length";
      return !s.finish_reason.empty();
    }
    if ((params.eos_token >= 0 && tok == params.eos_token) ||
        std::find(params.more_eos_tokens.begin(), params.more_eos_tokens.end(), tok) !=
            params.more_eos_tokens.end())
      s.finish_reason = "eos";
    else if (std::find(params.stop_tokens.begin(), params.stop_tokens.end(), tok) !=
             params.stop_tokens.end())
      s.finish_reason = "stop";
    else if (static_cast<int64_t>(s.response.size()) >= params.max_new_tokens)
      s.finish_reason = "length";
    return !s.finish_reason.empty();
  };
  const int64_t V = cfg.vocab_size;

  // Prefill: every prompt token, in passes of whole prompts up to opt_.prefill_tokens tokens;
  // logits of each last token.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> tokens, slots, positions, rows;
  for (int64_t i = 0; i < n; ++i) stats_.prompt_tokens += static_cast<int64_t>(prompts[i].size());
  // The routing of a mixture-of-experts model, per sequence: each step's rows go to their
  // sequence's positions.
  const int64_t k = cfg.moe.experts_per_token;
  if (moe)
    for (auto& s : out) {
      s.routing.assign(static_cast<size_t>(cfg.num_hidden_layers), {});
      for (int64_t l = 0; l < cfg.num_hidden_layers; ++l)
        if (cfg.moe.layer_has_experts(l))
          s.routing[static_cast<size_t>(l)].assign(static_cast<size_t>(max_len * k), -1);
    }
  auto record_routing = [&] {
    const DecoderModel::Routing& r = model_.last_routing();
    for (size_t l = 0; l < r.size(); ++l)
      for (size_t i = 0; i < tokens.size() && !r[l].empty(); ++i)
        std::copy_n(r[l].begin() + static_cast<std::ptrdiff_t>(i) * k, k,
                    out[static_cast<size_t>(slots[i])].routing[l].begin() + positions[i] * k);
  };
  // One forward step and the sampling of its rows (sequences seqs), on the device or the host.
  Buffer device_io;
  auto step = [&](const std::vector<int64_t>& seqs) {
    if (on_device) {
      const Tensor logits = model_.forward_cached_device(tokens, slots, positions, rows, *cache_);
      sample_rows_device(model_.backend(), logits, seqs, params, rngs, out, device_io);
    } else {
      const std::vector<float> logits =
          model_.forward_cached(tokens, slots, positions, rows, *cache_);
      sample_rows(logits.data(), V, seqs, params, rngs, out);
    }
    if (moe) record_routing();
  };
  std::vector<int64_t> active;
  for (int64_t first = 0; first < n;) {
    tokens.clear();
    slots.clear();
    positions.clear();
    rows.clear();
    std::vector<int64_t> pass;
    for (; first < n; ++first) {
      const auto& p = prompts[static_cast<size_t>(first)];
      if (!pass.empty() && static_cast<int64_t>(tokens.size() + p.size()) > opt_.prefill_tokens)
        break;
      for (size_t t = 0; t < p.size(); ++t) {
        tokens.push_back(p[t]);
        slots.push_back(static_cast<int32_t>(first));
        positions.push_back(static_cast<int32_t>(t));
      }
      rows.push_back(static_cast<int32_t>(tokens.size() - 1));
      pass.push_back(first);
    }
    step(pass);
    ++stats_.prefill_passes;
  }
  for (int64_t i = 0; i < n; ++i)
    if (!finished(i, out[i].response.back())) active.push_back(i);
  stats_.prefill_seconds = seconds_since(t0);

  // Decode: one row per active sequence; finished ones drop out immediately. With graphs, the
  // step of the active count's bucket is recorded on entering the bucket and replayed.
  t0 = std::chrono::steady_clock::now();
  std::unique_ptr<GraphStep> graph_step;
  bool graphs_ok = graphs;
  while (!active.empty()) {
    if (graphs_ok) {
      const int64_t bucket = graph_bucket(static_cast<int64_t>(active.size()));
      // Every active sequence has as many tokens as steps were taken.
      const int64_t steps_left =
          params.max_new_tokens - static_cast<int64_t>(out[active.front()].response.size());
      if (graph_step && graph_step->rows() != bucket) graph_step.reset();
      if (!graph_step &&
          (opt_.graphs == DecodeGraphs::unrecorded || steps_left >= kMinGraphSteps)) {
        graph_step =
            std::make_unique<GraphStep>(model_, *cache_, bucket, static_cast<int32_t>(n), params);
        if (opt_.graphs != DecodeGraphs::unrecorded) {
          const auto tc = std::chrono::steady_clock::now();
          std::string why;
          if (graph_step->record(why)) {
            ++stats_.graph_captures;
          } else {
            graph_step.reset();
            graphs_ok = false;
            stats_.graphs_unused = why;
          }
          stats_.capture_seconds += seconds_since(tc);
        }
      }
    }
    if (graph_step) {
      graph_step->run(active, out, rngs);
      if (graph_step->recorded()) ++stats_.graph_steps;
    } else {
      tokens.clear();
      slots.clear();
      positions.clear();
      rows.clear();
      for (int64_t i : active) {
        tokens.push_back(out[i].response.back());
        slots.push_back(static_cast<int32_t>(i));
        positions.push_back(last_position(out[i]));
        rows.push_back(static_cast<int32_t>(rows.size()));
      }
      step(active);
    }
    ++stats_.decode_steps;
    std::vector<int64_t> still;
    for (int64_t i : active)
      if (!finished(i, out[i].response.back())) still.push_back(i);
    active.swap(still);
  }
  graph_step.reset();
  stats_.decode_seconds = seconds_since(t0);
  if (opt_.graphs == DecodeGraphs::automatic && stats_.graph_steps == 0 &&
      stats_.graphs_unused.empty())
    stats_.graphs_unused =
        !on_device ? "sampling runs on the host (top-k, top-p, or the CPU)"
        : stats_.decode_steps == 0
            ? "no decode step"
            : "no batch bucket had " + std::to_string(kMinGraphSteps) + " decode steps ahead";
  for (auto& s : out) {
    stats_.generated_tokens += static_cast<int64_t>(s.response.size());
    // The positions fed: the prompt and every response token but the last.
    const int64_t fed = static_cast<int64_t>(s.prompt.size() + s.response.size()) - 1;
    for (auto& r : s.routing)
      if (!r.empty()) r.resize(static_cast<size_t>(fed * k));
  }
  if (moe && stats_.graphs_unused.empty() && opt_.graphs != DecodeGraphs::off && on_device)
    stats_.graphs_unused = "experts route on the host between a step's GEMMs";
  return out;
}

}  // namespace fp8rl
