// The run store's side of imported runs (docs/tensorboard.md): registering a run read from
// another trainer's logs, appending what each pass of the importer read, ending a followed run.
#include <unistd.h>

#include "store/run_store.hpp"
#include "store/run_store_impl.hpp"
#include "store/stored_values.hpp"

namespace fp8rl {
namespace {

// Scalar rows per INSERT statement of append_import: 6 parameters each, 960 in all (below
// 999, the smallest limit a SQLite build may have).
constexpr int kRowsPerInsert = 160;

}  // namespace

int64_t RunStore::create_imported_run(const ImportedRun& r) {
  check(r.status == run_status::kRunning || r.status == run_status::kFinished,
        "create_imported_run('" + r.name + "'): status '" + r.status +
            "' (an imported run is running or finished)");
  Impl& m = *impl_;
  const std::string what = "create_imported_run('" + r.name + "')";
  const bool live = r.status == run_status::kRunning;
  const double now = Impl::now_unix();
  return m.write(what, [&] {
    m.db.query(what,
               "INSERT INTO runs(name, status, preset, config, precision_summary, host, pid, "
               "created_at, started_at, ended_at, last_heartbeat, tags, notes, source, "
               "source_path) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11, ?12, "
               "?13, ?14)",
               r.name, r.status, r.preset, stored::json_text(r.config), r.precision_summary,
               Impl::host_name(), static_cast<int64_t>(live ? getpid() : 0), r.started_at,
               live ? std::nullopt : std::optional<double>(r.ended_at.value_or(r.started_at)), now,
               r.tags, r.notes, r.source, r.source_path)
        .run();
    return m.db.last_insert_rowid();
  });
}

void RunStore::append_import(int64_t run, const ImportBatch& b) {
  Impl& m = *impl_;
  const std::string what = run_what("append_import", run);
  for (const auto& s : b.scalars)
    check(s.key < b.keys.size(), what + ": scalar key index out of range");
  std::vector<const std::string*> names;
  names.reserve(b.keys.size());
  for (const std::string& k : b.keys) names.push_back(&k);
  const std::vector<int64_t> key_ids = m.scalar_key_ids(what, names);
  m.write(what, [&] {
    Impl::require_run(
        what, run,
        m.db.query(what,
                   "UPDATE runs SET last_step = coalesce(max(coalesce(last_step, ?2), ?2), "
                   "last_step), last_heartbeat = ?3, source_state = ?4 WHERE id = ?1",
                   run, b.last_step, Impl::now_unix(), b.state)
            .run());
    // Rows kRowsPerInsert at a time through one borrowed statement (and the rest one by one):
    // SQLite's per-statement work is then paid once per many rows.
    const std::string one = "(?, ?, ?, ?, ?, ?)";
    std::string many =
        "INSERT INTO scalar_rows(run_id, key_id, step, wall, value, nonfinite) VALUES " + one;
    for (int i = 1; i < kRowsPerInsert; ++i) many += ", " + one;
    const size_t n = b.scalars.size(), whole = n - n % kRowsPerInsert;
    if (whole > 0) {
      auto st = m.db.query(what + ": scalars", many);
      for (size_t at = 0; at < whole; at += kRowsPerInsert) {
        st.reset();
        for (int i = 0; i < kRowsPerInsert; ++i) {
          const auto& s = b.scalars[at + static_cast<size_t>(i)];
          st.bind_row(i * 6, run, key_ids[s.key], s.step, s.wall, stored::finite_or_null(s.value),
                      stored::nonfinite_or_null(s.value));
        }
        st.run();
      }
    }
    if (whole < n) {
      auto st = m.db.query(what + ": scalars",
                           "INSERT INTO scalar_rows(run_id, key_id, step, wall, value, nonfinite) "
                           "VALUES " +
                               one);
      for (size_t at = whole; at < n; ++at) {
        const auto& s = b.scalars[at];
        st.reset();
        st.bind_row(0, run, key_ids[s.key], s.step, s.wall, stored::finite_or_null(s.value),
                    stored::nonfinite_or_null(s.value));
        st.run();
      }
    }
    for (const auto& [step, h] : b.histograms)
      m.db.query(what + ": histogram '" + h.name + "'",
                 "INSERT INTO histograms(run_id, step, name, edges, counts) "
                 "VALUES (?1, ?2, ?3, ?4, ?5)",
                 run, step, h.name, stored::edges_json(h.hist.edges),
                 stored::counts_json(h.hist.counts))
          .run();
    for (const auto& e : b.events)
      m.db.query(what + ": event '" + e.event.kind + "'",
                 "INSERT INTO events(run_id, step, wall, kind, message, data) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                 run, e.step, e.wall, e.event.kind, e.event.message,
                 stored::json_text_or_null(e.event.data))
          .run();
  });
}

void RunStore::set_import_status(int64_t run, const std::string& status,
                                 std::optional<double> ended_at) {
  check(status == run_status::kRunning || status == run_status::kFinished,
        run_what("set_import_status", run) + ": status '" + status +
            "' (an imported run is running or finished)");
  const bool live = status == run_status::kRunning;
  impl_->write_run(run_what("set_import_status", run), run,
                   "UPDATE runs SET status = ?2, ended_at = ?3, host = ?4, pid = ?5 "
                   "WHERE id = ?1",
                   status,
                   live ? std::nullopt : std::optional<double>(ended_at.value_or(Impl::now_unix())),
                   Impl::host_name(), static_cast<int64_t>(live ? getpid() : 0));
}

std::optional<RunStore::RunRow> RunStore::find_imported(const std::string& source_path) {
  if (impl_->version < 6) return std::nullopt;
  std::optional<int64_t> id =
      impl_->db
          .query("find_imported('" + source_path + "')",
                 "SELECT id FROM runs WHERE source_path = ?1 AND source_path <> '' "
                 "ORDER BY id DESC LIMIT 1",
                 source_path)
          .one([](const sqlite::Row& r) { return r.integer(0); });
  return id ? find_run(*id) : std::nullopt;
}

std::string RunStore::import_state(int64_t run) {
  if (impl_->version < 6) return {};
  return impl_->db
      .query(run_what("import_state", run), "SELECT source_state FROM runs WHERE id = ?1", run)
      .one([](const sqlite::Row& r) { return r.text(0); })
      .value_or(std::string());
}

void RunStore::prepare_bulk_writes() {
  impl_->db.exec("PRAGMA cache_size = -262144", impl_->name() + ": setting the page cache");
  impl_->db.exec("PRAGMA wal_autocheckpoint = 0", impl_->name() + ": leaving checkpoints");
}

void RunStore::checkpoint() {
  impl_->db.query(impl_->name() + ": checkpoint", "PRAGMA wal_checkpoint(PASSIVE)").run();
}

}  // namespace fp8rl
