#include "store/run_store.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <ostream>
#include <source_location>
#include <thread>
#include <unordered_map>

#include "core/error.hpp"

namespace fp8rl {
namespace {

// Migrations, oldest first: migrations[v - 1] takes a database from version v − 1 to v. A
// released script never changes; a schema change is a new script appended here.
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
  };
  return scripts;
}

constexpr int kBusyTimeoutMs = 5000;
// BEGIN IMMEDIATE attempts when the busy handler gives up (another writer held the file for the
// whole timeout), with doubling sleeps from kFirstBackoffMs.
constexpr int kBeginAttempts = 5;
constexpr int kFirstBackoffMs = 50;

constexpr std::array<const char*, 6> kStatuses = {"running", "paused",  "finished",
                                                  "failed",  "crashed", "stopped"};
bool is_terminal(const std::string& s) {
  return s == "finished" || s == "failed" || s == "crashed" || s == "stopped";
}

double now_unix() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

const char* nonfinite_name(double v) {
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

double nonfinite_value(const std::string& name) {
  if (name == "inf") return std::numeric_limits<double>::infinity();
  if (name == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

// JSON has no NaN or inf: they are written as the strings "nan", "inf", "-inf" (as the
// telemetry line does), so a stored document always parses again.
Json without_nonfinite(const Json& j) {
  if (j.is_number()) {
    const double v = j.as_number();
    return std::isfinite(v) ? j : Json(nonfinite_name(v));
  }
  if (j.is_array()) {
    Json::Array a;
    for (const Json& x : j.as_array()) a.push_back(without_nonfinite(x));
    return Json(std::move(a));
  }
  if (j.is_object()) {
    Json::Object o;
    for (const auto& [k, x] : j.as_object()) o.emplace(k, without_nonfinite(x));
    return Json(std::move(o));
  }
  return j;
}

std::string edges_json(const std::vector<double>& edges) {
  Json::Array a;
  a.reserve(edges.size());
  for (double e : edges) a.push_back(std::isfinite(e) ? Json(e) : Json(nonfinite_name(e)));
  return Json(std::move(a)).dump();
}

std::string counts_json(const std::vector<int64_t>& counts) {
  Json::Array a;
  a.reserve(counts.size());
  for (int64_t c : counts) a.push_back(Json(c));
  return Json(std::move(a)).dump();
}

// Shortest text that reads back as the same double; nan, inf, -inf otherwise.
std::string format_number(double v) {
  if (!std::isfinite(v)) return nonfinite_name(v);
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

// A CSV field, quoted (RFC 4180) when it holds a comma, quote or line break.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}

// Throws Error("<what>: <SQLite's message>", sqlite3_errstr(rc)).
[[noreturn]] void fail(sqlite3* db, const std::string& what, int rc,
                       std::source_location where = std::source_location::current()) {
  const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw Error(what + ": " + msg, sqlite3_errstr(rc), where);
}

// A cached statement borrowed for one use: bind, step, read columns; reset on destruction so
// that it holds no read snapshot between uses (a WAL reader would otherwise keep seeing old
// data and block checkpoints).
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* s, std::string what) : db_(db), s_(s), what_(std::move(what)) {}
  ~Stmt() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind_int(int i, int64_t v) { return checked(sqlite3_bind_int64(s_, i, v)); }
  Stmt& bind_real(int i, double v) { return checked(sqlite3_bind_double(s_, i, v)); }
  Stmt& bind_null(int i) { return checked(sqlite3_bind_null(s_, i)); }
  Stmt& bind_text(int i, const std::string& v) {
    return checked(sqlite3_bind_text64(s_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }

  // Steps once: true with a row, false when done.
  bool next(std::source_location where = std::source_location::current()) {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, what_, rc, where);
  }
  // Steps a statement without results to completion.
  void run(std::source_location where = std::source_location::current()) {
    while (next(where)) {
    }
  }

  bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  int64_t integer(int c) const { return sqlite3_column_int64(s_, c); }
  double real(int c) const {
    // A NULL REAL is how SQLite keeps a NaN.
    return is_null(c) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(s_, c);
  }
  std::string text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string();
  }
  std::optional<int64_t> opt_integer(int c) const {
    return is_null(c) ? std::nullopt : std::optional<int64_t>(integer(c));
  }
  std::optional<double> opt_real(int c) const {
    return is_null(c) ? std::nullopt : std::optional<double>(real(c));
  }
  // Parses a JSON column, naming the column and row's context when it is malformed.
  Json json(int c) const {
    if (is_null(c)) return Json();
    try {
      return Json::parse(text(c));
    } catch (const Error& e) {
      throw Error(what_ + ": stored " + sqlite3_column_name(s_, c) +
                  " is not JSON: " + e.message());
    }
  }

 private:
  Stmt& checked(int rc) {
    if (rc != SQLITE_OK) fail(db_, what_ + ": bind", rc);
    return *this;
  }

  sqlite3* db_;
  sqlite3_stmt* s_;
  std::string what_;
};

std::string run_what(const char* op, int64_t run) {
  return std::string(op) + "(run " + std::to_string(run) + ")";
}

}  // namespace

struct RunStore::Impl {
  std::string path;
  bool read_only = false;
  sqlite3* db = nullptr;
  int version = 0;
  std::mutex mu;
  // Prepared statements by SQL text, prepared once per store.
  std::unordered_map<std::string, sqlite3_stmt*> statements;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    for (auto& [sql, s] : statements) sqlite3_finalize(s);
    if (db) sqlite3_close_v2(db);
  }

  std::string name() const { return "run store '" + path + "'"; }

  [[noreturn]] void fail(const std::string& what, int rc,
                         std::source_location where = std::source_location::current()) const {
    fp8rl::fail(db, what, rc, where);
  }

  // The cached statement for sql (prepared on first use), borrowed for one use.
  Stmt prepare(const std::string& sql, std::string what) {
    auto it = statements.find(sql);
    if (it == statements.end()) {
      sqlite3_stmt* s = nullptr;
      const int rc = sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size()) + 1,
                                        SQLITE_PREPARE_PERSISTENT, &s, nullptr);
      if (rc != SQLITE_OK) fail(what + ": prepare", rc);
      it = statements.emplace(sql, s).first;
    }
    return Stmt(db, it->second, std::move(what));
  }

  // Runs SQL without results (pragmas, scripts).
  void exec(const std::string& sql, const std::string& what) {
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) fail(what, rc);
  }

  void require_writable(const std::string& what) const {
    if (read_only) throw Error(name() + " is open read-only: cannot " + what);
  }

  int read_user_version(const std::string& what);

  // Runs body in one BEGIN IMMEDIATE transaction: committed when it returns, rolled back when
  // it throws. BEGIN IMMEDIATE takes the write lock up front (waiting in the busy handler), so
  // the statements inside never meet SQLITE_BUSY half-way.
  template <class F>
  void write(const std::string& what, F&& body) {
    require_writable(what);
    for (int attempt = 1;; ++attempt) {
      const int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) break;
      if ((rc & 0xff) != SQLITE_BUSY || attempt == kBeginAttempts)
        fail(what + ": cannot begin a write transaction", rc);
      std::this_thread::sleep_for(std::chrono::milliseconds(kFirstBackoffMs << (attempt - 1)));
    }
    try {
      body();
      const int rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) fail(what + ": commit", rc);
    } catch (...) {
      // Fails harmlessly when SQLite already rolled back (e.g. after SQLITE_FULL).
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  // Throws when the last UPDATE or INSERT … SELECT FROM runs touched no row.
  void require_run(const std::string& what, int64_t run) const {
    if (sqlite3_changes(db) == 0) throw Error(what + ": no run with id " + std::to_string(run));
  }

  void migrate();
  std::string run_select(const char* where_clause) const;
  static RunRow run_row(const Stmt& s);
};

