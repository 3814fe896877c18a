#include "contract/step_record.hpp"

#include <cmath>

#include "core/error.hpp"

namespace fp8rl {

namespace {

Json scalar_to_json(double v) {
  return std::isfinite(v) ? Json(v) : Json(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

}  // namespace

double scalar_from_json(const Json& v, const std::string& key) {
  if (v.is_number()) return v.as_number();
  if (v.is_string()) {
    const std::string& s = v.as_string();
    if (s == "nan") return std::nan("");
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  throw Error("scalar '" + key + "' is neither a number nor nan/inf/-inf (got " + v.type_name() +
              ")");
}

Json StepRecord::to_json() const {
  Json j;
  j["step"] = step;
  j["phase"] = phase;
  j["wall_seconds"] = wall_seconds;
  Json s(Json::Object{});
  for (const auto& [k, v] : scalars) s[k] = scalar_to_json(v);
  j["scalars"] = std::move(s);
  if (!samples.empty()) {
    Json::Array a;
    for (const auto& x : samples) {
      Json o;
      o["prompt"] = x.prompt;
      o["response"] = x.response;
      o["answer"] = x.answer;
      o["reward"] = x.reward;
      if (!x.tokens.empty()) {
        o["tokens"] = Json(Json::Array(x.tokens.begin(), x.tokens.end()));
        Json::Array d;
        for (double v : x.logprob_diff) d.push_back(scalar_to_json(v));
        o["logprob_diff"] = Json(std::move(d));
      }
      a.push_back(std::move(o));
    }
    j["samples"] = Json(std::move(a));
  }
  if (!audit.empty()) {
    Json::Array a;
    for (const auto& x : audit) a.push_back(audit_row_to_json(x));
    j["audit"] = Json(std::move(a));
  }
  if (!events.empty()) {
    Json::Array a;
    for (const auto& e : events) {
      Json o;
      o["kind"] = e.kind;
      o["message"] = e.message;
      if (!e.data.is_null()) o["data"] = e.data;
      a.push_back(std::move(o));
    }
    j["events"] = Json(std::move(a));
  }
  return j;
}

StepRecord StepRecord::from_json(const Json& j) {
  check(j.is_object(), "step record is not a JSON object");
  StepRecord r;
  r.step = j.at("step").as_int("step");
  r.phase = j.contains("phase") ? j.at("phase").as_string("phase") : "";
  r.wall_seconds = j.at("wall_seconds").as_number("wall_seconds");
  for (const auto& [k, v] : j.at("scalars").as_object("scalars"))
    r.scalars[k] = scalar_from_json(v, k);
  if (j.contains("samples"))
    for (const auto& s : j.at("samples").as_array("samples")) {
      SampleRecord x;
      x.prompt = s.at("prompt").as_string("sample prompt");
      x.response = s.at("response").as_string("sample response");
      x.answer = s.at("answer").as_string("sample answer");
      x.reward = s.at("reward").as_number("sample reward");
      if (s.contains("tokens")) {
        for (const auto& t : s.at("tokens").as_array("sample tokens"))
          x.tokens.push_back(t.as_string("sample token"));
        for (const auto& d : s.at("logprob_diff").as_array("sample logprob_diff"))
          x.logprob_diff.push_back(scalar_from_json(d, "sample logprob_diff"));
        check(x.tokens.size() == x.logprob_diff.size(),
              "sample has " + std::to_string(x.tokens.size()) + " tokens but " +
                  std::to_string(x.logprob_diff.size()) + " log-prob differences");
      }
      r.samples.push_back(std::move(x));
    }
  if (j.contains("audit"))
    for (const auto& a : j.at("audit").as_array("audit")) r.audit.push_back(audit_row_from_json(a));
  if (j.contains("events"))
    for (const auto& e : j.at("events").as_array("events")) {
      EventRecord x;
      x.kind = e.at("kind").as_string("event kind");
      x.message = e.at("message").as_string("event message");
      if (e.contains("data")) x.data = e.at("data");
      r.events.push_back(std::move(x));
    }
  return r;
}

Json histogram_to_json(const HistogramRecord& h, int64_t step) {
  Json j;
  j["step"] = step;
  j["name"] = h.name;
  Json::Array e, c;
  e.reserve(h.hist.edges.size());
  c.reserve(h.hist.counts.size());
  for (double x : h.hist.edges) e.push_back(Json(x));
  for (int64_t x : h.hist.counts) c.push_back(Json(x));
  j["edges"] = Json(std::move(e));
  j["counts"] = Json(std::move(c));
  return j;
}

HistogramRecord histogram_from_json(const Json& j, int64_t* step) {
  check(j.is_object(), "histogram is not a JSON object");
  HistogramRecord r;
  r.name = j.at("name").as_string("name");
  if (step) *step = j.at("step").as_int("step");
  for (const auto& e : j.at("edges").as_array("edges")) r.hist.edges.push_back(e.as_number("edge"));
  for (const auto& c : j.at("counts").as_array("counts"))
    r.hist.counts.push_back(c.as_int("count"));
  check(r.hist.edges.size() >= 2 && r.hist.counts.size() == r.hist.edges.size() + 1,
        "histogram '" + r.name + "' has " + std::to_string(r.hist.edges.size()) + " edges and " +
            std::to_string(r.hist.counts.size()) +
            " counts (want edges ≥ 2, counts = edges + 1)");
  return r;
}

Json audit_row_to_json(const AuditRow& a) {
  Json j;
  j["layer"] = a.layer;
  j["module"] = a.module;
  j["generator"] = a.generator_precision;
  j["trainer"] = a.trainer_precision;
  j["max_abs_diff"] = scalar_to_json(a.max_abs_diff);
  j["ok"] = a.ok;
  return j;
}

AuditRow audit_row_from_json(const Json& j) {
  check(j.is_object(), "audit row is not a JSON object");
  AuditRow a;
  a.layer = j.at("layer").as_int("audit layer");
  a.module = j.at("module").as_string("audit module");
  a.generator_precision = j.at("generator").as_string("audit generator");
  a.trainer_precision = j.at("trainer").as_string("audit trainer");
  a.max_abs_diff = scalar_from_json(j.at("max_abs_diff"), "audit max_abs_diff");
  a.ok = j.at("ok").as_bool("audit ok");
  return a;
}

Json event_to_json(const EventRecord& e, int64_t step, double unix_time) {
  Json j;
  j["step"] = step;
  j["kind"] = e.kind;
  j["message"] = e.message;
  j["time"] = unix_time;
  if (!e.data.is_null()) j["data"] = e.data;
  return j;
}

EventRecord event_from_json(const Json& j, int64_t* step, double* unix_time) {
  check(j.is_object(), "event is not a JSON object");
  EventRecord e;
  e.kind = j.at("kind").as_string("kind");
  e.message = j.contains("message") ? j.at("message").as_string("message") : "";
  if (j.contains("data")) e.data = j.at("data");
  if (step) *step = j.at("step").as_int("step");
  if (unix_time) *unix_time = j.contains("time") ? j.at("time").as_number("time") : 0.0;
  return e;
}

}  // namespace fp8rl
