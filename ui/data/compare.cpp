#include "ui/data/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "contract/metrics.hpp"
#include "contract/step_record.hpp"

namespace fp8rl::ui {

namespace {

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lo + hi) / 2;
}

// A number as short as it reads back exactly: 0.001, 2, 1e-06, 0.2.
std::string compactNumber(double d) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;
}

// A value as the diff table shows it: strings bare, numbers compact, lists and objects inline.
std::string render(const Json& v, bool top = true) {
  if (v.is_null()) return "null";
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_number()) return compactNumber(v.as_number());
  if (v.is_string()) return top ? v.as_string() : v.dump();
  std::string out;
  if (v.is_array()) {
    out = "[";
    for (const Json& x : v.as_array()) {
      if (out.size() > 1) out += ", ";
      out += render(x, false);
    }
    return out + "]";
  }
  out = "{";
  for (const auto& [k, x] : v.as_object()) {
    if (out.size() > 1) out += ", ";
    out += k + ": " + render(x, false);
  }
  return out + "}";
}

struct Setting {
  std::string compare;  // canonical JSON dump
  std::string shown;    // compact rendering
};

void flatten(const Json& v, const std::string& path, std::map<std::string, Setting>& out) {
  if (v.is_object() && !v.as_object().empty()) {
    for (const auto& [k, x] : v.as_object()) flatten(x, path.empty() ? k : path + "." + k, out);
    return;
  }
  if (path.empty()) return;  // a config that is not an object (e.g. null) has no settings
  out[path] = Setting{v.dump(), render(v)};
}

}  // namespace

std::vector<RunSummary> summarize(const std::vector<const RunData*>& runs, size_t base) {
  std::vector<RunSummary> out;
  out.reserve(runs.size());
  for (const RunData* run : runs) {
    RunSummary s;
    if (!run) {
      out.push_back(s);
      continue;
    }
    s.id = run->id;
    s.name = run->row.name;
    s.precision = run->row.precision_summary;
    s.steps = std::max<int64_t>(0, run->last_step);
    const auto& val = run->series(metric::kValAccuracy);
    if (!val.empty()) s.final_validation = val.back().value;
    for (const SeriesPoint& p : val)
      if (std::isfinite(p.value) && (!s.best_validation || p.value > *s.best_validation))
        s.best_validation = p.value;
    s.rollout_tps = run->rlMean(metric::kRolloutTps);
    s.training_tps = run->rlMean(metric::kTrainTps);
    s.step_time = run->rlMean(metric::kTimeTotal);
    std::vector<double> errors;
    for (const SeriesPoint& p : run->series(metric::kTokenMultProbError))
      if (std::isfinite(p.value)) errors.push_back(p.value);
    s.median_mult_prob_error = median(std::move(errors));
    out.push_back(std::move(s));
  }
  if (base < out.size() && out[base].step_time) {
    const double base_time = *out[base].step_time;
    for (RunSummary& s : out)
      if (s.step_time && *s.step_time > 0) s.speedup = base_time / *s.step_time;
  }
  return out;
}

std::vector<ConfigDiffRow> configDiff(const std::vector<const Json*>& configs) {
  std::vector<std::map<std::string, Setting>> flat(configs.size());
  std::set<std::string> keys;  // the union, sorted
  for (size_t i = 0; i < configs.size(); ++i) {
    if (configs[i]) flatten(*configs[i], "", flat[i]);
    for (const auto& [k, v] : flat[i]) keys.insert(k);
  }
  std::vector<ConfigDiffRow> rows;
  for (const std::string& key : keys) {
    bool differ = false;
    const Setting* first = nullptr;
    bool first_seen = false;
    ConfigDiffRow row{key, {}};
    for (const auto& f : flat) {
      auto it = f.find(key);
      const Setting* s = it == f.end() ? nullptr : &it->second;
      row.values.push_back(s ? s->shown : "—");
      if (!first_seen) {
        first = s;
        first_seen = true;
      } else if ((first == nullptr) != (s == nullptr) || (s && s->compare != first->compare)) {
        differ = true;
      }
    }
    if (differ) rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<ConfigDiffRow> groupConfigDiff(const std::vector<std::vector<const Json*>>& groups) {
  std::vector<const Json*> all;
  for (const auto& g : groups) all.insert(all.end(), g.begin(), g.end());
  std::vector<ConfigDiffRow> rows;
  for (const ConfigDiffRow& row : configDiff(all)) {
    ConfigDiffRow out{row.key, {}};
    size_t at = 0;
    bool constant = true;
    for (const auto& g : groups) {
      const std::string first = g.empty() ? "—" : row.values[at];
      for (size_t i = 0; i < g.size(); ++i) constant = constant && row.values[at + i] == first;
      out.values.push_back(first);
      at += g.size();
    }
    bool differ = false;
    for (const auto& v : out.values) differ = differ || v != out.values.front();
    if (constant && differ) rows.push_back(std::move(out));
  }
  return rows;
}

}  // namespace fp8rl::ui
