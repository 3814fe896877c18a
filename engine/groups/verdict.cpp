#include "groups/verdict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "core/error.hpp"

namespace fp8rl {
namespace {

constexpr const char* kMinus = "\u2212";

std::optional<double> value_of(const RunOutcome& o, const std::string& key) {
  if (key == "final_validation") return o.final_validation;
  if (key == "best_validation") return o.best_validation;
  if (key == "final_reward") return o.final_reward;
  if (key == "time_to_target") return o.time_to_target;
  if (key == "step_time") return o.step_time;
  return std::nullopt;
}

bool finite(const std::optional<double>& v) {
  return v && std::isfinite(*v);
}

std::string seconds_text(double s) {
  if (!std::isfinite(s)) return "—";
  if (std::fabs(s) >= 100) return format_number(s, 0) + " s";
  if (std::fabs(s) >= 10) return format_number(s, 1) + " s";
  if (std::fabs(s) >= 1) return format_number(s, 2) + " s";
  return format_number(s, 3) + " s";
}

std::string percent_text(double fraction) {
  return format_number(100 * fraction, std::fabs(fraction) < 0.1 ? 1 : 0) + " %";
}

Json number_or_null(double v) {
  return std::isfinite(v) ? Json(v) : Json();
}

Json numbers(const std::vector<double>& v) {
  Json::Array a;
  for (double x : v) a.push_back(number_or_null(x));
  return Json(std::move(a));
}

Json estimate_json(const stats::Estimate& e) {
  Json::Object o;
  o["estimate"] = number_or_null(e.value);
  o["ci"] = Json(Json::Array{number_or_null(e.ci.lo), number_or_null(e.ci.hi)});
  o["level"] = e.level;
  o["method"] = e.method;
  if (e.df > 0) o["df"] = number_or_null(e.df);
  if (e.resamples > 0) {
    o["resamples"] = e.resamples;
    o["exact"] = e.exact;
  }
  return Json(std::move(o));
}

double pooled_sd(const std::vector<double>& a, const std::vector<double>& b) {
  const double sa = stats::sample_sd(a), sb = stats::sample_sd(b);
  if (std::isnan(sa)) return sb;
  if (std::isnan(sb)) return sa;
  return std::sqrt((sa * sa + sb * sb) / 2);
}

std::vector<double> logs(const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v) out.push_back(x > 0 ? std::log(x) : NAN);
  return out;
}

MetricVerdict compare_metric(const std::string& key, const std::string& title,
                             const Verdict& v, const RunGroup& ga,
                             const std::vector<RunOutcome>& oa, const RunGroup& gb,
                             const std::vector<RunOutcome>& ob, const VerdictOptions& opt) {
  MetricVerdict m;
  m.key = key;
  m.title = title;
  m.ratio = key == "time_to_target" || key == "step_time";
  m.lower_is_better = m.ratio;
  // Pairs by replicate value when every run of both groups has a distinct one.
  std::map<std::string, double> ra, rb;
  bool pairable = opt.paired && !ga.replicate.empty() && ga.replicate == gb.replicate;
  const auto by_replicate = [&](const RunGroup& g, const std::vector<RunOutcome>& o,
                                std::map<std::string, double>& out) {
    for (size_t i = 0; i < o.size() && pairable; ++i) {
      const std::string r = i < g.runs.size() ? g.replicate_of(g.runs[i]) : "";
      const auto x = value_of(o[i], key);
      pairable = !r.empty() && out.emplace(r, finite(x) ? *x : NAN).second;
    }
  };
  by_replicate(ga, oa, ra);
  by_replicate(gb, ob, rb);
  if (pairable) {
    for (const auto& [r, x] : ra) {
      auto it = rb.find(r);
      if (std::isfinite(x) && it != rb.end() && std::isfinite(it->second)) {
        m.a.push_back(x);
        m.b.push_back(it->second);
        m.replicates.push_back(r);
      }
    }
    pairable = m.a.size() >= 2;
  }
  if (pairable) {
    m.paired = true;
    m.missing_a = static_cast<int>(oa.size() - m.a.size());
    m.missing_b = static_cast<int>(ob.size() - m.b.size());
  } else {
    m.a.clear();
    m.b.clear();
    m.replicates.clear();
    for (const auto& o : oa)
      if (finite(value_of(o, key))) m.a.push_back(*value_of(o, key)); else ++m.missing_a;
    for (const auto& o : ob)
      if (finite(value_of(o, key))) m.b.push_back(*value_of(o, key)); else ++m.missing_b;
  }
  m.mean_a = stats::mean(m.a);
  m.mean_b = stats::mean(m.b);
  m.sd_a = stats::sample_sd(m.a);
  m.sd_b = stats::sample_sd(m.b);

  const std::string& A = v.a_label;
  const std::string& B = v.b_label;
  const int decimals = 3;
  const auto shown = [&](double x, bool sign) {
    return m.ratio ? format_number(x, 3) : format_number(x, decimals, sign);
  };
  std::string s = m.ratio ? A + " / " + B + " " + title + ": "
                          : A + " " + kMinus + " " + B + " " + title + ": ";
  if (m.a.empty() || m.b.empty() || (m.paired ? m.a.size() < 2 : m.a.size() + m.b.size() < 3)) {
    m.finding = "too few runs";
    s += "too few runs with a value (" + std::to_string(m.a.size()) + " and " +
         std::to_string(m.b.size()) + ")";
    if (key == "time_to_target")
      s += "; validation " + format_number(opt.target, 2) + " was not reached by " +
           std::to_string(m.missing_a) + " of " + A + "'s and " + std::to_string(m.missing_b) +
           " of " + B + "'s runs";
    m.sentence = s + ".";
    return m;
  }
  if (m.ratio) {
    m.bootstrap = m.paired ? stats::bootstrap_paired_ratio(m.a, m.b, opt.bootstrap)
                           : stats::bootstrap_ratio_of_means(m.a, m.b, opt.bootstrap);
    if (m.paired) {
      const std::vector<double> la = logs(m.a), lb = logs(m.b);
      stats::Estimate t = stats::paired_t_difference(la, lb, opt.bootstrap.level);
      t.value = std::exp(t.value);
      t.ci = {std::exp(t.ci.lo), std::exp(t.ci.hi)};
      t.method = "paired t on the log ratios";
      m.t_based = t;
      std::vector<double> d;
      for (size_t i = 0; i < la.size(); ++i) d.push_back(la[i] - lb[i]);
      m.sd = stats::sample_sd(d);
    } else {
      m.t_based = stats::ratio_delta_method(m.a, m.b, opt.bootstrap.level);
      m.sd = pooled_sd(logs(m.a), logs(m.b));
    }
    m.detect = opt.detect_relative;
    const double d = std::log1p(opt.detect_relative);
    const double n = m.paired ? static_cast<double>(m.a.size())
                              : std::min(m.a.size(), m.b.size());
    m.seeds_needed = stats::seeds_needed(m.sd, d, m.paired, opt.alpha, opt.power);
    m.detectable = std::expm1(stats::detectable_difference(m.sd, n, m.paired, opt.alpha, opt.power));
    const auto& ci = m.bootstrap.ci;
    m.finding = ci.lo > 1 ? A + " slower" : ci.hi < 1 ? A + " faster" : "no difference detected";
  } else {
    m.bootstrap = m.paired ? stats::bootstrap_paired_difference(m.a, m.b, opt.bootstrap)
                           : stats::bootstrap_mean_difference(m.a, m.b, opt.bootstrap);
    m.t_based = m.paired ? stats::paired_t_difference(m.a, m.b, opt.bootstrap.level)
                         : stats::welch_difference(m.a, m.b, opt.bootstrap.level);
    if (m.paired) {
      std::vector<double> d;
      for (size_t i = 0; i < m.a.size(); ++i) d.push_back(m.a[i] - m.b[i]);
      m.sd = stats::sample_sd(d);
    } else {
      m.sd = pooled_sd(m.a, m.b);
    }
    m.detect = opt.detect_accuracy;
    const double n = m.paired ? static_cast<double>(m.a.size())
                              : std::min(m.a.size(), m.b.size());
    m.seeds_needed = stats::seeds_needed(m.sd, m.detect, m.paired, opt.alpha, opt.power);
    m.detectable = stats::detectable_difference(m.sd, n, m.paired, opt.alpha, opt.power);
    const auto& ci = m.bootstrap.ci;
    m.finding = ci.lo > 0 ? A + " higher" : ci.hi < 0 ? A + " lower" : "no difference detected";
  }
  const int level = static_cast<int>(std::lround(100 * m.bootstrap.level));
  if (m.ratio) s += "ratio ";
  s += shown(m.bootstrap.value, true) + ", " + std::to_string(level) + "% CI [" +
       shown(m.bootstrap.ci.lo, true) + ", " + shown(m.bootstrap.ci.hi, true) + "] (" +
       m.bootstrap.method + "; " + m.t_based.method + ": [" + shown(m.t_based.ci.lo, true) + ", " +
       shown(m.t_based.ci.hi, true) + "]), ";
  if (m.paired)
    s += std::to_string(m.a.size()) + " seeds each";
  else if (m.a.size() == m.b.size())
    s += std::to_string(m.a.size()) + " runs each";
  else
    s += std::to_string(m.a.size()) + " and " + std::to_string(m.b.size()) + " runs";
  s += ": " + m.finding;
  if (m.ratio)
    s += " (means " + seconds_text(m.mean_a) + " and " + seconds_text(m.mean_b) + ")";
  else
    s += " (means " + format_number(m.mean_a, 3) + " and " + format_number(m.mean_b, 3) + ")";
  if (m.missing_a + m.missing_b > 0) {
    s += "; left out: " + std::to_string(m.missing_a) + " of " + A + "'s and " +
         std::to_string(m.missing_b) + " of " + B + "'s runs";
    if (key == "time_to_target")
      s += " (validation " + format_number(opt.target, 2) + " not reached" +
           (m.paired ? ", or their pair's not" : "") + ")";
    else if (m.paired)
      s += " (no value, or no pair)";
  }
  s += ".";
  // Power: the user's next question.
  const std::string sd_what = m.paired ? "the per-seed differences" : "a run";
  if (m.seeds_needed > 0) {
    const std::string size = m.ratio ? "a " + percent_text(m.detect) + " difference"
                                     : "a difference of " + format_number(m.detect, 3);
    s += " Detecting " + size + " would take about " + std::to_string(m.seeds_needed) +
         " seeds per group (α " + format_number(opt.alpha, 2) + ", power " +
         format_number(opt.power, 1) + ", normal approximation, from the standard deviation of " +
         sd_what + (m.ratio ? " on the log scale " : " ") + format_number(m.sd, 3) + "); " +
         std::to_string(m.paired ? m.a.size() : std::min(m.a.size(), m.b.size())) +
         " seeds detect " +
         (m.ratio ? percent_text(m.detectable) : format_number(m.detectable, 3)) + " or more.";
  }
  m.sentence = s;
  return m;
}

}  // namespace

