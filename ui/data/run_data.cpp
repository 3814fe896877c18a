#include "ui/data/run_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "contract/live_settings.hpp"
#include "contract/metrics.hpp"
#include "contract/precision.hpp"
#include "contract/step_record.hpp"
#include "core/error.hpp"

namespace fp8rl::ui {

namespace {

const std::vector<SeriesPoint> kEmpty;

// tokens/total at or before step (0 before the first RL step).
double tokensAt(const std::vector<SeriesPoint>& tokens, double step) {
  auto it = std::upper_bound(tokens.begin(), tokens.end(), step,
                             [](double s, const SeriesPoint& p) { return s < p.step; });
  return it == tokens.begin() ? 0.0 : std::prev(it)->value;
}

bool sameEvent(const RunStore::EventRow& a, const RunStore::EventRow& b) {
  return a.step == b.step && a.event.kind == b.event.kind && a.event.message == b.event.message;
}

}  // namespace

const std::vector<SeriesPoint>& RunData::series(const std::string& key) const {
  auto it = scalars.find(key);
  return it == scalars.end() ? kEmpty : it->second;
}

std::optional<double> RunData::rlMean(const std::string& key) const {
  SeriesStats st;
  if (auto it = stats.find(key); it != stats.end()) {
    st = it->second;
  } else {  // data put together without mergeInto: from the points
    for (const SeriesPoint& p : series(key))
      if (p.step > 0 && std::isfinite(p.value)) ++st.rl_count, st.rl_sum += p.value;
  }
  if (st.rl_count == 0) return std::nullopt;
  return st.rl_sum / static_cast<double>(st.rl_count);
}

size_t reduceSeries(std::vector<SeriesPoint>& points, size_t max_points) {
  const size_t n = points.size();
  if (n <= max_points || max_points < 8) return 0;
  const size_t tail = max_points / 4;
  const size_t old_end = n - tail;
  const size_t budget = max_points / 2 - tail;  // points the older part may keep
  // The narrowest power-of-two bucket width whose extremes fit the budget.
  const auto bucket = [](double step, double width) { return std::floor(step / width); };
  double width = 1;
  for (;; width *= 2) {
    size_t kept = 0, in_bucket = 0;
    double current = 0;
    for (size_t i = 0; i < old_end; ++i) {
      const double b = bucket(points[i].step, width);
      if (i == 0 || b != current) {
        kept += std::min<size_t>(in_bucket, 3);
        current = b;
        in_bucket = 0;
      }
      ++in_bucket;
    }
    kept += std::min<size_t>(in_bucket, 3);
    if (kept <= budget || width > 1e18) break;
  }
  std::vector<SeriesPoint> out;
  out.reserve(budget + tail);
  std::vector<size_t> pick;
  size_t begin = 0;
  while (begin < old_end) {
    const double b = bucket(points[begin].step, width);
    size_t end = begin;
    size_t lo = SIZE_MAX, hi = SIZE_MAX, nonfinite = SIZE_MAX;
    for (; end < old_end && bucket(points[end].step, width) == b; ++end) {
      const double v = points[end].value;
      if (!std::isfinite(v)) {
        if (nonfinite == SIZE_MAX) nonfinite = end;
        continue;
      }
      if (lo == SIZE_MAX || v < points[lo].value) lo = end;
      if (hi == SIZE_MAX || v > points[hi].value) hi = end;
    }
    pick.clear();
    for (size_t i : {lo, hi, nonfinite})
      if (i != SIZE_MAX && std::find(pick.begin(), pick.end(), i) == pick.end()) pick.push_back(i);
    std::sort(pick.begin(), pick.end());
    for (size_t i : pick) out.push_back(points[i]);
    begin = end;
  }
  out.insert(out.end(), points.begin() + static_cast<std::ptrdiff_t>(old_end), points.end());
  const size_t dropped = n - out.size();
  points = std::move(out);
  return dropped;
}

std::vector<std::string> RunData::histogramNames(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& [name, steps] : histograms)
    if (name.compare(0, prefix.size(), prefix) == 0) out.push_back(name);
  return out;
}

