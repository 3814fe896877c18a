// fp8rl runs list | show ID | export ID --csv | import LOGDIR: the run database.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "run_db.hpp"
#include "store/run_store.hpp"
#if defined(FP8RL_HAVE_IPC)
#include "ipc/client.hpp"
#endif

namespace fp8rl::cli {
namespace {

std::string age(std::optional<double> t) {
  if (!t) return "-";
  const double s = std::max(0.0, static_cast<double>(std::time(nullptr)) - *t);
  char buf[32];
  if (s < 120)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%.0fm", s / 60);
  else if (s < 172800)
    std::snprintf(buf, sizeof buf, "%.0fh", s / 3600);
  else
    std::snprintf(buf, sizeof buf, "%.0fd", s / 86400);
  return buf;
}

double last_value(RunStore& db, int64_t run, const std::string& key) {
  const auto s = db.scalar_series(run, key);
  return s.empty() ? NAN : s.back().value;
}

}  // namespace

int cmd_runs(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "import")
    return cmd_runs_import(std::vector<std::string>(args.begin() + 1, args.end()));
  const Args a(args, {"db", "tensorboard"}, {"help", "csv"});
  const auto& pos = a.positional();
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl runs list [--db PATH]\n"
        "       fp8rl runs show ID [--db PATH]\n"
        "       fp8rl runs check [--db PATH]            (SQLite integrity check; prints ok)\n"
        "       fp8rl runs attach ID [--db PATH]        (follow a live run)\n"
        "       fp8rl runs export ID --csv [--db PATH]   (one row per step, one column per "
        "scalar)\n"
        "       fp8rl runs export ID --tensorboard DIR [--db PATH]   (TensorBoard event files)\n"
        "       fp8rl runs import LOGDIR [--follow] [...]   (TensorBoard logs; --help for more)\n");
  need(!pos.empty(),
       "needs an action: list, show ID, check, attach ID, export ID (--csv or --tensorboard "
       "DIR) or import LOGDIR");
  const bool by_id = pos[0] == "show" || pos[0] == "export" || pos[0] == "attach";
  need(by_id || pos[0] == "list" || pos[0] == "check",
       "unknown action '" + pos[0] + "' (list, show, check, attach, export or import)");
  need(!by_id || pos.size() >= 2, pos[0] + " needs a run id (as `fp8rl runs list` shows)");
  a.max_positional(by_id ? 2 : 1);
  const std::string path = a.get("db", default_db_path());
  if (!std::filesystem::exists(path)) {
    check(pos[0] == "list", "no run database at " + path + " (no runs recorded yet)");
    std::printf("no runs recorded yet (%s does not exist)\n", path.c_str());
    return 0;
  }
#if defined(FP8RL_HAVE_IPC)
  if (pos[0] == "attach") return cmd_attach(parse_run_id(pos[1], "runs attach"), path);
  // Runs whose worker died are shown as crashed (needs write access; skipped when read-only).
  try {
    mark_crashed_runs(path);
  } catch (const Error&) {
  }
#else
  check(pos[0] != "attach", "this build has no ZeroMQ: cannot attach to live runs");
#endif
  RunStore db(path, /*read_only=*/true);
  if (pos[0] == "check") {
    const std::string r = db.integrity_check();
    std::printf("%s\n", r.c_str());
    return r == "ok" ? 0 : 1;
  }
  if (pos[0] == "list") {
    std::printf("%5s  %-20s %-9s %-12s %-26s %7s %6s %8s\n", "id", "name", "status", "preset",
                "precision", "step", "age", "val acc");
    for (const auto& r : db.list_runs())
      std::printf("%5lld  %-20.20s %-9s %-12.12s %-26.26s %7s %6s %8.3f\n",
                  static_cast<long long>(r.id), r.name.c_str(), r.status.c_str(), r.preset.c_str(),
                  r.precision_summary.c_str(),
                  r.last_step ? std::to_string(*r.last_step).c_str() : "-",
                  age(r.created_at).c_str(), last_value(db, r.id, "accuracy/validation"));
    return 0;
  }
  const int64_t id = parse_run_id(pos[1], "runs " + pos[0]);
  const auto row = db.find_run(id);
  check(row.has_value(), "no run " + pos[1] + " in " + db.path());
  if (pos[0] == "export") {
    need(a.flag("csv") != a.has("tensorboard"), "export needs --csv or --tensorboard DIR");
    if (a.has("tensorboard"))
      return cmd_runs_export_tensorboard(path, id, a.get("tensorboard", ""));
    db.export_csv(id, std::cout);
    return 0;
  }
  std::printf("run %lld: %s (%s)\n  preset %s, precision %s\n  host %s, pid %lld, last step %s\n",
              static_cast<long long>(row->id), row->name.c_str(), row->status.c_str(),
              row->preset.c_str(), row->precision_summary.c_str(), row->host.c_str(),
              static_cast<long long>(row->pid),
              row->last_step ? std::to_string(*row->last_step).c_str() : "-");
  if (!row->source.empty())
    std::printf("  imported from %s: %s\n", row->source.c_str(), row->source_path.c_str());
  if (!row->checkpoint_dir.empty())
    std::printf("  checkpoint %s (step %lld)\n", row->checkpoint_dir.c_str(),
                static_cast<long long>(row->checkpoint_step.value_or(0)));
  std::printf("  latest:\n");
  for (const auto& key : db.scalar_keys(id)) {
    if (key.rfind("fp8/", 0) == 0 || key.rfind("kv_scale/", 0) == 0) continue;
    std::printf("    %-36s %.6g\n", key.c_str(), last_value(db, id, key));
  }
  std::printf("  events:\n");
  for (const auto& e : db.events(id))
    std::printf("    step %-6lld %-11s %s\n", static_cast<long long>(e.step), e.event.kind.c_str(),
                e.event.message.c_str());
  return 0;
}

}  // namespace fp8rl::cli
