#include "ui/data/expert_load.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "contract/metrics.hpp"

namespace fp8rl::ui {

std::vector<int> expertLayers(const RunData& run) {
  std::vector<int> out;
  const std::string prefix = histogram::kExpertLoadPrefix;
  for (auto it = run.histograms.lower_bound(prefix);
       it != run.histograms.end() && it->first.starts_with(prefix); ++it) {
    const std::string rest = it->first.substr(prefix.size());
    if (!rest.empty() &&
        std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
      out.push_back(std::stoi(rest));
  }
  std::sort(out.begin(), out.end());
  return out;
}

ExpertLoadSeries expertLoadSeries(const RunData& run, int layer) {
  ExpertLoadSeries s;
  s.layer = layer;
  const auto found = run.histograms.find(histogram::expert_load(layer));
  if (found == run.histograms.end()) return s;
  for (const auto& [step, h] : found->second)  // counts: underflow, experts…, overflow
    s.experts = std::max(s.experts, static_cast<int>(h.counts.size()) - 2);
  for (const auto& [step, h] : found->second) {
    std::vector<double> shares(static_cast<size_t>(s.experts),
                               std::numeric_limits<double>::quiet_NaN());
    double total = 0;
    for (size_t b = 1; b + 1 < h.counts.size(); ++b) total += static_cast<double>(h.counts[b]);
    if (total > 0)
      for (size_t b = 1; b + 1 < h.counts.size(); ++b)
        shares[b - 1] = static_cast<double>(h.counts[b]) / total;
    s.steps.push_back(step);
    s.shares.push_back(std::move(shares));
  }
  return s;
}

std::vector<StarvingExpert> starvingExperts(const ExpertLoadSeries& load) {
  std::vector<StarvingExpert> out;
  if (load.experts <= 0 || load.steps.empty()) return out;
  const double threshold = kStarvingFraction / load.experts;
  for (int e = 0; e < load.experts; ++e) {
    StarvingExpert x{load.layer, e, 0, 0, 0.0, threshold};
    // Back from the latest step while the expert stays under the threshold; a step that routed
    // nothing (NaN) says nothing either way and is passed over.
    for (size_t i = load.steps.size(); i-- > 0;) {
      const double share = load.shares[i][static_cast<size_t>(e)];
      if (std::isnan(share)) continue;
      if (!(share < threshold)) break;
      x.since_step = load.steps[i];
      ++x.steps;
      x.max_share = std::max(x.max_share, share);
    }
    if (x.steps >= kStarvingSteps) out.push_back(x);
  }
  return out;
}

std::vector<StarvingExpert> starvingExperts(const RunData& run) {
  std::vector<StarvingExpert> out;
  for (int layer : expertLayers(run)) {
    const auto layer_out = starvingExperts(expertLoadSeries(run, layer));
    out.insert(out.end(), layer_out.begin(), layer_out.end());
  }
  return out;
}

}  // namespace fp8rl::ui
