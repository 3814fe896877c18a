#include "store/run_store_schema.hpp"

#include "core/error.hpp"

namespace fp8rl::run_store_schema {

// A released script never changes; a schema change is a new script appended here.
const std::vector<std::string>& migrations() {
  static const std::vector<std::string> scripts = {
      // 1: the initial schema.
      R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  preset TEXT NOT NULL DEFAULT '',
  config TEXT NOT NULL DEFAULT '{}',
  precision_summary TEXT NOT NULL DEFAULT '',
  host TEXT NOT NULL DEFAULT '',
  pid INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL,
  started_at REAL,
  ended_at REAL,
  last_step INTEGER,
  last_heartbeat REAL,
  control_endpoint TEXT NOT NULL DEFAULT '',
  telemetry_endpoint TEXT NOT NULL DEFAULT '',
  checkpoint_dir TEXT NOT NULL DEFAULT '',
  checkpoint_step INTEGER
);
-- value is NULL for NaN and ±inf (SQLite stores NaN as NULL); nonfinite then says which.
CREATE TABLE scalars (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  wall REAL NOT NULL,
  key TEXT NOT NULL,
  value REAL,
  nonfinite TEXT
);
CREATE INDEX scalars_run_key_step ON scalars(run_id, key, step);
CREATE TABLE histograms (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  name TEXT NOT NULL,
  edges TEXT NOT NULL,
  counts TEXT NOT NULL
);
CREATE INDEX histograms_run_name_step ON histograms(run_id, name, step);
CREATE TABLE samples (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  prompt TEXT NOT NULL,
  response TEXT NOT NULL,
  answer TEXT NOT NULL,
  reward REAL
);
CREATE TABLE events (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  wall REAL NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL,
  data TEXT
);
CREATE TABLE precision_history (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  map TEXT NOT NULL
);
)sql",
      // 2: the user's tags and notes; per-run indexes for the samples, events and precision
      // readers (without them each read scans every run's rows).
      R"sql(
ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
CREATE INDEX samples_run_step ON samples(run_id, step);
CREATE INDEX events_run_step ON events(run_id, step);
CREATE INDEX precision_history_run_step ON precision_history(run_id, step);
)sql",
      // 3: per-token detail of samples (tokens and p − g, JSON), and the layer audit.
      R"sql(
ALTER TABLE samples ADD COLUMN detail TEXT;
CREATE TABLE layer_audit (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  layer INTEGER NOT NULL,
  module TEXT NOT NULL,
  generator TEXT NOT NULL,
  trainer TEXT NOT NULL,
  max_abs_diff REAL,
  ok INTEGER NOT NULL
);
CREATE INDEX layer_audit_run_step ON layer_audit(run_id, step);
)sql",
      // 4: the public CURVE key of a worker that serves beyond this machine ('' for none).
      R"sql(
ALTER TABLE runs ADD COLUMN server_key TEXT NOT NULL DEFAULT '';
)sql",
      // 5: sweeps (docs/sweeps.md): a sweep's definition and its points (axis values, the
      // validated configuration, the run recording the point), and on each run the sweep and
      // point it belongs to with its axis values (JSON), so run lists group without a join.
      R"sql(
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  spec TEXT NOT NULL DEFAULT '{}',
  spec_hash TEXT NOT NULL DEFAULT '',
  axes TEXT NOT NULL DEFAULT '[]',
  replicate TEXT NOT NULL DEFAULT '',
  concurrency INTEGER NOT NULL DEFAULT 1,
  created_at REAL NOT NULL,
  ended_at REAL,
  runner_host TEXT NOT NULL DEFAULT '',
  runner_pid INTEGER NOT NULL DEFAULT 0,
  runner_heartbeat REAL
);
CREATE TABLE sweep_points (
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  point INTEGER NOT NULL,
  name TEXT NOT NULL,
  axis_values TEXT NOT NULL DEFAULT '{}',
  config TEXT NOT NULL DEFAULT '{}',
  run_id INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sweep_id, point)
);
ALTER TABLE runs ADD COLUMN sweep_id INTEGER;
ALTER TABLE runs ADD COLUMN sweep_point INTEGER;
ALTER TABLE runs ADD COLUMN axis_values TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_sweep_point ON runs(sweep_id, sweep_point);
)sql",
      // 6: runs imported from other trainers' logs (docs/tensorboard.md): where they came from
      // ('' for a run this engine recorded; 'tensorboard'), the log folder, and how far the
      // importer has read it (JSON), so that importing again or following continues there.
      R"sql(
ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN source_path TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN source_state TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_source_path ON runs(source_path) WHERE source_path <> '';
)sql",
      // 7: a scalar's name stored once (scalar_keys) and its rows holding the name's id, so
      // that rows and their (run, key, step) index entries are about half as long and compare
      // integers instead of text (importing 10 million scalars was bound by SQLite's writer).
      // The view `scalars` keeps the columns of versions 1-6 for SQL written against them.
      R"sql(
CREATE TABLE scalar_keys (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE
);
INSERT INTO scalar_keys(key) SELECT DISTINCT key FROM scalars ORDER BY key;
CREATE TABLE scalar_rows (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key_id INTEGER NOT NULL REFERENCES scalar_keys(id),
  step INTEGER NOT NULL,
  wall REAL NOT NULL,
  value REAL,
  nonfinite TEXT
);
INSERT INTO scalar_rows(run_id, key_id, step, wall, value, nonfinite)
  SELECT s.run_id, k.id, s.step, s.wall, s.value, s.nonfinite
  FROM scalars s JOIN scalar_keys k ON k.key = s.key ORDER BY s.rowid;
DROP TABLE scalars;
CREATE INDEX scalar_rows_run_key_step ON scalar_rows(run_id, key_id, step);
CREATE VIEW scalars(run_id, step, wall, key, value, nonfinite) AS
  SELECT r.run_id, r.step, r.wall, k.key, r.value, r.nonfinite
  FROM scalar_rows r JOIN scalar_keys k ON k.id = r.key_id;
)sql",
  };
  return scripts;
}

int latest_version() {
  return static_cast<int>(migrations().size());
}

int user_version(sqlite::Connection& db, const sqlite::What& what) {
  return db.query(what, "PRAGMA user_version")
      .one([](const sqlite::Row& r) { return static_cast<int>(r.integer(0)); })
      .value_or(0);
}

void require_supported(const std::string& name, int version) {
  const int latest = latest_version();
  if (version > latest)
    throw Error(name + ": database schema version " + std::to_string(version) +
                " is newer than this build supports (" + std::to_string(latest) + ")");
}

int migrate(sqlite::Connection& db, const std::string& name, int from) {
  for (int target = from + 1; target <= latest_version(); ++target) {
    const std::string what = name + ": migrating to schema version " + std::to_string(target);
    db.write(what, [&] {
      // Another process may have migrated the file since we read its version.
      const int current = user_version(db, what);
      if (current >= target) return;
      if (current == 0) {
        const auto tables =
            db.query(what, "SELECT count(*) FROM sqlite_master").one([](const sqlite::Row& r) {
              return r.integer(0);
            });
        if (tables.value_or(0) > 0)
          throw Error(name + " is not a run store (it has tables but no schema version)");
      }
      db.exec(migrations()[static_cast<size_t>(target - 1)], what);
      db.exec("PRAGMA user_version = " + std::to_string(target), what);
    });
  }
  const int version = user_version(db, name + ": reading the schema version");
  require_supported(name, version);
  return version;
}

}  // namespace fp8rl::run_store_schema
