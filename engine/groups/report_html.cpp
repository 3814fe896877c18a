#include "groups/report_html.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

namespace fp8rl {
namespace {

const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char* color(size_t i) {
  return kPalette[i % std::size(kPalette)];
}

std::string num(double v, int decimals = 1) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Tick values over [lo, hi]: multiples of 1, 2 or 5 × 10^k, about `want` of them.
std::vector<double> ticks(double lo, double hi, int want) {
  std::vector<double> out;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, want);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return out;
}

std::string tick_text(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  char buf[48];
  if (std::fabs(v) >= 1e5 || (v != 0 && std::fabs(v) < 1e-4))
    std::snprintf(buf, sizeof buf, "%.2g", v);
  else
    std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 6), v);
  return buf;
}

std::string mean_sd(const std::vector<RunOutcome>& o,
                    const std::function<std::optional<double>(const RunOutcome&)>& f,
                    int decimals) {
  std::vector<double> v;
  for (const auto& x : o)
    if (auto y = f(x); y && std::isfinite(*y)) v.push_back(*y);
  if (v.empty()) return "—";
  std::string s = format_number(stats::mean(v), decimals);
  if (v.size() >= 2) s += " ± " + format_number(stats::sample_sd(v), decimals);
  if (v.size() != o.size()) s += " (" + std::to_string(v.size()) + " of " + std::to_string(o.size()) + ")";
  return s;
}

