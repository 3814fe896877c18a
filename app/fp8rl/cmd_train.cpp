// fp8rl train: a GRPO run in this process, with a progress line (or JSON lines), recorded in
// the run store; Ctrl-C stops at the next step boundary with a checkpoint.
#include <unistd.h>
#include <csignal>
#include <cstdio>

#include <atomic>
#include <cmath>
#include <filesystem>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "rl/run_loop.hpp"

namespace fp8rl::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

std::string fmt_scalar(const StepRecord& r, const char* key, const char* f) {
  auto it = r.scalars.find(key);
  if (it == r.scalars.end()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, it->second);
  return buf;
}

}  // namespace

int cmd_train(const std::vector<std::string>& args) {
  std::vector<std::string> sets;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--set" && i + 1 < args.size()) {
      sets.push_back(args[++i]);
    } else if (args[i].rfind("--set=", 0) == 0) {
      sets.push_back(args[i].substr(6));
    } else {
      rest.push_back(args[i]);
    }
  }
  const Args a(rest, {"preset", "config", "backend", "output"}, {"json", "help", "print-config"});
  if (a.flag("help") || (a.get("preset", "").empty() && a.get("config", "").empty())) {
    std::fputs(
        "usage: fp8rl train (--preset NAME | --config FILE) [--set key=value ...] [--json]\n"
        "                   [--backend auto|cpu|cuda] [--output DIR] [--print-config]\n\n"
        "Runs GRPO (with optional supervised warm-up) and prints a progress line per step, or\n"
        "with --json one JSON object per step and a final summary. Ctrl-C stops at the next\n"
        "step boundary and writes a checkpoint. Presets: resources/presets/*.yaml.\n",
        a.flag("help") ? stdout : stderr);
    return a.flag("help") ? 0 : 2;
  }
  RunConfig cfg = RunConfig::load(a.get("preset", ""), a.get("config", ""), sets);
  if (a.flag("print-config")) {
    std::printf("%s\n", cfg.doc.dump(2).c_str());
    return 0;
  }
  auto sel = make_backend(parse_backend_choice(a.get("backend", cfg.backend)));
  const bool json = a.flag("json");
  if (!sel.fallback_reason.empty() && !json)
    std::fprintf(stderr, "fp8rl train: using the CPU (%s)\n", sel.fallback_reason.c_str());
  GrpoRun run(cfg, *sel.backend);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool tty = isatty(STDERR_FILENO) && !json;
  const int64_t total = cfg.sft_steps + cfg.steps;
  double last_val = NAN, first_val = NAN;
  StepRecord last;
  while (!run.finished() && !g_stop) {
    last = run.next();
    if (auto it = last.scalars.find(metric::kValAccuracy); it != last.scalars.end()) {
      last_val = it->second;
      if (std::isnan(first_val)) first_val = it->second;
    }
    if (auto it = last.scalars.find("accuracy/validation_initial"); it != last.scalars.end())
      first_val = it->second;
    if (json) {
      std::printf("%s\n", last.to_json().dump().c_str());
      std::fflush(stdout);
      continue;
    }
    const int64_t done = run.sft_done() + run.rl_done();
    const int width = 24, filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(static_cast<size_t>(width), '.');
    std::fprintf(
        stderr, "%s[%s] %lld/%lld %s  reward %s  val %s  mult_err %s  %s s/step%s", tty ? "\r" : "",
        bar.c_str(), static_cast<long long>(done), static_cast<long long>(total),
        last.phase.c_str(), fmt_scalar(last, metric::kReward, "%.3f").c_str(),
        std::isnan(last_val) ? "-" : fmt_scalar(last, metric::kValAccuracy, "%.3f").c_str(),
        fmt_scalar(last, metric::kTokenMultProbError, "%.4f").c_str(),
        fmt_scalar(last, metric::kTimeTotal, "%.2f").c_str(), tty ? "   " : "\n");
  }
  if (tty) std::fputc('\n', stderr);
  std::string out = a.get("output", "");
  if (!out.empty() || g_stop) {
    if (out.empty()) out = "fp8rl-checkpoint";
    run.save(out);
    if (!json) std::fprintf(stderr, "checkpoint written to %s\n", out.c_str());
  }
  Json summary;
  summary["summary"] = true;
  summary["stopped_early"] = static_cast<bool>(g_stop);
  summary["sft_steps"] = run.sft_done();
  summary["rl_steps"] = run.rl_done();
  summary["validation_accuracy_initial"] = std::isnan(first_val) ? Json() : Json(first_val);
  summary["validation_accuracy_final"] = std::isnan(last_val) ? Json() : Json(last_val);
  summary["wall_seconds"] = last.wall_seconds;
  if (json)
    std::printf("%s\n", summary.dump().c_str());
  else
    std::fprintf(stderr, "%s\n", summary.dump().c_str());
  return g_stop ? 130 : 0;
}

}  // namespace fp8rl::cli
