#include "store/stored_values.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace fp8rl::stored {
namespace {

Json without_nonfinite(const Json& j) {
  if (j.is_number()) {
    const double v = j.as_number();
    return std::isfinite(v) ? j : Json(nonfinite_name(v));
  }
  if (j.is_array()) {
    Json::Array a;
    for (const Json& x : j.as_array()) a.push_back(without_nonfinite(x));
    return Json(std::move(a));
  }
  if (j.is_object()) {
    Json::Object o;
    for (const auto& [k, x] : j.as_object()) o.emplace(k, without_nonfinite(x));
    return Json(std::move(o));
  }
  return j;
}

}  // namespace

const char* nonfinite_name(double v) {
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

double nonfinite_value(const std::string& name) {
  if (name == "inf") return std::numeric_limits<double>::infinity();
  if (name == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

std::optional<double> finite_or_null(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<std::string_view> nonfinite_or_null(double v) {
  return std::isfinite(v) ? std::nullopt : std::optional<std::string_view>(nonfinite_name(v));
}

double scalar(const sqlite::Row& row, int value_column) {
  return row.is_null(value_column) ? nonfinite_value(row.text(value_column + 1))
                                   : row.real(value_column);
}

std::string json_text(const Json& j) {
  return without_nonfinite(j).dump();
}

std::optional<std::string> json_text_or_null(const Json& j) {
  return j.is_null() ? std::nullopt : std::optional<std::string>(json_text(j));
}

std::string edges_json(const std::vector<double>& edges) {
  Json::Array a;
  a.reserve(edges.size());
  for (double e : edges) a.push_back(std::isfinite(e) ? Json(e) : Json(nonfinite_name(e)));
  return Json(std::move(a)).dump();
}

std::string counts_json(const std::vector<int64_t>& counts) {
  Json::Array a;
  a.reserve(counts.size());
  for (int64_t c : counts) a.push_back(Json(c));
  return Json(std::move(a)).dump();
}

Histogram histogram(const sqlite::Row& row, int edges_column) {
  Histogram h;
  try {
    // Named: a range-for over a temporary's member would dangle.
    const Json edges = row.json(edges_column), counts = row.json(edges_column + 1);
    for (const Json& e : edges.as_array("edges"))
      h.edges.push_back(e.is_string() ? nonfinite_value(e.as_string()) : e.as_number("edge"));
    for (const Json& c : counts.as_array("counts")) h.counts.push_back(c.as_int("count"));
  } catch (const Error& e) {
    throw Error(row.what().text + ": malformed histogram: " + e.message(), {}, row.what().where);
  }
  return h;
}

std::optional<std::string> sample_detail_or_null(const SampleRecord& x) {
  if (x.tokens.empty()) return std::nullopt;
  Json d;
  d["tokens"] = Json(Json::Array(x.tokens.begin(), x.tokens.end()));
  Json::Array diff;
  for (double v : x.logprob_diff) diff.push_back(Json(v));
  d["logprob_diff"] = Json(std::move(diff));
  return json_text(d);
}

void read_sample_detail(const sqlite::Row& row, int c, SampleRecord& x) {
  if (row.is_null(c)) return;
  // The sample JSON of the contract (StepRecord::from_json) reads it, checks included.
  Json sample = Json::parse(row.text(c));
  sample["prompt"] = x.prompt;
  sample["response"] = x.response;
  sample["answer"] = x.answer;
  sample["reward"] = x.reward;
  Json step;
  step["step"] = 0;
  step["wall_seconds"] = 0.0;
  step["scalars"] = Json(Json::Object{});
  step["samples"] = Json(Json::Array{sample});
  x = StepRecord::from_json(step).samples.at(0);
}

}  // namespace fp8rl::stored
