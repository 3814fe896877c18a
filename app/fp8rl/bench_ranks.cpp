// fp8rl bench ranks: whole GRPO steps of a preset on 1, 2, … data-parallel ranks (each a
// `fp8rl train` started by mpirun, as a user would), step time, speed-up and scaling
// efficiency against one rank in the same run, throughput, and the collectives' share.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "bench.hpp"
#include "contract/metrics.hpp"
#include "contract/rank_launch.hpp"
#include "core/error.hpp"
#include "core/json.hpp"

namespace fp8rl::cli::bench {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The step records `fp8rl train --json` printed (the summary line left out).
std::vector<Json> run_steps(const std::vector<std::string>& cmd) {
  std::string line_cmd;
  for (const auto& part : cmd) line_cmd += (line_cmd.empty() ? "" : " ") + shell_quote(part);
  line_cmd += " 2>&1";
  std::FILE* p = ::popen(line_cmd.c_str(), "r");
  check(p != nullptr, "cannot start " + cmd.front());
  std::vector<Json> steps;
  std::string out, line;
  char buf[1 << 14];
  while (std::fgets(buf, sizeof buf, p)) {
    line += buf;
    if (line.empty() || line.back() != '\n') continue;
    Json j;
    if (line.rfind('{', 0) == 0) j = Json::parse(line);
    if (j.is_object() && j.contains("scalars"))
      steps.push_back(std::move(j));
    else
      out += line;
    line.clear();
  }
  const int status = ::pclose(p);
  check(status == 0, "`" + line_cmd + "` failed (status " + std::to_string(status) +
                         "): " + out.substr(out.size() > 1500 ? out.size() - 1500 : 0));
  return steps;
}

double scalar(const Json& step, const char* key) {
  const Json& s = step.at("scalars");
  return s.contains(key) ? s.at(key).as_number(key) : 0.0;
}

}  // namespace

Json bench_ranks(const RanksOptions& o) {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const int64_t total = o.warmup + o.steps + 1;  // the last step validates: not timed
  std::printf(
      "bench ranks: preset %s, %lld timed GRPO steps after %lld warm-up, backend %s, "
      "%u cores on this machine\n",
      o.preset.c_str(), static_cast<long long>(o.steps), static_cast<long long>(o.warmup),
      o.backend.c_str(), std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%6s %10s %9s %11s %14s %14s %10s %12s\n", "ranks", "step s", "speed-up",
              "efficiency", "rollout tok/s", "train tok/s", "comm %", "bytes/step");
  Json::Array rows;
  double base = 0;
  for (int64_t ranks : o.ranks) {
    std::vector<std::string> args = {"train",
                                     "--preset",
                                     o.preset,
                                     "--no-db",
                                     "--json",
                                     "--backend",
                                     o.backend,
                                     "--set",
                                     "sft.steps=0",
                                     "--set",
                                     "validation.every=0",
                                     "--set",
                                     "grpo.steps=" + std::to_string(total)};
    for (const auto& s : o.sets) args.insert(args.end(), {"--set", s});
    const auto steps = run_steps(ranks_command(static_cast<int>(ranks), "", exe, args));
    check(static_cast<int64_t>(steps.size()) == total,
          "bench ranks: " + std::to_string(ranks) + " ranks recorded " +
              std::to_string(steps.size()) + " steps, not " + std::to_string(total));
    double t = 0, comm = 0, roll = 0, train = 0, bytes = 0;
    for (int64_t i = o.warmup; i < o.warmup + o.steps; ++i) {
      const Json& s = steps[static_cast<size_t>(i)];
      t += scalar(s, metric::kTimeTotal);
      comm += scalar(s, metric::kTimeCommunication);
      roll += scalar(s, metric::kRolloutTps);
      train += scalar(s, metric::kTrainTps);
      bytes += scalar(s, metric::kCommBytes);
    }
    const double n = static_cast<double>(o.steps);
    t /= n;
    if (base == 0) base = t * static_cast<double>(ranks);  // the first row's rank-seconds
    const double speedup = base / t, efficiency = speedup / static_cast<double>(ranks);
    std::printf("%6lld %10.3f %8.2fx %10.0f%% %14.0f %14.0f %9.1f%% %12.0f\n",
                static_cast<long long>(ranks), t, speedup, 100 * efficiency, roll / n, train / n,
                100 * comm / n / t, bytes / n);
    Json row;
    row["ranks"] = ranks;
    row["step_seconds"] = number(t);
    row["speedup"] = number(speedup);
    row["efficiency"] = number(efficiency);
    row["rollout_tokens_per_s"] = number(roll / n);
    row["training_tokens_per_s"] = number(train / n);
    row["communication_seconds"] = number(comm / n);
    row["bytes_per_step"] = number(bytes / n);
    rows.push_back(row);
    std::fflush(stdout);
  }
  std::printf(
      "speed-up: against %lld rank(s) in this run (same global batch); efficiency = "
      "speed-up / ranks × the first row's ranks\n",
      static_cast<long long>(o.ranks.front()));
  Json run;
  run["preset"] = o.preset;
  run["cores"] = static_cast<int64_t>(std::thread::hardware_concurrency());
  run["rows"] = Json(std::move(rows));
  return run;
}

}  // namespace fp8rl::cli::bench
