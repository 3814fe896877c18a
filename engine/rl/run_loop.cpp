#include "rl/run_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>

#include "contract/autopilot.hpp"
#include "contract/rank_launch.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "model/checkpoint.hpp"
#include "model/weight_audit.hpp"
#include "rl/group_rollouts.hpp"
#include "rl/sensitivity.hpp"

namespace fp8rl {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

double resident_memory_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0.0;
}

// Collects FP8 quantization telemetry of one step where the tensors live, without
// synchronisation, in one buffer of backend memory read in one download when the step is
// recorded: the statistics per layer, module and kind (QuantOptions::stats_sum: the telemetry's,
// and the autopilot's per-linear error signal: the first micro-batch's activations and
// gradients, the recalibration's weights), then the histograms of log2 of the dequantization
// scales per layer and kind (Backend::scale_log2_histogram; a step observes millions of
// activation scales).
struct GrpoRun::Observer : QuantObserver {
  // The scale histogram's range: log2 in [-32, 8), one bin per power of two.
  static constexpr int kLog2Lo = -32, kLog2Hi = 8, kBins = kLog2Hi - kLog2Lo;
  static constexpr size_t kCounts = kBins + 2;  // + under/overflow
  static constexpr int kKinds = 3;              // activation, gradient, weight
  Observer(Backend& backend, int64_t model_layers) : be(backend), layers(model_layers) {
    device = be.alloc(sums_size() * sizeof(QuantStatsSum) + counts_size() * sizeof(int64_t));
  }
  Backend& be;
  const int64_t layers;
  bool enabled = false;  // the FP8 telemetry observes (histograms)
  bool signal = false;   // statistics are summed
  Buffer device;         // sums_size() sums, then counts_size() counts
  std::set<std::pair<int64_t, std::string>> observed;  // the histograms this step
  std::vector<QuantStatsSum> host_sums;                // once read
  std::vector<int64_t> host_counts;
  bool read = false;

  static size_t kind_index(const std::string& kind) {
    return kind == "gradient" ? 1 : kind == "weight" ? 2 : 0;
  }
  static size_t slot(int64_t layer, Module m, const std::string& kind) {
    return static_cast<size_t>(layer * kModules + static_cast<int>(m)) * kKinds + kind_index(kind);
  }
  size_t sums_size() const { return static_cast<size_t>(layers * kModules * kKinds); }
  size_t counts_size() const { return static_cast<size_t>(layers * kKinds) * kCounts; }
  size_t counts_at(int64_t layer, const std::string& kind) const {
    return (static_cast<size_t>(layer * kKinds) + kind_index(kind)) * kCounts;
  }

  bool active() const override { return enabled; }
  QuantStatsSum* stats_sum(int64_t layer, Module m, const char* kind) override {
    if (!signal || layer < 0 || layer >= layers) return nullptr;
    return device.as<QuantStatsSum>() + slot(layer, m, kind);
  }
  void observe(int64_t layer, Module, const char* kind, const Fp8Matrix& q) override {
    if (!enabled || layer < 0 || layer >= layers) return;
    observed.insert({layer, kind});
    int64_t* counts = reinterpret_cast<int64_t*>(device.as<QuantStatsSum>() + sums_size());
    be.scale_log2_histogram(q, kLog2Lo, kLog2Hi, counts + counts_at(layer, kind));
  }
  // Starts a step: zero in backend memory, nothing observed or read.
  void reset() {
    be.zero(device.data(), device.bytes());
    observed.clear();
    read = false;
  }
  // This step's sums and counts, downloaded on the first call (the one wait they cost a step).
  void read_step() {
    if (read) return;
    std::vector<std::byte> h(device.bytes());
    if (!h.empty()) be.download(h.data(), device.data(), h.size());
    host_sums.resize(sums_size());
    host_counts.resize(counts_size());
    std::memcpy(host_sums.data(), h.data(), host_sums.size() * sizeof(QuantStatsSum));
    std::memcpy(host_counts.data(), h.data() + host_sums.size() * sizeof(QuantStatsSum),
                host_counts.size() * sizeof(int64_t));
    read = true;
  }
  const std::vector<QuantStatsSum>& sums() {
    read_step();
    return host_sums;
  }
  // The statistics of one layer's quantizations of a kind, all its modules (and experts).
  QuantStats layer_stats(int64_t layer, const std::string& kind) {
    QuantStats st;
    for (int mi = 0; mi < kModules; ++mi) st += sums()[slot(layer, Module(mi), kind)].stats();
    return st;
  }
  // One layer's histogram counts of a kind.
  std::vector<int64_t> counts(int64_t layer, const std::string& kind) {
    read_step();
    const auto first = host_counts.begin() + static_cast<std::ptrdiff_t>(counts_at(layer, kind));
    return {first, first + static_cast<std::ptrdiff_t>(kCounts)};
  }
};