int RunStore::Impl::read_user_version(const std::string& what) {
  Stmt s = prepare("PRAGMA user_version", what);
  return s.next() ? static_cast<int>(s.integer(0)) : 0;
}

void RunStore::Impl::migrate() {
  const int latest = latest_schema_version();
  for (int target = version + 1; target <= latest; ++target) {
    const std::string what = name() + ": migrating to schema version " + std::to_string(target);
    write(what, [&] {
      // Another process may have migrated the file since we read its version.
      const int current = read_user_version(what);
      if (current >= target) return;
      if (current == 0) {
        Stmt s = prepare("SELECT count(*) FROM sqlite_master", what);
        if (s.next() && s.integer(0) > 0)
          throw Error(name() + " is not a run store (it has tables but no schema version)");
      }
      exec(migrations()[static_cast<size_t>(target - 1)], what);
      exec("PRAGMA user_version = " + std::to_string(target), what);
    });
  }
  version = read_user_version(name() + ": reading the schema version");
  if (version > latest)
    throw Error(name() + ": database schema version " + std::to_string(version) +
                " is newer than this build supports (" + std::to_string(latest) + ")");
}

std::string RunStore::Impl::run_select(const char* where_clause) const {
  // A read-only store may be older than this build: version 1 has no tags or notes.
  std::string sql =
      "SELECT id, name, status, preset, config, precision_summary, host, pid, created_at, "
      "started_at, ended_at, last_step, last_heartbeat, control_endpoint, telemetry_endpoint, "
      "checkpoint_dir, checkpoint_step, ";
  sql += version >= 2 ? "tags, notes" : "'' AS tags, '' AS notes";
  sql += " FROM runs ";
  sql += where_clause;
  return sql;
}

