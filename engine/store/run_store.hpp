// The run store: one SQLite file holding many runs (their configuration, status, per-step
// scalars, histograms, sample responses, events and precision maps). The process that runs a
// run (a worker or `fp8rl train`) writes it; others (the studio, `fp8rl runs`) read it.
//
// Concurrency: the file is in WAL mode, so readers never block the writer and several
// processes may write different runs into the same file; every write is one BEGIN IMMEDIATE
// transaction (retried with backoff when the 5 s busy timeout still gives up). A RunStore is
// one connection; its methods are serialized by an internal mutex, so one store may be shared
// between threads, though a thread of its own per store reads faster. Every failure throws
// fp8rl::Error naming what failed, with SQLite's error text as status.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "contract/run_recorder.hpp"
#include "contract/step_record.hpp"
#include "core/json.hpp"

namespace fp8rl {

class RunStore final : public RunRecorder {
 public:
  // One row of the runs table. Times are unix seconds; absent values are nullopt.
  struct RunRow {
    int64_t id = 0;
    std::string name;
    std::string status;  // running, paused, finished, failed, crashed, stopped
    std::string preset;
    Json config;
    std::string precision_summary;
    std::string host;
    int64_t pid = 0;
    double created_at = 0;
    std::optional<double> started_at;
    std::optional<double> ended_at;  // set by a terminal status
    std::optional<int64_t> last_step;
    std::optional<double> last_heartbeat;
    std::string control_endpoint;
    std::string telemetry_endpoint;
    std::string server_key;  // the worker's public CURVE key when it serves beyond loopback
    std::string checkpoint_dir;
    std::optional<int64_t> checkpoint_step;
    std::string tags;
    std::string notes;
    // The sweep the run belongs to (docs/sweeps.md) and its point there, with the point's axis
    // values ({"seed": "3", "precision": "fp8"}); nullopt, -1 and null for a run of no sweep.
    std::optional<int64_t> sweep_id;
    int64_t sweep_point = -1;
    Json axis_values;
    // Where an imported run came from (docs/tensorboard.md): "tensorboard" and its log folder;
    // "" and "" for a run this engine recorded.
    std::string source;
    std::string source_path;
  };

  // A sweep: the runs a sweep file expands to (docs/sweeps.md), queued and run by
  // `fp8rl sweep`. Times are unix seconds.
  struct SweepRow {
    int64_t id = 0;
    std::string name;
    std::string source;             // the sweep file it was read from ("" when none)
    Json spec;                      // the sweep as read (JSON form of the file)
    std::string spec_hash;          // the same sweep run again has the same hash
    std::vector<std::string> axes;  // axis names, in the file's order
    std::string replicate;          // the axis of repeats (seeds); "" when none
    int64_t concurrency = 1;        // runs at once
    double created_at = 0;
    std::optional<double> ended_at;  // set when every point has a finished or failed run
    std::string runner_host;         // the `fp8rl sweep` process running it ("" / 0: none)
    int64_t runner_pid = 0;
    std::optional<double> runner_heartbeat;

    // The preset the sweep's runs are recorded with: the sweep file's, else "sweep NAME".
    std::string recorded_preset() const;
  };

  // One point of a sweep: its axis values, its validated configuration and the run that
  // records it (the latest attempt; nullopt while queued).
  struct SweepPoint {
    int64_t sweep_id = 0;
    int64_t point = 0;  // 0, 1, … in expansion order
    std::string name;   // the run name
    Json axis_values;   // axis → value as text
    Json config;
    std::optional<int64_t> run_id;
    int64_t attempts = 0;  // runs created for the point
  };

  struct ScalarPoint {
    int64_t step;
    double wall;   // seconds since the run started
    double value;  // NaN and ±inf as recorded
  };

  struct EventRow {
    int64_t step;
    double wall;  // seconds since the run started
    EventRecord event;
  };

  // A run read from another trainer's logs, as an import registers it: its started_at and
  // created_at are the logs' first wall time (unix seconds), host and pid this process's.
  struct ImportedRun {
    std::string name;
    std::string preset;  // what the studio's preset column shows ("tensorboard")
    Json config;
    std::string tags;
    std::string notes;
    std::string precision_summary;
    std::string source;       // "tensorboard"
    std::string source_path;  // the log folder, absolute
    double started_at = 0;
    std::string status;              // running (followed) or finished
    std::optional<double> ended_at;  // finished: its last event (started_at when nullopt)
  };

