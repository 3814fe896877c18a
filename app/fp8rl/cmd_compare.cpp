// fp8rl compare and fp8rl report: the verdict between groups of runs (groups/verdict.hpp) in
// the terminal, as JSON, or in a self-contained HTML report with the groups' curves.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "groups/report_html.hpp"
#include "groups/run_groups.hpp"
#include "groups/verdict.hpp"
#include "run_db.hpp"
#include "store/run_store.hpp"

namespace fp8rl::cli {
namespace {

constexpr const char* kGroupOptions =
    "Groups: --group SWEEP:VALUE (the runs of sweep SWEEP with VALUE on an axis other than\n"
    "the replicate, e.g. 3:fp8), --group SWEEP:AXIS=VALUE[,AXIS=VALUE] (several axes),\n"
    "--group runs:ID,ID,… (runs by id); every group is compared with the last one. Or\n"
    "--sweep ID: every group of the sweep against --base VALUE (default: its first group).\n"
    "Options: --target ACC (time to this validation accuracy, default 0.5), --detect D (the\n"
    "accuracy difference to size the seeds needed for, default 0.02), --detect-relative R\n"
    "(the same for times, default 0.05), --resamples N (bootstrap, default 10000), --seed S,\n"
    "--unpaired (never pair runs by seed), --db PATH.\n";

struct Setup {
  std::vector<RunGroup> groups;
  size_t base = 0;  // the group the others are compared with
  VerdictOptions options;
  std::vector<std::vector<RunOutcome>> outcomes;  // per group, per run
};

Setup read_setup(RunStore& store, const Args& a, const std::vector<std::string>& group_specs) {
  Setup s;
  check(!group_specs.empty() || a.has("sweep"), "name the groups: --group A --group B, or --sweep ID");
  check(group_specs.empty() || !a.has("sweep"), "give --group or --sweep, not both");
  if (a.has("sweep")) {
    const int64_t sweep = parse_run_id(a.get("sweep", ""), "--sweep");
    for (auto& g : sweep_groups(store, sweep))
      if (!g.runs.empty()) s.groups.push_back(std::move(g));
    check(s.groups.size() >= 2, "sweep " + std::to_string(sweep) +
                                    " has fewer than two groups with runs to compare");
    if (a.has("base")) {
      const std::string want = a.get("base", "");
      bool found = false;
      for (size_t i = 0; i < s.groups.size(); ++i)
        if (s.groups[i].label == want) s.base = i, found = true;
      std::string labels;
      for (const auto& g : s.groups) labels += (labels.empty() ? "" : ", ") + g.label;
      check(found, "--base '" + want + "': sweep " + std::to_string(sweep) +
                       " has no group of that name (groups: " + labels + ")");
    }
  } else {
    check(group_specs.size() >= 2, "compare needs two groups or more (--group A --group B)");
    for (const auto& spec : group_specs) s.groups.push_back(resolve_group(store, spec));
    s.base = s.groups.size() - 1;
  }
  VerdictOptions& o = s.options;
  o.target = a.get_number("target", o.target);
  o.detect_accuracy = a.get_number("detect", o.detect_accuracy);
  o.detect_relative = a.get_number("detect-relative", o.detect_relative);
  check(o.detect_accuracy > 0 && o.detect_relative > 0, "--detect and --detect-relative must be > 0");
  o.bootstrap.resamples = a.get_int("resamples", o.bootstrap.resamples);
  check(o.bootstrap.resamples >= 100, "--resamples must be at least 100");
  o.bootstrap.seed = static_cast<uint64_t>(a.get_number("seed", static_cast<double>(o.bootstrap.seed)));
  o.paired = !a.flag("unpaired");
  for (const auto& g : s.groups) s.outcomes.push_back(read_outcomes(store, g, o.target));
  return s;
}

std::string group_line(const RunGroup& g) {
  std::string s = g.label + ": ";
  if (g.sweep_id) s += "sweep " + std::to_string(*g.sweep_id) + " (" + g.sweep_name + "), ";
  s += std::to_string(g.runs.size()) + " run(s)";
  if (g.queued) s += " + " + std::to_string(g.queued) + " queued";
  std::string ids, reps;
  for (const auto& r : g.runs) {
    ids += " " + std::to_string(r.id);
    const std::string rep = g.replicate_of(r);
    if (!rep.empty()) reps += " " + rep;
  }
  s += ":" + ids;
  if (!reps.empty()) s += " (" + g.replicate + reps + ")";
  return s;
}

std::string pad(const std::string& s, size_t width) {
  // Width in characters (UTF-8 continuation bytes do not count).
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  return s + std::string(chars < width ? width - chars : 0, ' ');
}

void print_table(const Verdict& v) {
  std::printf("%s%s%s%s%s%s\n", pad("metric", 34).c_str(), pad(v.a_label, 18).c_str(),
              pad(v.b_label, 18).c_str(), pad("estimate", 10).c_str(),
              pad("95% CI (bootstrap)", 22).c_str(), "95% CI (t)");
  for (const auto& m : v.metrics) {
    const auto ms = [](double mean, double sd) {
      return std::isfinite(mean) ? format_number(mean, 3) +
                                       (std::isfinite(sd) ? " ± " + format_number(sd, 3) : "")
                                 : std::string("—");
    };
    const bool has = m.bootstrap.resamples > 0;
    const auto ci = [&](const stats::Estimate& e) {
      return has ? "[" + format_number(e.ci.lo, 3, !m.ratio) + ", " +
                       format_number(e.ci.hi, 3, !m.ratio) + "]"
                 : std::string("—");
    };
    std::printf("%s%s%s%s%s%s\n", pad(m.title + (m.ratio ? " (ratio)" : ""), 34).c_str(),
                pad(ms(m.mean_a, m.sd_a), 18).c_str(), pad(ms(m.mean_b, m.sd_b), 18).c_str(),
                pad(has ? format_number(m.bootstrap.value, 3, !m.ratio) : "—", 10).c_str(),
                pad(ci(m.bootstrap), 22).c_str(), ci(m.t_based).c_str());
  }
}

std::vector<Verdict> verdicts_of(const Setup& s) {
  const auto& o = s.outcomes;
  std::vector<Verdict> out;
  for (size_t i = 0; i < s.groups.size(); ++i)
    if (i != s.base)
      out.push_back(compare_groups(s.groups[i], o[i], s.groups[s.base], o[s.base], s.options));
  return out;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&t));
  return buf;
}

}  // namespace