RunStore::RunRow RunStore::Impl::run_row(const Stmt& s) {
  RunRow r;
  r.id = s.integer(0);
  r.name = s.text(1);
  r.status = s.text(2);
  r.preset = s.text(3);
  r.config = s.json(4);
  r.precision_summary = s.text(5);
  r.host = s.text(6);
  r.pid = s.integer(7);
  r.created_at = s.real(8);
  r.started_at = s.opt_real(9);
  r.ended_at = s.opt_real(10);
  r.last_step = s.opt_integer(11);
  r.last_heartbeat = s.opt_real(12);
  r.control_endpoint = s.text(13);
  r.telemetry_endpoint = s.text(14);
  r.checkpoint_dir = s.text(15);
  r.checkpoint_step = s.opt_integer(16);
  r.tags = s.text(17);
  r.notes = s.text(18);
  return r;
}

RunStore::RunStore(const std::string& path, bool read_only) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  m.read_only = read_only;
  if (path.empty()) throw Error("run store: empty path");
  if (!read_only) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec)
      throw Error(m.name() + ": cannot create directory '" + parent.string() +
                  "': " + ec.message());
  }
  const int flags = read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &m.db, flags, nullptr);
  if (rc != SQLITE_OK) m.fail("cannot open " + m.name(), rc);
  rc = sqlite3_busy_timeout(m.db, kBusyTimeoutMs);
  if (rc != SQLITE_OK) m.fail(m.name() + ": setting the busy timeout", rc);

  // The first read of the file: a file that is not a database fails here, before any write.
  m.version = m.read_user_version(m.name() + ": reading the schema version");
  const int latest = latest_schema_version();
  if (m.version > latest)
    throw Error(m.name() + ": database schema version " + std::to_string(m.version) +
                " is newer than this build supports (" + std::to_string(latest) + ")");
  if (read_only) {
    if (m.version == 0) throw Error(m.name() + " is not a run store (schema version 0)");
    m.exec("PRAGMA query_only = ON", m.name() + ": setting query_only");
    return;
  }
  m.exec("PRAGMA foreign_keys = ON", m.name() + ": enabling foreign keys");
  m.exec("PRAGMA synchronous = NORMAL", m.name() + ": setting synchronous");
  {
    // Where WAL is impossible (e.g. a file system without shared memory) SQLite keeps the
    // rollback journal: still correct, only readers then wait for writers.
    Stmt s = m.prepare("PRAGMA journal_mode = WAL", m.name() + ": enabling WAL");
    s.run();
  }
  m.migrate();
}

RunStore::~RunStore() = default;
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;

