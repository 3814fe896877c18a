// fp8rl audit --run ID: the layer audits a run recorded (does every linear compute in the
// precision the trainer holds, with bit-identical weights?), read from the run database.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "run_db.hpp"
#include "store/run_store.hpp"

namespace fp8rl::cli {
namespace {

constexpr const char* kHelp =
    "usage: fp8rl audit --run ID [--step S] [--all] [--db PATH]\n\n"
    "Prints a run's layer audit: before the first rollout and after every weight sync (every\n"
    "audit.every steps) the run checks, linear by linear, that the generator computes in the\n"
    "precision the trainer's map holds, with exactly the weights (FP8 codes and scales, or BF16\n"
    "values) the trainer's quantizer makes from its FP32 masters.\n\n"
    "  --step S   the audit before step S's rollout (default: the latest audit)\n"
    "  --all      one summary line per audited step, then the latest audit's rows\n\n"
    "Exit status: 0 when every row of the shown audit is OK, 1 on any mismatch (or an error).\n";

struct StepSummary {
  int64_t rows = 0, mismatches = 0;
  double max_abs_diff = 0;
};

void print_rows(int64_t step, const std::vector<std::pair<int64_t, AuditRow>>& rows) {
  std::printf("audit before step %lld's rollout\n", static_cast<long long>(step));
  std::printf("%5s  %-6s %-9s %-9s %12s  %s\n", "layer", "module", "generator", "trainer",
              "max |diff|", "status");
  for (const auto& [s, r] : rows) {
    if (s != step) continue;
    std::printf("%5lld  %-6s %-9s %-9s %12.4g  %s\n", static_cast<long long>(r.layer),
                r.module.c_str(), r.generator_precision.c_str(), r.trainer_precision.c_str(),
                r.max_abs_diff, r.ok ? "ok" : "MISMATCH");
  }
}

}  // namespace

int cmd_audit(const std::vector<std::string>& args) {
  const Args a(args, {"run", "db", "step"}, {"help", "all"});
  if (a.flag("help")) return print_help(kHelp);
  need(!a.get("run", "").empty(), "needs --run ID (a run id, as `fp8rl runs list` shows)");
  a.max_positional(0);
  const std::string path = a.get("db", default_db_path());
  check(std::filesystem::exists(path), "no run database at " + path + " (no runs recorded yet)");
  RunStore db(path, /*read_only=*/true);
  const int64_t id = parse_run_id(a.get("run", ""), "audit --run");
  check(db.find_run(id).has_value(), "no run " + std::to_string(id) + " in " + db.path());
  const int64_t want = a.get_int("step", -1);

  const auto rows = db.audit(id);
  std::map<int64_t, StepSummary> steps;
  for (const auto& [s, r] : rows) {
    StepSummary& t = steps[s];
    ++t.rows;
    t.mismatches += !r.ok;
    t.max_abs_diff = std::max(t.max_abs_diff, r.max_abs_diff);
  }
  if (steps.empty()) {
    std::printf(
        "run %lld has no layer audit (recorded when audit.every > 0, before the first rollout "
        "and after weight syncs)\n",
        static_cast<long long>(id));
    return 0;
  }
  const int64_t step = want >= 0 ? want : steps.rbegin()->first;
  check(steps.count(step) > 0, "run " + std::to_string(id) + " has no audit at step " +
                                   std::to_string(step) + " (audited: steps " +
                                   std::to_string(steps.begin()->first) + " to " +
                                   std::to_string(steps.rbegin()->first) + ")");
  if (a.flag("all")) {
    std::printf("%7s %8s %11s %12s\n", "step", "linears", "mismatches", "max |diff|");
    for (const auto& [s, t] : steps)
      std::printf("%7lld %8lld %11lld %12.4g\n", static_cast<long long>(s),
                  static_cast<long long>(t.rows), static_cast<long long>(t.mismatches),
                  t.max_abs_diff);
    std::printf("\n");
  }
  print_rows(step, rows);
  const StepSummary& t = steps[step];
  std::printf("\n%lld linears, %lld mismatch%s\n", static_cast<long long>(t.rows),
              static_cast<long long>(t.mismatches), t.mismatches == 1 ? "" : "es");
  return t.mismatches == 0 ? 0 : 1;
}

}  // namespace fp8rl::cli
