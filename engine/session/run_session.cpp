#include "session/run_session.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "backend/backend.hpp"
#include "contract/live_edit.hpp"
#include "contract/metrics.hpp"
#include "contract/precision.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "rl/run_loop.hpp"

namespace fp8rl {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct RunSession::Impl {
  RunConfig cfg;
  Backend& be;
  RunRecorder* rec;
  SessionOptions opt;
  SessionListener* listener;
  std::unique_ptr<GrpoRun> run;
  std::string ckpt_dir;
  int64_t checkpoint_step = -1;            // the step of the run's latest checkpoint (-1: none yet)
  std::unique_ptr<Communicator> own_comm;  // SingleProcess when opt.comm is null
  Communicator* comm = nullptr;
  bool leader() const { return comm->rank() == 0; }

  // Requests and status, shared with the controlling thread.
  mutable std::mutex mu;
  std::condition_variable wake;
  bool pause = false, stop = false, checkpoint_now = false;
  std::string stop_reason;
  LiveEdit queued;                   // the edits asked for since the last boundary, merged
  std::optional<LiveState> pending;  // the live state once they apply (set once started)
  Status st;

  Impl(RunConfig c, Backend& b, RunRecorder* r, SessionOptions o, SessionListener* l)
      : cfg(std::move(c)), be(b), rec(r), opt(std::move(o)), listener(l) {
    st.state = "starting";
    comm = opt.comm;
    if (!comm) {
      own_comm = std::make_unique<SingleProcess>();
      comm = own_comm.get();
    }
  }

  int64_t id() const { return st.run_id; }

  bool status_is(const std::string& s) const {
    std::lock_guard lock(mu);
    return st.state == s;
  }

  void set_state(const std::string& s) {
    std::lock_guard lock(mu);
    st.state = s;
  }

  void event(int64_t step, EventRecord e) {
    if (rec && id() >= 0) rec->record_event(id(), step, e);
    if (listener) listener->on_event(e, step);
  }

  // Makes the run's live state known: status, and the precision history when the map changed.
  void publish_live(int64_t step, bool map_changed) {
    const LiveState live = run->live_state();
    const Json map = live.precision.to_json();
    {
      std::lock_guard lock(mu);
      st.precision_summary = live.precision.summary();
      st.precision_map = map;
      st.settings = live.to_json().at("settings");
    }
    if (map_changed && rec && id() >= 0) {
      rec->record_precision(id(), step, map);
      rec->set_precision_summary(id(), live.precision.summary());
    }
  }

  void checkpoint(int64_t step) {
    if (!leader()) return;  // one copy, written by rank 0
    if (ckpt_dir.empty()) {
      event(step, {event::kCheckpoint, "not written: the run has no checkpoint directory", Json()});
      return;
    }
    run->save(ckpt_dir);
    checkpoint_step = step;
    if (rec && id() >= 0) rec->set_checkpoint(id(), ckpt_dir, step);
    event(step, {event::kCheckpoint, ckpt_dir, Json()});
  }