int cmd_compare(const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  const std::vector<std::string> specs = take_repeated(rest, "group");
  const Args a(rest,
               {"db", "sweep", "base", "target", "detect", "detect-relative", "resamples", "seed"},
               {"help", "json", "unpaired"});
  if (a.flag("help"))
    return print_help((std::string("usage: fp8rl compare --group A --group B [--json] [options]\n"
                                   "       fp8rl compare --sweep ID [--base VALUE] [--json]\n\n"
                                   "Is group A as good as group B? For final and best validation "
                                   "accuracy, reward, time to\na validation target and step time: "
                                   "the difference (or ratio) of the means with a 95%\nbootstrap "
                                   "interval (paired by seed where the groups share seeds), a t "
                                   "interval for\ncomparison, the finding in words and the seeds "
                                   "needed to detect a given difference.\n") +
                       kGroupOptions)
                          .c_str());
  need(!specs.empty() || a.has("sweep"),
       "needs the groups to compare: --group A --group B, or --sweep ID");
  const std::string db = a.get("db", default_db_path());
  check(std::filesystem::exists(db), "no run database at " + db);
  RunStore store(db, /*read_only=*/true);
  const Setup s = read_setup(store, a, specs);
  const std::vector<Verdict> verdicts = verdicts_of(s);
  if (a.flag("json")) {
    Json::Object out;
    Json::Array groups;
    for (size_t i = 0; i < s.groups.size(); ++i) {
      const RunGroup& g = s.groups[i];
      Json::Object j;
      j["label"] = g.label;
      j["sweep_id"] = g.sweep_id ? Json(*g.sweep_id) : Json();
      j["replicate"] = g.replicate;
      j["base"] = i == s.base;
      Json::Array runs;
      for (size_t r = 0; r < g.runs.size(); ++r) {
        const RunOutcome& o = s.outcomes[i][r];
        Json::Object run;
        run["id"] = o.run_id;
        run["name"] = o.name;
        run["status"] = o.status;
        run["replicate"] = o.replicate;
        const auto opt = [](const std::optional<double>& v) {
          return v && std::isfinite(*v) ? Json(*v) : Json();
        };
        run["final_validation"] = opt(o.final_validation);
        run["best_validation"] = opt(o.best_validation);
        run["final_reward"] = opt(o.final_reward);
        run["time_to_target"] = opt(o.time_to_target);
        run["step_time"] = opt(o.step_time);
        runs.emplace_back(std::move(run));
      }
      j["runs"] = Json(std::move(runs));
      groups.emplace_back(std::move(j));
    }
    out["groups"] = Json(std::move(groups));
    Json::Array list;
    for (const auto& v : verdicts) list.push_back(v.to_json());
    out["verdicts"] = Json(std::move(list));
    std::printf("%s\n", Json(std::move(out)).dump(2).c_str());
    return 0;
  }
  for (size_t i = 0; i < s.groups.size(); ++i)
    std::printf("%s%s\n", group_line(s.groups[i]).c_str(), i == s.base ? "  [base]" : "");
  for (const auto& v : verdicts) {
    std::printf("\n%s against %s:\n", v.a_label.c_str(), v.b_label.c_str());
    print_table(v);
    std::printf("\n");
    for (const auto& m : v.metrics) std::printf("- %s\n", m.sentence.c_str());
  }
  return 0;
}

