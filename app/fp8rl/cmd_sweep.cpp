// fp8rl sweep: runs the points of a sweep file (docs/sweeps.md) as `fp8rl train` processes, a
// few at a time, each recorded in the run store with its sweep and axis values. The queue is
// the store: a sweep interrupted any way (Ctrl-C, kill -9 of this process, a reboot) continues
// where it stood when `fp8rl sweep FILE` (or `--resume ID`) runs again — finished points are
// never run again, a run still going is waited for, a crashed or stopped one continues from its
// checkpoint (or starts afresh without one).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "groups/run_groups.hpp"
#include "groups/sweep_progress.hpp"
#include "rl/sweep.hpp"
#include "run_db.hpp"
#include "store/run_store.hpp"

namespace fp8rl::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_signal{0};
void on_signal(int s) {
  g_signal = s;
}

constexpr int kAttemptsPerPoint = 3;  // starts per point in one runner before it gives up

double now_unix() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string self_exe() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("fp8rl") : p.string();
}

// Starts argv with stdout and stderr appended to log, at the given niceness, with
// FP8RL_THREADS=threads unless the environment sets it. Returns the pid.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, int nice_level,
            int threads) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error("cannot start " + argv[0] + ": fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, STDIN_FILENO);
    if (threads > 0 && !std::getenv("FP8RL_THREADS"))
      setenv("FP8RL_THREADS", std::to_string(threads).c_str(), 1);
    if (nice_level > 0) setpriority(PRIO_PROCESS, 0, nice_level);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// The default number of runs at once: one on a GPU (runs would share it), else one per core.
int64_t default_concurrency(const std::vector<RunStore::SweepPoint>& points) {
  bool gpu = false;
  for (const auto& p : points) {
    const std::string backend =
        p.config.is_object() && p.config.contains("backend") && p.config.at("backend").is_string()
            ? p.config.at("backend").as_string()
            : "auto";
    if (backend == "cuda" || (backend == "auto" && cuda_module_status().usable)) gpu = true;
  }
  if (gpu) return 1;
  const unsigned cores = std::thread::hardware_concurrency();
  return std::max<int64_t>(1, cores);
}

struct Child {
  pid_t pid = 0;
  int64_t point = 0;
  std::string log;
};

class Runner {
 public:
  Runner(RunStore& store, std::string db, int64_t sweep, int64_t concurrency, int nice_level,
         bool retry_failed)
      : store_(store),
        db_(std::move(db)),
        sweep_(sweep),
        concurrency_(concurrency),
        nice_(nice_level),
        retry_failed_(retry_failed),
        tty_(isatty(STDERR_FILENO)) {}

  int run();

 private:
  void reap();
  void start(const RunStore::SweepPoint& p, const std::optional<RunStore::RunRow>& run);
  void print(const SweepProgress& progress, bool force);

  RunStore& store_;
  std::string db_;
  int64_t sweep_;
  int64_t concurrency_;
  int nice_;
  bool retry_failed_;
  bool tty_;
  std::string name_;
  std::map<pid_t, Child> children_;
  std::map<int64_t, int> starts_;     // point → starts by this runner
  std::set<int64_t> given_up_;        // points whose starts kept failing
  std::set<int64_t> user_stopped_;    // points whose run a client stopped (the studio's Stop)
  std::set<int64_t> retried_failed_;  // failed points started again (--retry-failed)
  std::string last_line_;
  double last_print_ = 0;
};

void Runner::start(const RunStore::SweepPoint& p, const std::optional<RunStore::RunRow>& run) {
  const fs::path logs = fs::path(db_).parent_path() / "logs";
  create_private_directories(logs.string());
  const int attempt = ++starts_[p.point];
  Child c;
  c.point = p.point;
  c.log = (logs / ("sweep-" + std::to_string(sweep_) + "-point-" + std::to_string(p.point) + "-" +
                   std::to_string(p.attempts + attempt) + ".log"))
              .string();
  // Each point runs as a worker (on the user's private sockets): the studio links to it, shows
  // it live and can pause, stop and edit it like any run. It reads its configuration from the
  // point's row.
  std::vector<std::string> argv = {self_exe(), "worker", "--db", db_};
  // A crashed or stopped run with a checkpoint continues (the same run); anything else starts
  // the point's run afresh.
  const bool resume = run && !run->checkpoint_dir.empty() && run->checkpoint_step &&
                      run->status != run_status::kFailed && fs::exists(run->checkpoint_dir);
  if (resume)
    argv.insert(argv.end(), {"--resume", std::to_string(run->id)});
  else
    argv.insert(argv.end(),
                {"--sweep-point", std::to_string(sweep_) + ":" + std::to_string(p.point)});
  const int threads = static_cast<int>(std::max<int64_t>(
      1, static_cast<int64_t>(std::thread::hardware_concurrency()) / concurrency_));
  c.pid = spawn(argv, c.log, nice_, threads);
  if (tty_ && !last_line_.empty()) std::fputc('\n', stderr);
  std::fprintf(stderr, "fp8rl sweep: %s point %lld (%s)%s, log %s\n",
               resume ? "continuing" : "starting", static_cast<long long>(p.point), p.name.c_str(),
               resume ? (" from run " + std::to_string(run->id) + "'s checkpoint").c_str() : "",
               c.log.c_str());
  last_line_.clear();
  children_[c.pid] = c;
}

void Runner::reap() {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = children_.find(pid);
    if (it == children_.end()) continue;
    const Child c = it->second;
    children_.erase(it);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    // A run that stopped while this runner was not stopping was stopped by a client (the
    // studio's Stop): this runner leaves it; the next `fp8rl sweep` continues it.
    if (code == 0 && g_signal == 0)
      for (const auto& p : store_.sweep_points(sweep_))
        if (p.point == c.point && p.run_id)
          if (const auto r = store_.find_run(*p.run_id); r && r->status == run_status::kStopped) {
            user_stopped_.insert(c.point);
            if (tty_) std::fputc('\n', stderr);
            std::fprintf(stderr,
                         "fp8rl sweep: point %lld's run %lld was stopped by a client: left as it "
                         "is (the next `fp8rl sweep` continues it)\n",
                         static_cast<long long>(c.point), static_cast<long long>(r->id));
            last_line_.clear();
          }
    if (code != 0 && code != 130 && g_signal == 0) {
      if (tty_) std::fputc('\n', stderr);
      std::fprintf(stderr, "fp8rl sweep: point %lld exited with code %d (log %s)\n",
                   static_cast<long long>(c.point), code, c.log.c_str());
      last_line_.clear();
      if (starts_[c.point] >= kAttemptsPerPoint) given_up_.insert(c.point);
    }
  }
}

