#include "ipc/worker.hpp"

#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "backend/backend_registry.hpp"
#include "core/error.hpp"
#include "core/version.hpp"
#include "ipc/protocol.hpp"
#include "ipc/telemetry_publisher.hpp"
#include "ipc/zmq_frames.hpp"
#include "rl/run_loop.hpp"
#include "store/run_store.hpp"

namespace fp8rl::ipc {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

[[noreturn]] void zmq_fail(const std::string& what) {
  throw Error(what + ": " + zmq_strerror(zmq_errno()), "zmq errno " + std::to_string(zmq_errno()));
}

// Refuses tcp binds beyond loopback unless allowed.
void check_bind_address(const std::string& ep, bool allow_remote) {
  if (ep.rfind("tcp://", 0) != 0 || allow_remote) return;
  const std::string host = ep.substr(6, ep.rfind(':') - 6);
  check(host == "127.0.0.1" || host == "localhost" || host == "[::1]",
        "refusing to bind " + ep + " beyond loopback (pass --allow-remote to do so)");
}

// A bound socket of the given type; returns the resolved endpoint.
void* bind_socket(void* ctx, int type, const std::string& ep, bool allow_remote,
                  std::string* bound) {
  check_bind_address(ep, allow_remote);
  void* s = zmq_socket(ctx, type);
  if (!s) zmq_fail("zmq_socket");
  const int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  // The transport drops anything far beyond the protocol limit before it reaches us.
  const int64_t max_size = static_cast<int64_t>(4 * kMaxMessageBytes);
  if (type == ZMQ_ROUTER) zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size);
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

Json precision_json(const PrecisionMap& pm) {
  Json::Array layers;
  for (int64_t l = 0; l < pm.layers(); ++l) {
    Json row;
    for (int mi = 0; mi < kModules; ++mi)
      row[module_short(Module(mi))] = precision_name(pm.at(l, Module(mi)));
    layers.push_back(std::move(row));
  }
  return Json(std::move(layers));
}

}  // namespace

struct Worker::Impl {
  WorkerOptions opt;
  void* ctx = nullptr;
  void* control = nullptr;
  void* pub = nullptr;
  std::string control_ep, telemetry_ep;
  std::unique_ptr<Backend> backend;
  std::string fallback_reason;

  // Shared between the serving thread and the training thread.
  std::mutex mu;
  std::string state = "idle";  // idle, running, paused, stopping, finished, stopped, failed
  int64_t step = 0, run_id = -1;
  std::string last_error, precision_summary;
  Json precision_map;  // as last applied
  int64_t layers = 0;
  bool pause_requested = false, stop_requested = false, checkpoint_requested = false;
  std::optional<std::vector<std::string>> pending_precision;
  std::vector<std::pair<std::string, double>> pending_settings;
  std::vector<TelemetryMessage> outbox;  // queued for the serving thread to send
  double telemetry_sent_seconds = 0;     // sending time not yet reported in time/telemetry
  std::condition_variable resume_cv;
  std::thread trainer;
  int64_t dropped = 0;  // malformed requests answered with an error

  void publish(const std::string& topic, const Json& payload) {
    std::lock_guard lock(mu);
    outbox.push_back({topic, payload.dump()});
  }
  void event(int64_t at_step, const std::string& kind, const std::string& message,
             RunStore* store) {
    Json e;
    e["step"] = at_step;
    e["kind"] = kind;
    e["message"] = message;
    e["time"] = now_seconds();
    publish(kTopicEvent, e);
    if (store && run_id >= 0) store->record_event(run_id, at_step, {kind, message, Json()});
  }

  // preset: recorded with the run ("" when the run came as a configuration only).
  void train(RunConfig cfg, std::string name, std::string preset);
  std::string handle(const Request& r);
  void flush_outbox();
};

Worker::Worker(WorkerOptions opt) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = std::move(opt);
  const std::string base = "ipc://@fp8rl-" + std::to_string(getpid()) + "-" +
                           std::to_string(static_cast<uint64_t>(now_seconds() * 1e6) % 1000000);
  if (m.opt.control.empty()) m.opt.control = base + "-control";
  if (m.opt.telemetry.empty()) m.opt.telemetry = base + "-telemetry";
  auto sel = make_backend(parse_backend_choice(m.opt.backend));
  m.backend = std::move(sel.backend);
  m.fallback_reason = sel.fallback_reason;
  m.ctx = zmq_ctx_new();
  m.control = bind_socket(m.ctx, ZMQ_ROUTER, m.opt.control, m.opt.allow_remote, &m.control_ep);
  m.pub = bind_socket(m.ctx, ZMQ_PUB, m.opt.telemetry, m.opt.allow_remote, &m.telemetry_ep);
}