std::string format_number(double v, int decimals, bool sign) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : std::string(kMinus) + "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v));
  const bool zero = std::string(buf).find_first_not_of("0.") == std::string::npos;
  if (v < 0 && !zero) return std::string(kMinus) + buf;
  if (sign && !zero) return std::string("+") + buf;
  return buf;
}

const std::vector<std::pair<std::string, std::string>>& verdict_metrics() {
  static const std::vector<std::pair<std::string, std::string>> m = {
      {"final_validation", "final validation accuracy"},
      {"best_validation", "best validation accuracy"},
      {"final_reward", "reward (last 20 RL steps)"},
      {"time_to_target", "time to the validation target"},
      {"step_time", "step time"},
  };
  return m;
}

std::vector<RunOutcome> read_outcomes(RunStore& store, const RunGroup& group, double target) {
  std::vector<RunOutcome> out;
  for (const auto& r : group.runs) {
    RunOutcome o = read_outcome(store, r, target);
    o.replicate = group.replicate_of(r);
    out.push_back(std::move(o));
  }
  return out;
}

Verdict compare_groups(const RunGroup& a, const std::vector<RunOutcome>& outcomes_a,
                       const RunGroup& b, const std::vector<RunOutcome>& outcomes_b,
                       const VerdictOptions& opt) {
  Verdict v;
  v.a_label = a.label;
  v.b_label = b.label;
  v.n_a = static_cast<int>(outcomes_a.size());
  v.n_b = static_cast<int>(outcomes_b.size());
  v.options = opt;
  for (const auto& [key, title] : verdict_metrics()) {
    std::string t = title;
    if (key == "time_to_target") t = "time to validation " + format_number(opt.target, 2);
    v.metrics.push_back(compare_metric(key, t, v, a, outcomes_a, b, outcomes_b, opt));
  }
  v.paired = std::any_of(v.metrics.begin(), v.metrics.end(),
                         [](const MetricVerdict& m) { return m.paired; });
  return v;
}