  // What one pass of an import appends to a run: scalars (names by index into keys, inserted
  // in the order given), histograms and events, the highest step, and the importer's state.
  struct ImportBatch {
    struct Scalar {
      int64_t step;
      double wall;  // seconds since the run started
      uint32_t key;
      double value;
    };
    std::vector<std::string> keys;
    std::vector<Scalar> scalars;
    std::vector<std::pair<int64_t, HistogramRecord>> histograms;
    std::vector<EventRow> events;
    std::optional<int64_t> last_step;
    std::string state;  // the importer's state (JSON text), kept with the run
    bool empty() const { return scalars.empty() && histograms.empty() && events.empty(); }
  };

  // Opens (read_only = false: creating it and its parent directories when missing) the store
  // at path and brings its schema up to date. read_only opens an existing store for reading
  // only: it never creates, migrates or writes, and its write methods throw. Throws when the
  // file cannot be opened, is not a SQLite database or not a run store, or has a schema newer
  // than this build supports.
  explicit RunStore(const std::string& path, bool read_only = false);
  ~RunStore();
  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  // The path given to the constructor.
  const std::string& path() const;
  // Whether the store was opened read-only.
  bool read_only() const;
  // The schema version of the file (after migration, unless opened read-only).
  int schema_version() const;
  // The schema version this build creates and migrates to.
  static int latest_schema_version();
  // The SQL script that takes a database from version − 1 to version (1 … latest). Scripts
  // of released versions never change; tests use them to build old databases.
  static const std::string& migration_script(int version);

  // --- Writers (each one transaction)

  // Registers a new run with status "running", this host and process id, created_at =
  // started_at = last_heartbeat = now. Returns its id.
  int64_t create_run(const std::string& name, const std::string& preset, const Json& config,
                     const std::string& precision_summary) override;
  // Sets the status: running, paused, finished, failed, crashed or stopped (anything else
  // throws, listing them). The terminal four set ended_at to now; running and paused clear it
  // (a resumed run is no longer ended). Throws when there is no such run.
  void set_status(int64_t run, const std::string& status) override;
  void reopen_run(int64_t run) override;
  // Writes every scalar, histogram, sample and event of the step record and sets the run's
  // last_step to r.step and last_heartbeat to now, all in one transaction (nothing of it is
  // written when any of it fails). Events get r.wall_seconds as their wall time.
  void record_step(int64_t run, const StepRecord& r) override;
  // Several steps in one transaction (all or none): imports and generated stores.
  void record_steps(int64_t run, std::span<const StepRecord> steps);
  // Writes one event outside a step record; its wall time is now − the run's start.
  void record_event(int64_t run, int64_t step, const EventRecord& e) override;
  // Writes the run's precision map (layer → format, as JSON) in effect from step on.
  void record_precision(int64_t run, int64_t step, const Json& map) override;
  // Sets last_heartbeat to now (a reader takes a stale heartbeat of a running run as a crash).
  void heartbeat(int64_t run) override;
  // Sets the addresses of the run's control and telemetry sockets ("" when none) and the
  // worker's public CURVE key ("" when it serves loopback or IPC only).
  void set_endpoints(int64_t run, const std::string& control, const std::string& telemetry,
                     const std::string& server_key) override;
  // Records the run's latest checkpoint (its directory and step).
  void set_checkpoint(int64_t run, const std::string& dir, int64_t step) override;
  // The precision summary shown in run lists (after a live precision edit).
  void set_precision_summary(int64_t run, const std::string& summary) override;
  // Deletes everything a run recorded after `step` (a resumed run records those steps again).
  void truncate_after(int64_t run, int64_t step) override;
  // Sets the user's tags and notes of the run.
  void set_tags_notes(int64_t run, const std::string& tags, const std::string& notes);

  // --- Imported runs (docs/tensorboard.md; run_store_imports.cpp)

  // Registers an imported run; returns its id. Its status must be running or finished.
  int64_t create_imported_run(const ImportedRun& run);
  // Appends a pass of an import and stores the importer's state, in one transaction; sets
  // last_step (when the batch has one) and last_heartbeat to now.
  void append_import(int64_t run, const ImportBatch& batch);
  // Ends a followed run: its status (finished, or running again) and, for finished, ended_at
  // (unix seconds; now when nullopt).
  void set_import_status(int64_t run, const std::string& status, std::optional<double> ended_at);
  // The imported run read from this log folder (source_path), or nullopt.
  std::optional<RunRow> find_imported(const std::string& source_path);
  // The importer's state of the run ("" when none).
  std::string import_state(int64_t run);
  // Settles this connection for writing millions of rows (an import): a 256 MB page cache,
  // and no checkpoints of its own — another connection calls checkpoint() on another thread,
  // so that copying the log into the database is not on the writing thread (without that, the
  // log grows until the last connection closes).
  void prepare_bulk_writes();
  // A passive checkpoint: copies what the write-ahead log holds into the database file as far
  // as it can without waiting for any reader or writer.
  void checkpoint();

