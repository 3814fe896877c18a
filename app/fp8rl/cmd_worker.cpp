// fp8rl worker: serve one run over ZeroMQ (docs/protocol.md).
// fp8rl runs attach ID: follow a live run in the terminal.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "ipc/client.hpp"
#include "ipc/protocol.hpp"
#include "run_db.hpp"
#include "store/run_store.hpp"
#include "worker/worker.hpp"

namespace fp8rl::cli {
namespace {

std::atomic<bool> g_stop_signal{false};
void on_stop_signal(int) {
  g_stop_signal = true;
}

}  // namespace

int cmd_worker(const std::vector<std::string>& args) {
  const Args a(args,
               {"control", "telemetry", "db", "backend", "keys", "nice", "resume", "sweep-point"},
               {"help", "allow-remote", "no-db"});
  if (a.flag("help")) {
    std::puts(
        "usage: fp8rl worker [--control ENDPOINT] [--telemetry ENDPOINT] [--db PATH | --no-db]\n"
        "                    [--backend auto|cpu|cuda] [--allow-remote [--keys DIR]] [--nice N]\n"
        "                    [--resume RUN_ID | --sweep-point SWEEP:POINT]\n\n"
        "Binds a ROUTER control socket and a PUB telemetry socket (default: socket files in\n"
        "this user's private folder, $XDG_RUNTIME_DIR/fp8rl or /tmp/fp8rl-<uid>, which no other\n"
        "account can open; tcp://127.0.0.1:* picks a free port), prints one JSON line\n"
        "{\"control\", \"telemetry\", \"pid\"} and serves until its run stops or finishes.\n"
        "Sockets other accounts could reach (loopback tcp, abstract ipc://@name) use ZeroMQ\n"
        "CURVE with this user's keys; binding beyond loopback also needs --allow-remote. With\n"
        "CURVE only clients whose key this install authorized (fp8rl keys authorize) get an\n"
        "answer, and the JSON line adds \"server_key\", the worker's public key, which clients\n"
        "need. Keys: --keys DIR, $FP8RL_KEYS or ~/.config/fp8rl/keys. --nice N lowers\n"
        "the worker's CPU priority by N (0-19; the studio starts its workers at 10).\n"
        "--resume RUN_ID and --sweep-point SWEEP:POINT start a run at once, as a client's start\n"
        "{\"resume\"} or {\"sweep_point\"} would: continue a recorded run from its checkpoint, or\n"
        "run a sweep's point from the configuration the sweep stored (what `fp8rl sweep` does,\n"
        "so that every run of a sweep can be watched, paused and edited like any other).\n"
        "Started by `mpirun -np N`, rank 0 is the worker and the run is data-parallel over the\n"
        "N ranks (docs/distributed.md); the other ranks bind nothing.\n"
        "Protocol: docs/protocol.md.");
    return 0;
  }
  a.max_positional(0);
  if (a.has("nice")) {
    const int n = a.get_int("nice", 0);
    check(n >= 0 && n <= 19, "--nice " + std::to_string(n) + " is not in 0..19");
    errno = 0;
    check(::nice(n) != -1 || errno == 0, std::string("--nice: ") + std::strerror(errno));
    // With autogrouping (Linux' default for desktops) a process started in a session of its own
    // — as the studio starts workers — competes as a group, whatever its nice value: lower the
    // group's too. Where there is no autogroup file, the process nice above is what counts.
    if (std::FILE* g = std::fopen("/proc/self/autogroup", "w")) {
      std::fprintf(g, "%d", n);
      std::fclose(g);
    }
  }
  // A client going away must never kill the worker (no SIGPIPE on broken connections).
  std::signal(SIGPIPE, SIG_IGN);
  // Under mpirun (docs/distributed.md) rank 0 is the worker; the others follow its run and
  // bind nothing.
  Communicator& comm = world();
  if (comm.rank() > 0) return follow_rank0(comm);
  ipc::WorkerOptions opt;
  opt.comm = &comm;
  opt.control = a.get("control", "");
  opt.telemetry = a.get("telemetry", "");
  opt.db_path = a.flag("no-db") ? "" : a.get("db", default_db_path());
  opt.allow_remote = a.flag("allow-remote");
  opt.keys_dir = a.get("keys", "");
  opt.backend = a.get("backend", "auto");
  check(!(a.has("resume") && a.has("sweep-point")), "give --resume or --sweep-point, not both");
  if (a.has("resume")) {
    opt.start = Json(Json::Object{});
    opt.start["resume"] = parse_run_id(a.get("resume", ""), "--resume");
  } else if (a.has("sweep-point")) {
    const std::string sp = a.get("sweep-point", "");
    const size_t colon = sp.find(':');
    long long point = -1;
    check(colon != std::string::npos && parse_integer(sp.substr(colon + 1), &point) && point >= 0,
          "--sweep-point '" + sp + "' is not SWEEP:POINT (two whole numbers)");
    opt.start = Json(Json::Object{});
    opt.start["sweep_point"]["sweep"] = parse_run_id(sp.substr(0, colon), "--sweep-point");
    opt.start["sweep_point"]["point"] = static_cast<int64_t>(point);
  }
  // SIGINT / SIGTERM (a sweep's runner stopping, Ctrl-C): stop at the next step boundary with
  // a checkpoint, as a client's stop would. Under mpirun SIGTERM ends the job (the communicator).
  opt.stop_signal = &g_stop_signal;
  std::signal(SIGINT, on_stop_signal);
  if (comm.size() == 1) std::signal(SIGTERM, on_stop_signal);
  ipc::Worker worker(opt);
  Json hello;
  hello["control"] = worker.control_endpoint();
  hello["telemetry"] = worker.telemetry_endpoint();
  if (!worker.server_key().empty()) hello["server_key"] = worker.server_key();
  hello["pid"] = static_cast<int64_t>(getpid());
  hello["protocol"] = ipc::kProtocolVersion;
  std::printf("%s\n", hello.dump().c_str());
  std::fflush(stdout);
  return worker.serve();
}

int cmd_attach(int64_t run_id, const std::string& db_path) {
  std::string control, telemetry, server_key;
  {
    RunStore db(db_path, /*read_only=*/true);
    const auto row = db.find_run(run_id);
    check(row.has_value(), "no run " + std::to_string(run_id) + " in " + db_path);
    check(row->status == "running" || row->status == "paused",
          "run " + std::to_string(run_id) + " is " + row->status + ", not live");
    check(!row->telemetry_endpoint.empty(),
          "run " + std::to_string(run_id) + " has no worker endpoints");
    control = row->control_endpoint;
    telemetry = row->telemetry_endpoint;
    server_key = row->server_key;
  }
  ipc::Client client(control, telemetry, server_key);
  const Json hello = client.request("hello", Json(Json::Object{}), 3000);
  check(hello.contains("ok") && hello.at("ok").as_bool(), "worker refused hello: " + hello.dump());
  std::printf("attached to run %lld (%s on %s); Ctrl-C to detach\n", static_cast<long long>(run_id),
              hello.at("backend").as_string().c_str(), hello.at("device").as_string().c_str());
  auto silent = 0;
  while (true) {
    auto m = client.receive(1000);
    if (!m) {
      if (++silent >= 3) {
        std::printf("no heartbeat for 3 s: the worker is gone or stuck\n");
        return 1;
      }
      continue;
    }
    silent = 0;
    if (m->topic == ipc::kTopicStep) {
      const Json& s = m->payload.at("scalars");
      auto val = [&](const char* k) {
        return s.contains(k) && s.at(k).is_number() ? s.at(k).as_number() : NAN;
      };
      std::printf(
          "step %5lld %-3s reward %.3f  val %.3f  mult_err %.4f  %.2f s  [%s]\n",
          static_cast<long long>(m->payload.at("step").as_int()),
          m->payload.at("phase").as_string().c_str(), val("reward/mean"),
          val("accuracy/validation"), val("token_mult_prob_error"), val("time/total_step"),
          m->payload.contains("precision") ? m->payload.at("precision").as_string().c_str() : "");
    } else if (m->topic == ipc::kTopicEvent) {
      std::printf("event %-10s %s\n", m->payload.at("kind").as_string().c_str(),
                  m->payload.at("message").as_string().c_str());
      const std::string kind = m->payload.at("kind").as_string();
      if (kind == "finish" || kind == "stop" || kind == "error") return 0;
    }
    std::fflush(stdout);
  }
}

}  // namespace fp8rl::cli
