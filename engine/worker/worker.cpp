#include "worker/worker.hpp"

#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "backend/backend_registry.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "ipc/curve.hpp"
#include "ipc/endpoints.hpp"
#include "ipc/protocol.hpp"
#include "ipc/telemetry_publisher.hpp"
#include "ipc/zmq_frames.hpp"
#include "rl/run_loop.hpp"
#include "session/run_session.hpp"
#include "store/run_store.hpp"

namespace fp8rl::ipc {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

[[noreturn]] void zmq_fail(const std::string& what) {
  throw Error(what + ": " + zmq_strerror(zmq_errno()), "zmq errno " + std::to_string(zmq_errno()));
}

// Whether ep can be reached from other machines: any tcp address but loopback.
bool beyond_loopback(const std::string& ep) {
  if (ep.rfind("tcp://", 0) != 0) return false;  // ipc, inproc
  const std::string host = ep.substr(6, ep.rfind(':') - 6);
  return !(host == "127.0.0.1" || host == "localhost" || host == "[::1]");
}

// Refuses binds beyond loopback unless allowed.
void check_bind_address(const std::string& ep, bool allow_remote) {
  check(allow_remote || !beyond_loopback(ep),
        "refusing to bind " + ep + " beyond loopback (pass --allow-remote to do so)");
}

// A bound socket of the given type (a CURVE server when keys are given); returns the resolved
// endpoint.
void* bind_socket(void* ctx, int type, const std::string& ep, const CurveKeys* curve,
                  std::string* bound) {
  void* s = zmq_socket(ctx, type);
  if (!s) zmq_fail("zmq_socket");
  const int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  // The transport drops anything far beyond the protocol limit before it reaches us.
  const int64_t max_size = static_cast<int64_t>(4 * kMaxMessageBytes);
  if (type == ZMQ_ROUTER) zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size);
  if (curve) make_curve_server(s, *curve);
  if (zmq_bind(s, ep.c_str()) != 0) zmq_fail("cannot bind " + ep);
  char buf[512];
  size_t len = sizeof buf;
  zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, buf, &len);
  *bound = std::string(buf, strnlen(buf, len));
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// The session's listener: each step's telemetry is encoded on the training thread and queued
// for the serving thread, which owns the PUB socket; events likewise.
struct Worker::Impl : SessionListener {
  WorkerOptions opt;
  void* ctx = nullptr;
  void* control = nullptr;
  void* pub = nullptr;
  std::string control_ep, telemetry_ep;
  std::unique_ptr<ZapAuthenticator> zap;  // admits authorized CURVE clients (shared sockets)
  std::string server_key;
  std::unique_ptr<Backend> backend;
  std::string fallback_reason;

  // Set once by `start` (serving thread), then used by both threads.
  std::unique_ptr<RunStore> store;
  std::unique_ptr<RunSession> session;
  std::thread trainer;

  std::mutex mu;  // guards what follows
  bool stop_before_start = false;
  std::string failure;                   // the run's error, for status
  std::vector<TelemetryMessage> outbox;  // queued for the serving thread to send
  double telemetry_sent_seconds = 0;     // sending time not yet reported in time/telemetry
  int64_t dropped = 0;                   // malformed requests answered with an error

  void on_step(StepRecord& r, int64_t run_id) override {
    auto messages = encode_step_telemetry(r, run_id, session->status().precision_summary);
    std::lock_guard lock(mu);
    for (auto& m : messages) outbox.push_back(std::move(m));
  }
  void on_event(const EventRecord& e, int64_t step) override {
    const std::string payload = event_to_json(e, step, now_seconds()).dump();
    std::lock_guard lock(mu);
    outbox.push_back({kTopicEvent, payload});
  }
  double take_telemetry_seconds() override {
    std::lock_guard lock(mu);
    return std::exchange(telemetry_sent_seconds, 0.0);
  }