int cmd_report(const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  const std::vector<std::string> specs = take_repeated(rest, "group");
  const Args a(rest,
               {"db", "sweep", "base", "target", "detect", "detect-relative", "resamples", "seed",
                "out", "title"},
               {"help", "unpaired"});
  if (a.flag("help"))
    return print_help(
        (std::string("usage: fp8rl report (--group A --group B … | --sweep ID [--base "
                     "VALUE]) --out FILE.html [--title TEXT]\n\n"
                     "Writes a self-contained HTML report: the verdicts of `fp8rl "
                     "compare` in words and as\ntables, the groups and their runs, and "
                     "each group's mean curve with a 95% bootstrap\nband over seeds for "
                     "reward, accuracies, mismatch, throughput and step time (inline "
                     "SVG;\nno script, nothing fetched), to read without the studio.\n") +
         kGroupOptions)
            .c_str());
  need(!specs.empty() || a.has("sweep"),
       "needs the groups to compare: --group A --group B, or --sweep ID");
  need(a.has("out"), "needs --out FILE.html, the report to write");
  const std::string db = a.get("db", default_db_path());
  check(std::filesystem::exists(db), "no run database at " + db);
  RunStore store(db, /*read_only=*/true);
  const Setup s = read_setup(store, a, specs);
  ReportInput in;
  in.groups = s.groups;
  in.outcomes = s.outcomes;
  in.verdicts = verdicts_of(s);
  std::string title = a.get("title", "");
  if (title.empty()) {
    if (s.groups.front().sweep_id)
      title = "Sweep " + std::to_string(*s.groups.front().sweep_id) + " " + s.groups.front().sweep_name + ": ";
    for (size_t i = 0; i < s.groups.size(); ++i) title += (i ? " vs " : "") + s.groups[i].label;
  }
  in.title = title;
  in.source = std::filesystem::absolute(db).string();
  in.generated = "Generated " + now_text() + " by fp8rl " + FP8RL_VERSION + " (" +
                 FP8RL_GIT_DESCRIBE + ")";
  stats::BootstrapOptions band;
  band.resamples = 1000;
  band.seed = s.options.bootstrap.seed;
  for (const auto& [key, chart_title] : group_chart_metrics()) {
    ReportChart c;
    c.key = key;
    c.title = chart_title;
    for (auto& series : read_group_series(store, s.groups, key, 400))
      c.bands.push_back(series.bands(band));
    bool any = false;
    for (const auto& b : c.bands) any = any || !b.empty();
    if (any) in.charts.push_back(std::move(c));
  }
  const std::string out = a.get("out", "");
  std::ofstream f(out);
  check(static_cast<bool>(f), "cannot write " + out);
  f << report_html(in);
  f.close();
  check(!f.fail(), "cannot write " + out);
  std::fprintf(stderr, "fp8rl report: wrote %s (%zu groups, %zu charts)\n", out.c_str(),
               s.groups.size(), in.charts.size());
  for (const auto& v : in.verdicts)
    for (const auto& m : v.metrics) std::printf("- %s\n", m.sentence.c_str());
  return 0;
}

}  // namespace fp8rl::cli