void Runner::print(const SweepProgress& p, bool force) {
  const int width = 24;
  const int filled = p.total > 0 ? static_cast<int>(width * (p.done + p.failed) / p.total) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  const std::string line =
      "[" + bar + "] sweep " + std::to_string(sweep_) + " " + name_ + ": " + p.summary();
  const double now = now_unix();
  if (tty_) {
    if (line != last_line_ || force) std::fprintf(stderr, "\r%s\033[K", line.c_str());
  } else if (line == last_line_) {
    return;
  } else if (force ||
             line.substr(0, line.find(" · ETA")) !=
                 last_line_.substr(0, last_line_.find(" · ETA")) ||
             now - last_print_ > 60) {
    std::fprintf(stderr, "%s\n", line.c_str());
    last_print_ = now;
  }
  last_line_ = line;
}

int Runner::run() {
  const auto sweep = store_.find_sweep(sweep_);
  check(sweep.has_value(), "no sweep " + std::to_string(sweep_) + " in " + db_);
  name_ = sweep->name;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  bool stopping = false;
  double last_beat = 0;
  while (true) {
    reap();
    if (g_signal != 0 && !stopping) {
      stopping = true;
      // The runs stop at their next step boundary with a checkpoint (status stopped); the next
      // `fp8rl sweep` continues them.
      for (const auto& [pid, c] : children_) kill(pid, SIGINT);
      if (tty_) std::fputc('\n', stderr);
      std::fprintf(stderr, "fp8rl sweep: stopping: %zu run(s) finish their step and checkpoint\n",
                   children_.size());
      last_line_.clear();
    }
    // Runs whose process is gone (this host) are crashed; the store says so for every reader.
    auto points = store_.sweep_points(sweep_);
    std::map<int64_t, RunStore::RunRow> runs;
    bool gone = false;
    for (const auto& p : points)
      if (p.run_id)
        if (auto r = store_.find_run(*p.run_id)) {
          gone = gone || run_process_gone(*r);
          runs.emplace(r->id, std::move(*r));
        }
    if (gone) {
      mark_crashed_runs(db_);
      runs.clear();
      for (const auto& p : points)
        if (p.run_id)
          if (auto r = store_.find_run(*p.run_id)) runs.emplace(r->id, std::move(*r));
    }
    std::vector<RunStore::RunRow> rows;
    for (auto& [id, r] : runs) rows.push_back(r);
    const double now = now_unix();
    SweepProgress progress = sweep_progress(*sweep, points, rows, now, concurrency_);

    std::set<int64_t> ours;
    for (const auto& [pid, c] : children_) ours.insert(c.point);
    int64_t busy = static_cast<int64_t>(ours.size());
    std::vector<size_t> waiting;  // interrupted first, then queued, each in point order
    for (PointState want : {PointState::interrupted, PointState::queued, PointState::failed})
      for (size_t i = 0; i < points.size(); ++i) {
        const PointState s = progress.states[i];
        const int64_t pt = points[i].point;
        if (s != want || ours.count(pt) || given_up_.count(pt) || user_stopped_.count(pt)) continue;
        if (s == PointState::failed && (!retry_failed_ || retried_failed_.count(pt))) continue;
        waiting.push_back(i);
      }
    // Adopted runs (still running from an earlier runner) take slots too.
    for (size_t i = 0; i < points.size(); ++i)
      if (progress.states[i] == PointState::running && !ours.count(points[i].point)) ++busy;
    if (!stopping) {
      for (size_t i : waiting) {
        if (busy >= concurrency_) break;
        const auto& p = points[i];
        if (progress.states[i] == PointState::failed) retried_failed_.insert(p.point);
        std::optional<RunStore::RunRow> run;
        if (p.run_id && runs.count(*p.run_id)) run = runs.at(*p.run_id);
        if (progress.states[i] == PointState::failed) run.reset();  // afresh
        start(p, run);
        ++busy;
      }
    }
    // A point just started has no run row yet: show it as running.
    for (size_t i = 0; i < points.size(); ++i)
      if (ours.count(points[i].point) && progress.states[i] != PointState::running &&
          progress.states[i] != PointState::done) {
        --(progress.states[i] == PointState::queued        ? progress.queued
           : progress.states[i] == PointState::interrupted ? progress.interrupted
                                                           : progress.failed);
        ++progress.running;
        progress.states[i] = PointState::running;
      }
    print(progress, false);
    if (now - last_beat >= 1) {
      try {
        store_.sweep_heartbeat(sweep_);
      } catch (const Error&) {
        // A locked database delays a heartbeat; the sweep goes on.
      }
      last_beat = now;
    }
    const bool adopted_running = progress.running > static_cast<int64_t>(children_.size());
    const bool startable = std::any_of(waiting.begin(), waiting.end(),
                                       [&](size_t i) { return !given_up_.count(points[i].point); });
    if (children_.empty() && (stopping || (!adopted_running && !startable))) {
      print(progress, true);
      if (tty_) std::fputc('\n', stderr);
      const bool ended = progress.complete();
      store_.release_sweep(sweep_, ended);
      const std::string what = stopping ? "stopped" : ended ? "complete" : "incomplete";
      std::fprintf(stdout, "sweep %lld %s: %s\n", static_cast<long long>(sweep_), what.c_str(),
                   progress.summary().c_str());
      if (!given_up_.empty())
        std::fprintf(stdout, "gave up on %zu point(s) after %d failed starts each (see the logs)\n",
                     given_up_.size(), kAttemptsPerPoint);
      if (!user_stopped_.empty())
        std::fprintf(stdout,
                     "%zu point(s) stopped by a client; `fp8rl sweep` again continues them\n",
                     user_stopped_.size());
      if (stopping) return 130;
      return progress.failed > 0 || !given_up_.empty() ? 1 : 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

void print_points(const std::vector<SweepPointSpec>& points) {
  for (const auto& p : points) {
    std::string sets;
    for (const auto& s : p.sets) sets += " --set " + s;
    std::printf("%4lld  %s\n      %s\n", static_cast<long long>(p.index), p.name.c_str(),
                sets.c_str());
  }
}

int print_status(RunStore& store, std::optional<int64_t> only) {
  const auto runs = store.list_runs();
  const auto sweeps = store.list_sweeps();
  if (sweeps.empty()) std::printf("no sweeps in %s\n", store.path().c_str());
  for (const auto& s : sweeps) {
    if (only && s.id != *only) continue;
    const auto points = store.sweep_points(s.id);
    const SweepProgress p = sweep_progress(s, points, runs, now_unix());
    std::printf(
        "sweep %lld %s: %s%s\n", static_cast<long long>(s.id), s.name.c_str(), p.summary().c_str(),
        s.runner_pid > 0 ? (" (runner pid " + std::to_string(s.runner_pid) + ")").c_str() : "");
    for (const auto& g : sweep_groups(s, points, runs)) {
      std::string ids;
      for (const auto& r : g.runs) ids += " " + std::to_string(r.id);
      std::printf("  group %s: %zu run(s)%s%s\n", g.label.c_str(), g.runs.size(),
                  g.queued ? (", " + std::to_string(g.queued) + " queued").c_str() : "",
                  ids.empty() ? "" : (" —" + ids).c_str());
    }
  }
  return 0;
}

}  // namespace

int cmd_sweep(const std::vector<std::string>& args) {
  const Args a(args, {"db", "resume", "concurrency", "nice", "status"},
               {"help", "check", "list", "new", "retry-failed", "all-status"});
  const auto& pos = a.positional();
  const bool status = a.has("status") || a.flag("all-status");
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl sweep FILE [--db PATH] [--concurrency N] [--nice N] [--new]\n"
        "                        [--retry-failed] [--check] [--list]\n"
        "       fp8rl sweep --resume SWEEP_ID [--db PATH] [--concurrency N]\n"
        "       fp8rl sweep --status SWEEP_ID | --all-status [--db PATH]\n\n"
        "Runs every point of a sweep file (docs/sweeps.md: a base preset or config, --set\n"
        "overrides, axes of seeds, precision variants or any setting, as a product or a list)\n"
        "as `fp8rl train` processes, --concurrency at a time (default: the sweep file's, else\n"
        "one per core, one on a GPU), each recorded in the run database with its sweep and axis\n"
        "values. Every point's configuration is validated before anything starts. Progress on\n"
        "stderr: done / running / queued and the time left.\n"
        "Interrupted (Ctrl-C, or this process killed), the same command continues the sweep:\n"
        "finished points are not run again, runs still going are waited for, a crashed or\n"
        "stopped run continues from its checkpoint (checkpoint.every) or starts again.\n"
        "  --check   validate the file and say how many points it makes; start nothing\n"
        "  --list    also list every point's run name and overrides\n"
        "  --new     start the sweep again as a new sweep even when it ran before\n"
        "  --retry-failed  start failed points again (once each)\n"
        "  --nice N  the runs' niceness (default 10)\n"
        "Exit code: 0 when every point finished, 1 when some failed, 130 when stopped.\n");
  need(!pos.empty() || a.has("resume") || status,
       "needs a sweep file (e.g. resources/sweeps/demo-precision.yaml), --resume SWEEP_ID or "
       "--status SWEEP_ID");
  a.max_positional(1);
  const std::string db = a.get("db", default_db_path());
  if (status) {
    check(fs::exists(db), "no run database at " + db);
    RunStore store(db, /*read_only=*/true);
    std::optional<int64_t> only;
    if (a.has("status")) only = parse_run_id(a.get("status", ""), "--status");
    return print_status(store, only);
  }
  int64_t concurrency = 0;
  if (a.has("concurrency")) {
    concurrency = a.get_int("concurrency", 0);
    check(concurrency >= 1, "--concurrency must be at least 1");
  }
  const int nice_level = a.get_int("nice", 10);

  if (a.has("resume")) {
    const int64_t id = parse_run_id(a.get("resume", ""), "--resume");
    RunStore store(db);
    const auto sweep = store.find_sweep(id);
    check(sweep.has_value(), "no sweep " + std::to_string(id) + " in " + db);
    if (const std::string who = store.claim_sweep(id); !who.empty()) throw Error(who);
    if (concurrency == 0) concurrency = sweep->concurrency;
    std::fprintf(stderr, "fp8rl sweep: resuming sweep %lld (%s) in %s\n",
                 static_cast<long long>(id), sweep->name.c_str(), db.c_str());
    Runner runner(store, db, id, concurrency, nice_level, a.flag("retry-failed"));
    return runner.run();
  }

  // Everything is checked before anything starts or is recorded.
  const SweepSpec spec = SweepSpec::load(pos[0]);
  const std::vector<SweepPointSpec> points = spec.expand();
  std::string shape;
  for (const auto& name : spec.axis_names()) {
    size_t n = 0;
    for (const auto& x : spec.axes)
      if (x.name == name) n = x.values.size();
    if (n == 0) n = spec.point_count;
    shape += (shape.empty() ? "" : " × ") + name + " (" + std::to_string(n) + ")";
  }
  if (a.flag("check") || a.flag("list")) {
    std::printf("sweep '%s': %zu points: %s; replicate axis: %s; every configuration valid\n",
                spec.name.c_str(), points.size(), shape.c_str(),
                spec.replicate.empty() ? "none" : spec.replicate.c_str());
    if (a.flag("list")) print_points(points);
    return 0;
  }
  const std::string hash = SweepSpec::hash(spec.name, points);
  RunStore store(db);
  std::vector<RunStore::SweepPoint> rows;
  for (const auto& p : points) {
    RunStore::SweepPoint r;
    r.point = p.index;
    r.name = p.name;
    r.axis_values = p.axis_json();
    r.config = p.config.doc;
    rows.push_back(std::move(r));
  }
  if (concurrency == 0)
    concurrency = spec.concurrency > 0 ? spec.concurrency : default_concurrency(rows);
  // The same file run again continues its sweep.
  std::optional<RunStore::SweepRow> same;
  if (!a.flag("new"))
    for (const auto& s : store.list_sweeps())
      if (s.spec_hash == hash && s.name == spec.name) same = s;
  int64_t id = 0;
  if (same && same->ended_at) {
    std::printf(
        "sweep %lld (%s, the same points) is complete: nothing to do "
        "(--new starts it again as a new sweep)\n",
        static_cast<long long>(same->id), same->name.c_str());
    return 0;
  }
  if (same) {
    id = same->id;
    std::fprintf(stderr, "fp8rl sweep: continuing sweep %lld (%s): %zu points in %s\n",
                 static_cast<long long>(id), spec.name.c_str(), points.size(), db.c_str());
  } else {
    RunStore::SweepRow row;
    row.name = spec.name;
    row.source = fs::absolute(pos[0]).lexically_normal().string();
    row.spec = spec.doc;
    row.spec_hash = hash;
    row.axes = spec.axis_names();
    row.replicate = spec.replicate;
    row.concurrency = concurrency;
    id = store.create_sweep(row, rows);
    std::fprintf(stderr, "fp8rl sweep: sweep %lld (%s): %zu points, %s, %lld at a time, in %s\n",
                 static_cast<long long>(id), spec.name.c_str(), points.size(), shape.c_str(),
                 static_cast<long long>(concurrency), db.c_str());
  }
  if (const std::string who = store.claim_sweep(id); !who.empty()) throw Error(who);
  Runner runner(store, db, id, concurrency, nice_level, a.flag("retry-failed"));
  return runner.run();
}

}  // namespace fp8rl::cli