  void start();
  // Applies what was asked at a step boundary; returns false when the run must stop. Rank 0
  // decides (lead_boundary) and sends the other ranks what it applied (follow_boundary).
  bool boundary(int64_t step);
  bool lead_boundary(int64_t step, LiveEdit& applied);
  // Applies a live edit at a boundary and records it: the precision map (history and an
  // event with the full map) and one event per setting.
  void apply_edit(int64_t step, const LiveEdit& edit) {
    run->apply(edit);
    publish_live(step, !edit.precision.empty());
    if (!edit.precision.empty()) precision_event(step, edit, "");
    for (const auto& sv : edit.settings)
      event(step, {event::kSet, std::string(sv.setting->key) + " = " + live_value_text(sv.value),
                   live_setting_event_data(sv.setting->key, sv.value)});
  }
  // A `precision` event: the edit's overrides after prefix, with the whole map now in force.
  void precision_event(int64_t step, const LiveEdit& edit, const std::string& prefix) {
    std::string text;
    for (const auto& o : edit.precision) text += (text.empty() ? "" : ", ") + o.to_string();
    event(step, {event::kPrecision, prefix + text, run->model().precision().to_json()});
  }
  bool follow_boundary();
  // The precision autopilot's decision of the last step, after the person's edits of this
  // boundary (they win): applied through the same typed edit and recorded as an `autopilot`
  // event with its evidence; a change of the map is also what a person's is, a `precision`
  // event with the whole map and a precision history entry (a live studio builds its history
  // and chart markers from those events).
  void apply_autopilot(int64_t step, LiveEdit& applied) {
    const auto d = run->take_autopilot_decision();
    if (!d) return;
    const LiveEdit edit = d->edit();
    run->apply_autopilot(*d);
    if (!edit.empty()) {
      publish_live(step, true);
      applied.merge(edit);
    }
    if (!edit.precision.empty()) precision_event(step, edit, "autopilot: ");
    event(step, {event::kAutopilot, d->message, d->to_json()});
  }
};

void RunSession::Impl::start() {
  run = std::make_unique<GrpoRun>(cfg, be, comm);
  int64_t step = 0;
  if (opt.resume_run) {
    run->restore(opt.resume_dir);
    step = run->rl_done() > 0 ? run->rl_done() : run->sft_done() - cfg.sft_steps;
    // The steps after the checkpoint go before anyone hears the run id (a studio rereads the
    // run when it does).
    if (rec) {
      rec->truncate_after(*opt.resume_run, step);
      rec->reopen_run(*opt.resume_run);
    }
    checkpoint_step = step;
    std::lock_guard lock(mu);
    st.run_id = *opt.resume_run;
    st.step = step;
  } else if (rec) {
    const int64_t new_id = rec->create_run(opt.name.empty() ? cfg.name : opt.name,
                                           opt.preset.empty() ? "custom" : opt.preset, cfg.doc,
                                           run->model().precision().summary());
    std::lock_guard lock(mu);
    st.run_id = new_id;
  }
  if (rec && (!opt.control_endpoint.empty() || !opt.telemetry_endpoint.empty()))
    rec->set_endpoints(id(), opt.control_endpoint, opt.telemetry_endpoint, opt.server_key);
  if (opt.checkpoint_dir) ckpt_dir = opt.checkpoint_dir(id());
  publish_live(step, true);
  {
    // Edits that arrived while the run was starting are checked now, against the run.
    std::lock_guard lock(mu);
    pending = run->live_state();
    try {
      pending->apply(queued);
    } catch (const Error& e) {
      queued = LiveEdit();
      pending = run->live_state();
      event(step, {event::kError, "live edit refused: " + e.message(), Json()});
    }
  }
  set_state("running");
  if (opt.resume_run)
    event(step, {event::kResume, "resumed from " + opt.resume_dir, Json()});
  else
    event(step, {event::kStart, "backend " + be.name() + " (" + be.device() + ")", Json()});
}

bool RunSession::Impl::boundary(int64_t step) {
  if (!leader()) return follow_boundary();
  LiveEdit applied;
  const bool go_on = lead_boundary(step, applied);
  if (comm->size() > 1) {
    Json msg;
    msg["edit"] = applied.empty() ? Json() : applied.to_json();
    msg["stop"] = !go_on;
    broadcast_string(*comm, msg.dump(), 0);
  }
  return go_on;
}

bool RunSession::Impl::follow_boundary() {
  const Json msg = Json::parse(broadcast_string(*comm, "", 0));
  if (!msg.at("edit").is_null()) run->apply(LiveEdit::from_json(msg.at("edit")));
  return !msg.at("stop").as_bool("stop");
}

bool RunSession::Impl::lead_boundary(int64_t step, LiveEdit& applied) {
  bool autopilot_done = false;
  while (true) {
    LiveEdit edit;
    bool want_checkpoint, want_stop, want_pause;
    {
      std::lock_guard lock(mu);
      std::swap(edit, queued);
      want_checkpoint = std::exchange(checkpoint_now, false);
      want_stop = stop;
      want_pause = pause;
    }
    if (!edit.empty()) {
      apply_edit(step, edit);
      applied.merge(edit);
    }
    if (!autopilot_done) {
      autopilot_done = true;
      apply_autopilot(step, applied);
    }
    if (want_checkpoint) checkpoint(step);
    if (want_stop) return false;
    if (!want_pause) {
      if (status_is("paused")) {
        set_state("running");
        if (rec && id() >= 0) rec->set_status(id(), run_status::kRunning);
        event(step, {event::kResume, "resumed", Json()});
      }
      return true;
    }
    if (!status_is("paused")) {
      set_state("paused");
      if (rec && id() >= 0) rec->set_status(id(), run_status::kPaused);
      event(step, {event::kPause, "paused at the step boundary", Json()});
    }
    // Wait for anything to do; then go round again (edits while paused apply now). A paused
    // rank 0 of several also watches for the job ending (another rank lost).
    std::unique_lock lock(mu);
    while (!wake.wait_for(lock, std::chrono::milliseconds(200),
                          [&] { return !pause || stop || checkpoint_now || !queued.empty(); }))
      if (comm->job_ending())
        throw PeerLost(
            "the MPI job is ending while the run is paused (another rank exited or "
            "the job was interrupted)");
  }
}

RunSession::RunSession(RunConfig cfg, Backend& be, RunRecorder* recorder, SessionOptions opt,
                       SessionListener* listener)
    : impl_(std::make_unique<Impl>(std::move(cfg), be, recorder, std::move(opt), listener)) {}

RunSession::~RunSession() = default;

std::string RunSession::run() {
  Impl& m = *impl_;
  int64_t step = 0;
  try {
    m.start();
    step = m.st.step;
    double telemetry_seconds = -1;  // the previous step's (< 0: none yet)
    bool stopped = false;
    while (!m.run->finished()) {
      if (!m.boundary(step)) {
        stopped = true;
        break;
      }
      StepRecord r = m.run->next();
      step = r.step;
      // What the previous step's recording cost (store write, listeners, a worker's sending).
      const auto t0 = std::chrono::steady_clock::now();
      const double elsewhere = m.listener ? m.listener->take_telemetry_seconds() : 0.0;
      if (telemetry_seconds >= 0) r.scalars[metric::kTimeTelemetry] = telemetry_seconds + elsewhere;
      // Recorded before the listeners hear of it: what a worker sends on is then already in the
      // store, so a studio that starts listening and then reads the store misses no step.
      if (m.rec && m.id() >= 0) m.rec->record_step(m.id(), r);
      if (m.listener) m.listener->on_step(r, m.id());
      {
        std::lock_guard lock(m.mu);
        m.st.step = step;
      }
      telemetry_seconds = seconds_since(t0);
      if (r.phase == "rl" && m.cfg.checkpoint_every > 0 &&
          m.run->rl_done() % m.cfg.checkpoint_every == 0)
        m.checkpoint(step);
    }
    // A stop that arrives with the last step still counts as finishing.
    stopped = stopped && !m.run->finished();
    m.set_state("stopping");
    if (stopped || m.opt.checkpoint_at_end) m.checkpoint(step);
    const std::string final_state = stopped ? run_status::kStopped : run_status::kFinished;
    if (m.rec && m.id() >= 0) m.rec->set_status(m.id(), final_state);
    std::string reason;
    {
      std::lock_guard lock(m.mu);
      reason = m.stop_reason;
    }
    m.event(step, stopped ? EventRecord{event::kStop, reason, Json()}
                          : EventRecord{event::kFinish, "finished", Json()});
    m.set_state(final_state);
    return final_state;
  } catch (const std::exception& e) {
    // Out of disk space nothing recorded is lost and the run can go on once space is freed:
    // say how (the store or the checkpoint said only "disk is full").
    std::optional<Error> full;
    if (out_of_space(e) && m.id() >= 0) {
      const auto* err = dynamic_cast<const Error*>(&e);
      const std::string n = std::to_string(m.id());
      full = Error(
          (err ? err->message() : std::string(e.what())) +
              " — free space on that disk: every step recorded so far is kept" +
              (m.checkpoint_step >= 0 ? ", and `fp8rl train --resume " + n +
                                            "` (or Continue in the studio) goes on "
                                            "from the step-" +
                                            std::to_string(m.checkpoint_step) + " checkpoint"
                                      : "; run " + n + " has no checkpoint yet, so start it again"),
          err ? err->status() : "");
    }
    {
      std::lock_guard lock(m.mu);
      m.st.state = run_status::kFailed;
      // What users read: no source location (logs keep it).
      m.st.error = full ? error_text(*full) : error_text(e);
    }
    // A lost rank: the run did not fail on its own account, its job broke (as when its
    // process dies).
    const bool crashed = dynamic_cast<const PeerLost*>(&e) != nullptr;
    try {
      if (m.rec && m.id() >= 0)
        m.rec->set_status(m.id(), crashed ? run_status::kCrashed : run_status::kFailed);
      m.event(step, {event::kError, full ? error_text(*full) : error_text(e), Json()});
    } catch (...) {
      // The recorder failing too must not hide the first error.
    }
    if (full) throw *full;
    throw;
  }
}

void RunSession::request_pause() {
  std::lock_guard lock(impl_->mu);
  impl_->pause = true;
}

void RunSession::request_resume() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->pause = false;
  }
  impl_->wake.notify_all();
}