const std::string& RunStore::path() const {
  return impl_->path;
}
bool RunStore::read_only() const {
  return impl_->read_only;
}
int RunStore::schema_version() const {
  return impl_->version;
}
int RunStore::latest_schema_version() {
  return static_cast<int>(migrations().size());
}

const std::string& RunStore::migration_script(int version) {
  if (version < 1 || version > latest_schema_version())
    throw Error("run store: no migration to schema version " + std::to_string(version) +
                " (versions 1 to " + std::to_string(latest_schema_version()) + ")");
  return migrations()[static_cast<size_t>(version - 1)];
}

// --- Writers

int64_t RunStore::create_run(const std::string& name, const std::string& preset, const Json& config,
                             const std::string& precision_summary) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = "create_run('" + name + "')";
  int64_t id = 0;
  m.write(what, [&] {
    Stmt s = m.prepare(
        "INSERT INTO runs(name, status, preset, config, precision_summary, host, "
        "pid, created_at, started_at, last_heartbeat) "
        "VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?7)",
        what);
    s.bind_text(1, name)
        .bind_text(2, preset)
        .bind_text(3, without_nonfinite(config).dump())
        .bind_text(4, precision_summary)
        .bind_text(5, host_name())
        .bind_int(6, static_cast<int64_t>(getpid()))
        .bind_real(7, now_unix());
    s.run();
    id = sqlite3_last_insert_rowid(m.db);
  });
  return id;
}

void RunStore::set_status(int64_t run, const std::string& status) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  bool known = false;
  std::string list;
  for (const char* s : kStatuses) {
    known = known || status == s;
    list += list.empty() ? s : std::string(", ") + s;
  }
  if (!known) throw Error("invalid run status '" + status + "' (one of: " + list + ")");
  const std::string what = run_what("set_status", run);
  m.write(what, [&] {
    Stmt s = m.prepare(
        "UPDATE runs SET status = ?2, "
        "ended_at = CASE WHEN ?3 THEN coalesce(ended_at, ?4) ELSE NULL END, "
        "started_at = CASE WHEN ?2 = 'running' THEN coalesce(started_at, ?4) "
        "ELSE started_at END WHERE id = ?1",
        what);
    s.bind_int(1, run)
        .bind_text(2, status)
        .bind_int(3, is_terminal(status))
        .bind_real(4, now_unix());
    s.run();
    m.require_run(what, run);
  });
}

void RunStore::record_step(int64_t run, const StepRecord& r) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("record_step", run) + " step " + std::to_string(r.step);
  m.write(what, [&] {
    {
      Stmt s = m.prepare("UPDATE runs SET last_step = ?2, last_heartbeat = ?3 WHERE id = ?1", what);
      s.bind_int(1, run).bind_int(2, r.step).bind_real(3, now_unix());
      s.run();
      m.require_run(what, run);
    }
    for (const auto& [key, value] : r.scalars) {
      Stmt s = m.prepare(
          "INSERT INTO scalars(run_id, step, wall, key, value, nonfinite) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
          what + ": scalar '" + key + "'");
      s.bind_int(1, run).bind_int(2, r.step).bind_real(3, r.wall_seconds).bind_text(4, key);
      if (std::isfinite(value))
        s.bind_real(5, value).bind_null(6);
      else
        s.bind_null(5).bind_text(6, nonfinite_name(value));
      s.run();
    }
    for (const HistogramRecord& h : r.histograms) {
      Stmt s = m.prepare(
          "INSERT INTO histograms(run_id, step, name, edges, counts) "
          "VALUES (?1, ?2, ?3, ?4, ?5)",
          what + ": histogram '" + h.name + "'");
      s.bind_int(1, run)
          .bind_int(2, r.step)
          .bind_text(3, h.name)
          .bind_text(4, edges_json(h.hist.edges))
          .bind_text(5, counts_json(h.hist.counts));
      s.run();
    }
    for (const SampleRecord& x : r.samples) {
      Stmt s = m.prepare(
          "INSERT INTO samples(run_id, step, prompt, response, answer, reward) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
          what + ": sample");
      s.bind_int(1, run)
          .bind_int(2, r.step)
          .bind_text(3, x.prompt)
          .bind_text(4, x.response)
          .bind_text(5, x.answer)
          .bind_real(6, x.reward);
      s.run();
    }
    for (const EventRecord& e : r.events) {
      Stmt s = m.prepare(
          "INSERT INTO events(run_id, step, wall, kind, message, data) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
          what + ": event '" + e.kind + "'");
      s.bind_int(1, run)
          .bind_int(2, r.step)
          .bind_real(3, r.wall_seconds)
          .bind_text(4, e.kind)
          .bind_text(5, e.message);
      if (e.data.is_null())
        s.bind_null(6);
      else
        s.bind_text(6, without_nonfinite(e.data).dump());
      s.run();
    }
  });
}