GrpoRun::GrpoRun(const RunConfig& cfg, Backend& be, Communicator* comm) : cfg_(cfg), be_(be) {
  if (!comm) {
    own_comm_ = std::make_unique<SingleProcess>();
    comm = own_comm_.get();
  }
  comm_ = comm;
  const int64_t R = comm_->size();
  // Whole groups, the same share of every mini-batch on every rank.
  if (auto e = data_parallel_error(R, cfg_.prompts_per_step, cfg_.mini_batches, cfg_.sft_steps,
                                   cfg_.sft_batch_size))
    throw Error(*e);
  // A model folder's config.json is read once, for the task's chat template and the model.
  std::optional<CheckpointInfo> ckpt;
  if (!cfg_.init_checkpoint.empty()) ckpt = read_checkpoint_info(cfg_.init_checkpoint);
  task_ = make_run_task(cfg_, ckpt ? &*ckpt : nullptr);
  model_ = make_run_model(cfg_, be_, *task_, ckpt ? &*ckpt : nullptr);
  observer_ = std::make_unique<Observer>(be_, model_->config().num_hidden_layers);
  model_->set_quant_observer(observer_.get());
  {
    // The autopilot knows every decoder linear's GEMM cost; the overrides of the launch
    // configuration are a person's edits (pins). A resumed run replaces its state (restore).
    const ModelConfig& mc = model_->config();
    DecoderModel& model = *model_;
    autopilot_ = PrecisionAutopilot(autopilot_linears(
        model_->precision(),
        [&](int64_t l, Module m) -> std::pair<int64_t, int64_t> {
          if (model.moe(l) && (m == Module::gate || m == Module::up || m == Module::down)) {
            const Linear& e = model.moe(l)->expert(0, m);
            return {e.in_features(), e.out_features()};
          }
          const Linear& lin = model.linear(l, m);
          return {lin.in_features(), lin.out_features()};
        },
        mc.moe.enabled() ? mc.moe.experts_per_token : 0));
    for (const auto& o : cfg_.precision_overrides)
      autopilot_.person_edit(PrecisionOverride::parse(o));
  }
  // Mixture of experts: frozen routers stay out of the optimizers (moe.freeze_router); the
  // load-balancing loss only when asked (moe.router_aux_loss_coef).
  std::vector<Param*> trained = model_->parameters();
  if (cfg_.moe_freeze_router)
    std::erase_if(trained, [](const Param* p) { return p->name.ends_with(".mlp.gate.weight"); });
  model_->set_router_aux_loss_coef(cfg_.moe_router_aux_loss_coef);
  opt_ = std::make_unique<AdamW>(be_, trained, cfg_.optimizer);
  if (cfg_.sft_steps > 0) {
    OptimizerConfig sft = cfg_.optimizer;
    sft.lr = cfg_.sft_lr;
    sft.schedule = "constant";
    sft.warmup_steps = 0;
    sft_opt_ = std::make_unique<AdamW>(be_, trained, sft);
  }
  gen_ = std::make_unique<Generator>(
      *model_, GeneratorOptions{cfg_.kv_cache, 0, SamplingSite::automatic,
                                cfg_.decode_graphs ? DecodeGraphs::automatic : DecodeGraphs::off});
  if (R > 1) {
    try {
      device_comm_ = be_.device_communicator(*comm_);
    } catch (const PeerLost&) {
      throw;
    } catch (const Error& e) {
      // E.g. two ranks on one GPU, which NCCL refuses: the gradients go through host memory.
      if (comm_->rank() == 0)
        std::fprintf(stderr, "fp8rl: no device communicator (%s): reducing through host memory\n",
                     e.what());
    }
  }
}

std::vector<int64_t> GrpoRun::my_prompts() const {
  const int64_t per_mini = cfg_.prompts_per_step / cfg_.mini_batches;
  const auto [b, e] = share_of(per_mini, comm_->rank(), comm_->size());
  std::vector<int64_t> out;
  for (int64_t m = 0; m < cfg_.mini_batches; ++m)
    for (int64_t i = b; i < e; ++i) out.push_back(m * per_mini + i);
  return out;
}

template <class F>
void GrpoRun::in_collective(F&& f) {
  const auto t0 = Clock::now();
  f();
  comm_seconds_ += since(t0);
}

void GrpoRun::all_reduce_gradients() {
  if (comm_->size() == 1) return;
  const auto params = model_->parameters();
  if (device_comm_) {
    in_collective([&] {
      for (Param* p : params)
        device_comm_->all_reduce_sum(static_cast<float*>(p->grad.buf.data()),
                                     static_cast<size_t>(p->grad.size()));
    });
    return;
  }
  in_collective([&] {
    // One message for all of them: the latency of a collective counts more than its bytes.
    size_t total = 0;
    for (const Param* p : params) total += static_cast<size_t>(p->grad.size());
    grad_stage_.resize(total);
    size_t at = 0;
    for (Param* p : params) {
      be_.download(grad_stage_.data() + at, p->grad.buf.data(), p->grad.buf.bytes());
      at += static_cast<size_t>(p->grad.size());
    }
    comm_->all_reduce_sum(grad_stage_.data(), total);
    at = 0;
    for (Param* p : params) {
      be_.upload(p->grad.buf.data(), grad_stage_.data() + at, p->grad.buf.bytes());
      at += static_cast<size_t>(p->grad.size());
    }
  });
}

void GrpoRun::check_ranks_agree(const StepRecord& r) {
  Json state = live_state().to_json();
  if (r.scalars.count(metric::kValAccuracy)) {
    uint32_t crc = 0;
    std::vector<float> host;
    for (const Param* p : model_->parameters()) {
      host.resize(static_cast<size_t>(p->master.size()));
      be_.download(host.data(), p->master.buf.data(), p->master.buf.bytes());
      crc = crc32c(host.data(), host.size() * sizeof(float), crc);
    }
    state["weights_crc32c"] = static_cast<int64_t>(crc);
  }
  std::vector<std::string> all;
  in_collective([&] { all = all_gather_strings(*comm_, state.dump()); });
  for (size_t k = 1; k < all.size(); ++k)
    check(all[k] == all[0], "rank " + std::to_string(k) + " differs from rank 0 after step " +
                                std::to_string(r.step) + ": " + all[k] + " vs " + all[0]);
}

void GrpoRun::reduce_sum(double* v, size_t n) {
  if (comm_->size() == 1) return;
  in_collective([&] { comm_->all_reduce_sum(v, n); });
}

void GrpoRun::gather_kv_amax(KvScaleCalibrator& calibrator) {
  if (comm_->size() == 1) return;
  const size_t layers = static_cast<size_t>(model_->config().num_hidden_layers);
  std::vector<float> mine;
  for (const auto& mb : calibrator.samples())
    for (const auto& l : mb) mine.insert(mine.end(), l.begin(), l.end());
  std::vector<float> all;
  in_collective([&] { all = all_gather_floats(*comm_, mine); });
  calibrator.clear();
  for (size_t at = 0; at + 3 * layers <= all.size(); at += 3 * layers) {
    std::vector<std::array<float, 3>> mb(layers);
    for (size_t l = 0; l < layers; ++l)
      mb[l] = {all[at + 3 * l], all[at + 3 * l + 1], all[at + 3 * l + 2]};
    calibrator.add(mb);
  }
}

GrpoRun::~GrpoRun() = default;

LiveState GrpoRun::live_state() const {
  return LiveState::from_config(cfg_.doc, model_->precision());
}

