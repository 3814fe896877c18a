#include "model/optimizer.hpp"

#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace fp8rl {

void OptimizerConfig::validate() const {
  check(lr > 0 && std::isfinite(lr), "optimizer.lr must be positive");
  check(beta1 >= 0 && beta1 < 1, "optimizer.beta1 must be in [0, 1)");
  check(beta2 >= 0 && beta2 < 1, "optimizer.beta2 must be in [0, 1)");
  check(eps > 0, "optimizer.eps must be positive");
  check(weight_decay >= 0, "optimizer.weight_decay must be ≥ 0");
  check(warmup_steps >= 0, "optimizer.warmup_steps must be ≥ 0");
  check(schedule == "constant" || schedule == "cosine",
        "optimizer.schedule '" + schedule + "' is not one of: constant, cosine");
  check(schedule != "cosine" || total_steps > 0, "optimizer.schedule cosine needs total_steps > 0");
  check(min_lr_ratio >= 0 && min_lr_ratio <= 1, "optimizer.min_lr_ratio must be in [0, 1]");
}

AdamW::AdamW(Backend& be, std::vector<Param*> params, OptimizerConfig cfg)
    : be_(be), params_(std::move(params)), cfg_(std::move(cfg)) {
  cfg_.validate();
  for (Param* p : params_) {
    m_.push_back(Tensor::make(be, p->master.rows, p->master.cols, DType::f32));
    v_.push_back(Tensor::make(be, p->master.rows, p->master.cols, DType::f32));
    be.zero(m_.back().buf.data(), m_.back().buf.bytes());
    be.zero(v_.back().buf.data(), v_.back().buf.bytes());
  }
}

double AdamW::lr_at(int64_t t) const {
  if (cfg_.warmup_steps > 0 && t <= cfg_.warmup_steps)
    return cfg_.lr * static_cast<double>(t) / static_cast<double>(cfg_.warmup_steps);
  if (cfg_.schedule == "cosine") {
    const double span =
        std::max<double>(1.0, static_cast<double>(cfg_.total_steps - cfg_.warmup_steps));
    const double progress = std::min(1.0, static_cast<double>(t - cfg_.warmup_steps) / span);
    const double lo = cfg_.lr * cfg_.min_lr_ratio;
    return lo + (cfg_.lr - lo) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return cfg_.lr;
}

OptimizerStep AdamW::step() {
  OptimizerStep r;
  // Every parameter at once: one pass and one synchronisation for the norm, one launch for the
  // clipping and one for the update (on a device: not one of each per parameter).
  std::vector<Backend::FloatSpan> grads;
  std::vector<Backend::AdamWParam> params;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param* p = params_[i];
    grads.push_back({p->grad.f32(), p->grad.size()});
    params.push_back({p->master.f32(), p->grad.f32(), m_[i].f32(), v_[i].f32(), p->master.size(),
                      p->decay ? static_cast<float>(cfg_.weight_decay) : 0.0f});
  }
  r.grad_norm = std::sqrt(be_.sum_squares(grads));
  check(std::isfinite(r.grad_norm), "optimizer: gradient norm is not finite (" +
                                        std::to_string(r.grad_norm) + "); step skipped");
  if (cfg_.max_grad_norm > 0 && r.grad_norm > cfg_.max_grad_norm) {
    be_.scale(grads, static_cast<float>(cfg_.max_grad_norm / (r.grad_norm + 1e-6)));
    r.clipped = true;
  }
  ++t_;
  r.lr = lr_at(t_);
  be_.adamw(params, static_cast<float>(r.lr), static_cast<float>(cfg_.beta1),
            static_cast<float>(cfg_.beta2), static_cast<float>(cfg_.eps), t_);
  return r;
}

SafeTensorsFile AdamW::state() const {
  SafeTensorsFile f;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (const auto& [suffix, t] :
         {std::make_pair(".exp_avg", &m_[i]), std::make_pair(".exp_avg_sq", &v_[i])}) {
      SafeTensor st;
      st.dtype = "F32";
      st.shape = {t->rows, t->cols};
      st.data.resize(static_cast<size_t>(t->size()) * 4);
      be_.download(st.data.data(), t->buf.data(), st.data.size());
      f.tensors[params_[i]->name + suffix] = std::move(st);
    }
  }
  f.metadata["step"] = std::to_string(t_);
  return f;
}

void AdamW::load_state(const SafeTensorsFile& f) {
  auto it = f.metadata.find("step");
  check(it != f.metadata.end(), "optimizer state: missing metadata \"step\"");
  const int64_t t = std::stoll(it->second);
  for (size_t i = 0; i < params_.size(); ++i) {
    for (const auto& [suffix, t_ptr] :
         {std::make_pair(".exp_avg", &m_[i]), std::make_pair(".exp_avg_sq", &v_[i])}) {
      const std::string name = params_[i]->name + suffix;
      auto ti = f.tensors.find(name);
      check(ti != f.tensors.end(), "optimizer state: missing tensor " + name);
      check(ti->second.dtype == "F32" &&
                ti->second.data.size() == static_cast<size_t>(t_ptr->size()) * 4,
            "optimizer state: tensor " + name + " has the wrong dtype or shape");
      be_.upload(t_ptr->buf.data(), ti->second.data.data(), ti->second.data.size());
    }
  }
  check(f.tensors.size() == 2 * params_.size(), "optimizer state: unexpected tensors in the file");
  t_ = t;
}

}  // namespace fp8rl