void RunStore::record_event(int64_t run, int64_t step, const EventRecord& e) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("record_event", run) + " '" + e.kind + "'";
  m.write(what, [&] {
    // INSERT … SELECT FROM runs: the wall time comes from the run's start, and no row is
    // inserted when there is no such run.
    Stmt s = m.prepare(
        "INSERT INTO events(run_id, step, wall, kind, message, data) "
        "SELECT id, ?2, ?3 - coalesce(started_at, created_at), ?4, ?5, ?6 "
        "FROM runs WHERE id = ?1",
        what);
    s.bind_int(1, run)
        .bind_int(2, step)
        .bind_real(3, now_unix())
        .bind_text(4, e.kind)
        .bind_text(5, e.message);
    if (e.data.is_null())
      s.bind_null(6);
    else
      s.bind_text(6, without_nonfinite(e.data).dump());
    s.run();
    m.require_run(what, run);
  });
}

void RunStore::record_precision(int64_t run, int64_t step, const Json& map) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("record_precision", run);
  m.write(what, [&] {
    Stmt s = m.prepare(
        "INSERT INTO precision_history(run_id, step, map) "
        "SELECT id, ?2, ?3 FROM runs WHERE id = ?1",
        what);
    s.bind_int(1, run).bind_int(2, step).bind_text(3, without_nonfinite(map).dump());
    s.run();
    m.require_run(what, run);
  });
}

void RunStore::heartbeat(int64_t run) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("heartbeat", run);
  m.write(what, [&] {
    Stmt s = m.prepare("UPDATE runs SET last_heartbeat = ?2 WHERE id = ?1", what);
    s.bind_int(1, run).bind_real(2, now_unix());
    s.run();
    m.require_run(what, run);
  });
}

void RunStore::set_endpoints(int64_t run, const std::string& control,
                             const std::string& telemetry) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("set_endpoints", run);
  m.write(what, [&] {
    Stmt s = m.prepare(
        "UPDATE runs SET control_endpoint = ?2, telemetry_endpoint = ?3 WHERE id = ?1", what);
    s.bind_int(1, run).bind_text(2, control).bind_text(3, telemetry);
    s.run();
    m.require_run(what, run);
  });
}

void RunStore::set_checkpoint(int64_t run, const std::string& dir, int64_t step) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("set_checkpoint", run);
  m.write(what, [&] {
    Stmt s =
        m.prepare("UPDATE runs SET checkpoint_dir = ?2, checkpoint_step = ?3 WHERE id = ?1", what);
    s.bind_int(1, run).bind_text(2, dir).bind_int(3, step);
    s.run();
    m.require_run(what, run);
  });
}

void RunStore::set_precision_summary(int64_t run, const std::string& summary) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("set_precision_summary", run);
  m.write(what, [&] {
    Stmt s = m.prepare("UPDATE runs SET precision_summary = ?2 WHERE id = ?1", what);
    s.bind_int(1, run).bind_text(2, summary);
    s.run();
    m.require_run(what, run);
  });
}

void RunStore::truncate_after(int64_t run, int64_t step) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("truncate_after", run);
  m.write(what, [&] {
    for (const char* table : {"scalars", "histograms", "samples", "events", "precision_history"}) {
      Stmt s =
          m.prepare(std::string("DELETE FROM ") + table + " WHERE run_id = ?1 AND step > ?2", what);
      s.bind_int(1, run).bind_int(2, step);
      s.run();
    }
    Stmt u = m.prepare("UPDATE runs SET last_step = ?2 WHERE id = ?1", what);
    u.bind_int(1, run).bind_int(2, step);
    u.run();
    m.require_run(what, run);
  });
}

