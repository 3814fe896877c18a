// The GRPO run loop: sample prompts → generate G responses each (FP8 rollout, same weights as
// the trainer) → rewards → advantages → trainer log-probs → importance-weighted clipped PPO loss
// → optimizer step(s) → re-quantize FP8 weights and recalibrate the KV scales. Optional
// supervised warm-up steps first. Deterministic for a seed on the CPU; resumable from a
// checkpoint.
//
// Data-parallel (docs/distributed.md): given a Communicator of several ranks, every rank holds
// the whole model; each generates and trains on its share of the step's prompts (whole groups,
// the same share of every mini-batch), the gradients are summed over ranks — each rank's loss
// is already divided by the global token count — and every rank applies the same optimizer
// step, re-quantization and KV calibration. The result is the one-rank run's with the same
// global batch, up to the order of float sums. Every rank must call next(), validate() and the
// live edits in the same order; the returned records are complete on rank 0 (the step's
// telemetry merged over ranks), and checkpoints are written by rank 0.
#pragma once

#include <memory>
#include <string>

#include "contract/metrics.hpp"
#include "contract/step_record.hpp"
#include "dist/communicator.hpp"
#include "model/decoder.hpp"
#include "model/kv_cache.hpp"
#include "model/optimizer.hpp"
#include "rl/autopilot.hpp"
#include "rl/run_config.hpp"
#include "rl/tasks.hpp"
#include "rollout/generator.hpp"

namespace fp8rl {

class GrpoRun {
 public:
  // comm: the ranks sharing the run (null: this process alone). Throws when the batch cannot
  // be shared (fewer prompts per mini-batch than ranks, or groups split by mini-batches).
  GrpoRun(const RunConfig& cfg, Backend& be, Communicator* comm = nullptr);
  ~GrpoRun();

  const RunConfig& config() const { return cfg_; }
  DecoderModel& model() { return *model_; }
  const Task& task() const { return *task_; }
  Backend& backend() { return be_; }
  Communicator& communicator() { return *comm_; }

  int64_t sft_done() const { return sft_done_; }
  int64_t rl_done() const { return rl_done_; }
  bool finished() const { return sft_done_ >= cfg_.sft_steps && rl_done_ >= cfg_.steps; }

  // Runs the next step (a warm-up step while any remain, else a GRPO step) and returns its
  // record. Validation runs when the step count reaches a multiple of validation.every and at
  // the last step.
  StepRecord next();
  // Greedy exact-match accuracy on the task's validation set; fills samples when given.
  double validate(std::vector<SampleRecord>* samples = nullptr);

  // The live state in force: the precision map and every live setting's value.
  LiveState live_state() const;
  // Applies a person's live edit now (the caller calls it between steps): the edited state is
  // checked whole first (LiveState::apply), then written into the run's configuration, which
  // the run reads the settings from, and handed to the parts that keep their own copy (the
  // model's precision map, the optimizer's learning rate, the autopilot's pins). Throws
  // fp8rl::Error, changing nothing, for an edit the run cannot take.
  void apply(const LiveEdit& edit);

  // The precision autopilot (rl/autopilot.hpp, docs/autopilot.md). It observes every RL step
  // at its end (rank 0); its decision waits for the next step boundary, where the caller takes
  // it — checked against the map after that boundary's person's edits — applies it with
  // apply_autopilot (the same typed edit, without pinning) and records it.
  std::optional<AutopilotDecision> take_autopilot_decision();
  void apply_autopilot(const AutopilotDecision& d);
  const PrecisionAutopilot& autopilot() const { return autopilot_; }

  // Checkpoint: model + optimizer + trainer_state.json (steps, KV scales, the configuration
  // with the live state in force, the live state) into dir.
  void save(const std::string& dir);
  // Continues a run saved by save(). The run must have been built from the checkpoint's
  // configuration (resume_config), so that it continues with the live edits made before.
  void restore(const std::string& dir);

 private:
  StepRecord sft_step();
  // A GRPO step, phase by phase (run_loop.cpp): audit, rollout, training, recalibration,
  // telemetry. RlBatch carries what one phase hands the next.
  struct RlBatch;
  StepRecord rl_step();
  void audit_rollout_weights(StepRecord& r);
  // Whether this RL step records FP8 quantization telemetry (telemetry.fp8_every).
  bool fp8_telemetry_due() const;
  void rollout_phase(StepRecord& r, RlBatch& b);
  void training_phase(RlBatch& b);
  void recalibration_phase(RlBatch& b);
  void step_telemetry(StepRecord& r, RlBatch& b);
  void add_fp8_telemetry(StepRecord& r);
  // The per-linear FP8 error signal of the step (metric::fp8_error) into r and an observation
  // (none on a step that took no signal: autopilot off and FP8 telemetry not due).
  AutopilotObservation add_fp8_signal(StepRecord& r, const RlBatch& b);
  // Hands the step to the autopilot: the watched metric (measuring fp8/policy_kl when it is the
  // one), the confirmation it asks for, its counters as scalars.
  void observe_autopilot(StepRecord& r, RlBatch& b, AutopilotObservation obs);
  // outliers.linears: the dead channels injected before the first RL step (an event of r).
  void inject_outliers(StepRecord& r);
  // Mixture of experts: routing mismatch (generator vs the trainer's routers), router entropy,
  // expert load (contract/metrics.hpp: moe/…, expert_load/L…).
  void add_routing_telemetry(StepRecord& r);
  // This rank's prompts of an RL step: its share of every mini-batch's prompts.
  std::vector<int64_t> my_prompts() const;
  // Sums the gradients over ranks (through device memory when the backend has a device
  // communicator, else staged through host memory).
  void all_reduce_gradients();
  // v[0, n) ← the sum over ranks (timed as communication).
  void reduce_sum(double* v, size_t n);
  // Runs f, adding its seconds to the step's communication time.
  template <class F>
  void in_collective(F&& f);
  // Checks that every rank holds what rank 0 holds after a step: the precision map and live
  // settings, and at validation steps a checksum of the master weights. Throws naming the
  // first rank that differs (a control message lost, or a reduction that is not the same
  // everywhere, would otherwise go unnoticed while the ranks drift apart).
  void check_ranks_agree(const StepRecord& r);
  // The KV amax every rank recorded, in rank order, into calibrator.
  void gather_kv_amax(KvScaleCalibrator& calibrator);

  RunConfig cfg_;
  Backend& be_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<AdamW> opt_, sft_opt_;
  std::unique_ptr<Generator> gen_;
  int64_t sft_done_ = 0, rl_done_ = 0;
  int64_t tokens_total_ = 0;  // response tokens generated by RL steps so far
  double elapsed_ = 0;        // seconds of completed steps (restored on resume)
  struct Observer;
  std::unique_ptr<Observer> observer_;
  PrecisionAutopilot autopilot_;
  std::unique_ptr<Communicator> own_comm_;  // SingleProcess when none was given
  Communicator* comm_ = nullptr;
  std::unique_ptr<Communicator> device_comm_;  // NCCL, when the backend has one
  std::vector<float> grad_stage_;              // host staging of the gradients
  double comm_seconds_ = 0;                    // in collectives during the current step
};

// The configuration a run saved in checkpoint_dir continues with: the one saved there (the
// launch configuration with the live state in force when the checkpoint was written), with
// `sets` ("a.b=value") applied on top. Throws naming the file or the bad override.
RunConfig resume_config(const std::string& checkpoint_dir, const std::vector<std::string>& sets);

// Resident memory of this process in MiB (0 where unknown).
double resident_memory_mb();

}  // namespace fp8rl
