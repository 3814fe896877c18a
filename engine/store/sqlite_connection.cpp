#include "store/sqlite_connection.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "core/error.hpp"

namespace fp8rl::sqlite {

void fail(sqlite3* db, const std::string& what, int rc, std::source_location where) {
  const int err = errno;  // before anything else can change it
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  // "disk I/O error" alone hides the cause. SQLite keeps the system's error for some failures
  // only (not for a failed COMMIT's write); errno still holds it then, and these values are no
  // failure SQLite meets along the way.
  if ((rc & 0xff) == SQLITE_IOERR) {
    int sys = db ? sqlite3_system_errno(db) : 0;
    if (sys == 0 && (err == ENOSPC || err == EDQUOT || err == EFBIG || err == EIO || err == EROFS))
      sys = err;
    if (sys != 0) msg += std::string(" (") + std::strerror(sys) + ")";
  }
  throw Error(what + ": " + msg, sqlite3_errstr(rc), where);
}

// --- Row

bool Row::is_null(int c) const {
  return sqlite3_column_type(s_, c) == SQLITE_NULL;
}

int64_t Row::integer(int c) const {
  return sqlite3_column_int64(s_, c);
}

double Row::real(int c) const {
  return is_null(c) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(s_, c);
}

std::string Row::text(int c) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string();
}

std::optional<int64_t> Row::opt_integer(int c) const {
  return is_null(c) ? std::nullopt : std::optional<int64_t>(integer(c));
}

std::optional<double> Row::opt_real(int c) const {
  return is_null(c) ? std::nullopt : std::optional<double>(real(c));
}

Json Row::json(int c) const {
  if (is_null(c)) return Json();
  try {
    return Json::parse(text(c));
  } catch (const Error& e) {
    throw Error(
        what_.text + ": stored " + sqlite3_column_name(s_, c) + " is not JSON: " + e.message(), {},
        what_.where);
  }
}

// --- Statement

void Statement::Reset::operator()(sqlite3_stmt* s) const {
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
}

bool Statement::next() {
  const int rc = sqlite3_step(s_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, what_.text, rc, what_.where);
}

int64_t Statement::run() {
  while (next()) {
  }
  return sqlite3_changes(db_);
}

void Statement::bind_null(int i) {
  checked(sqlite3_bind_null(s_.get(), i));
}

void Statement::bind_integer(int i, int64_t v) {
  checked(sqlite3_bind_int64(s_.get(), i, v));
}

void Statement::bind_real(int i, double v) {
  checked(sqlite3_bind_double(s_.get(), i, v));
}

void Statement::bind_text(int i, std::string_view v) {
  checked(sqlite3_bind_text64(s_.get(), i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
}

void Statement::bind_static_text(int i, std::string_view v) {
  checked(sqlite3_bind_text64(s_.get(), i, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8));
}

void Statement::checked(int rc) {
  if (rc != SQLITE_OK) fail(db_, what_.text + ": bind", rc, what_.where);
}

// --- Connection

Connection::~Connection() {
  for (auto& [sql, s] : statements_) sqlite3_finalize(s);
  if (db_) sqlite3_close_v2(db_);
}

void Connection::open(const std::string& path, int flags, int busy_timeout_ms,
                      const std::string& name) {
  // On failure SQLite still returns a handle (closed by the destructor) holding the message.
  // NOMUTEX: this class's lock already serializes every use of the handle, so SQLite's own
  // per-call mutex would only be taken and released again (a few % of a bulk insert).
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) fail(db_, "cannot open " + name, rc, std::source_location::current());
  rc = sqlite3_busy_timeout(db_, busy_timeout_ms);
  if (rc != SQLITE_OK)
    fail(db_, name + ": setting the busy timeout", rc, std::source_location::current());
}

void Connection::exec(const std::string& sql, const What& what) {
  std::lock_guard lock(mu_);
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, what.text, rc, what.where);
}

sqlite3_stmt* Connection::prepared(const std::string& sql, const What& what) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* s = nullptr;
    const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()) + 1,
                                      SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) fail(db_, what.text + ": prepare", rc, what.where);
    it = statements_.emplace(sql, s).first;
  }
  return it->second;
}

void Connection::begin_immediate(const What& what) {
  for (int attempt = 1;; ++attempt) {
    const int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || attempt == kBeginAttempts)
      fail(db_, what.text + ": cannot begin a write transaction", rc, what.where);
    std::this_thread::sleep_for(std::chrono::milliseconds(kFirstBackoffMs << (attempt - 1)));
  }
}

void Connection::commit(const What& what) {
  const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db_, what.text + ": commit", rc, what.where);
}

void Connection::rollback() {
  // Fails harmlessly when SQLite already rolled back (e.g. after SQLITE_FULL).
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

int64_t Connection::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

}  // namespace fp8rl::sqlite