void RunStore::set_tags_notes(int64_t run, const std::string& tags, const std::string& notes) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("set_tags_notes", run);
  m.write(what, [&] {
    Stmt s = m.prepare("UPDATE runs SET tags = ?2, notes = ?3 WHERE id = ?1", what);
    s.bind_int(1, run).bind_text(2, tags).bind_text(3, notes);
    s.run();
    m.require_run(what, run);
  });
}

// --- Readers

std::vector<RunStore::RunRow> RunStore::list_runs() {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Stmt s = m.prepare(m.run_select("ORDER BY id"), "list_runs");
  std::vector<RunRow> rows;
  while (s.next()) rows.push_back(m.run_row(s));
  return rows;
}

std::optional<RunStore::RunRow> RunStore::find_run(int64_t id) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Stmt s = m.prepare(m.run_select("WHERE id = ?1"), run_what("find_run", id));
  s.bind_int(1, id);
  if (!s.next()) return std::nullopt;
  return m.run_row(s);
}

std::vector<std::string> RunStore::scalar_keys(int64_t run) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  // A skip scan over the (run_id, key, step) index: one index seek per distinct key instead
  // of reading every row of the run.
  Stmt s = m.prepare(
      "WITH RECURSIVE k(key) AS ("
      " SELECT (SELECT min(key) FROM scalars WHERE run_id = ?1)"
      " UNION ALL"
      " SELECT (SELECT min(key) FROM scalars WHERE run_id = ?1 AND key > k.key)"
      " FROM k WHERE k.key IS NOT NULL)"
      "SELECT key FROM k WHERE key IS NOT NULL",
      run_what("scalar_keys", run));
  s.bind_int(1, run);
  std::vector<std::string> keys;
  while (s.next()) keys.push_back(s.text(0));
  return keys;
}

std::vector<RunStore::ScalarPoint> RunStore::scalar_series(int64_t run, const std::string& key,
                                                           int64_t after_step) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Stmt s = m.prepare(
      "SELECT step, wall, value, nonfinite FROM scalars "
      "WHERE run_id = ?1 AND key = ?2 AND step > ?3 ORDER BY step, rowid",
      run_what("scalar_series", run) + " '" + key + "'");
  s.bind_int(1, run).bind_text(2, key).bind_int(3, after_step);
  std::vector<ScalarPoint> points;
  while (s.next()) {
    const double v = s.is_null(2) ? nonfinite_value(s.text(3)) : s.real(2);
    points.push_back({s.integer(0), s.real(1), v});
  }
  return points;
}

std::vector<std::string> RunStore::histogram_names(int64_t run) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  // A skip scan over the (run_id, name, step) index, as in scalar_keys.
  Stmt s = m.prepare(
      "WITH RECURSIVE h(name) AS ("
      " SELECT (SELECT min(name) FROM histograms WHERE run_id = ?1)"
      " UNION ALL"
      " SELECT (SELECT min(name) FROM histograms WHERE run_id = ?1 AND name > h.name)"
      " FROM h WHERE h.name IS NOT NULL)"
      "SELECT name FROM h WHERE name IS NOT NULL",
      run_what("histogram_names", run));
  s.bind_int(1, run);
  std::vector<std::string> names;
  while (s.next()) names.push_back(s.text(0));
  return names;
}

std::vector<std::pair<int64_t, Histogram>> RunStore::histogram_series(int64_t run,
                                                                      const std::string& name) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  const std::string what = run_what("histogram_series", run) + " '" + name + "'";
  Stmt s = m.prepare(
      "SELECT step, edges, counts FROM histograms "
      "WHERE run_id = ?1 AND name = ?2 ORDER BY step, rowid",
      what);
  s.bind_int(1, run).bind_text(2, name);
  std::vector<std::pair<int64_t, Histogram>> series;
  while (s.next()) {
    Histogram h;
    try {
      // Named: a range-for over a temporary's member would dangle.
      const Json edges = s.json(1), counts = s.json(2);
      for (const Json& e : edges.as_array("edges"))
        h.edges.push_back(e.is_string() ? nonfinite_value(e.as_string()) : e.as_number("edge"));
      for (const Json& c : counts.as_array("counts")) h.counts.push_back(c.as_int("count"));
    } catch (const Error& e) {
      throw Error(what + ": malformed histogram: " + e.message());
    }
    series.emplace_back(s.integer(0), std::move(h));
  }
  return series;
}