void GrpoRun::apply(const LiveEdit& edit) {
  LiveState next = live_state();
  next.apply(edit);
  cfg_ = cfg_.with_live_state(next);
  if (!(next.precision == model_->precision())) model_->set_precision(next.precision);
  // The parts that keep their own copy of a live value. The rest (temperature, importance
  // bounds, validation interval, the autopilot's settings) is read from cfg_ where it is used.
  opt_->set_lr(cfg_.optimizer.lr);
  // A person's precision edit wins over the autopilot: what it names is pinned.
  for (const auto& o : edit.precision) autopilot_.person_edit(o);
}

std::optional<AutopilotDecision> GrpoRun::take_autopilot_decision() {
  return autopilot_.take(model_->precision());
}

void GrpoRun::apply_autopilot(const AutopilotDecision& d) {
  const LiveEdit edit = d.edit();
  if (!edit.empty()) {
    LiveState next = live_state();
    next.apply(edit);
    cfg_ = cfg_.with_live_state(next);
    model_->set_precision(next.precision);
  }
  autopilot_.applied(d);
}

StepRecord GrpoRun::next() {
  check(!finished(), "the run has finished");
  const auto t0 = Clock::now();
  comm_seconds_ = 0;
  auto bytes = [&] {
    return comm_->bytes_communicated() + (device_comm_ ? device_comm_->bytes_communicated() : 0);
  };
  const uint64_t bytes0 = bytes();
  StepRecord r = sft_done_ < cfg_.sft_steps ? sft_step() : rl_step();
  elapsed_ += since(t0);
  r.wall_seconds = elapsed_;
  r.scalars[metric::kMemory] = resident_memory_mb();
  if (comm_->size() > 1) {
    check_ranks_agree(r);
    r.scalars[metric::kRanks] = comm_->size();
    r.scalars[metric::kTimeCommunication] = comm_seconds_;
    r.scalars[metric::kCommBytes] = static_cast<double>(bytes() - bytes0);
  }
  return r;
}

StepRecord GrpoRun::sft_step() {
  // Supervised next-token cross-entropy on prompt → answer<eos> (teacher forcing).
  StepRecord r;
  r.phase = "sft";
  r.step = sft_done_ - cfg_.sft_steps;  // −N … −1
  Rng rng(mix_seed(cfg_.seed, 0x5f7000000ull + static_cast<uint64_t>(sft_done_)));
  std::vector<TrainSeq> seqs;
  // This rank's share of the batch (all of it on one rank); every rank draws every example.
  const auto [first, end] = share_of(cfg_.sft_batch_size, comm_->rank(), comm_->size());
  for (int64_t i = 0; i < cfg_.sft_batch_size; ++i) {
    const Example ex = task_->sample(rng);
    if (i < first || i >= end) continue;
    TrainSeq s;
    s.ids = task_->encode_prompt(ex.prompt);
    s.prompt_len = static_cast<int64_t>(s.ids.size());
    for (int32_t t : task_->tokenizer().encode(ex.answer)) s.ids.push_back(t);
    s.ids.push_back(task_->tokenizer().eos());
    seqs.push_back(std::move(s));
  }
  const auto t0 = Clock::now();
  // The token-level mean is over the whole batch: every rank divides by the global count.
  double tokens = 0;
  for (const auto& s : seqs) tokens += static_cast<double>(s.ids.size()) - s.prompt_len;
  reduce_sum(&tokens, 1);
  model_->zero_grad();
  double loss = 0;
  const size_t mbs = static_cast<size_t>(cfg_.micro_batch_size);
  for (size_t b = 0; b < seqs.size(); b += mbs) {
    const MicroBatch mb = pack_micro_batch(seqs, b, std::min(seqs.size(), b + mbs));
    const auto res = model_->forward(mb.ids, mb.targets, mb.B, mb.T, 1.0f, true);
    std::vector<float> dlogp(res.logp.size(), 0.0f);
    for (auto [si, row] : mb.rows)
      for (int64_t k = 0; k < static_cast<int64_t>(seqs[si].ids.size()) - seqs[si].prompt_len;
           ++k) {
        loss -= res.logp[static_cast<size_t>(row + k)] / tokens;
        dlogp[static_cast<size_t>(row + k)] = -1.0f / static_cast<float>(tokens);
      }
    model_->backward(dlogp);
  }
  all_reduce_gradients();
  reduce_sum(&loss, 1);
  const OptimizerStep os = sft_opt_->step();
  model_->refresh();
  ++sft_done_;
  r.scalars[metric::kSftLoss] = loss;
  r.scalars[metric::kGradNorm] = os.grad_norm;
  r.scalars[metric::kTimeTraining] = since(t0);
  r.scalars[metric::kTimeTotal] = since(t0);
  if (sft_done_ == cfg_.sft_steps) {
    // The RL baseline: validation right before the first GRPO step.
    r.scalars[metric::kValAccuracy] = validate(&r.samples);
  }
  return r;
}

// What one phase of a GRPO step hands the next.
struct GrpoRun::RlBatch {
  GroupRollouts rollouts;            // this rank's share: sequences, rewards, training sequences
  std::vector<int64_t> sample_rows;  // the sequences the step's samples show
  double correct = 0, response_length = 0;
  double t_generation = 0, t_logprob = 0, t_training = 0, t_recalibration = 0;
  std::vector<std::vector<float>> p;  // trainer log-probs per sequence
  KvScaleCalibrator calibrator;       // KV amax of the training forwards (FP8 KV cache)
  TokenLossSums sums;
  double entropy_sum = 0, grad_norm = 0, lr = 0;
  int64_t entropy_n = 0;
  std::vector<float> all_p, all_g;  // p and g of every token (first epoch)
  std::vector<TrainSeq> observed;   // the first micro-batch (the autopilot's measures)
  // The quantization statistics this step (the per-linear error signal, the FP8 telemetry's):
  // summed in backend memory, read once, when the autopilot is on or the telemetry observes.
  bool signal = false;
};

