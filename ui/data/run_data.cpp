#include "ui/data/run_data.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "rl/telemetry.hpp"

namespace fp8rl::ui {

namespace {

const std::vector<SeriesPoint> kEmpty;

// A scalar as sent in telemetry: a number, or "nan" / "inf" / "-inf".
double scalar_value(const Json& v, const std::string& key) {
  if (v.is_number()) return v.as_number();
  if (v.is_string()) {
    const std::string& s = v.as_string();
    if (s == "nan") return std::nan("");
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  throw Error("telemetry scalar '" + key + "' is neither a number nor nan/inf/-inf (got " +
              v.type_name() + ")");
}

Histogram histogram_from(const Json& p) {
  Histogram h;
  for (const auto& e : p.at("edges").as_array("edges")) h.edges.push_back(e.as_number("edge"));
  for (const auto& c : p.at("counts").as_array("counts")) h.counts.push_back(c.as_int("count"));
  if (h.edges.size() < 2 || h.counts.size() != h.edges.size() + 1)
    throw Error("histogram has " + std::to_string(h.edges.size()) + " edges and " +
                std::to_string(h.counts.size()) + " counts (want edges ≥ 2, counts = edges + 1)");
  return h;
}

// tokens/total at or before step (0 before the first RL step).
double tokens_at(const std::vector<SeriesPoint>& tokens, double step) {
  auto it = std::upper_bound(tokens.begin(), tokens.end(), step,
                             [](double s, const SeriesPoint& p) { return s < p.step; });
  return it == tokens.begin() ? 0.0 : std::prev(it)->value;
}

bool same_event(const RunStore::EventRow& a, const RunStore::EventRow& b) {
  return a.step == b.step && a.event.kind == b.event.kind && a.event.message == b.event.message;
}

}  // namespace

const std::vector<SeriesPoint>& RunData::series(const std::string& key) const {
  auto it = scalars.find(key);
  return it == scalars.end() ? kEmpty : it->second;
}

std::vector<std::string> RunData::histogram_names(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& [name, steps] : histograms)
    if (name.compare(0, prefix.size(), prefix) == 0) out.push_back(name);
  return out;
}

Json RunData::current_precision() const {
  return precision.empty() ? Json() : precision.back().second;
}

std::vector<std::pair<int64_t, std::string>> RunData::precision_changes() const {
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
    out.emplace_back(precision[i].first, what.empty() ? "precision" : what);
  }
  return out;
}

int64_t RunData::layers() const {
  const Json p = current_precision();
  if (p.is_array()) return static_cast<int64_t>(p.as_array().size());
  if (row.config.is_object() && row.config.contains("model")) {
    const Json& m = row.config.at("model");
    if (m.is_object() && m.contains("num_hidden_layers") && m.at("num_hidden_layers").is_number())
      return static_cast<int64_t>(m.at("num_hidden_layers").as_number());
  }
  return 0;
}

void merge_into(RunData& dst, RunData&& delta) {
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
    for (auto& p : src) {
      if (!out.empty() && p.step <= out.back().step) continue;  // already have it
      if (key == metric::kTokensTotal)
        p.tokens = p.value;
      else
        p.tokens = tokens_at(tokens, p.step);
      out.push_back(p);
      added = true;
    }
  }
  for (auto& [name, steps] : delta.histograms) {
    auto& out = dst.histograms[name];
    for (auto& [step, h] : steps)
      if (out.emplace(step, std::move(h)).second) added = true;
  }
  for (auto& e : delta.events) {
    // Events arrive whole from the store or one by one from telemetry: keep the new ones.
    const bool known = std::any_of(dst.events.begin(), dst.events.end(),
                                   [&](const RunStore::EventRow& x) { return same_event(x, e); });
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
  if (delta.last_step > dst.last_step) {
    dst.last_step = delta.last_step;
    added = true;
  }
  if (added) ++dst.version;
}

void add_step_payload(RunData& delta, const Json& payload) {
  if (!payload.is_object()) throw Error("step payload is not a JSON object");
  const int64_t step = payload.at("step").as_int("step");
  const double wall = payload.at("wall_seconds").as_number("wall_seconds");
  for (const auto& [k, v] : payload.at("scalars").as_object("scalars"))
    delta.scalars[k].push_back({static_cast<double>(step), wall, 0.0, scalar_value(v, k)});
  if (payload.contains("samples"))
    for (const auto& s : payload.at("samples").as_array("samples")) {
      SampleRecord r;
      r.prompt = s.at("prompt").as_string("sample prompt");
      r.response = s.at("response").as_string("sample response");
      r.answer = s.at("answer").as_string("sample answer");
      r.reward = s.at("reward").as_number("sample reward");
      delta.samples.emplace_back(step, std::move(r));
    }
  if (payload.contains("events"))
    for (const auto& e : payload.at("events").as_array("events")) {
      EventRecord r;
      r.kind = e.at("kind").as_string("event kind");
      r.message = e.at("message").as_string("event message");
      if (e.contains("data")) r.data = e.at("data");
      delta.events.push_back({step, wall, std::move(r)});
    }
  delta.last_step = std::max(delta.last_step, step);
}

void add_histogram_payload(RunData& delta, const Json& payload) {
  if (!payload.is_object()) throw Error("histogram payload is not a JSON object");
  const int64_t step = payload.at("step").as_int("step");
  delta.histograms[payload.at("name").as_string("name")][step] = histogram_from(payload);
}

void add_event_payload(RunData& delta, const Json& payload, double run_started_at) {
  if (!payload.is_object()) throw Error("event payload is not a JSON object");
  RunStore::EventRow e;
  e.step = payload.at("step").as_int("step");
  const double t = payload.contains("time") ? payload.at("time").as_number("time") : 0.0;
  e.wall = run_started_at > 0 && t > 0 ? t - run_started_at : 0.0;
  e.event.kind = payload.at("kind").as_string("kind");
  e.event.message = payload.contains("message") ? payload.at("message").as_string("message") : "";
  if (payload.contains("map")) {
    e.event.data = payload.at("map");
    if (e.event.kind == "precision") delta.precision.emplace_back(e.step, e.event.data);
  }
  delta.events.push_back(std::move(e));
}

RunData load_run(RunStore& store, int64_t run, int64_t after_step) {
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
  d.events = store.events(run);
  d.precision = store.precision_history(run);
  // Merging fills in the token coordinates of the points.
  RunData out;
  out.id = run;
  if (auto row = store.find_run(run)) out.row = std::move(*row);
  merge_into(out, std::move(d));
  return out;
}

}  // namespace fp8rl::ui
