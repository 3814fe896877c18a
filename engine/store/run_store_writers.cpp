// The run store's writers: each one write transaction.
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>

#include "store/run_store.hpp"
#include "store/run_store_impl.hpp"
#include "store/stored_values.hpp"

namespace fp8rl {
namespace {

// The statuses set_status accepts, in the order its error lists them.
constexpr std::array<const char*, 6> kStatuses = {run_status::kRunning,  run_status::kPaused,
                                                  run_status::kFinished, run_status::kFailed,
                                                  run_status::kCrashed,  run_status::kStopped};

// Throws "invalid run status '<status>' (one of: …)" unless status is one of kStatuses.
void require_known_status(const std::string& status) {
  bool known = false;
  std::string list;
  for (const char* s : kStatuses) {
    known = known || status == s;
    list += list.empty() ? s : std::string(", ") + s;
  }
  if (!known) throw Error("invalid run status '" + status + "' (one of: " + list + ")");
}

std::string this_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace

double RunStore::Impl::now_unix() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string RunStore::Impl::host_name() {
  return this_host();
}

int64_t RunStore::create_run(const std::string& name, const std::string& preset, const Json& config,
                             const std::string& precision_summary) {
  Impl& m = *impl_;
  const std::string what = "create_run('" + name + "')";
  const auto sweep_point = m.next_sweep_point;
  const int64_t id = m.write(what, [&] {
    m.db.query(what,
               "INSERT INTO runs(name, status, preset, config, precision_summary, host, "
               "pid, created_at, started_at, last_heartbeat) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?8)",
               name, run_status::kRunning, preset, stored::json_text(config), precision_summary,
               Impl::host_name(), static_cast<int64_t>(getpid()), Impl::now_unix())
        .run();
    const int64_t run = m.db.last_insert_rowid();
    if (sweep_point) {
      // The run and its sweep point name each other, in this transaction.
      const auto [sweep, point] = *sweep_point;
      const std::string tag =
          what + ": sweep " + std::to_string(sweep) + " point " + std::to_string(point);
      const int64_t changed =
          m.db.query(tag,
                     "UPDATE sweep_points SET run_id = ?3, attempts = attempts + 1 "
                     "WHERE sweep_id = ?1 AND point = ?2",
                     sweep, point, run)
              .run();
      if (changed == 0) throw Error(tag + ": no such sweep point");
      m.db.query(tag,
                 "UPDATE runs SET sweep_id = ?1, sweep_point = ?2, axis_values = "
                 "(SELECT axis_values FROM sweep_points WHERE sweep_id = ?1 AND point = ?2) "
                 "WHERE id = ?3",
                 sweep, point, run)
          .run();
    }
    return run;
  });
  m.next_sweep_point.reset();
  return id;
}

void RunStore::set_status(int64_t run, const std::string& status) {
  require_known_status(status);
  // A terminal status ends the run; running or paused again (resumed) it is no longer ended.
  const bool terminal = !run_status::is_live(status);
  impl_->write_run(run_what("set_status", run), run,
                   "UPDATE runs SET status = ?2, "
                   "ended_at = CASE WHEN ?3 THEN coalesce(ended_at, ?4) ELSE NULL END, "
                   "started_at = CASE WHEN ?5 THEN coalesce(started_at, ?4) "
                   "ELSE started_at END WHERE id = ?1",
                   status, terminal, Impl::now_unix(), status == run_status::kRunning);
}

void RunStore::reopen_run(int64_t run) {
  impl_->write_run(run_what("reopen_run", run), run,
                   "UPDATE runs SET status = ?2, ended_at = NULL, host = ?3, pid = ?4, "
                   "last_heartbeat = ?5 WHERE id = ?1",
                   run_status::kRunning, Impl::host_name(), static_cast<int64_t>(getpid()),
                   Impl::now_unix());
}

bool run_process_gone(const RunStore::RunRow& r) {
  return run_status::is_live(r.status) && r.host == this_host() && r.pid > 0 &&
         ::kill(static_cast<pid_t>(r.pid), 0) != 0 && errno != EPERM;
}

int mark_crashed_runs(const std::string& db_path) {
  std::vector<int64_t> dead;
  {
    RunStore ro(db_path, /*read_only=*/true);
    for (const auto& r : ro.list_runs())
      if (run_process_gone(r)) dead.push_back(r.id);
  }
  if (dead.empty()) return 0;
  RunStore rw(db_path);
  for (int64_t id : dead) {
    const auto row = rw.find_run(id);
    // An imported run's process is the one following its log folder, not the trainer.
    const bool imported = row && !row->source.empty();
    rw.record_event(id, row && row->last_step ? *row->last_step : 0,
                    {"crash",
                     imported ? "the process following its log folder is gone; what it had "
                                "read is kept"
                              : "the worker process is gone; last completed step recorded",
                     Json()});
    rw.set_status(id, run_status::kCrashed);
  }
  return static_cast<int>(dead.size());
}

void RunStore::record_step(int64_t run, const StepRecord& r) {
  record_steps(run, std::span(&r, 1));
}

void RunStore::record_steps(int64_t run, std::span<const StepRecord> steps) {
  if (steps.empty()) return;
  Impl& m = *impl_;
  const std::string what = run_what("record_step", run) + " steps " +
                           std::to_string(steps.front().step) + "–" +
                           std::to_string(steps.back().step);
  std::vector<const std::string*> keys;
  for (const StepRecord& r : steps)
    for (const auto& kv : r.scalars) keys.push_back(&kv.first);
  const std::vector<int64_t> ids = m.scalar_key_ids(what, keys);
  m.write(what, [&] {
    size_t next_id = 0;
    for (const StepRecord& r : steps) {
      m.insert_step(run, r, std::span(ids).subspan(next_id, r.scalars.size()));
      next_id += r.scalars.size();
    }
  });
}

std::vector<int64_t> RunStore::Impl::scalar_key_ids(const sqlite::What& what,
                                                    const std::vector<const std::string*>& keys) {
  std::lock_guard lock(key_ids_mu);
  std::vector<const std::string*> missing;
  for (const std::string* k : keys)
    if (!key_ids.contains(*k)) missing.push_back(k);
  if (!missing.empty()) {
    std::unordered_map<std::string, int64_t> added;
    const std::string names = what.text + ": scalar names";
    write(names, [&] {
      for (const std::string* k : missing) {
        if (added.contains(*k)) continue;
        db.query(names, "INSERT INTO scalar_keys(key) VALUES (?1) ON CONFLICT(key) DO NOTHING", *k)
            .run();
        added[*k] = db.query(names, "SELECT id FROM scalar_keys WHERE key = ?1", *k)
                        .one([](const sqlite::Row& r) { return r.integer(0); })
                        .value();
      }
    });
    key_ids.merge(added);
  }
  std::vector<int64_t> ids;
  ids.reserve(keys.size());
  for (const std::string* k : keys) ids.push_back(key_ids.at(*k));
  return ids;
}

void RunStore::Impl::insert_step(int64_t run, const StepRecord& r,
                                 std::span<const int64_t> scalar_ids) {
  Impl& m = *this;
  const std::string what = run_what("record_step", run) + " step " + std::to_string(r.step);
  {
    Impl::require_run(
        what, run,
        m.db.query(what, "UPDATE runs SET last_step = ?2, last_heartbeat = ?3 WHERE id = ?1", run,
                   r.step, Impl::now_unix())
            .run());
    // One row of the step: run and step bind ?1 and ?2, values the rest. The row's words
    // become a What at the call, so that an error names the line of its INSERT.
    auto insert = [&](const sqlite::What& row, const char* sql, const auto&... values) {
      m.db.query(row, sql, run, r.step, values...).run();
    };
    size_t i = 0;
    for (const auto& [key, value] : r.scalars)
      insert(what + ": scalar '" + key + "'",
             "INSERT INTO scalar_rows(run_id, step, wall, key_id, value, nonfinite) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
             r.wall_seconds, scalar_ids[i++], stored::finite_or_null(value),
             stored::nonfinite_or_null(value));
    for (const HistogramRecord& h : r.histograms)
      insert(what + ": histogram '" + h.name + "'",
             "INSERT INTO histograms(run_id, step, name, edges, counts) "
             "VALUES (?1, ?2, ?3, ?4, ?5)",
             h.name, stored::edges_json(h.hist.edges), stored::counts_json(h.hist.counts));
    for (const SampleRecord& x : r.samples)
      insert(what + ": sample",
             "INSERT INTO samples(run_id, step, prompt, response, answer, reward, detail) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
             x.prompt, x.response, x.answer, x.reward, stored::sample_detail_or_null(x));
    for (const AuditRow& a : r.audit)
      insert(what + ": layer audit",
             "INSERT INTO layer_audit(run_id, step, layer, module, generator, trainer, "
             "max_abs_diff, ok) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
             a.layer, a.module, a.generator_precision, a.trainer_precision,
             stored::finite_or_null(a.max_abs_diff), int64_t{a.ok});
    for (const EventRecord& e : r.events)
      insert(what + ": event '" + e.kind + "'",
             "INSERT INTO events(run_id, step, wall, kind, message, data) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
             r.wall_seconds, e.kind, e.message, stored::json_text_or_null(e.data));
  }
}

void RunStore::record_event(int64_t run, int64_t step, const EventRecord& e) {
  // INSERT … SELECT FROM runs: the wall time comes from the run's start, and no row is
  // inserted when there is no such run.
  impl_->write_run(run_what("record_event", run) + " '" + e.kind + "'", run,
                   "INSERT INTO events(run_id, step, wall, kind, message, data) "
                   "SELECT id, ?2, ?3 - coalesce(started_at, created_at), ?4, ?5, ?6 "
                   "FROM runs WHERE id = ?1",
                   step, Impl::now_unix(), e.kind, e.message, stored::json_text_or_null(e.data));
}

void RunStore::record_precision(int64_t run, int64_t step, const Json& map) {
  impl_->write_run(run_what("record_precision", run), run,
                   "INSERT INTO precision_history(run_id, step, map) "
                   "SELECT id, ?2, ?3 FROM runs WHERE id = ?1",
                   step, stored::json_text(map));
}

void RunStore::heartbeat(int64_t run) {
  impl_->write_run(run_what("heartbeat", run), run,
                   "UPDATE runs SET last_heartbeat = ?2 WHERE id = ?1", Impl::now_unix());
}

void RunStore::set_endpoints(int64_t run, const std::string& control, const std::string& telemetry,
                             const std::string& server_key) {
  impl_->write_run(run_what("set_endpoints", run), run,
                   "UPDATE runs SET control_endpoint = ?2, telemetry_endpoint = ?3, "
                   "server_key = ?4 WHERE id = ?1",
                   control, telemetry, server_key);
}

void RunStore::set_checkpoint(int64_t run, const std::string& dir, int64_t step) {
  impl_->write_run(run_what("set_checkpoint", run), run,
                   "UPDATE runs SET checkpoint_dir = ?2, checkpoint_step = ?3 WHERE id = ?1", dir,
                   step);
}

void RunStore::set_precision_summary(int64_t run, const std::string& summary) {
  impl_->write_run(run_what("set_precision_summary", run), run,
                   "UPDATE runs SET precision_summary = ?2 WHERE id = ?1", summary);
}

void RunStore::set_tags_notes(int64_t run, const std::string& tags, const std::string& notes) {
  impl_->write_run(run_what("set_tags_notes", run), run,
                   "UPDATE runs SET tags = ?2, notes = ?3 WHERE id = ?1", tags, notes);
}

void RunStore::truncate_after(int64_t run, int64_t step) {
  Impl& m = *impl_;
  const std::string what = run_what("truncate_after", run);
  m.write(what, [&] {
    for (const char* table :
         {"scalar_rows", "histograms", "samples", "events", "precision_history", "layer_audit"})
      m.db.query(what, std::string("DELETE FROM ") + table + " WHERE run_id = ?1 AND step > ?2",
                 run, step)
          .run();
    Impl::require_run(
        what, run,
        m.db.query(what, "UPDATE runs SET last_step = ?2 WHERE id = ?1", run, step).run());
  });
}

}  // namespace fp8rl