StepRecord GrpoRun::rl_step() {
  const auto t_step = Clock::now();
  StepRecord r;
  r.phase = "rl";
  r.step = rl_done_ + 1;
  double validation_s = 0;
  auto timed_validate = [&] {
    const auto t0 = Clock::now();
    const double accuracy = validate();
    validation_s += since(t0);
    return accuracy;
  };
  if (rl_done_ == 0 && cfg_.sft_steps == 0)
    r.scalars[metric::kValAccuracyInitial] = timed_validate();
  RlBatch b;
  if (rl_done_ == 0 && !cfg_.outlier_layers.empty()) inject_outliers(r);
  audit_rollout_weights(r);
  rollout_phase(r, b);
  training_phase(b);
  recalibration_phase(b);
  ++rl_done_;
  step_telemetry(r, b);
  observe_autopilot(r, b, add_fp8_signal(r, b));
  if (finished() || (cfg_.validation_every > 0 && rl_done_ % cfg_.validation_every == 0))
    r.scalars[metric::kValAccuracy] = timed_validate();
  if (validation_s > 0) r.scalars[metric::kTimeValidation] = validation_s;
  r.scalars[metric::kTimeTotal] = since(t_step);
  return r;
}

bool GrpoRun::fp8_telemetry_due() const {
  // During RL step rl_done_ + 1: steps 1, 1 + N, 1 + 2N, ...
  const int64_t every = cfg_.fp8_telemetry_every;
  return every > 0 && rl_done_ % every == 0;
}

void GrpoRun::audit_rollout_weights(StepRecord& r) {
  // The weights the rollout will use (those of the last refresh; the same on every rank, so
  // rank 0 audits).
  if (comm_->rank() != 0 || cfg_.audit_every <= 0 || (r.step - 1) % cfg_.audit_every != 0) return;
  const auto t0 = Clock::now();
  r.audit = audit_weights(*model_, model_->precision(), model_->quant_options());
  r.scalars[metric::kTimeAudit] = since(t0);
  int64_t bad = 0;
  for (const auto& a : r.audit) bad += !a.ok;
  r.scalars[metric::kAuditMismatches] = static_cast<double>(bad);
}

void GrpoRun::rollout_phase(StepRecord& r, RlBatch& b) {
  // Prompts, rollout, rewards and advantages (this rank's share of the prompts).
  const int64_t G = cfg_.group_size;
  const std::vector<int64_t> mine = my_prompts();
  b.rollouts = generate_group_rollouts(cfg_, *task_, *gen_, r.step, cfg_.prompts_per_step,
                                       comm_->size() > 1 ? &mine : nullptr);
  const GroupRollouts& batch = b.rollouts;
  const RolloutStats rs = gen_->last_stats();
  b.t_generation = rs.prefill_seconds + rs.decode_seconds + rs.calibration_seconds;
  const int64_t N = static_cast<int64_t>(batch.sequences.size());
  for (int64_t i = 0; i < N; ++i) {
    const size_t si = static_cast<size_t>(i);
    b.correct += batch.correct[si];
    b.response_length += static_cast<double>(batch.sequences[si].response.size());
    if (static_cast<int64_t>(r.samples.size()) < cfg_.samples_per_step && i % G == 0) {
      const Example& ex = batch.examples[static_cast<size_t>(i / G)];
      r.samples.push_back({ex.prompt,
                           batch.texts[si] + (batch.ended[si] ? "" : "…"),
                           ex.answer,
                           batch.rewards[si],
                           {},
                           {}});
      b.sample_rows.push_back(i);
    }
  }
}

void GrpoRun::training_phase(RlBatch& b) {
  // Trainer log-probs p and the PPO updates. With one optimizer step per RL step the policy
  // that trains is the one that generated, so p comes from the training forward itself (c = p,
  // ratio 1); with several, a separate no-grad pass records p first.
  std::vector<TrainSeq>& train = b.rollouts.train;
  const float inv_t = static_cast<float>(1.0 / cfg_.sampling.temperature);
  const size_t mbs = static_cast<size_t>(cfg_.micro_batch_size);
  b.p.assign(train.size(), {});
  const bool separate_logprob = cfg_.mini_batches > 1 || cfg_.epochs > 1;
  if (separate_logprob) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < train.size(); i += mbs) {
      const MicroBatch mb = pack_micro_batch(train, i, std::min(train.size(), i + mbs));
      model_->set_routing_reference(mb.routing.empty() ? nullptr : &mb.routing,
                                    cfg_.moe_routing_replay);
      const auto res = model_->forward(mb.ids, mb.targets, mb.B, mb.T, inv_t, false);
      for (auto [si, row] : mb.rows)
        b.p[si].assign(res.logp.begin() + row,
                       res.logp.begin() + row + static_cast<int64_t>(train[si].g.size()));
    }
    b.t_logprob = since(t0);
  }
  if (cfg_.kv_cache == KvDType::fp8) model_->set_kv_calibrator(&b.calibrator);
  b.signal = cfg_.autopilot.on || fp8_telemetry_due();
  observer_->reset();
  b.observed.assign(train.begin(),
                    train.begin() + static_cast<std::ptrdiff_t>(std::min(train.size(), mbs)));
  const auto t_train0 = Clock::now();
  const size_t per_mini = train.size() / static_cast<size_t>(cfg_.mini_batches);
  // Each mini-batch's response tokens over all ranks: the token-level mean's denominator.
  std::vector<double> global_mini_tokens(static_cast<size_t>(cfg_.mini_batches), 0.0);
  for (size_t m = 0; m < global_mini_tokens.size(); ++m)
    for (size_t i = m * per_mini; i < (m + 1) * per_mini; ++i)
      global_mini_tokens[m] += static_cast<double>(train[i].g.size());
  reduce_sum(global_mini_tokens.data(), global_mini_tokens.size());
  for (int64_t epoch = 0; epoch < cfg_.epochs; ++epoch)
    for (int64_t m = 0; m < cfg_.mini_batches; ++m) {
      const size_t m0 = static_cast<size_t>(m) * per_mini, m1 = m0 + per_mini;
      const double mini_tokens = global_mini_tokens[static_cast<size_t>(m)];
      model_->zero_grad();
      for (size_t i = m0; i < m1; i += mbs) {
        // FP8 telemetry from the first micro-batch of the step only (bounded cost).
        observer_->enabled = fp8_telemetry_due() && epoch == 0 && m == 0 && i == m0;
        observer_->signal = b.signal && epoch == 0 && m == 0 && i == m0;
        const MicroBatch mb = pack_micro_batch(train, i, std::min(m1, i + mbs));
        // Routing telemetry from the first epoch's forwards (each token once).
        model_->collect_routing(epoch == 0);
        model_->set_routing_reference(mb.routing.empty() ? nullptr : &mb.routing,
                                      cfg_.moe_routing_replay);
        const auto res = model_->forward(mb.ids, mb.targets, mb.B, mb.T, inv_t, true, true);
        std::vector<float> dlogp(res.logp.size(), 0.0f);
        for (auto [si, row] : mb.rows) {
          TrainSeq& s = train[si];
          const int64_t n = static_cast<int64_t>(s.g.size());
          const float* c = res.logp.data() + row;
          if (!separate_logprob) b.p[si].assign(c, c + n);
          add_token_loss(cfg_.loss, s.advantage, c, b.p[si].data(), s.g.data(), nullptr, n,
                         dlogp.data() + row, b.sums);
          for (int64_t k = 0; k < n; ++k) {
            dlogp[static_cast<size_t>(row + k)] /=
                static_cast<float>(mini_tokens);  // token-level mean
            b.entropy_sum += res.entropy[static_cast<size_t>(row + k)];
          }
          b.entropy_n += n;
          if (epoch == 0) {
            b.all_p.insert(b.all_p.end(), b.p[si].begin(), b.p[si].end());
            b.all_g.insert(b.all_g.end(), s.g.begin(), s.g.end());
          }
        }
        model_->backward(dlogp);
        model_->set_routing_reference(nullptr, false);
        model_->collect_routing(false);
        observer_->enabled = false;
        observer_->signal = false;
      }
      all_reduce_gradients();
      const OptimizerStep os = opt_->step();
      b.grad_norm = os.grad_norm;
      b.lr = os.lr;
      if (!(epoch == cfg_.epochs - 1 && m == cfg_.mini_batches - 1)) model_->refresh();
    }
  model_->set_kv_calibrator(nullptr);
  if (cfg_.kv_cache == KvDType::fp8) gather_kv_amax(b.calibrator);
  b.t_training = since(t_train0);
}