  // "idle" before a run was started, else the session's state.
  std::string state() { return session ? session->status().state : "idle"; }
  bool stopped_before_start() {
    std::lock_guard lock(mu);
    return !session && stop_before_start;
  }
  std::string start(const Request& r);
  std::string handle(const Request& r);
  void flush_outbox();
};

Worker::Worker(WorkerOptions opt) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = std::move(opt);
  // Default sockets: files in the user's private runtime folder (ipc/endpoints.hpp).
  if (m.opt.control.empty() || m.opt.telemetry.empty()) {
    remove_stale_sockets();
    const Endpoints own =
        private_endpoints("fp8rl-" + std::to_string(getpid()) + "-" +
                          std::to_string(static_cast<uint64_t>(now_seconds() * 1e6) % 1000000));
    if (m.opt.control.empty()) m.opt.control = own.control;
    if (m.opt.telemetry.empty()) m.opt.telemetry = own.telemetry;
  }
  auto sel = make_backend(parse_backend_choice(m.opt.backend));
  m.backend = std::move(sel.backend);
  m.fallback_reason = sel.fallback_reason;
  m.ctx = zmq_ctx_new();
  // Reachable by anyone but this user (another machine, or another account of this one: tcp,
  // loopback included, abstract sockets): encrypted and authenticated with this user's keys
  // (CURVE with a ZAP handler bound before the sockets), never plain.
  std::optional<CurveKeys> curve;
  if (reachable_by_other_users(m.opt.control) || reachable_by_other_users(m.opt.telemetry)) {
    for (const std::string* ep : {&m.opt.control, &m.opt.telemetry})
      check_bind_address(*ep, m.opt.allow_remote);
    curve = load_or_create_keys(m.opt.keys_dir.empty() ? keys_dir() : m.opt.keys_dir);
    m.zap = std::make_unique<ZapAuthenticator>(m.ctx, curve->authorized);
    m.server_key = curve->server.public_key;
  }
  const CurveKeys* keys = curve ? &*curve : nullptr;
  m.control = bind_socket(m.ctx, ZMQ_ROUTER, m.opt.control, keys, &m.control_ep);
  m.pub = bind_socket(m.ctx, ZMQ_PUB, m.opt.telemetry, keys, &m.telemetry_ep);
}

Worker::~Worker() {
  Impl& m = *impl_;
  if (m.session) m.session->request_stop("the worker is shutting down");
  if (m.trainer.joinable()) m.trainer.join();
  if (m.control) zmq_close(m.control);
  if (m.pub) zmq_close(m.pub);
  m.zap.reset();
  if (m.ctx) zmq_ctx_term(m.ctx);
  remove_socket_file(m.control_ep);
  remove_socket_file(m.telemetry_ep);
}

const std::string& Worker::control_endpoint() const {
  return impl_->control_ep;
}
const std::string& Worker::telemetry_endpoint() const {
  return impl_->telemetry_ep;
}
const std::string& Worker::server_key() const {
  return impl_->server_key;
}

