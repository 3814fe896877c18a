#include "groups/group_series.hpp"

#include <algorithm>
#include <cmath>

#include "contract/metrics.hpp"

namespace fp8rl {

GroupSeries::GroupSeries(size_t runs, size_t max_buckets)
    : runs_(runs), max_buckets_(std::max<size_t>(2, max_buckets)) {}

void GroupSeries::resize_runs(size_t runs) {
  if (runs <= runs_) return;
  runs_ = runs;
  for (auto& [b, bucket] : buckets_) bucket.runs.resize(runs_);
}

int64_t GroupSeries::bucket_of(int64_t step) const {
  // Floor division: negative (warm-up) steps bucket like positive ones.
  return step >= 0 ? step / width_ : -((-step + width_ - 1) / width_);
}

void GroupSeries::add(size_t run, int64_t step, double value) {
  if (!std::isfinite(value)) return;
  if (run >= runs_) resize_runs(run + 1);
  Bucket& b = buckets_[bucket_of(step)];
  if (b.runs.size() < runs_) b.runs.resize(runs_);
  b.runs[run].sum += value;
  ++b.runs[run].n;
  b.step_sum += static_cast<double>(step);
  ++b.step_n;
  b.dirty = true;
  changed_ = true;
  if (buckets_.size() > max_buckets_) coarsen();
}

void GroupSeries::coarsen() {
  width_ *= 2;
  std::map<int64_t, Bucket> merged;
  for (auto& [index, b] : buckets_) {
    // The old bucket [index·w/2, (index+1)·w/2) lies in the new bucket floor(index / 2).
    const int64_t to = index >= 0 ? index / 2 : -((-index + 1) / 2);
    Bucket& m = merged[to];
    if (m.runs.size() < runs_) m.runs.resize(runs_);
    for (size_t r = 0; r < b.runs.size(); ++r) {
      m.runs[r].sum += b.runs[r].sum;
      m.runs[r].n += b.runs[r].n;
    }
    m.step_sum += b.step_sum;
    m.step_n += b.step_n;
    m.dirty = true;
  }
  buckets_ = std::move(merged);
  changed_ = true;
}

const std::vector<BandPoint>& GroupSeries::bands(const stats::BootstrapOptions& opt) {
  if (!changed_) return out_;
  out_.clear();
  out_.reserve(buckets_.size());
  std::vector<double> means;
  for (auto& [index, b] : buckets_) {
    if (b.dirty) {
      means.clear();
      for (const Cell& c : b.runs)
        if (c.n > 0) means.push_back(c.sum / static_cast<double>(c.n));
      BandPoint p;
      p.step = b.step_n > 0 ? b.step_sum / static_cast<double>(b.step_n) : 0;
      p.n = static_cast<int>(means.size());
      p.mean = stats::mean(means);
      p.lo = p.hi = p.mean;
      if (means.size() >= 2) {
        stats::BootstrapOptions o = opt;
        o.seed = opt.seed ^ (static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ull);
        const stats::Estimate e = stats::bootstrap_mean(means, o);
        p.lo = e.ci.lo;
        p.hi = e.ci.hi;
      }
      b.band = p;
      b.dirty = false;
    }
    if (b.band.n > 0) out_.push_back(b.band);
  }
  changed_ = false;
  return out_;
}

const std::vector<std::pair<std::string, std::string>>& group_chart_metrics() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {metric::kValAccuracy, "validation accuracy"},
      {metric::kReward, "reward"},
      {metric::kTrainAccuracy, "train accuracy"},
      {metric::kLoss, "loss"},
      {metric::kTokenMultProbError, "token_mult_prob_error"},
      {metric::kGenKlError, "gen_kl_error"},
      {metric::kEntropy, "entropy"},
      {metric::kRolloutTps, "rollout tokens/s"},
      {metric::kTrainTps, "training tokens/s"},
      {metric::kTimeTotal, "step time (s)"},
  };
  return m;
}

std::vector<GroupSeries> read_group_series(RunStore& store, const std::vector<RunGroup>& groups,
                                           const std::string& key, size_t max_buckets) {
  std::vector<GroupSeries> out;
  for (const auto& g : groups) {
    GroupSeries s(g.runs.size(), max_buckets);
    for (size_t r = 0; r < g.runs.size(); ++r)
      for (const auto& p : store.scalar_series(g.runs[r].id, key)) s.add(r, p.step, p.value);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace fp8rl
