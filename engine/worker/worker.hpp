// fp8rl worker: one run per process, controlled over a ZeroMQ ROUTER socket and streamed on a
// PUB socket (docs/protocol.md). The run is a RunSession (engine/session, the same lifecycle as
// `fp8rl train`) executing on a training thread; the main thread serves requests, publishes
// telemetry and a heartbeat (≥ 1 Hz, also while paused or inside a long step). Commands that
// change the run (pause, precision, settings, checkpoint, stop) take effect at the next step
// boundary. The worker records its run in the run store itself, so the run survives any client.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/json.hpp"
#include "dist/communicator.hpp"

namespace fp8rl::ipc {

struct WorkerOptions {
  // Bind addresses; empty: a socket file in the user's private runtime folder
  // (ipc::private_endpoints, e.g. ipc:///run/user/1000/fp8rl/fp8rl-<pid>-…-control). An address
  // other local users could reach (tcp, loopback included; an abstract ipc://@ socket) makes the
  // worker a CURVE server on both sockets (ipc/curve.hpp, ipc/endpoints.hpp): only clients
  // holding a key this user's install authorized get through.
  std::string control;
  std::string telemetry;
  std::string db_path;  // run store; empty: the run is not recorded
  // Permit tcp binds beyond loopback (always with CURVE, as above).
  bool allow_remote = false;
  std::string keys_dir;  // CURVE keys; empty: ipc::keys_dir()
  std::string backend = "auto";
  double heartbeat_seconds = 0.5;
  // The arguments of a `start` request the worker runs at once, before serving (fp8rl worker
  // --resume ID, --sweep-point S:P: the run a sweep's runner starts), as if a client had sent
  // it; null: wait for a client's start. A start it refuses makes serve() throw its reason.
  Json start;
  // Set by a signal handler (SIGINT, SIGTERM): the run stops at its next step boundary with a
  // checkpoint, as a client's stop would (null: signals are not watched).
  const std::atomic<bool>* stop_signal = nullptr;
  // The ranks of a data-parallel run (null: one process). The worker is rank 0: it serves and
  // records the run and sends it to the other ranks (session/run_session.hpp, send_run).
  Communicator* comm = nullptr;
};

class Worker {
 public:
  explicit Worker(WorkerOptions opt);
  ~Worker();
  // The bound endpoints (after ZMQ resolved wildcards such as tcp://127.0.0.1:*).
  const std::string& control_endpoint() const;
  const std::string& telemetry_endpoint() const;
  // The worker's public CURVE key when its sockets are reachable by other users, else "".
  const std::string& server_key() const;
  // Serves until the run stops or finishes (or a stop request before any run). Returns the
  // process exit code.
  int serve();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp8rl::ipc