std::string Worker::Impl::start(const Request& r) {
  if (session || stop_before_start) return error_reply(r.id, "a run was already started");
  const bool resuming = r.args.contains("resume");
  const bool sweeping = r.args.contains("sweep_point");
  if (!resuming && !sweeping && !r.args.contains("preset") && !r.args.contains("config"))
    return error_reply(r.id,
                       "start needs \"preset\" (a name) and/or \"config\" (an object), "
                       "\"resume\" (a recorded run's id) or \"sweep_point\"");
  if (resuming && (r.args.contains("preset") || r.args.contains("config")))
    return error_reply(r.id,
                       "\"resume\" continues a recorded run with its own configuration: give no "
                       "\"preset\" or \"config\" (\"set\" may still change settings)");
  if (sweeping && (resuming || r.args.contains("preset") || r.args.contains("config") ||
                   r.args.contains("set")))
    return error_reply(r.id,
                       "\"sweep_point\" runs the point's stored configuration: give no \"preset\", "
                       "\"config\", \"set\" or \"resume\"");
  RunConfig cfg;
  std::string preset, point_name;
  std::optional<int64_t> resume_run;
  std::optional<std::pair<int64_t, int64_t>> point;  // sweep, point
  std::string resume_dir;
  try {
    std::vector<std::string> sets;
    if (r.args.contains("set"))
      for (const auto& s : r.args.at("set").as_array("set"))
        sets.push_back(s.as_string("set item"));
    if (resuming) {
      check(!opt.db_path.empty(), "resume needs the run database (this worker has none)");
      resume_run = r.args.at("resume").as_int("resume");
      mark_crashed_runs(opt.db_path);  // a row still "running" whose process is gone
      const auto row = RunStore(opt.db_path, /*read_only=*/true).find_run(*resume_run);
      check(row.has_value(), "no run " + std::to_string(*resume_run) + " in " + opt.db_path);
      check(!run_status::is_live(row->status),
            "run " + std::to_string(*resume_run) + " is " + row->status + " in another process");
      check(row->status != run_status::kFinished,
            "run " + std::to_string(*resume_run) + " has finished");
      check(!row->checkpoint_dir.empty() && row->checkpoint_step.has_value(),
            "run " + std::to_string(*resume_run) + " has no checkpoint to resume from");
      resume_dir = row->checkpoint_dir;
      preset = row->preset;
      // The checkpoint's configuration: the launch one with the live edits made before it.
      cfg = resume_config(resume_dir, sets);
    } else if (sweeping) {
      // The point's configuration as the sweep stored it, validated when the sweep was read.
      check(!opt.db_path.empty(), "sweep_point needs the run database (this worker has none)");
      const Json& sp = r.args.at("sweep_point");
      check(sp.is_object() && sp.contains("sweep") && sp.contains("point"),
            "sweep_point must be {\"sweep\": ID, \"point\": N}");
      point.emplace(sp.at("sweep").as_int("sweep_point.sweep"),
                    sp.at("point").as_int("sweep_point.point"));
      RunStore ro(opt.db_path, /*read_only=*/true);
      const auto sweep = ro.find_sweep(point->first);
      check(sweep.has_value(), "no sweep " + std::to_string(point->first) + " in " + opt.db_path);
      bool found = false;
      for (auto& p : ro.sweep_points(point->first))
        if (p.point == point->second) {
          cfg = RunConfig::from_json(p.config);
          point_name = p.name;
          found = true;
        }
      check(found, "sweep " + std::to_string(point->first) + " has no point " +
                       std::to_string(point->second));
      preset = sweep->recorded_preset();
    } else {
      preset = r.args.contains("preset") ? r.args.at("preset").as_string("preset") : "";
      if (r.args.contains("config")) {
        Json doc = preset.empty() ? RunConfig::defaults() : RunConfig::load(preset, "", {}).doc;
        overlay(doc, r.args.at("config"), "");
        for (const auto& s : sets) apply_override(doc, s);
        cfg = RunConfig::from_json(doc);
      } else {
        cfg = RunConfig::load(preset, "", sets);
      }
    }
  } catch (const Error& e) {
    return error_reply(r.id,
                       (resuming ? "cannot resume: " : "bad run configuration: ") + e.message());
  }
  SessionOptions so;
  so.name = r.args.contains("name") ? r.args.at("name").as_string("name")
            : point                 ? point_name
                                    : cfg.name;
  so.preset = preset;
  so.control_endpoint = control_ep;
  so.telemetry_endpoint = telemetry_ep;
  so.server_key = server_key;
  const std::string db = opt.db_path;
  so.checkpoint_dir = [db](int64_t id) {
    return (std::filesystem::path(db.empty() ? "." : db).parent_path() / "checkpoints" /
            ("run-" + std::to_string(id)))
        .string();
  };
  try {
    if (!opt.db_path.empty()) store = std::make_unique<RunStore>(opt.db_path);
    // The run and its sweep point name each other from the run's first transaction on.
    if (point) store->set_next_run_sweep_point(point->first, point->second);
  } catch (const Error& e) {
    return error_reply(r.id, "cannot open the run database: " + e.message());
  }
  so.comm = opt.comm;
  so.resume_run = resume_run;
  so.resume_dir = resume_dir;
  session = std::make_unique<RunSession>(cfg, *backend, store.get(), so, this);
  trainer = std::thread([this, cfg, resume_dir] {
    try {
      if (opt.comm) send_run(*opt.comm, &cfg, backend->name(), resume_dir);
      session->run();
    } catch (const std::exception& e) {
      std::lock_guard lock(mu);
      // Recorded by the session (status failed, error event); the log keeps where it was raised.
      std::fprintf(stderr, "fp8rl worker: the run failed: %s\n", e.what());
      failure = error_text(e);
    }
  });
  return ok_reply(r.id);
}

