// fp8rl replay: plays recorded runs' telemetry as live workers, for measuring the studio with
// more live runs than the machine could train (docs/benchmarks.md). Each replayed run is
// recorded in the run database as a running run with its own control (ROUTER) and telemetry
// (PUB) sockets, as a worker records it, so the studio attaches to it like to any worker: it
// answers hello and status, heartbeats twice a second, and publishes the source run's steps
// (scalars, histograms, samples; cycled, renumbered) at the recorded pace or --rate steps a
// second, recording them in the database as it goes (one transaction per run every second, on a
// thread of its own).
#include <signal.h>
#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "args.hpp"
#include "commands.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "ipc/endpoints.hpp"
#include "ipc/protocol.hpp"
#include "ipc/telemetry_publisher.hpp"
#include "ipc/zmq_frames.hpp"
#include "run_db.hpp"
#include "store/run_store.hpp"

namespace fp8rl::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// The source run's steps as the run loop made them (RL steps only), from the store.
std::vector<StepRecord> read_steps(RunStore& store, int64_t run) {
  std::map<int64_t, StepRecord> steps;
  for (const auto& key : store.scalar_keys(run))
    for (const auto& p : store.scalar_series(run, key)) {
      if (p.step <= 0) continue;
      StepRecord& r = steps[p.step];
      r.step = p.step;
      r.phase = "rl";
      r.wall_seconds = p.wall;
      r.scalars[key] = p.value;
    }
  for (const auto& name : store.histogram_names(run))
    for (auto& [step, h] : store.histogram_series(run, name))
      if (auto it = steps.find(step); it != steps.end())
        it->second.histograms.push_back({name, std::move(h)});
  for (auto& [step, s] : store.samples(run, -1))
    if (auto it = steps.find(step); it != steps.end()) it->second.samples.push_back(std::move(s));
  std::vector<StepRecord> out;
  for (auto& [step, r] : steps) out.push_back(std::move(r));
  return out;
}

void* bind(void* ctx, int type, std::string* endpoint) {
  void* s = zmq_socket(ctx, type);
  const int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_bind(s, endpoint->c_str()) != 0)
    throw Error("cannot bind " + *endpoint + ": " + zmq_strerror(zmq_errno()));
  char buf[256];
  size_t len = sizeof buf;
  zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, buf, &len);
  *endpoint = buf;
  return s;
}

constexpr double kHeartbeatPeriod = 0.5;  // seconds, as a worker's

struct Replayed {
  int64_t run_id = 0;
  void* control = nullptr;
  void* pub = nullptr;
  std::string control_ep, telemetry_ep;
  int64_t next = 0;       // index of the next source step
  int64_t published = 0;  // steps published
  double due = 0;         // when the next step is due (steady seconds)
  double beat = 0;        // when the next heartbeat is due
};

// Writes the published steps to the store once a second, on its own thread, so that the
// publishing loop keeps its pace. (Written on the loop, each second's writes held every run's
// steps back for tens of milliseconds; then all hundred runs published at once, waking the
// studio's hundred link threads together: a stall that independent workers never cause.)
class Recorder {
 public:
  explicit Recorder(RunStore& store) : store_(store), thread_([this] { loop(); }) {}
  ~Recorder() { finish(); }

  void add(int64_t run, StepRecord step) {
    std::lock_guard lock(mu_);
    pending_[run].push_back(std::move(step));
  }

  // Writes what is left and ends the thread; the store is the caller's again.
  void finish() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (bool last = false; !last;) {
      wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
      last = stop_;
      std::map<int64_t, std::vector<StepRecord>> batch = std::move(pending_);
      pending_.clear();
      lock.unlock();
      for (auto& [run, steps] : batch) {
        try {
          store_.record_steps(run, steps);
          steps.clear();
        } catch (const Error& e) {
          std::fprintf(stderr, "fp8rl replay: %s (kept for the next write)\n",
                       error_text(e).c_str());
        }
      }
      lock.lock();
      for (auto& [run, steps] : batch)  // unwritten: before what came meanwhile
        if (!steps.empty()) {
          auto& p = pending_[run];
          p.insert(p.begin(), std::make_move_iterator(steps.begin()),
                   std::make_move_iterator(steps.end()));
        }
    }
  }

  RunStore& store_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::map<int64_t, std::vector<StepRecord>> pending_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace

int cmd_replay(const std::vector<std::string>& args) {
  const Args a(args, {"db", "source-db", "source-run", "runs", "rate", "seconds", "nice", "name"},
               {"help", "no-record"});
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl replay --source-run ID [--source-db PATH] [--db PATH] [--runs N]\n"
        "                    [--rate STEPS_PER_S] [--seconds S] [--nice N] [--no-record]\n\n"
        "Plays a recorded run's telemetry as N live workers (default 10), for measuring the\n"
        "studio with more live runs than this machine could train. Each replayed run is\n"
        "recorded in --db as a running run with its own control and telemetry sockets (the\n"
        "studio attaches to it as to a worker; it answers hello and status, nothing else),\n"
        "heartbeats, and publishes the source run's RL steps — scalars, histograms, samples —\n"
        "cycled and renumbered, at the pace they were recorded at (or --rate steps a second),\n"
        "recording them in --db as it goes unless --no-record. Ends after --seconds (default\n"
        "60) or on Ctrl-C; its runs are then finished.\n");
  need(a.has("source-run"), "needs --source-run ID, the recorded run to play");
  a.max_positional(0);
  const std::string db = a.get("db", default_db_path());
  const std::string source_db = a.get("source-db", db);
  const int64_t source_run = parse_run_id(a.get("source-run", ""), "--source-run");
  const int count = a.get_int("runs", 10);
  check(count >= 1 && count <= 1000, "--runs must be in 1..1000");
  const double seconds = a.get_number("seconds", 60);
  const bool record = !a.flag("no-record");
  if (a.has("nice")) {
    const int n = a.get_int("nice", 0);
    check(n >= 0 && n <= 19, "--nice must be in 0..19");
    errno = 0;
    (void)::nice(n);
    if (std::FILE* g = std::fopen("/proc/self/autogroup", "w")) {
      std::fprintf(g, "%d", n);
      std::fclose(g);
    }
  }
  std::vector<StepRecord> steps;
  Json config;
  std::string precision;
  {
    check(std::filesystem::exists(source_db), "no run database at " + source_db);
    RunStore src(source_db, /*read_only=*/true);
    const auto row = src.find_run(source_run);
    check(row.has_value(), "no run " + std::to_string(source_run) + " in " + source_db);
    config = row->config;
    precision = row->precision_summary;
    steps = read_steps(src, source_run);
    check(!steps.empty(), "run " + std::to_string(source_run) + " recorded no RL steps");
  }
  // The recorded pace, unless --rate.
  double rate = a.get_number("rate", 0);
  if (rate <= 0) {
    const double span = steps.back().wall_seconds - steps.front().wall_seconds;
    rate = span > 0 ? static_cast<double>(steps.size() - 1) / span : 2;
  }
  const double period = 1 / rate;

  RunStore store(db);
  void* ctx = zmq_ctx_new();
  std::vector<Replayed> runs(static_cast<size_t>(count));
  const std::string name = a.get("name", "replay");
  const double t0 = now_seconds();
  for (int i = 0; i < count; ++i) {
    Replayed& r = runs[static_cast<size_t>(i)];
    // As a worker's default sockets: files in the user's private runtime folder.
    const ipc::Endpoints own = ipc::private_endpoints("fp8rl-replay-" + std::to_string(getpid()) +
                                                      "-" + std::to_string(i));
    std::string control = own.control, telemetry = own.telemetry;
    r.control = bind(ctx, ZMQ_ROUTER, &control);
    r.pub = bind(ctx, ZMQ_PUB, &telemetry);
    r.control_ep = control;
    r.telemetry_ep = telemetry;
    Json cfg = config;
    if (cfg.is_object()) cfg["name"] = name + "-" + std::to_string(i);
    r.run_id = store.create_run(name + "-" + std::to_string(i), "replay", cfg, precision);
    store.set_endpoints(r.run_id, control, telemetry, "");
    // Spread the runs over one period so their steps do not arrive together, and their
    // heartbeats over half a second: independent workers beat out of step. (All at once, a
    // hundred link threads woke together twice a second and held the studio's cores ~15 ms.)
    r.due = t0 + period * static_cast<double>(i) / count;
    r.beat = t0 + kHeartbeatPeriod * static_cast<double>(i) / count;
  }
  std::fprintf(stderr, "fp8rl replay: %d runs of run %lld (%zu steps) at %.2f steps/s each, %s%s\n",
               count, static_cast<long long>(source_run), steps.size(), rate,
               record ? "recorded in " : "not recorded", record ? db.c_str() : "");
  std::printf("{\"runs\": [");
  for (int i = 0; i < count; ++i)
    std::printf("%s%lld", i ? ", " : "",
                static_cast<long long>(runs[static_cast<size_t>(i)].run_id));
  std::printf("], \"rate\": %.4f}\n", rate);
  std::fflush(stdout);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::vector<zmq_pollitem_t> items(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) items[i] = {runs[i].control, 0, ZMQ_POLLIN, 0};
  std::optional<Recorder> recorder;
  if (record) recorder.emplace(store);
  int64_t published = 0;
  while (!g_stop && now_seconds() - t0 < seconds) {
    zmq_poll(items.data(), static_cast<int>(items.size()), 5);
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      for (auto frames = ipc::recv_frames(runs[i].control); !frames.empty();
           frames = ipc::recv_frames(runs[i].control)) {
        if (frames.size() < 2) continue;
        std::string error, id;
        const auto req = ipc::parse_request(frames.back(), &error, &id);
        if (!req) {
          frames.back() = ipc::error_reply(id, error);
        } else if (req->command == ipc::Command::hello) {
          Json f;
          f["protocol"] = ipc::kProtocolVersion;
          f["worker_version"] = FP8RL_VERSION;
          f["backend"] = "replay";
          f["device"] = "run " + std::to_string(source_run) + " replayed";
          f["pid"] = static_cast<int64_t>(getpid());
          frames.back() = ipc::ok_reply(req->id, f);
        } else if (req->command == ipc::Command::status) {
          Json f;
          f["state"] = "running";
          f["step"] = runs[i].published;
          f["run_id"] = runs[i].run_id;
          frames.back() = ipc::ok_reply(req->id, f);
        } else {
          frames.back() = ipc::error_reply(req->id, "a replayed run cannot be steered");
        }
        ipc::send_frames(runs[i].control, frames);
      }
    }
    const double now = now_seconds();
    for (Replayed& r : runs) {
      while (now >= r.due) {
        StepRecord s = steps[static_cast<size_t>(r.next)];
        r.next = (r.next + 1) % static_cast<int64_t>(steps.size());
        s.step = ++r.published;
        s.wall_seconds = now - t0;
        ipc::send_telemetry(r.pub, ipc::encode_step_telemetry(s, r.run_id, precision));
        if (recorder) recorder->add(r.run_id, std::move(s));
        r.due += period;
        ++published;
      }
    }
    for (Replayed& r : runs) {
      if (now < r.beat) continue;
      // The next one in phase (beats missed while the process was held up are not sent late).
      r.beat += kHeartbeatPeriod * std::ceil((now - r.beat + 1e-9) / kHeartbeatPeriod);
      Json hb;
      hb["state"] = "running";
      hb["step"] = r.published;
      hb["run_id"] = r.run_id;
      hb["pid"] = static_cast<int64_t>(getpid());
      hb["time"] = unix_seconds();
      ipc::send_frames(r.pub, {ipc::kTopicHeartbeat, hb.dump()});
    }
  }
  if (recorder) recorder->finish();
  for (Replayed& r : runs) {
    store.set_status(r.run_id, run_status::kFinished);
    zmq_close(r.control);
    zmq_close(r.pub);
  }
  zmq_ctx_term(ctx);
  for (const Replayed& r : runs) {
    ipc::remove_socket_file(r.control_ep);
    ipc::remove_socket_file(r.telemetry_ep);
  }
  std::fprintf(stderr, "fp8rl replay: %lld steps published in %.0f s (%.1f steps/s in all)\n",
               static_cast<long long>(published), now_seconds() - t0,
               static_cast<double>(published) / std::max(1e-9, now_seconds() - t0));
  return 0;
}

}  // namespace fp8rl::cli