void GrpoRun::recalibration_phase(RlBatch& b) {
  // Re-quantize the FP8 weights for the next rollout; new KV scales.
  const auto t0 = Clock::now();
  observer_->enabled = fp8_telemetry_due();
  observer_->signal = b.signal;  // the weights' part of the error signal
  model_->refresh();
  observer_->signal = false;
  observer_->enabled = false;
  if (cfg_.kv_cache == KvDType::fp8 && !b.calibrator.empty())
    gen_->set_kv_scales(b.calibrator.scales());
  b.t_recalibration = since(t0);
}

void GrpoRun::step_telemetry(StepRecord& r, RlBatch& b) {
  // Merged over ranks: sums of counts, then the statistics of the whole batch.
  const int ranks = comm_->size();
  const std::vector<double>& rewards = b.rollouts.rewards;
  double reward_sum = 0;
  for (double x : rewards) reward_sum += x;
  // The step's sums, reduced over the ranks as one array, named by position.
  enum Total {
    kReward,
    kCorrect,
    kResponseLength,
    kSequences,
    kLoss,
    kLossTokens,
    kClipped,
    kEntropy,
    kEntropyTokens,
    kResponseTokens,
    kTotals
  };
  double tot[kTotals];
  tot[kReward] = reward_sum;
  tot[kCorrect] = b.correct;
  tot[kResponseLength] = b.response_length;
  tot[kSequences] = static_cast<double>(b.rollouts.sequences.size());
  tot[kLoss] = b.sums.loss;
  tot[kLossTokens] = static_cast<double>(b.sums.tokens);
  tot[kClipped] = static_cast<double>(b.sums.clipped);
  tot[kEntropy] = b.entropy_sum;
  tot[kEntropyTokens] = static_cast<double>(b.entropy_n);
  tot[kResponseTokens] = static_cast<double>(b.rollouts.response_tokens);
  reduce_sum(tot, kTotals);
  const double all_n = tot[kSequences], loss_tokens = tot[kLossTokens];
  const double reward_mean = tot[kReward] / all_n;
  double var = 0;
  for (double x : rewards) var += (x - reward_mean) * (x - reward_mean);
  reduce_sum(&var, 1);
  if (ranks > 1)
    in_collective([&] {
      b.all_p = all_gather_floats(*comm_, b.all_p);
      b.all_g = all_gather_floats(*comm_, b.all_g);
    });
  const MismatchStats ms = mismatch_stats(b.all_p, b.all_g, cfg_.loss);
  auto& S = r.scalars;
  S[metric::kReward] = reward_mean;
  S[metric::kRewardStd] = std::sqrt(var / all_n);
  S[metric::kTrainAccuracy] = tot[kCorrect] / all_n;
  S[metric::kLoss] = loss_tokens > 0 ? tot[kLoss] / loss_tokens : 0.0;
  S[metric::kGradNorm] = b.grad_norm;
  S[metric::kLr] = b.lr;
  S[metric::kEntropy] = tot[kEntropyTokens] > 0 ? tot[kEntropy] / tot[kEntropyTokens] : 0.0;
  S[metric::kClipFraction] = loss_tokens > 0 ? tot[kClipped] / loss_tokens : 0.0;
  S[metric::kTokenMultProbError] = ms.token_mult_prob_error;
  S[metric::kGenKlError] = ms.gen_kl_error;
  S[metric::kMeanWeight] = ms.mean_weight;
  S[metric::kOutOfBounds] = ms.out_of_bounds;
  S[metric::kEss] = ms.effective_sample_size;
  S[metric::kResponseLength] = tot[kResponseLength] / all_n;
  S[metric::kTimeGeneration] = b.t_generation;
  S[metric::kTimeLogprob] = b.t_logprob;
  S[metric::kTimeTraining] = b.t_training;
  S[metric::kTimeRecalibration] = b.t_recalibration;
  tokens_total_ += static_cast<int64_t>(tot[kResponseTokens]);
  S[metric::kTokensTotal] = static_cast<double>(tokens_total_);
  // Throughput: each rank's, and their sum (the ranks work at the same time).
  const double my_tps[] = {
      b.t_generation > 0 ? static_cast<double>(b.rollouts.response_tokens) / b.t_generation : 0.0,
      b.t_training > 0 ? static_cast<double>(b.rollouts.train_tokens * cfg_.epochs) / b.t_training
                       : 0.0};
  std::vector<double> tps(2 * static_cast<size_t>(ranks));
  in_collective([&] { comm_->all_gather(my_tps, sizeof my_tps, tps.data()); });
  S[metric::kRolloutTps] = S[metric::kTrainTps] = 0;
  for (int k = 0; k < ranks; ++k) {
    S[metric::kRolloutTps] += tps[2 * static_cast<size_t>(k)];
    S[metric::kTrainTps] += tps[2 * static_cast<size_t>(k) + 1];
    if (ranks > 1) {
      S[metric::rank_rollout_tps(k)] = tps[2 * static_cast<size_t>(k)];
      S[metric::rank_train_tps(k)] = tps[2 * static_cast<size_t>(k) + 1];
    }
  }
  {
    std::vector<double> log_w(b.all_p.size());
    for (size_t i = 0; i < b.all_p.size(); ++i) log_w[i] = double(b.all_p[i]) - double(b.all_g[i]);
    const double range = histogram::kImportanceLogWeightRange;
    r.histograms.push_back(
        {histogram::kImportanceLogWeight,
         linear_histogram(log_w, -range, range, histogram::kImportanceLogWeightBins)});
  }
  // The samples' tokens and p − g per token (the studio colours them).
  for (size_t k = 0; k < r.samples.size(); ++k) {
    const size_t i = static_cast<size_t>(b.sample_rows[k]);
    const Sequence& s = b.rollouts.sequences[i];
    SampleRecord& out = r.samples[k];
    for (size_t t = 0; t < s.response.size(); ++t) {
      out.tokens.push_back(task_->tokenizer().token_text(s.response[t]));
      out.logprob_diff.push_back(double(b.p[i][t]) - double(b.rollouts.train[i].g[t]));
    }
  }
  const auto kv = gen_->kv_scales();
  for (size_t l = 0; l < kv.size(); ++l) {
    S[metric::kv_scale(static_cast<int64_t>(l), "k")] = kv[l].first;
    S[metric::kv_scale(static_cast<int64_t>(l), "v")] = kv[l].second;
  }
  add_fp8_telemetry(r);
  add_routing_telemetry(r);
}

