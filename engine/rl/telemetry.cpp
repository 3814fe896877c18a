#include "rl/telemetry.hpp"

#include <cmath>

namespace fp8rl {

Json StepRecord::to_json() const {
  Json j;
  j["step"] = step;
  j["phase"] = phase;
  j["wall_seconds"] = wall_seconds;
  Json s(Json::Object{});
  // NaN and inf are reported as strings (JSON has no such numbers); they must stay visible.
  for (const auto& [k, v] : scalars)
    s[k] = std::isfinite(v) ? Json(v) : Json(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
  j["scalars"] = std::move(s);
  if (!samples.empty()) {
    Json::Array a;
    for (const auto& x : samples) {
      Json o;
      o["prompt"] = x.prompt;
      o["response"] = x.response;
      o["answer"] = x.answer;
      o["reward"] = x.reward;
      a.push_back(std::move(o));
    }
    j["samples"] = Json(std::move(a));
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

}  // namespace fp8rl