std::string opt_text(const std::optional<double>& v, int decimals) {
  return v && std::isfinite(*v) ? format_number(*v, decimals) : "—";
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_band_chart(const ReportChart& chart, const std::vector<std::string>& labels,
                           int width, int height) {
  const double left = 58, right = 12, top = 28, bottom = 34;
  const double pw = width - left - right, ph = height - top - bottom;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& band : chart.bands)
    for (const auto& p : band) {
      x0 = std::min(x0, p.step), x1 = std::max(x1, p.step);
      y0 = std::min(y0, p.lo), y1 = std::max(y1, p.hi);
    }
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
                  "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
                  std::to_string(width) + " " + std::to_string(height) +
                  "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s += "<text x=\"" + num(left) + "\" y=\"16\" font-weight=\"bold\" font-size=\"12\">" +
       html_escape(chart.title) + "</text>\n";
  if (!std::isfinite(x0)) {
    s += "<text x=\"" + num(width / 2.0) + "\" y=\"" + num(height / 2.0) +
         "\" text-anchor=\"middle\" fill=\"#666\">no data</text>\n</svg>\n";
    return s;
  }
  if (!(x1 > x0)) x0 -= 1, x1 += 1;
  if (!(y1 > y0)) y0 -= 0.5, y1 += 0.5;
  const double pad = 0.05 * (y1 - y0);
  y0 -= pad, y1 += pad;
  const auto X = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  const auto Y = [&](double y) { return top + (1 - (y - y0) / (y1 - y0)) * ph; };
  // Frame, grid and ticks.
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"none\" stroke=\"#999\"/>\n";
  const auto xt = ticks(x0, x1, 8), yt = ticks(y0, y1, 6);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : xt) {
    s += "<line x1=\"" + num(X(t)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(X(t)) + "\" y2=\"" +
         num(top + ph) + "\" stroke=\"#e4e4e4\"/>";
    s += "<text x=\"" + num(X(t)) + "\" y=\"" + num(top + ph + 14) +
         "\" text-anchor=\"middle\" fill=\"#444\">" + tick_text(t, xstep) + "</text>\n";
  }
  for (double t : yt) {
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(Y(t)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(Y(t)) + "\" stroke=\"#e4e4e4\"/>";
    s += "<text x=\"" + num(left - 5) + "\" y=\"" + num(Y(t) + 4) +
         "\" text-anchor=\"end\" fill=\"#444\">" + tick_text(t, ystep) + "</text>\n";
  }
  s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(height - 4.0) +
       "\" text-anchor=\"middle\" fill=\"#444\">step</text>\n";
  // Bands first, then the means over them.
  for (size_t g = 0; g < chart.bands.size(); ++g) {
    const auto& band = chart.bands[g];
    if (band.size() < 2) continue;
    std::string pts;
    for (const auto& p : band) pts += num(X(p.step)) + "," + num(Y(p.hi)) + " ";
    for (auto it = band.rbegin(); it != band.rend(); ++it)
      pts += num(X(it->step)) + "," + num(Y(it->lo)) + " ";
    s += "<polygon points=\"" + pts + "\" fill=\"" + color(g) + "\" fill-opacity=\"0.18\" stroke=\"none\"/>\n";
  }
  for (size_t g = 0; g < chart.bands.size(); ++g) {
    std::string pts;
    for (const auto& p : chart.bands[g]) pts += num(X(p.step)) + "," + num(Y(p.mean)) + " ";
    s += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + color(g) +
         "\" stroke-width=\"1.4\"/>\n";
  }
  // Legend, right-aligned on the title line.
  double lx = width - right;
  for (size_t g = labels.size(); g-- > 0;) {
    const double w = 7.0 * static_cast<double>(labels[g].size()) + 22;
    lx -= w;
    s += "<rect x=\"" + num(lx) + "\" y=\"8\" width=\"12\" height=\"10\" fill=\"" + color(g) +
         "\" fill-opacity=\"0.5\" stroke=\"" + color(g) + "\"/><text x=\"" + num(lx + 16) +
         "\" y=\"17\">" + html_escape(labels[g]) + "</text>\n";
  }
  s += "</svg>\n";
  return s;
}

std::string report_html(const ReportInput& in) {
  std::vector<std::string> labels;
  for (const auto& g : in.groups) labels.push_back(g.label);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
       html_escape(in.title) + "</title>\n";
  h += R"(<style>
body { font-family: sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f2f2f2; } td.l, th.l { text-align: left; }
.meta { color: #666; font-size: 0.9em; }
.verdict li { margin: 0.4em 0; line-height: 1.4; }
.charts { display: flex; flex-wrap: wrap; gap: 10px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
</style>
</head>
<body>
)";
  h += "<h1>" + html_escape(in.title) + "</h1>\n<p class=\"meta\">" + html_escape(in.generated);
  if (!in.source.empty()) h += "<br>run database: " + html_escape(in.source);
  h += "</p>\n";

  // Verdicts.
  for (const auto& v : in.verdicts) {
    h += "<h2>" + html_escape(v.a_label) + " against " + html_escape(v.b_label) + "</h2>\n";
    h += "<ul class=\"verdict\">\n";
    for (const auto& m : v.metrics) h += "<li>" + html_escape(m.sentence) + "</li>\n";
    h += "</ul>\n<table>\n<tr><th class=\"l\">metric</th><th>" + html_escape(v.a_label) +
         " mean ± sd</th><th>" + html_escape(v.b_label) +
         " mean ± sd</th><th>estimate</th><th>95% CI (bootstrap)</th><th>95% CI (t)</th>"
         "<th>n</th><th class=\"l\">finding</th><th>seeds needed</th></tr>\n";
    for (const auto& m : v.metrics) {
      const int d = m.ratio ? 3 : 3;
      const auto ms = [&](double mean, double sd) {
        return std::isfinite(mean) ? format_number(mean, 3) +
                                         (std::isfinite(sd) ? " ± " + format_number(sd, 3) : "")
                                   : std::string("—");
      };
      const bool has = m.bootstrap.resamples > 0;
      h += "<tr><td class=\"l\">" + html_escape(m.title) + (m.ratio ? " (ratio)" : "") +
           "</td><td>" + ms(m.mean_a, m.sd_a) + "</td><td>" + ms(m.mean_b, m.sd_b) + "</td><td>" +
           (has ? format_number(m.bootstrap.value, d, !m.ratio) : "—") + "</td><td>" +
           (has ? "[" + format_number(m.bootstrap.ci.lo, d, !m.ratio) + ", " +
                      format_number(m.bootstrap.ci.hi, d, !m.ratio) + "]"
                : "—") +
           "</td><td>" +
           (has ? "[" + format_number(m.t_based.ci.lo, d, !m.ratio) + ", " +
                      format_number(m.t_based.ci.hi, d, !m.ratio) + "]"
                : "—") +
           "</td><td>" +
           (m.paired ? std::to_string(m.a.size()) + " pairs"
                     : std::to_string(m.a.size()) + " / " + std::to_string(m.b.size())) +
           "</td><td class=\"l\"><strong>" + html_escape(m.finding) + "</strong></td><td>" +
           (m.seeds_needed > 0 ? std::to_string(m.seeds_needed) : "—") + "</td></tr>\n";
    }
    h += "</table>\n";
  }

  // Groups.
  h += "<h2>Groups</h2>\n<table>\n<tr><th class=\"l\">group</th><th class=\"l\">sweep</th>"
       "<th>runs</th><th>final validation</th><th>best validation</th><th>reward (last 20)</th>"
       "<th>step time s</th><th>rollout tok/s</th><th>training tok/s</th></tr>\n";
  for (size_t g = 0; g < in.groups.size(); ++g) {
    const auto& gr = in.groups[g];
    const auto& o = g < in.outcomes.size() ? in.outcomes[g] : std::vector<RunOutcome>{};
    h += std::string("<tr><td class=\"l\"><span class=\"swatch\" style=\"background:") + color(g) +
         "\"></span>" + html_escape(gr.label) + "</td><td class=\"l\">" +
         (gr.sweep_id ? std::to_string(*gr.sweep_id) + " " + html_escape(gr.sweep_name) : "—") +
         "</td><td>" + std::to_string(gr.runs.size()) +
         (gr.queued ? " (+" + std::to_string(gr.queued) + " queued)" : "") + "</td><td>" +
         mean_sd(o, [](const RunOutcome& x) { return x.final_validation; }, 3) + "</td><td>" +
         mean_sd(o, [](const RunOutcome& x) { return x.best_validation; }, 3) + "</td><td>" +
         mean_sd(o, [](const RunOutcome& x) { return x.final_reward; }, 3) + "</td><td>" +
         mean_sd(o, [](const RunOutcome& x) { return x.step_time; }, 3) + "</td><td>" +
         mean_sd(o, [](const RunOutcome& x) { return x.rollout_tps; }, 0) + "</td><td>" +
         mean_sd(o, [](const RunOutcome& x) { return x.training_tps; }, 0) + "</td></tr>\n";
  }
  h += "</table>\n";

  // Charts.
  if (!in.charts.empty()) {
    h += "<h2>Curves</h2>\n<p class=\"meta\">Each group's mean over its runs per step, with a "
         "95% bootstrap percentile band over the runs (long runs are drawn on step buckets: "
         "each run's mean over the bucket).</p>\n<div class=\"charts\">\n";
    for (const auto& c : in.charts) h += "<div>" + svg_band_chart(c, labels) + "</div>\n";
    h += "</div>\n";
  }

  // Runs.
  h += "<h2>Runs</h2>\n<table>\n<tr><th>run</th><th class=\"l\">name</th><th class=\"l\">group</th>"
       "<th class=\"l\">status</th><th>RL steps</th><th>final val</th><th>best val</th>"
       "<th>reward</th><th>time to target s</th><th>step time s</th><th>wall s</th></tr>\n";
  for (size_t g = 0; g < in.groups.size(); ++g)
    for (size_t r = 0; g < in.outcomes.size() && r < in.outcomes[g].size(); ++r) {
      const RunOutcome& o = in.outcomes[g][r];
      h += "<tr><td>" + std::to_string(o.run_id) + "</td><td class=\"l\">" + html_escape(o.name) +
           "</td><td class=\"l\">" + html_escape(in.groups[g].label) + "</td><td class=\"l\">" +
           html_escape(o.status) + "</td><td>" + std::to_string(o.rl_steps) + "</td><td>" +
           opt_text(o.final_validation, 3) + "</td><td>" + opt_text(o.best_validation, 3) +
           "</td><td>" + opt_text(o.final_reward, 3) + "</td><td>" + opt_text(o.time_to_target, 1) +
           "</td><td>" + opt_text(o.step_time, 3) + "</td><td>" + format_number(o.wall_seconds, 0) +
           "</td></tr>\n";
    }
  h += "</table>\n";

  h += R"(<h2>Method</h2>
<p>Each run contributes one number per metric: the final validation accuracy (its last record),
the best validation accuracy, the mean reward of its last 20 RL steps, the wall time until its
validation accuracy first reached the target, and its mean step time over RL steps. Two groups
are compared on the difference of their means (accuracies, reward) or the ratio of their means
(times). The interval is a bootstrap percentile interval: runs are resampled with replacement —
paired by seed when both groups ran the same seeds (each seed's two runs share their
initialisation and prompts), else each group on its own — every resample enumerated when there
are few, else 10,000 drawn with a fixed seed, so the report is reproducible. A t-based interval
(paired t or Welch's t; the delta method on the log scale for ratios) is given for comparison.
"No difference detected" means the interval contains zero (a ratio of one); it does not prove
the groups equal: the interval's ends say how large a difference the data still allow. The
number of seeds needed to detect a difference uses the normal approximation at significance
0.05 and power 0.8 with the standard deviation observed here. With five or fewer seeds the
percentile bootstrap tends to give intervals that are too narrow; read the t interval beside it.</p>
</body>
</html>
)";
  return h;
}

}  // namespace fp8rl
