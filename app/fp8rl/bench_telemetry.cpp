// fp8rl bench telemetry: what a worker's telemetry (JSON, PUB socket, run store) costs per step
// of the demo preset, against the step itself.
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "bench.hpp"
#include "core/error.hpp"
#include "ipc/endpoints.hpp"
#include "ipc/telemetry_publisher.hpp"
#include "rl/run_loop.hpp"
#include "store/run_store.hpp"

namespace fp8rl::cli::bench {
namespace {

// A client's SUB socket connected to the bench's PUB socket, drained on its own thread (as the
// studio's receive thread does), counting the step and histogram messages it receives.
class DrainingSubscriber {
 public:
  // The topic of the connection probes (not counted as received).
  static constexpr const char* kProbeTopic = "bench-probe";

  DrainingSubscriber(void* ctx, const std::string& endpoint) {
    sub_ = zmq_socket(ctx, ZMQ_SUB);
    check(sub_ != nullptr, std::string("zmq_socket: ") + zmq_strerror(zmq_errno()));
    const int linger = 0;
    zmq_setsockopt(sub_, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sub_, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_connect(sub_, endpoint.c_str()) != 0) {
      zmq_close(sub_);
      throw Error("cannot connect a subscriber to " + endpoint + ": " + zmq_strerror(zmq_errno()));
    }
    thread_ = std::thread([this] { drain(); });
  }
  ~DrainingSubscriber() {
    stop_ = true;
    thread_.join();
    zmq_close(sub_);
  }
  DrainingSubscriber(const DrainingSubscriber&) = delete;
  DrainingSubscriber& operator=(const DrainingSubscriber&) = delete;

  // Whether a probe has arrived (the subscription reached the PUB socket).
  bool connected() const { return probes_ > 0; }
  // Messages received other than probes.
  int64_t received() const { return received_; }

 private:
  void drain() {
    zmq_msg_t m;
    while (!stop_) {
      zmq_pollitem_t items[] = {{sub_, 0, ZMQ_POLLIN, 0}};
      if (zmq_poll(items, 1, 20) <= 0) continue;
      std::string topic;
      int more = 0;
      do {  // one [topic][payload] message
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sub_, ZMQ_DONTWAIT) < 0) {
          zmq_msg_close(&m);
          break;
        }
        if (topic.empty())
          topic.assign(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
      } while (more);
      if (topic == kProbeTopic)
        ++probes_;
      else if (!topic.empty())
        ++received_;
    }
  }