void RunSession::request_stop(const std::string& reason) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
    impl_->pause = false;
    if (impl_->stop_reason.empty()) impl_->stop_reason = reason;
  }
  impl_->wake.notify_all();
}

void RunSession::request_checkpoint() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->checkpoint_now = true;
  }
  impl_->wake.notify_all();
}

void RunSession::request_edit(const LiveEdit& edit) {
  check(!edit.empty(), "the live edit changes nothing (no precision overrides, no settings)");
  {
    std::lock_guard lock(impl_->mu);
    Impl& m = *impl_;
    if (m.pending) {
      LiveState next = *m.pending;
      next.apply(edit);  // throws, queueing nothing
      m.pending = std::move(next);
    }
    m.queued.merge(edit);
  }
  impl_->wake.notify_all();
}

RunSession::Status RunSession::status() const {
  std::lock_guard lock(impl_->mu);
  return impl_->st;
}

GrpoRun* RunSession::loop() {
  return impl_->run.get();
}

void send_run(Communicator& comm, const RunConfig* cfg, const std::string& backend,
              const std::string& resume_dir) {
  if (comm.size() == 1) return;
  Json msg;
  if (cfg) {
    msg["config"] = cfg->doc;
    msg["backend"] = backend;
    msg["resume_dir"] = resume_dir;
  }
  broadcast_string(comm, msg.dump(), 0);
}

std::string follow_run(
    Communicator& comm,
    const std::function<std::unique_ptr<Backend>(const std::string&)>& make_backend) {
  check(comm.rank() != 0, "follow_run: rank 0 leads the run");
  const Json msg = Json::parse(broadcast_string(comm, "", 0));
  if (msg.is_null()) return "";
  SessionOptions opt;
  opt.comm = &comm;
  const std::string resume_dir = msg.at("resume_dir").as_string("resume_dir");
  if (!resume_dir.empty()) {
    opt.resume_run = -1;
    opt.resume_dir = resume_dir;
  }
  const auto be = make_backend(msg.at("backend").as_string("backend"));
  RunSession session(RunConfig::from_json(msg.at("config")), *be, nullptr, std::move(opt));
  return session.run();
}

}  // namespace fp8rl