void GrpoRun::add_routing_telemetry(StepRecord& r) {
  DecoderModel::RoutingTelemetry t = model_->take_routing_telemetry();
  if (!model_->has_experts() || t.stats.empty()) return;
  // Merged over ranks: the counts are sums.
  std::vector<double> sums;
  for (const auto& s : t.stats) {
    sums.insert(sums.end(), {static_cast<double>(s.tokens), static_cast<double>(s.compared),
                             static_cast<double>(s.differing), s.entropy, s.aux_loss});
    for (int64_t n : s.load) sums.push_back(static_cast<double>(n));
  }
  sums.insert(sums.end(), {static_cast<double>(t.tokens), static_cast<double>(t.tokens_differing)});
  reduce_sum(sums.data(), sums.size());
  auto& S = r.scalars;
  size_t at = 0;
  double mismatch_sum = 0, entropy_sum = 0, aux = 0, compared_tokens = 0;
  int64_t layers = 0;
  for (size_t l = 0; l < t.stats.size(); ++l) {
    const auto& s = t.stats[l];
    const double tokens = sums[at], compared = sums[at + 1], differing = sums[at + 2];
    const double entropy = sums[at + 3];
    aux += sums[at + 4];
    at += 5;
    std::vector<double> load(sums.begin() + static_cast<std::ptrdiff_t>(at),
                             sums.begin() + static_cast<std::ptrdiff_t>(at + s.load.size()));
    at += s.load.size();
    if (s.load.empty() || tokens <= 0) continue;  // a dense layer
    const int64_t L = static_cast<int64_t>(l);
    ++layers;
    compared_tokens = std::max(compared_tokens, compared);
    const double mismatch = compared > 0 ? differing / compared : 0.0;
    S[metric::moe(L, "routing_mismatch")] = mismatch;
    S[metric::moe(L, "router_entropy")] = entropy / tokens;
    mismatch_sum += mismatch;
    entropy_sum += entropy / tokens;
    // Tokens per expert: bin e over [e, e + 1), with the empty underflow and overflow bins every
    // histogram carries.
    Histogram h;
    for (size_t e = 0; e <= load.size(); ++e) h.edges.push_back(static_cast<double>(e));
    h.counts.push_back(0);
    for (double n : load) h.counts.push_back(static_cast<int64_t>(n));
    h.counts.push_back(0);
    r.histograms.push_back({histogram::expert_load(L), std::move(h)});
  }
  if (layers == 0) return;
  S[metric::kMoeRoutingMismatch] = mismatch_sum / static_cast<double>(layers);
  S[metric::kMoeRouterEntropy] = entropy_sum / static_cast<double>(layers);
  S[metric::kMoeTokensRerouted] = compared_tokens > 0 ? sums[at + 1] / compared_tokens : 0.0;
  if (cfg_.moe_router_aux_loss_coef > 0) S[metric::kMoeAuxLoss] = aux;
}

void GrpoRun::add_fp8_telemetry(StepRecord& r) {
  for (const auto& [layer, kind] : observer_->observed) {
    Histogram h = linear_histogram({}, Observer::kLog2Lo, Observer::kLog2Hi, Observer::kBins);
    h.counts = observer_->counts(layer, kind);
    r.histograms.push_back({histogram::fp8_scale_log2(layer, kind), std::move(h)});
    const QuantStats st = observer_->layer_stats(layer, kind);
    const double n = static_cast<double>(std::max<int64_t>(st.elements, 1));
    r.scalars[metric::fp8(layer, kind, "saturated_frac")] = static_cast<double>(st.saturated) / n;
    r.scalars[metric::fp8(layer, kind, "flushed_frac")] =
        static_cast<double>(st.flushed_to_zero) / n;
    r.scalars[metric::fp8(layer, kind, "rel_error")] = st.relative_error();
  }
  observer_->observed.clear();
}