  // --- Sweeps (run_store_sweeps.cpp)

  // Records a sweep and its points in one transaction; returns its id. The SweepRow's id,
  // created_at, ended_at and runner fields are ignored.
  int64_t create_sweep(const SweepRow& sweep, const std::vector<SweepPoint>& points);
  // Every sweep, by id; one sweep; a sweep's points, by point.
  std::vector<SweepRow> list_sweeps();
  std::optional<SweepRow> find_sweep(int64_t id);
  std::vector<SweepPoint> sweep_points(int64_t sweep);
  // Makes this process the sweep's runner (its host, pid and a heartbeat now) unless another
  // live process runs it: returns "" or who runs it ("sweep 3 is being run by process 4242 on
  // host"). A runner whose process is gone, or whose heartbeat is older than stale_seconds,
  // no longer holds the sweep.
  std::string claim_sweep(int64_t sweep, double stale_seconds = 30);
  // The runner's heartbeat (claim_sweep's process only).
  void sweep_heartbeat(int64_t sweep);
  // Lets the sweep go (no runner); ended: every point is done, ended_at is set.
  void release_sweep(int64_t sweep, bool ended);
  // The next run this store object creates (create_run) belongs to the sweep's point: its row
  // records the sweep, the point and the point's axis values, and the point records the run
  // (attempts + 1), in create_run's transaction, so that a run is never a sweep's without the
  // sweep knowing it. Throws when there is no such point.
  void set_next_run_sweep_point(int64_t sweep, int64_t point);

  // --- Readers (each sees the latest committed state)

  // Every run, by id. The configuration (never changed once stored) is read for runs with an id
  // above configs_known only, the others' is null: a reader that keeps the configurations it has
  // (the studio, every 2 s) need not read and parse ten thousand of them again.
  std::vector<RunRow> list_runs(int64_t configs_known = -1);
  // The run with this id, or nullopt.
  std::optional<RunRow> find_run(int64_t id);
  // The scalar keys the run has recorded, sorted.
  std::vector<std::string> scalar_keys(int64_t run);
  // The run's values of key with step > after_step, by step (pass the last step seen to poll
  // incrementally).
  std::vector<ScalarPoint> scalar_series(int64_t run, const std::string& key,
                                         int64_t after_step = std::numeric_limits<int64_t>::min());
  // The histogram names the run has recorded, sorted.
  std::vector<std::string> histogram_names(int64_t run);
  // The run's histograms called name, by step.
  std::vector<std::pair<int64_t, Histogram>> histogram_series(int64_t run, const std::string& name);
  // The run's latest sample responses, newest first; at most limit (all when limit < 0).
  std::vector<std::pair<int64_t, SampleRecord>> samples(int64_t run, int64_t limit);
  // The run's layer audits (step, row), by step then layer: every audited step, or only `step`
  // when step ≥ 0.
  std::vector<std::pair<int64_t, AuditRow>> audit(int64_t run, int64_t step = -1);
  // The run's events in the order they were recorded.
  std::vector<EventRow> events(int64_t run);
  // The run's precision maps, by step.
  std::vector<std::pair<int64_t, Json>> precision_history(int64_t run);
  // Writes the run's scalars as CSV: header "step,wall,<keys sorted>", one row per step by
  // step, an empty cell where a step lacks a key, NaN and ±inf as nan, inf, -inf.
  void export_csv(int64_t run, std::ostream& out);
  // SQLite's integrity check: "ok" when the file is sound, else its findings, one a line.
  std::string integrity_check();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether the process a run row names is gone: a live status (running, paused), this host, and
// no process with its pid.
bool run_process_gone(const RunStore::RunRow& r);
// Marks the runs of this host whose process is gone as crashed (an event says so; nothing
// recorded is lost). Returns how many were marked. Needs write access to the database.
int mark_crashed_runs(const std::string& db_path);

}  // namespace fp8rl