std::string Verdict::text() const {
  std::string s;
  for (const auto& m : metrics) s += m.sentence + "\n";
  return s;
}

Json Verdict::to_json() const {
  Json::Object o;
  o["a"] = Json(Json::Object{{"label", Json(a_label)}, {"runs", Json(static_cast<int64_t>(n_a))}});
  o["b"] = Json(Json::Object{{"label", Json(b_label)}, {"runs", Json(static_cast<int64_t>(n_b))}});
  o["paired"] = paired;
  Json::Object options_json;
  options_json["target"] = options.target;
  options_json["detect_accuracy"] = options.detect_accuracy;
  options_json["detect_relative"] = options.detect_relative;
  options_json["alpha"] = options.alpha;
  options_json["power"] = options.power;
  options_json["level"] = options.bootstrap.level;
  options_json["resamples"] = options.bootstrap.resamples;
  options_json["seed"] = static_cast<double>(options.bootstrap.seed);
  o["options"] = Json(std::move(options_json));
  Json::Array list;
  for (const auto& m : metrics) {
    Json::Object j;
    j["key"] = m.key;
    j["title"] = m.title;
    j["comparison"] = m.ratio ? "ratio" : "difference";
    j["paired"] = m.paired;
    j["a"] = numbers(m.a);
    j["b"] = numbers(m.b);
    if (m.paired) {
      Json::Array reps;
      for (const auto& r : m.replicates) reps.emplace_back(r);
      j["replicates"] = Json(std::move(reps));
    }
    j["mean_a"] = number_or_null(m.mean_a);
    j["mean_b"] = number_or_null(m.mean_b);
    j["sd_a"] = number_or_null(m.sd_a);
    j["sd_b"] = number_or_null(m.sd_b);
    j["missing_a"] = m.missing_a;
    j["missing_b"] = m.missing_b;
    if (m.bootstrap.resamples > 0 || !m.bootstrap.method.empty()) {
      j["bootstrap"] = estimate_json(m.bootstrap);
      j["t_based"] = estimate_json(m.t_based);
    }
    j["sd"] = number_or_null(m.sd);
    j["detect"] = m.detect;
    j["seeds_needed"] = m.seeds_needed > 0 ? Json(m.seeds_needed) : Json();
    j["detectable"] = number_or_null(m.detectable);
    j["finding"] = m.finding;
    j["sentence"] = m.sentence;
    list.emplace_back(std::move(j));
  }
  o["metrics"] = Json(std::move(list));
  o["text"] = text();
  return Json(std::move(o));
}

}  // namespace fp8rl