namespace {

// What FP8 loses of one operand: relative error + flushed share + saturated share (NaN: no
// element quantized).
double operand_loss(const QuantStats& s) {
  if (s.elements <= 0) return std::numeric_limits<double>::quiet_NaN();
  const double n = static_cast<double>(s.elements);
  return s.relative_error() + static_cast<double>(s.flushed_to_zero) / n +
         static_cast<double>(s.saturated) / n;
}

}  // namespace

AutopilotObservation GrpoRun::add_fp8_signal(StepRecord& r, const RlBatch& b) {
  AutopilotObservation obs;
  obs.step = r.step;
  const PrecisionMap& map = model_->precision();
  if (map.all_fp32() || !b.signal) return obs;
  // Each operand's statistics by layer and module (a layer with experts: all of them).
  const int64_t L = observer_->layers;
  std::vector<QuantStats> weight(static_cast<size_t>(L * kModules)),
      act(static_cast<size_t>(L * kModules)), grad(static_cast<size_t>(L * kModules));
  auto at = [](int64_t l, Module m) { return static_cast<size_t>(l * kModules + int(m)); };
  const std::vector<QuantStatsSum>& sums = observer_->sums();  // shared with the telemetry
  for (int64_t l = 0; l < L; ++l)
    for (int mi = 0; mi < kModules; ++mi) {
      act[at(l, Module(mi))] = sums[Observer::slot(l, Module(mi), "activation")].stats();
      grad[at(l, Module(mi))] = sums[Observer::slot(l, Module(mi), "gradient")].stats();
      weight[at(l, Module(mi))] = sums[Observer::slot(l, Module(mi), "weight")].stats();
    }
  for (int64_t l = 0; l < L; ++l)
    for (int mi = 0; mi < kModules; ++mi) {
      const Module m = Module(mi);
      const bool mlp = m == Module::gate || m == Module::up || m == Module::down;
      if (!map.has(l, m)) continue;
      if (map.experts(l) > 0 && mlp && !map.experts_uniform(l, m)) continue;
      if (map.at(l, m) != Precision::fp8) continue;
      // The input this linear reads was quantized (and counted) once, for the first of its
      // readers in FP8.
      QuantStats a;
      for (Module sharer : DecoderModel::input_sharers(m))
        if (a.elements == 0) a = act[at(l, sharer)];
      AutopilotObservation::Signal sig;
      sig.unit = {l, m};
      sig.weight = operand_loss(weight[at(l, m)]);
      sig.activation = operand_loss(a);
      sig.gradient = operand_loss(grad[at(l, m)]);
      sig.error = std::numeric_limits<double>::quiet_NaN();
      for (double part : {sig.weight, sig.activation, sig.gradient})
        if (!std::isnan(part)) sig.error = std::isnan(sig.error) ? part : std::max(sig.error, part);
      if (!std::isnan(sig.error)) r.scalars[metric::fp8_error(l, module_short(m))] = sig.error;
      obs.per_linear.push_back(sig);
    }
  return obs;
}

void GrpoRun::observe_autopilot(StepRecord& r, RlBatch& b, AutopilotObservation obs) {
  if (comm_->rank() != 0) return;  // rank 0 decides; the others apply what it sends
  const AutopilotSettings& s = cfg_.autopilot;
  const PrecisionMap map = model_->precision();
  if (!s.on || map.all_fp32()) {
    autopilot_.observe(obs, map, s);  // counts the cooldown down, nothing else
    return;
  }
  const auto t0 = Clock::now();
  // The KL measures: the step's first micro-batch against the same weights all in BF16.
  const Precision head =
      model_->lm_head_setting() == Precision::fp8 ? Precision::fp8 : Precision::bf16;
  std::optional<SensitivityProbe> probe;
  auto measure = [&](const PrecisionMap& pm) {
    if (!probe) probe.emplace(*model_, cfg_, b.observed);
    return probe->measure(pm, head, false).kl;
  };
  if (s.metric == autopilot::kWatchPolicyKl) {
    r.scalars[metric::kFp8PolicyKl] = obs.per_linear.empty() ? 0.0 : measure(map);
  }
  if (auto it = r.scalars.find(s.metric); it != r.scalars.end()) obs.value = it->second;
  const PrecisionAutopilot::Confirm confirm = [&](const std::vector<AutopilotUnit>& units) {
    std::vector<double> kl;
    for (const auto& u : units) {
      PrecisionMap pm = map;
      pm.set(u.layer, u.module, Precision::bf16);
      kl.push_back(measure(pm));
    }
    return kl;
  };
  autopilot_.observe(obs, map, s, confirm);
  probe.reset();  // the model as it was
  if (obs.value) r.scalars[autopilot::kScalarValue] = *obs.value;
  r.scalars[autopilot::kScalarStreak] = static_cast<double>(autopilot_.streak());
  r.scalars[autopilot::kScalarCalm] = static_cast<double>(autopilot_.calm());
  r.scalars[autopilot::kScalarCooldown] = static_cast<double>(autopilot_.cooldown());
  r.scalars[autopilot::kScalarBudgetUsed] = autopilot_.budget_used(s.budget_flops);
  r.scalars[autopilot::kScalarHeld] = static_cast<double>(autopilot_.held().size());
  r.scalars[autopilot::kTimeAutopilot] = since(t0);
}

void GrpoRun::inject_outliers(StepRecord& r) {
  std::string text;
  Json::Array linears;
  for (int64_t want : cfg_.outlier_layers)
    for (int64_t l = 0; l < model_->config().num_hidden_layers; ++l) {
      if (want >= 0 && want != l) continue;
      const auto channels = model_->inject_outlier_channels(l, cfg_.outlier_scale);
      std::string ch;
      for (int64_t c : channels) ch += (ch.empty() ? "" : ", ") + std::to_string(c);
      text += (text.empty() ? "" : "; ") + AutopilotUnit{l, Module::down}.name() + " (channels " +
              ch + ")";
      linears.emplace_back(AutopilotUnit{l, Module::down}.name());
    }
  Json data;
  data["linears"] = Json(std::move(linears));
  data["scale"] = cfg_.outlier_scale;
  r.events.push_back({event::kOutliers,
                      "dead MLP channels with down_proj columns " +
                          live_value_text(cfg_.outlier_scale) + " × its largest weight: " + text,
                      data});
}