std::vector<std::pair<int64_t, SampleRecord>> RunStore::samples(int64_t run, int64_t limit) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Stmt s = m.prepare(
      "SELECT step, prompt, response, answer, reward FROM samples "
      "WHERE run_id = ?1 ORDER BY step DESC, rowid DESC LIMIT ?2",
      run_what("samples", run));
  s.bind_int(1, run).bind_int(2, limit < 0 ? -1 : limit);  // LIMIT -1: no limit
  std::vector<std::pair<int64_t, SampleRecord>> out;
  while (s.next()) {
    SampleRecord x;
    x.prompt = s.text(1);
    x.response = s.text(2);
    x.answer = s.text(3);
    x.reward = s.real(4);
    out.emplace_back(s.integer(0), std::move(x));
  }
  return out;
}

std::vector<RunStore::EventRow> RunStore::events(int64_t run) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Stmt s = m.prepare(
      "SELECT step, wall, kind, message, data FROM events "
      "WHERE run_id = ?1 ORDER BY rowid",
      run_what("events", run));
  s.bind_int(1, run);
  std::vector<EventRow> out;
  while (s.next()) {
    EventRow e{s.integer(0), s.real(1), {}};
    e.event.kind = s.text(2);
    e.event.message = s.text(3);
    e.event.data = s.json(4);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::pair<int64_t, Json>> RunStore::precision_history(int64_t run) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Stmt s = m.prepare(
      "SELECT step, map FROM precision_history WHERE run_id = ?1 "
      "ORDER BY step, rowid",
      run_what("precision_history", run));
  s.bind_int(1, run);
  std::vector<std::pair<int64_t, Json>> out;
  while (s.next()) out.emplace_back(s.integer(0), s.json(1));
  return out;
}

void RunStore::export_csv(int64_t run, std::ostream& out) {
  // The keys first (they fix the columns), then every scalar row in step order.
  const std::vector<std::string> keys = scalar_keys(run);
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < keys.size(); ++i) column.emplace(keys[i], i);

  out << "step,wall";
  for (const std::string& k : keys) out << ',' << csv_field(k);
  out << '\n';

  Stmt s = m.prepare(
      "SELECT step, wall, key, value, nonfinite FROM scalars WHERE run_id = ?1 "
      "ORDER BY step, rowid",
      run_what("export_csv", run));
  s.bind_int(1, run);
  bool have_row = false;
  int64_t step = 0;
  double wall = 0;
  std::vector<std::optional<double>> cells(keys.size());
  auto flush = [&] {
    out << step << ',' << format_number(wall);
    for (const auto& c : cells) out << ',' << (c ? format_number(*c) : "");
    out << '\n';
  };
  while (s.next()) {
    const int64_t row_step = s.integer(0);
    if (!have_row || row_step != step) {
      if (have_row) flush();
      have_row = true;
      step = row_step;
      wall = s.real(1);
      std::fill(cells.begin(), cells.end(), std::nullopt);
    }
    // A key written after scalar_keys read the list has no column (a live run): skipped.
    const auto it = column.find(s.text(2));
    if (it != column.end())
      cells[it->second] = s.is_null(3) ? nonfinite_value(s.text(4)) : s.real(3);
  }
  if (have_row) flush();
  if (!out) throw Error(run_what("export_csv", run) + ": writing the CSV failed");
}

std::string RunStore::integrity_check() {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  Stmt s = m.prepare("PRAGMA integrity_check", m.name() + ": integrity_check");
  std::string result;
  while (s.next()) {
    if (!result.empty()) result += '\n';
    result += s.text(0);
  }
  return result;
}

}  // namespace fp8rl
