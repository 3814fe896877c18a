// One run's lifecycle, the same for `fp8rl train` (in-process) and `fp8rl worker` (serving it
// over ZeroMQ): it builds the run, records it (run row, precision history, steps, events,
// checkpoints, status) through a RunRecorder, and applies what its controller asks — pause,
// resume, stop, checkpoint, live precision and setting edits — at step boundaries. A run
// started either way therefore writes the same rows.
//
// Data-parallel runs (docs/distributed.md): every rank runs a session over the same
// Communicator. Rank 0's session is the run as the world sees it — it records, hears the
// controller and writes checkpoints; at each step boundary it sends what it applied (precision
// and setting edits, stop) to the other ranks, whose sessions apply the same before the same
// step. Those sessions have no recorder and no listener; follow_run() starts one from what
// rank 0 sends with send_run().
//
// Threads: run() runs the loop on the calling thread; the request_* methods and status() may
// be called from any thread (a worker's serving thread) while it runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "contract/live_edit.hpp"
#include "contract/run_recorder.hpp"
#include "contract/step_record.hpp"
#include "dist/communicator.hpp"
#include "rl/run_config.hpp"

namespace fp8rl {

class Backend;
class GrpoRun;

struct SessionOptions {
  std::string name;    // the run's name (empty: the config's)
  std::string preset;  // recorded with the run (empty: "custom")
  // Where checkpoints go, given the run id (-1 without a recorder). Empty: no checkpoints
  // (then a stop or checkpoint request records that none was written).
  std::function<std::string(int64_t run_id)> checkpoint_dir;
  bool checkpoint_at_end = false;  // also write one when the run finishes
  // The control and telemetry endpoints serving the run (recorded when not empty).
  std::string control_endpoint, telemetry_endpoint;
  // The worker's public CURVE key when it serves beyond loopback (recorded with the endpoints).
  std::string server_key;
  // Continue this recorded run from its checkpoint in resume_dir instead of creating one.
  std::optional<int64_t> resume_run;
  std::string resume_dir;
  // The ranks sharing the run (null: this process alone).
  Communicator* comm = nullptr;
};

// What the owner of a session hears, on the session's thread.
class SessionListener {
 public:
  virtual ~SessionListener() = default;
  // A finished step, after it is recorded (so whatever a listener passes on is already in the
  // store, like an event). run_id is -1 without a recorder.
  virtual void on_step(StepRecord& r, int64_t run_id) {
    (void)r;
    (void)run_id;
  }
  // An event the session recorded (start, pause, precision, set, checkpoint, stop, …).
  virtual void on_event(const EventRecord& e, int64_t step) {
    (void)e;
    (void)step;
  }
  // Seconds spent on the run's telemetry elsewhere since the last call (a worker's sending
  // thread): added to the next step's time/telemetry.
  virtual double take_telemetry_seconds() { return 0.0; }
};

class RunSession {
 public:
  // Cheap: the model is built when run() starts. recorder and listener may be null; both
  // must outlive the session.
  RunSession(RunConfig cfg, Backend& be, RunRecorder* recorder, SessionOptions opt,
             SessionListener* listener = nullptr);
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  // Runs to the end, a stop, or an error. Returns the final state: "finished" or "stopped".
  // On an error the run is recorded as failed (status and an error event) — as crashed when
  // another rank was lost (PeerLost) — and the exception propagates.
  std::string run();

  // --- Requests (any thread), applied at the next step boundary; a paused run wakes for them.
  void request_pause();
  void request_resume();
  void request_stop(const std::string& reason);
  void request_checkpoint();
  // A live edit (contract/live_edit.hpp): precision overrides and settings, applied together
  // at the next step boundary. Checked now against the state the run will be in once the
  // edits queued before it apply; throws fp8rl::Error naming what is wrong (and queues
  // nothing). An edit sent while the run is still starting is checked when it has started.
  void request_edit(const LiveEdit& edit);
  struct Status {
    std::string state;  // starting, running, paused, stopping, finished, stopped, failed
    int64_t step = 0;   // last completed step
    int64_t run_id = -1;
    std::string precision_summary;
    Json precision_map;  // PrecisionMap::to_json of the map in force (null while starting)
    Json settings;       // {"lr": …, …}: every live setting's value in force (null while starting)
    std::string error;   // what failed (state failed)
  };
  Status status() const;

  // The run loop (after run() has started it), for summaries; null before.
  GrpoRun* loop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Rank 0 of a data-parallel run: sends the other ranks the run to follow — its configuration,
// the backend rank 0 runs on ("cpu", "cuda") and the checkpoint folder it resumes from, which
// every rank must be able to read — or, with cfg null, that there is none. A no-op for one rank.
void send_run(Communicator& comm, const RunConfig* cfg, const std::string& backend,
              const std::string& resume_dir = "");

// Ranks other than 0: receives what send_run sent and runs it as a following session (no
// recorder; controlled by rank 0 at step boundaries) on make_backend(backend name). Returns its
// final state, or "" when rank 0 sent no run. Throws like RunSession::run.
std::string follow_run(
    Communicator& comm,
    const std::function<std::unique_ptr<Backend>(const std::string&)>& make_backend);

}  // namespace fp8rl