size_t RunData::approxBytes() const {
  // Vector capacities and map nodes (about four pointers and the key each).
  const size_t node = 4 * sizeof(void*);
  size_t bytes = sizeof(RunData);
  for (const auto& [key, points] : scalars)
    bytes += node + key.capacity() + points.capacity() * sizeof(SeriesPoint);
  bytes += stats.size() * (node + sizeof(SeriesStats) + 32);
  for (const auto& [name, steps] : histograms) {
    bytes += node + name.capacity();
    for (const auto& [step, h] : steps)
      bytes += node + sizeof(Histogram) + h.edges.capacity() * sizeof(double) +
               h.counts.capacity() * sizeof(int64_t);
  }
  for (const auto& [step, s] : samples)
    bytes += sizeof(s) + s.prompt.capacity() + s.response.capacity() + s.answer.capacity() +
             s.tokens.size() * 16 + s.logprob_diff.capacity() * sizeof(double);
  bytes += events.size() * (sizeof(RunStore::EventRow) + 64);
  return bytes;
}

Json RunData::currentPrecision() const {
  return precision.empty() ? Json() : precision.back().second;
}

std::vector<int64_t> RunData::expertsPerLayer() const {
  std::vector<int64_t> experts;
  if (precision.empty()) return experts;
  try {
    const PrecisionMap map = PrecisionMap::from_json(precision.back().second);
    for (int64_t l = 0; l < map.layers(); ++l) experts.push_back(map.experts(l));
  } catch (const Error&) {
    experts.clear();  // a map this build cannot read: nothing known
  }
  return experts;
}

std::vector<std::pair<int64_t, std::string>> RunData::precisionChanges() const {
  std::vector<std::pair<int64_t, std::string>> out;
  for (size_t i = 1; i < precision.size(); ++i) {
    // Name what changed: "L0.gate bf16" for every differing cell.
    std::string what;
    const Json& a = precision[i - 1].second;
    const Json& b = precision[i].second;
    if (a.is_array() && b.is_array() && a.as_array().size() == b.as_array().size()) {
      for (size_t l = 0; l < b.as_array().size(); ++l) {
        const Json& rb = b.as_array()[l];
        const Json& ra = a.as_array()[l];
        if (!rb.is_object() || !ra.is_object()) continue;
        for (const auto& [m, v] : rb.as_object())
          if (!ra.contains(m) || ra.at(m).dump() != v.dump())
            what += (what.empty() ? "" : ", ") + ("L" + std::to_string(l) + "." + m + " ") +
                    (v.is_string() ? v.as_string() : v.dump());
      }
    }
    // The autopilot's decision at that step, when it made this change: its words.
    for (const auto& e : events) {
      if (e.step != precision[i].first || e.event.kind != event::kAutopilot) continue;
      const Json& d = e.event.data;
      if (!d.is_object() || !d.contains("overrides") || !d.at("overrides").is_array() ||
          d.at("overrides").as_array().empty())
        continue;
      bool all = true;  // every linear it names changed to what it says
      for (const Json& o : d.at("overrides").as_array()) {
        if (!o.is_string()) continue;
        const std::string t = o.as_string();
        const size_t dot = t.find('.'), eq = t.find('=');
        if (dot == std::string::npos || eq == std::string::npos) {
          all = false;
          continue;
        }
        const auto m = parse_module(t.substr(dot + 1, eq - dot - 1));
        const std::string cell = "L" + t.substr(0, dot) + "." +
                                 (m ? std::string(module_short(*m)) : std::string("?")) + " " +
                                 t.substr(eq + 1);
        all = all && what.find(cell) != std::string::npos;
      }
      if (all) what = "autopilot: " + e.event.message;
    }
    out.emplace_back(precision[i].first, what.empty() ? "precision" : what);
  }
  return out;
}

