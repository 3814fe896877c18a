// The GRPO run loop: sample prompts → generate G responses each (FP8 rollout, same weights as
// the trainer) → rewards → advantages → trainer log-probs → importance-weighted clipped PPO loss
// → optimizer step(s) → re-quantize FP8 weights and recalibrate the KV scales. Optional
// supervised warm-up steps first. Deterministic for a seed on the CPU; resumable from a
// checkpoint.
#pragma once

#include <memory>
#include <string>

#include "model/optimizer.hpp"
#include "model/qwen3.hpp"
#include "rl/run_config.hpp"
#include "rl/tasks.hpp"
#include "rl/telemetry.hpp"
#include "rollout/generator.hpp"

namespace fp8rl {

class GrpoRun {
 public:
  GrpoRun(const RunConfig& cfg, Backend& be);
  ~GrpoRun();

  const RunConfig& config() const { return cfg_; }
  Qwen3Model& model() { return *model_; }
  const Task& task() const { return *task_; }
  Backend& backend() { return be_; }

  int64_t sft_done() const { return sft_done_; }
  int64_t rl_done() const { return rl_done_; }
  bool finished() const { return sft_done_ >= cfg_.sft_steps && rl_done_ >= cfg_.steps; }

  // Runs the next step (a warm-up step while any remain, else a GRPO step) and returns its
  // record. Validation runs when the step count reaches a multiple of validation.every and at
  // the last step.
  StepRecord next();
  // Greedy exact-match accuracy on the task's validation set; fills samples when given.
  double validate(std::vector<SampleRecord>* samples = nullptr);

  // Live edits (applied now: the caller calls them between steps).
  void set_precision(const PrecisionMap& pm);
  void set_lr(double lr);
  void set_temperature(double t) { cfg_.sampling.temperature = t; }
  void set_importance_bounds(double lo, double hi);
  void set_validation_every(int64_t k) { cfg_.validation_every = k; }

  // Checkpoint: model + optimizer + trainer_state.json (steps, KV scales, config) into dir.
  void save(const std::string& dir);
  // Continues a run saved by save().
  void restore(const std::string& dir);

 private:
  StepRecord sft_step();
  StepRecord rl_step();
  void add_fp8_telemetry(StepRecord& r);

  RunConfig cfg_;
  Backend& be_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<Qwen3Model> model_;
  std::unique_ptr<AdamW> opt_, sft_opt_;
  std::unique_ptr<Generator> gen_;
  int64_t sft_done_ = 0, rl_done_ = 0;
  double elapsed_ = 0;  // seconds of completed steps (restored on resume)
  struct Observer;
  std::unique_ptr<Observer> observer_;
};

// Resident memory of this process in MiB (0 where unknown).
double resident_memory_mb();

}  // namespace fp8rl