  void* sub_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> probes_{0}, received_{0};
};

// Removes a directory tree when it goes out of scope.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

// Runs the demo preset's RL steps as a worker does (GrpoRun::next), and after each the worker's
// telemetry: RunStore::record_step into a temporary database, encode_step_telemetry and
// send_telemetry on a PUB socket with a subscriber connected and draining. Telemetry is timed
// serially here; in a worker the sending happens on the serving thread instead.
Json bench_telemetry(Backend& be, int64_t warmup, int64_t steps) {
  RunConfig cfg = RunConfig::load("demo", "", {"sft.steps=0"});
  TempDir tmp{std::filesystem::temp_directory_path() /
              ("fp8rl-bench-telemetry-" + std::to_string(getpid()))};
  std::filesystem::create_directories(tmp.path);
  RunStore store((tmp.path / "runs.sqlite").string());
  GrpoRun run(cfg, be);
  const std::string precision = run.model().precision().summary();
  const int64_t run_id = store.create_run("bench telemetry", "demo", cfg.doc, precision);

  void* ctx = zmq_ctx_new();
  struct ContextGuard {
    void* ctx;
    ~ContextGuard() { zmq_ctx_term(ctx); }
  } ctx_guard{ctx};
  void* pub = zmq_socket(ctx, ZMQ_PUB);
  check(pub != nullptr, std::string("zmq_socket: ") + zmq_strerror(zmq_errno()));
  struct SocketGuard {
    void* s;
    ~SocketGuard() { zmq_close(s); }
  } pub_guard{pub};
  const int linger = 0;
  zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
  const std::string endpoint =  // as a worker's default
      ipc::private_endpoints("fp8rl-bench-" + std::to_string(getpid())).telemetry;
  if (zmq_bind(pub, endpoint.c_str()) != 0)
    throw Error("cannot bind " + endpoint + ": " + zmq_strerror(zmq_errno()));
  struct FileGuard {
    std::string ep;
    ~FileGuard() { ipc::remove_socket_file(ep); }
  } file_guard{endpoint};
  DrainingSubscriber sub(ctx, endpoint);
  // PUB drops everything until the subscription has arrived: probe until it has.
  const auto t_connect = Clock::now();
  while (!sub.connected()) {
    check(seconds_since(t_connect) < 10, "the subscriber did not connect within 10 s");
    zmq_send(pub, DrainingSubscriber::kProbeTopic, std::strlen(DrainingSubscriber::kProbeTopic),
             ZMQ_DONTWAIT);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "demo preset: %lld RL steps timed after %lld warm-up steps (%lld prompts x %lld responses, "
      "validation every %lld steps)\n",
      static_cast<long long>(steps), static_cast<long long>(warmup),
      static_cast<long long>(cfg.prompts_per_step), static_cast<long long>(cfg.group_size),
      static_cast<long long>(cfg.validation_every));
  struct Costs {
    double step = 0, store = 0, encode = 0, send = 0, total = 0;
  };
  Costs sum, worst;
  int64_t sent = 0;
  size_t bytes = 0;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    check(!run.finished(), "the demo preset ran out of steps");
    Costs c;
    auto t0 = Clock::now();
    const StepRecord r = run.next();
    c.step = seconds_since(t0);
    // The worker's order: store, encode, send.
    t0 = Clock::now();
    store.record_step(run_id, r);
    c.store = seconds_since(t0);
    t0 = Clock::now();
    const std::vector<ipc::TelemetryMessage> messages =
        ipc::encode_step_telemetry(r, run_id, precision);
    c.encode = seconds_since(t0);
    t0 = Clock::now();
    const size_t b = ipc::send_telemetry(pub, messages);
    c.send = seconds_since(t0);
    c.total = c.store + c.encode + c.send;
    sent += static_cast<int64_t>(messages.size());
    if (i < warmup) continue;
    bytes += b;
    sum.step += c.step, sum.store += c.store, sum.encode += c.encode, sum.send += c.send;
    sum.total += c.total;
    worst.step = std::max(worst.step, c.step), worst.store = std::max(worst.store, c.store);
    worst.encode = std::max(worst.encode, c.encode), worst.send = std::max(worst.send, c.send);
    worst.total = std::max(worst.total, c.total);
  }
  // Everything sent should arrive (the subscriber keeps up; PUB drops only beyond its HWM).
  const auto t_drain = Clock::now();
  while (sub.received() < sent && seconds_since(t_drain) < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

  const double n = static_cast<double>(steps);
  const double per_step_messages = static_cast<double>(sent) / static_cast<double>(warmup + steps);
  std::printf("%-44s %10s %10s %10s\n", "per RL step", "mean ms", "max ms", "vs step");
  Json::Array rows;
  auto row = [&](const std::string& name, double total, double max) {
    std::printf("%-44s %10.3f %10.3f %9.2f%%\n", name.c_str(), total / n * 1e3, max * 1e3,
                100.0 * total / sum.step);
    Json r;
    r["name"] = name;
    r["mean_ms"] = number(total / n * 1e3);
    r["max_ms"] = number(max * 1e3);
    r["share_of_step"] = number(total / sum.step);
    rows.push_back(r);
  };
  row("step: GrpoRun::next (baseline)", sum.step, worst.step);
  row("telemetry: store (RunStore::record_step)", sum.store, worst.store);
  char name[64];
  std::snprintf(name, sizeof name, "telemetry: encode JSON (%.0f messages)", per_step_messages);
  row(name, sum.encode, worst.encode);
  std::snprintf(name, sizeof name, "telemetry: send on PUB (%.1f KB)",
                static_cast<double>(bytes) / n / 1024.0);
  row(name, sum.send, worst.send);
  row("telemetry: total", sum.total, worst.total);
  std::printf("subscriber received %lld of %lld messages\n", static_cast<long long>(sub.received()),
              static_cast<long long>(sent));
  const double overhead = 100.0 * sum.total / sum.step;
  std::printf("telemetry overhead: %.3f%% of the step time: %s (target < 1%%)\n\n", overhead,
              overhead < 1.0 ? "PASS" : "FAIL");
  Json out = backend_json(be);
  out["warmup"] = warmup;
  out["steps"] = steps;
  out["messages_sent"] = sent;
  out["messages_received"] = sub.received();
  out["rows"] = Json(rows);
  Json target;
  target["name"] = "telemetry share of the step";
  target["value"] = number(overhead / 100.0);
  target["relation"] = "<";
  target["target"] = 0.01;
  target["pass"] = overhead < 1.0;
  out["targets"] = Json(Json::Array{target});
  return out;
}

}  // namespace fp8rl::cli::bench
