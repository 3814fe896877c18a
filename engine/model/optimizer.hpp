// AdamW over FP32 master weights, with gradient clipping by global norm and a warmup +
// constant/cosine learning-rate schedule.
#pragma once

#include <string>
#include <vector>

#include "model/safetensors.hpp"
#include "model/tensor.hpp"

namespace fp8rl {

struct OptimizerConfig {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;          // decoupled; not applied to norm weights
  double max_grad_norm = 1.0;         // ≤ 0: no clipping
  int64_t warmup_steps = 0;           // linear warmup from lr/warmup to lr
  std::string schedule = "constant";  // "constant" or "cosine" (to min_lr_ratio·lr at total_steps)
  int64_t total_steps = 0;
  double min_lr_ratio = 0.1;

  void validate() const;  // throws naming the bad field
};

struct OptimizerStep {
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
  bool clipped = false;
};

class AdamW {
 public:
  AdamW(Backend& be, std::vector<Param*> params, OptimizerConfig cfg);

  // Learning rate of step t (1-based).
  double lr_at(int64_t t) const;
  // Clips the accumulated gradients, updates the parameters, advances the step count. Does not
  // zero the gradients.
  OptimizerStep step();
  int64_t steps() const { return t_; }
  const OptimizerConfig& config() const { return cfg_; }
  void set_lr(double lr) { cfg_.lr = lr; }

  // Moments as safetensors tensors "<param>.exp_avg" / ".exp_avg_sq" (F32) plus the step.
  SafeTensorsFile state() const;
  void load_state(const SafeTensorsFile& f);

 private:
  Backend& be_;
  std::vector<Param*> params_;
  OptimizerConfig cfg_;
  std::vector<Tensor> m_, v_;
  int64_t t_ = 0;
};

}  // namespace fp8rl