Worker::~Worker() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    m.stop_requested = true;
  }
  m.resume_cv.notify_all();
  if (m.trainer.joinable()) m.trainer.join();
  if (m.control) zmq_close(m.control);
  if (m.pub) zmq_close(m.pub);
  if (m.ctx) zmq_ctx_term(m.ctx);
}

const std::string& Worker::control_endpoint() const {
  return impl_->control_ep;
}
const std::string& Worker::telemetry_endpoint() const {
  return impl_->telemetry_ep;
}

void Worker::Impl::train(RunConfig cfg, std::string name, std::string preset) {
  std::unique_ptr<RunStore> store;
  try {
    if (!opt.db_path.empty()) store = std::make_unique<RunStore>(opt.db_path);
    GrpoRun run(cfg, *backend);
    {
      std::lock_guard lock(mu);
      layers = run.model().config().num_hidden_layers;
      precision_summary = run.model().precision().summary();
      precision_map = precision_json(run.model().precision());
    }
    if (store) {
      const int64_t id =
          store->create_run(name, preset.empty() ? "custom" : preset, cfg.doc, run.model().precision().summary());
      store->set_endpoints(id, control_ep, telemetry_ep);
      store->record_precision(id, 0, precision_map);
      std::lock_guard lock(mu);
      run_id = id;
    }
    event(0, "start", "backend " + backend->name() + " (" + backend->device() + ")", store.get());
    const std::string ckpt_dir =
        (std::filesystem::path(opt.db_path.empty() ? "." : opt.db_path).parent_path() /
         "checkpoints" / ("run-" + std::to_string(run_id)))
            .string();
    int64_t last_step = 0;
    bool paused = false;
    double telemetry_seconds = -1;  // the previous step's, on this thread (< 0: none yet)
    auto checkpoint = [&] {
      run.save(ckpt_dir);
      if (store) store->set_checkpoint(run_id, ckpt_dir, last_step);
      event(last_step, "checkpoint", ckpt_dir, store.get());
    };
    while (!run.finished()) {
      // Step boundary: apply what clients asked for.
      std::optional<std::vector<std::string>> prec;
      std::vector<std::pair<std::string, double>> settings;
      bool want_ckpt = false, want_stop = false, want_pause = false;
      {
        std::lock_guard lock(mu);
        prec.swap(pending_precision);
        settings.swap(pending_settings);
        want_ckpt = std::exchange(checkpoint_requested, false);
        want_stop = stop_requested;
        want_pause = pause_requested;
      }
      if (prec) {
        PrecisionMap pm = run.model().precision();
        for (const auto& o : *prec) apply_precision_override(pm, o);
        run.set_precision(pm);
        const Json pj = precision_json(pm);
        {
          std::lock_guard lock(mu);
          precision_summary = pm.summary();
          precision_map = pj;
        }
        if (store) {
          store->record_precision(run_id, last_step, pj);
          store->set_precision_summary(run_id, pm.summary());
        }
        std::string text;
        for (const auto& o : *prec) text += (text.empty() ? "" : ", ") + o;
        Json e;
        e["step"] = last_step;
        e["kind"] = "precision";
        e["message"] = text;
        e["map"] = pj;
        e["time"] = now_seconds();
        publish(kTopicEvent, e);
        if (store) store->record_event(run_id, last_step, {"precision", text, pj});
      }
      for (const auto& [k, v] : settings) {
        if (k == "lr")
          run.set_lr(v);
        else if (k == "temperature")
          run.set_temperature(v);
        else if (k == "is_min")
          run.set_importance_bounds(v, run.config().loss.is_max);
        else if (k == "is_max")
          run.set_importance_bounds(run.config().loss.is_min, v);
        else if (k == "validation_every")
          run.set_validation_every(static_cast<int64_t>(v));
        event(last_step, "set", k + " = " + Json(v).dump(), store.get());
      }
      if (want_ckpt) checkpoint();
      if (want_stop) break;
      if (want_pause) {
        if (!paused) {  // announce once; precision edits while paused wake the loop too
          paused = true;
          {
            std::lock_guard lock(mu);
            state = "paused";
          }
          if (store) store->set_status(run_id, "paused");
          event(last_step, "pause", "paused at the step boundary", store.get());
        }
        std::unique_lock lock(mu);
        resume_cv.wait(lock, [&] {
          return !pause_requested || stop_requested || pending_precision ||
                 !pending_settings.empty() || checkpoint_requested;
        });
        const bool resumed = !pause_requested;
        if (resumed) state = "running";
        lock.unlock();
        if (resumed) {
          paused = false;
          if (store) store->set_status(run_id, "running");
          event(last_step, "resume", "resumed", store.get());
        }
        continue;  // re-check the boundary requests (precision edits while paused apply now)
      }
      StepRecord r = run.next();
      last_step = r.step;
      // Telemetry: record, encode and queue the step; what this costs is reported with the
      // next step as time/telemetry (with the serving thread's sending time since).
      const auto t_telemetry = std::chrono::steady_clock::now();
      std::string precision;
      {
        std::lock_guard lock(mu);
        precision = precision_summary;
        const double sent = std::exchange(telemetry_sent_seconds, 0.0);
        if (telemetry_seconds >= 0) r.scalars[kMetricTelemetryTime] = telemetry_seconds + sent;
      }
      if (store) store->record_step(run_id, r);
      std::vector<TelemetryMessage> messages = encode_step_telemetry(r, run_id, precision);
      {
        std::lock_guard lock(mu);
        step = r.step;
        for (auto& msg : messages) outbox.push_back(std::move(msg));
      }
      telemetry_seconds = seconds_since(t_telemetry);
      if (r.phase == "rl" && cfg.checkpoint_every > 0 && run.rl_done() % cfg.checkpoint_every == 0)
        checkpoint();
    }
    bool stopped;
    {
      std::lock_guard lock(mu);
      stopped = stop_requested && !run.finished();
      state = "stopping";
    }
    if (stopped) checkpoint();
    if (store) store->set_status(run_id, stopped ? "stopped" : "finished");
    event(last_step, stopped ? "stop" : "finish", stopped ? "stopped on request" : "finished",
          store.get());
    std::lock_guard lock(mu);
    state = stopped ? "stopped" : "finished";
  } catch (const std::exception& e) {
    if (store && run_id >= 0) {
      try {
        store->set_status(run_id, "failed");
      } catch (...) {
      }
    }
    event(step, "error", e.what(), store.get());
    std::lock_guard lock(mu);
    last_error = e.what();
    state = "failed";
  }
}