double GrpoRun::validate(std::vector<SampleRecord>* samples) {
  // Each rank scores its share of the validation set; the counts are summed.
  const auto& all_val = task_->validation();
  const auto [first, end] =
      share_of(static_cast<int64_t>(all_val.size()), comm_->rank(), comm_->size());
  const std::vector<Example> val(all_val.begin() + first, all_val.begin() + end);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& ex : val) prompts.push_back(task_->encode_prompt(ex.prompt));
  if (comm_->size() > 1 && cfg_.kv_cache == KvDType::fp8 && gen_->kv_scales().empty()) {
    // The first FP8 KV scales come from the prompts of the first generation: all of them.
    std::vector<std::vector<int32_t>> every;
    for (const auto& ex : all_val) every.push_back(task_->encode_prompt(ex.prompt));
    gen_->calibrate(every);
  }
  SamplingParams sp;
  sp.temperature = 0;  // greedy
  sp.max_new_tokens = task_->max_response_tokens();
  stop_at_eos(sp, task_->tokenizer());
  std::vector<int64_t> indices(val.size());  // each prompt's index in the whole validation set
  std::iota(indices.begin(), indices.end(), first);
  sp.response_lengths = task_->forced_response_lengths(indices, 0x7a11dull);
  std::vector<Sequence> seqs;
  if (!prompts.empty()) seqs = gen_->generate(prompts, sp);
  double right = 0;
  for (size_t i = 0; i < val.size(); ++i) {
    bool ended = false;
    const std::string text = response_text(*task_, seqs[i], &ended);
    right += task_->correct(val[i], text, ended);
    if (samples && static_cast<int64_t>(samples->size()) < cfg_.samples_per_step)
      samples->push_back(
          {val[i].prompt, text, val[i].answer, task_->reward(val[i], text, ended), {}, {}});
  }
  reduce_sum(&right, 1);
  return all_val.empty() ? 0.0 : right / static_cast<double>(all_val.size());
}

void GrpoRun::save(const std::string& dir) {
  Json st;
  st["sft_done"] = sft_done_;
  st["rl_done"] = rl_done_;
  st["tokens_total"] = tokens_total_;
  st["elapsed_seconds"] = elapsed_;
  st["config"] = cfg_.doc;  // with the live state in force (GrpoRun::apply keeps it there)
  st["live"] = live_state().to_json();
  st["autopilot"] = autopilot_.state_json();
  Json::Array kv;
  for (auto [k, v] : gen_->kv_scales())
    kv.push_back(Json(Json::Array{Json(double(k)), Json(double(v))}));
  st["kv_scales"] = Json(std::move(kv));
  // All files or none: a run killed while saving keeps its previous checkpoint.
  write_checkpoint_dir(dir, [&](const std::string& tmp) {
    save_checkpoint(tmp, *model_, opt_.get(), st);
    if (sft_opt_) sft_opt_->state().write(tmp + "/sft_optimizer.safetensors");
    task_->tokenizer().save(tmp);
  });
}

void GrpoRun::restore(const std::string& folder) {
  const std::string dir = checkpoint_dir_to_read(folder);
  auto loaded = load_checkpoint(be_, dir, model_->precision(),
                                QuantOptions{Fp8Format::e4m3, cfg_.pow2_scales});
  // Copy the weights into this run's model (keeps optimizer bindings).
  auto src = loaded->parameters();
  auto dst = model_->parameters();
  check(src.size() == dst.size(), "resume: the checkpoint's model differs from the run's");
  for (size_t i = 0; i < src.size(); ++i) {
    check(src[i]->name == dst[i]->name && src[i]->master.size() == dst[i]->master.size(),
          "resume: parameter " + src[i]->name + " differs from the run's model");
    be_.copy(dst[i]->master.buf.data(), src[i]->master.buf.data(), src[i]->master.buf.bytes());
  }
  model_->refresh();
  load_optimizer_state(dir, *opt_);
  if (sft_opt_ && std::filesystem::exists(dir + "/sft_optimizer.safetensors"))
    sft_opt_->load_state(SafeTensorsFile::read(dir + "/sft_optimizer.safetensors"));
  const Json st = Json::parse(read_text_file(dir + "/trainer_state.json"));
  sft_done_ = st.at("sft_done").as_int("sft_done");
  rl_done_ = st.at("rl_done").as_int("rl_done");
  // Checkpoints written before tokens were counted resume the count at 0.
  tokens_total_ = st.contains("tokens_total") ? st.at("tokens_total").as_int("tokens_total") : 0;
  elapsed_ = st.at("elapsed_seconds").as_number("elapsed_seconds");
  // Checkpoints written before the autopilot existed keep the pins of the configuration.
  if (st.contains("autopilot")) autopilot_.restore(st.at("autopilot"));
  std::vector<std::pair<float, float>> kv;
  for (const auto& p : st.at("kv_scales").as_array("kv_scales"))
    kv.push_back({static_cast<float>(p.as_array()[0].as_number()),
                  static_cast<float>(p.as_array()[1].as_number())});
  if (!kv.empty()) gen_->set_kv_scales(kv);
}

RunConfig resume_config(const std::string& checkpoint_dir, const std::vector<std::string>& sets) {
  const std::string file = checkpoint_dir_to_read(checkpoint_dir) + "/trainer_state.json";
  Json doc;
  try {
    const Json st = Json::parse(read_text_file(file));
    check(st.is_object() && st.contains("config") && st.at("config").is_object(),
          "no \"config\" object");
    doc = st.at("config");
  } catch (const Error& e) {
    throw Error(file + ": " + e.message());
  }
  for (const auto& s : sets) apply_override(doc, s);
  return RunConfig::from_json(doc);
}

}  // namespace fp8rl