int64_t RunData::layers() const {
  const Json p = currentPrecision();
  if (p.is_array()) return static_cast<int64_t>(p.as_array().size());
  if (row.config.is_object() && row.config.contains("model")) {
    const Json& m = row.config.at("model");
    if (m.is_object() && m.contains("num_hidden_layers") && m.at("num_hidden_layers").is_number())
      return static_cast<int64_t>(m.at("num_hidden_layers").as_number());
  }
  return 0;
}

std::optional<LiveValue> RunData::liveValue(const std::string& key) const {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    const EventRecord& e = it->event;
    if (e.kind != event::kSet || !e.data.is_object() || !e.data.contains("key") ||
        !e.data.contains("value") || !e.data.at("key").is_string() ||
        e.data.at("key").as_string() != key)
      continue;
    try {
      const LiveValue v = live_value_from_json(e.data.at("value"), key);
      if (!live_setting_error(key, v)) return v;
    } catch (const Error&) {
      // A value of another type (a recording of another version): the configuration's counts.
    }
    break;
  }
  return live_setting_in_config(row.config, key);
}

std::optional<double> RunData::liveSetting(const std::string& key) const {
  const auto v = liveValue(key);
  if (!v || !std::holds_alternative<double>(*v)) return std::nullopt;
  return std::get<double>(*v);
}