std::string Worker::Impl::handle(const Request& r) {
  if (r.args.contains("protocol")) {
    const Json& v = r.args.at("protocol");
    if (!v.is_number() || v.as_number() != kProtocolVersion)
      return error_reply(r.id, "protocol version mismatch: this worker speaks " +
                                   std::to_string(kProtocolVersion) + ", the client " + v.dump());
  }
  std::unique_lock lock(mu);
  auto need_running = [&]() -> std::optional<std::string> {
    if (state == "running" || state == "paused") return std::nullopt;
    return "no run in progress (state " + state + ")";
  };
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
      f["state"] = state;
      f["step"] = step;
      f["run_id"] = run_id;
      f["precision"] = precision_summary;
      f["precision_map"] = precision_map;
      if (!last_error.empty()) f["error"] = last_error;
      f["dropped_requests"] = dropped;
      return ok_reply(r.id, f);
    }
    case Command::start: {
      if (state != "idle")
        return error_reply(r.id, "a run was already started (state " + state + ")");
      RunConfig cfg;
      std::string name = "run";
      try {
        Json doc = RunConfig::defaults();
        if (r.args.contains("preset") || r.args.contains("config")) {
          const std::string preset =
              r.args.contains("preset") ? r.args.at("preset").as_string("preset") : "";
          std::vector<std::string> sets;
          if (r.args.contains("set"))
            for (const auto& s : r.args.at("set").as_array("set"))
              sets.push_back(s.as_string("set item"));
          lock.unlock();
          if (r.args.contains("config")) {
            Json over = r.args.at("config");
            doc = RunConfig::defaults();
            if (!preset.empty()) doc = RunConfig::load(preset, "", {}).doc;
            overlay(doc, over, "");
            for (const auto& s : sets) apply_override(doc, s);
            cfg = RunConfig::from_json(doc);
          } else {
            cfg = RunConfig::load(preset, "", sets);
          }
          lock.lock();
        } else {
          return error_reply(r.id, "start needs \"preset\" (a name) and/or \"config\" (an object)");
        }
        if (r.args.contains("name"))
          name = r.args.at("name").as_string("name");
        else
          name = cfg.name;
      } catch (const Error& e) {
        if (!lock.owns_lock()) lock.lock();
        return error_reply(r.id, "bad run configuration: " + e.message());
      }
      if (state != "idle") return error_reply(r.id, "a run was already started");
      state = "running";
      const std::string preset_name =
          r.args.contains("preset") ? r.args.at("preset").as_string("preset") : "";
      trainer = std::thread([this, cfg, name, preset_name] { train(cfg, name, preset_name); });
      return ok_reply(r.id);
    }
    case Command::pause:
      if (auto e = need_running()) return error_reply(r.id, *e);
      pause_requested = true;
      return ok_reply(r.id, Json(Json::Object{{"note", Json("pauses at the next step boundary")}}));
    case Command::resume:
      if (auto e = need_running()) return error_reply(r.id, *e);
      pause_requested = false;
      lock.unlock();
      resume_cv.notify_all();
      return ok_reply(r.id);
    case Command::stop:
      stop_requested = true;
      pause_requested = false;
      lock.unlock();
      resume_cv.notify_all();
      return ok_reply(r.id, Json(Json::Object{{"note", Json("checkpoints, then exits")}}));
    case Command::checkpoint:
      if (auto e = need_running()) return error_reply(r.id, *e);
      checkpoint_requested = true;
      lock.unlock();
      resume_cv.notify_all();
      return ok_reply(r.id);
    case Command::set_precision: {
      if (auto e = need_running()) return error_reply(r.id, *e);
      if (layers == 0) return error_reply(r.id, "the run is still starting; retry");
      if (!r.args.contains("overrides") || !r.args.at("overrides").is_array())
        return error_reply(r.id,
                           "set_precision needs \"overrides\": a list like [\"0.gate=bf16\"]");
      std::vector<std::string> list;
      try {
        PrecisionMap check_map(layers, Precision::fp8);
        for (const auto& o : r.args.at("overrides").as_array()) {
          list.push_back(o.as_string("overrides item"));
          apply_precision_override(check_map, list.back());
        }
      } catch (const Error& e) {
        return error_reply(r.id, e.message());
      }
      if (!pending_precision) pending_precision.emplace();
      pending_precision->insert(pending_precision->end(), list.begin(), list.end());
      lock.unlock();
      resume_cv.notify_all();
      return ok_reply(r.id,
                      Json(Json::Object{{"note", Json("applies at the next step boundary")}}));
    }
    case Command::set: {
      if (auto e = need_running()) return error_reply(r.id, *e);
      if (!r.args.contains("key") || !r.args.at("key").is_string() || !r.args.contains("value") ||
          !r.args.at("value").is_number())
        return error_reply(r.id, "set needs \"key\" (string) and \"value\" (number)");
      const std::string key = r.args.at("key").as_string();
      const double v = r.args.at("value").as_number();
      if (!is_live_setting(key))
        return error_reply(r.id,
                           "unknown setting \"" + key +
                               "\" (allowed: lr, temperature, is_min, is_max, validation_every)");
      const bool ok = (key == "lr" || key == "temperature") ? v > 0 : v >= 0;
      if (!ok || !std::isfinite(v))
        return error_reply(r.id, "bad value for " + key + ": " + Json(v).dump());
      pending_settings.emplace_back(key, v);
      lock.unlock();
      resume_cv.notify_all();
      return ok_reply(r.id);
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
  std::unique_ptr<RunStore> store;  // this thread's own connection, for heartbeats
  auto last_beat = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  auto last_db_beat = last_beat;
  std::optional<std::chrono::steady_clock::time_point> done_since;
  while (true) {
    zmq_pollitem_t items[] = {{m.control, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, 1, 50);
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
              reply = error_reply(req->id, e.what());
            }
          }
        }
        frames.back() = reply;
        send_frames(m.control, frames);
      }
    }
    m.flush_outbox();
    const auto now = std::chrono::steady_clock::now();
    std::string state;
    int64_t step, run_id;
    {
      std::lock_guard lock(m.mu);
      state = m.state;
      step = m.step;
      run_id = m.run_id;
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
    const bool done = state == "finished" || state == "stopped" || state == "failed" ||
                      (state == "idle" && m.stop_requested);
    if (done) {
      // Linger briefly so subscribers receive the last events.
      if (!done_since) done_since = now;
      if (now - *done_since > std::chrono::milliseconds(300)) break;
    }
  }
  if (m.trainer.joinable()) m.trainer.join();
  m.flush_outbox();
  return m.state == "failed" ? 1 : 0;
}

}  // namespace fp8rl::ipc