std::string Worker::Impl::handle(const Request& r) {
  if (r.args.contains("protocol")) {
    const Json& v = r.args.at("protocol");
    if (!v.is_number() || v.as_number() != kProtocolVersion)
      return error_reply(r.id, "protocol version mismatch: this worker speaks " +
                                   std::to_string(kProtocolVersion) + ", the client " + v.dump());
  }
  const std::string now = state();
  auto need_running = [&]() -> std::optional<std::string> {
    if (session && (now == "starting" || now == "running" || now == "paused")) return std::nullopt;
    return "no run in progress (state " + now + ")";
  };
  auto note = [](const char* text) { return Json(Json::Object{{"note", Json(text)}}); };
  switch (r.command) {
    case Command::hello: {
      Json f;
      f["protocol"] = kProtocolVersion;
      f["worker_version"] = FP8RL_VERSION;
      f["backend"] = backend->name();
      f["device"] = backend->device();
      if (!fallback_reason.empty()) f["fallback_reason"] = fallback_reason;
      f["pid"] = static_cast<int64_t>(getpid());
      return ok_reply(r.id, f);
    }
    case Command::status: {
      Json f;
      f["state"] = now;
      if (session) {
        const auto st = session->status();
        f["step"] = st.step;
        f["run_id"] = st.run_id;
        f["precision"] = st.precision_summary;
        f["precision_map"] = st.precision_map;
        f["settings"] = st.settings;
        if (!st.error.empty()) f["error"] = st.error;
      } else {
        f["step"] = 0;
        f["run_id"] = -1;
      }
      std::lock_guard lock(mu);
      f["dropped_requests"] = dropped;
      return ok_reply(r.id, f);
    }
    case Command::start:
      return start(r);
    case Command::pause:
      if (auto e = need_running()) return error_reply(r.id, *e);
      session->request_pause();
      return ok_reply(r.id, note("pauses at the next step boundary"));
    case Command::resume:
      if (auto e = need_running()) return error_reply(r.id, *e);
      session->request_resume();
      return ok_reply(r.id);
    case Command::stop:
      if (session) {
        session->request_stop("stopped on request");
      } else {
        std::lock_guard lock(mu);
        stop_before_start = true;
      }
      return ok_reply(r.id, note("checkpoints, then exits"));
    case Command::checkpoint:
      if (auto e = need_running()) return error_reply(r.id, *e);
      session->request_checkpoint();
      return ok_reply(r.id);
    case Command::edit: {
      if (auto e = need_running()) return error_reply(r.id, *e);
      try {
        session->request_edit(r.edit);
      } catch (const Error& e) {
        return error_reply(r.id, e.message());
      }
      Json f;
      f["edit"] = r.edit.to_json();  // what will be applied, as the worker understood it
      f["note"] = "applies at the next step boundary";
      return ok_reply(r.id, f);
    }
  }
  return error_reply(r.id, "unhandled command");
}