void mergeInto(RunData& dst, RunData&& delta) {
  bool added = false;
  // tokens/total first, so other scalars of the same steps find their token count.
  std::vector<std::string> keys;
  if (delta.scalars.count(metric::kTokensTotal)) keys.push_back(metric::kTokensTotal);
  for (const auto& [k, v] : delta.scalars)
    if (k != metric::kTokensTotal) keys.push_back(k);
  for (const auto& key : keys) {
    auto& src = delta.scalars[key];
    auto& out = dst.scalars[key];
    const auto& tokens = key == metric::kTokensTotal ? out : dst.series(metric::kTokensTotal);
    SeriesStats& stats = dst.stats[key];
    for (auto& p : src) {
      if (!out.empty() && p.step <= out.back().step) continue;  // already have it
      if (key == metric::kTokensTotal)
        p.tokens = p.value;
      else
        p.tokens = tokensAt(tokens, p.step);
      if (p.step > 0 && std::isfinite(p.value)) {
        ++stats.rl_count;
        stats.rl_sum += p.value;
      }
      out.push_back(p);
      added = true;
    }
    // tokens/total is read for the other keys' token coordinates: reduced after them.
    if (key != metric::kTokensTotal)
      dst.reduced_points += static_cast<int64_t>(reduceSeries(out, RunData::kMaxSeriesPoints));
  }
  if (auto t = dst.scalars.find(metric::kTokensTotal); t != dst.scalars.end())
    dst.reduced_points += static_cast<int64_t>(reduceSeries(t->second, RunData::kMaxSeriesPoints));
  for (auto& [name, steps] : delta.histograms) {
    auto& out = dst.histograms[name];
    for (auto& [step, h] : steps)
      if (out.emplace(step, std::move(h)).second) added = true;
    if (out.size() > RunData::kMaxHistogramSteps) {
      // Thin the older steps (every other one) until a quarter of the room is free; the
      // newest quarter stays whole.
      const size_t keep_newest = RunData::kMaxHistogramSteps / 4;
      while (out.size() > RunData::kMaxHistogramSteps * 3 / 4) {
        const size_t older = out.size() - keep_newest;
        auto it = out.begin();
        for (size_t i = 0; i < older && it != out.end(); ++i)
          it = i % 2 == 1 ? out.erase(it) : std::next(it);
      }
    }
  }
  for (auto& e : delta.events) {
    // Events arrive whole from the store or one by one from telemetry: keep the new ones.
    const bool known = std::any_of(dst.events.begin(), dst.events.end(),
                                   [&](const RunStore::EventRow& x) { return sameEvent(x, e); });
    if (known) continue;
    dst.events.push_back(std::move(e));
    added = true;
  }
  // Samples come several per step; a step dst already has samples of is not taken again.
  const int64_t last_sample_step =
      dst.samples.empty() ? std::numeric_limits<int64_t>::min() : dst.samples.back().first;
  for (auto& s : delta.samples) {
    if (s.first <= last_sample_step) continue;
    dst.samples.push_back(std::move(s));
    added = true;
  }
  if (dst.samples.size() > RunData::kMaxSamples)
    dst.samples.erase(dst.samples.begin(),
                      dst.samples.end() - static_cast<std::ptrdiff_t>(RunData::kMaxSamples));
  for (auto& [step, map] : delta.precision) {
    const bool known = std::any_of(dst.precision.begin(), dst.precision.end(), [&](const auto& x) {
      return x.first == step && x.second.dump() == map.dump();
    });
    if (known) continue;
    dst.precision.emplace_back(step, std::move(map));
    std::stable_sort(dst.precision.begin(), dst.precision.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    added = true;
  }
  if (!delta.audit.empty() && (dst.audit.empty() || delta.audit_step > dst.audit_step)) {
    dst.audit = std::move(delta.audit);
    dst.audit_step = delta.audit_step;
    added = true;
  }
  if (delta.last_step > dst.last_step) {
    dst.last_step = delta.last_step;
    added = true;
  }
  if (added) ++dst.version;
}

void addStepPayload(RunData& delta, const Json& payload) {
  StepRecord r = StepRecord::from_json(payload);
  for (const auto& [k, v] : r.scalars)
    delta.scalars[k].push_back({static_cast<double>(r.step), r.wall_seconds, 0.0, v});
  for (auto& sample : r.samples) delta.samples.emplace_back(r.step, std::move(sample));
  for (auto& e : r.events) delta.events.push_back({r.step, r.wall_seconds, std::move(e)});
  if (!r.audit.empty()) {
    delta.audit = std::move(r.audit);
    delta.audit_step = r.step;
  }
  delta.last_step = std::max(delta.last_step, r.step);
}

void addHistogramPayload(RunData& delta, const Json& payload) {
  int64_t step = 0;
  HistogramRecord h = histogram_from_json(payload, &step);
  delta.histograms[h.name][step] = std::move(h.hist);
}

void addEventPayload(RunData& delta, const Json& payload, double run_started_at) {
  RunStore::EventRow e;
  double t = 0;
  e.event = event_from_json(payload, &e.step, &t);
  e.wall = run_started_at > 0 && t > 0 ? t - run_started_at : 0.0;
  if (e.event.kind == event::kPrecision) delta.precision.emplace_back(e.step, e.event.data);
  delta.events.push_back(std::move(e));
}

RunData loadRun(RunStore& store, int64_t run, int64_t after_step) {
  RunData d;
  for (const auto& key : store.scalar_keys(run)) {
    auto& out = d.scalars[key];
    for (const auto& p : store.scalar_series(run, key, after_step)) {
      out.push_back({static_cast<double>(p.step), p.wall, 0.0, p.value});
      d.last_step = std::max(d.last_step, p.step);
    }
  }
  for (const auto& name : store.histogram_names(run))
    for (auto& [step, h] : store.histogram_series(run, name))
      if (step > after_step) d.histograms[name][step] = std::move(h);
  auto samples = store.samples(run, static_cast<int64_t>(RunData::kMaxSamples));
  for (auto it = samples.rbegin(); it != samples.rend(); ++it)
    if (it->first > after_step) d.samples.push_back(std::move(*it));
  // Every audit records audit/mismatches at its step: read the rows of the latest one only.
  if (auto it = d.scalars.find(metric::kAuditMismatches);
      it != d.scalars.end() && !it->second.empty()) {
    d.audit_step = static_cast<int64_t>(it->second.back().step);
    for (auto& [step, row] : store.audit(run, d.audit_step)) d.audit.push_back(std::move(row));
  }
  d.events = store.events(run);
  d.precision = store.precision_history(run);
  // Merging fills in the token coordinates of the points.
  RunData out;
  out.id = run;
  if (auto row = store.find_run(run)) out.row = std::move(*row);
  mergeInto(out, std::move(d));
  return out;
}

}  // namespace fp8rl::ui