void Worker::Impl::flush_outbox() {
  std::vector<TelemetryMessage> out;
  {
    std::lock_guard lock(mu);
    out.swap(outbox);
  }
  if (out.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  send_telemetry(pub, out);
  const double dt = seconds_since(t0);
  std::lock_guard lock(mu);
  telemetry_sent_seconds += dt;
}

int Worker::serve() {
  Impl& m = *impl_;
  if (!m.opt.start.is_null()) {
    Request r;
    r.id = "start";
    r.command = Command::start;
    r.args = m.opt.start;
    const Json reply = Json::parse(m.start(r));
    if (!reply.at("ok").as_bool()) throw Error(reply.at("error").as_string());
  }
  std::unique_ptr<RunStore> store;  // this thread's own connection, for heartbeats
  auto last_beat = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  auto last_db_beat = last_beat;
  std::optional<std::chrono::steady_clock::time_point> done_since;
  bool stop_signalled = false;
  while (true) {
    zmq_pollitem_t items[] = {{m.control, 0, ZMQ_POLLIN, 0},
                              {m.zap ? m.zap->socket() : nullptr, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, m.zap ? 2 : 1, 50);
    if (m.zap && (items[1].revents & ZMQ_POLLIN)) m.zap->handle();
    if (items[0].revents & ZMQ_POLLIN) {
      for (int budget = 0; budget < 256; ++budget) {
        auto frames = recv_frames(m.control);
        if (frames.empty()) break;
        // ROUTER: [identity][optional empty delimiter][request]. Reply on the same envelope.
        std::string reply;
        if (frames.size() < 2 || frames.size() > 3 || (frames.size() == 3 && !frames[1].empty())) {
          std::lock_guard lock(m.mu);
          ++m.dropped;
          if (frames.size() < 2) continue;  // nothing to reply to
          reply =
              error_reply("", "malformed message: expected [request] or [empty][request] frames");
        } else {
          std::string error, id;
          auto req = parse_request(frames.back(), &error, &id);
          if (!req) {
            std::lock_guard lock(m.mu);
            ++m.dropped;
            reply = error_reply(id, error);
          } else {
            try {
              reply = m.handle(*req);
            } catch (const std::exception& e) {
              reply = error_reply(req->id, error_text(e));
            }
          }
        }
        frames.back() = reply;
        send_frames(m.control, frames);
      }
    }
    if (m.opt.stop_signal && *m.opt.stop_signal && !stop_signalled) {
      stop_signalled = true;
      if (m.session) {
        m.session->request_stop("stopped by a signal");
      } else {
        std::lock_guard lock(m.mu);
        m.stop_before_start = true;
      }
    }
    m.flush_outbox();
    const auto now = std::chrono::steady_clock::now();
    std::string state;
    int64_t step, run_id;
    state = m.state();
    if (m.session) {
      const auto st = m.session->status();
      step = st.step;
      run_id = st.run_id;
    } else {
      step = 0;
      run_id = -1;
    }
    if (now - last_beat >= std::chrono::duration<double>(m.opt.heartbeat_seconds)) {
      Json hb;
      hb["state"] = state;
      hb["step"] = step;
      hb["run_id"] = run_id;
      hb["pid"] = static_cast<int64_t>(getpid());
      hb["time"] = now_seconds();
      send_frames(m.pub, {kTopicHeartbeat, hb.dump()});
      last_beat = now;
    }
    if (run_id >= 0 && !m.opt.db_path.empty() && now - last_db_beat >= std::chrono::seconds(2)) {
      try {
        if (!store) store = std::make_unique<RunStore>(m.opt.db_path);
        store->heartbeat(run_id);
      } catch (const std::exception&) {
        // A locked database delays a heartbeat; the run goes on.
      }
      last_db_beat = now;
    }
    const bool done =
        state == "finished" || state == "stopped" || state == "failed" || m.stopped_before_start();
    if (done) {
      // Linger briefly so subscribers receive the last events.
      if (!done_since) done_since = now;
      if (now - *done_since > std::chrono::milliseconds(300)) break;
    }
  }
  if (m.trainer.joinable()) m.trainer.join();
  // The other ranks wait for a run until told there is none.
  if (!m.session && m.opt.comm) send_run(*m.opt.comm, nullptr, "");
  m.flush_outbox();
  return m.state() == "failed" ? 1 : 0;
}

}  // namespace fp8rl::ipc
