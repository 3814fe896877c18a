// One SQLite connection as the run store uses it: statements prepared once and borrowed for one
// use, parameters bound by position from C++ values, columns read as typed values, and write
// transactions that take the write lock up front. Every failure throws fp8rl::Error naming what
// failed, with SQLite's error text as status.
//
// A Connection may be shared between threads: its lock (recursive, so that a write
// transaction's body may run statements) is held while a Statement lives and for the whole of
// a write transaction.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/json.hpp"

namespace fp8rl::sqlite {

// What an operation does, in words for its errors, and where it was asked for. Built
// implicitly from a string at the call, so that an error points at the caller's line rather
// than at these helpers.
struct What {
  What(std::string words, std::source_location at = std::source_location::current())
      : text(std::move(words)), where(at) {}
  What(const char* words, std::source_location at = std::source_location::current())
      : text(words), where(at) {}
  std::string text;
  std::source_location where;
};

// Throws Error("<what>: <SQLite's message for db, or for rc without one>", sqlite3_errstr(rc)).
[[noreturn]] void fail(sqlite3* db, const std::string& what, int rc, std::source_location where);

// The current row of a statement, its columns read by index.
class Row {
 public:
  Row(sqlite3_stmt* s, const What& what) : s_(s), what_(what) {}

  bool is_null(int c) const;
  int64_t integer(int c) const;
  // A NULL is NaN: SQLite keeps a NaN REAL as NULL.
  double real(int c) const;
  std::string text(int c) const;  // "" for NULL
  std::optional<int64_t> opt_integer(int c) const;
  std::optional<double> opt_real(int c) const;
  // Parses a JSON column (null for NULL); a malformed one throws naming the column.
  Json json(int c) const;
  // What the statement does (for errors about its rows).
  const What& what() const { return what_; }

 private:
  sqlite3_stmt* s_;
  const What& what_;
};

// Text bound without a copy (SQLITE_STATIC): it must outlive the statement's next run.
struct StaticText {
  std::string_view text;
};

// A cached statement borrowed for one use, its parameters bound. When it goes out of scope it
// is reset and its bindings cleared, so that it holds no read snapshot between uses (a WAL
// reader would otherwise keep seeing old data and block checkpoints); it holds the
// connection's lock meanwhile.
class Statement {
 public:
  // Binds args to ?1, ?2, …: integers (bool included) as INTEGER, floating point as REAL,
  // strings as TEXT, std::nullopt or an empty std::optional as NULL.
  template <class... Args>
  Statement(std::unique_lock<std::recursive_mutex> lock, sqlite3* db, sqlite3_stmt* s, What what,
            const Args&... args)
      : lock_(std::move(lock)), db_(db), s_(s), what_(std::move(what)) {
    int i = 0;
    (bind(++i, args), ...);
  }

  // Steps once: true with a row (then row() reads it), false when done.
  bool next();
  Row row() const { return Row(s_.get(), what_); }
  // Steps a statement without results to completion; returns the rows it inserted, updated or
  // deleted.
  int64_t run();

  // Makes the statement ready to run again (its parameters keep their values until bound
  // anew): a bulk insert borrows its statement once and runs it per row or per rows.
  void reset() { sqlite3_reset(s_.get()); }
  // Binds args to ?first+1, ?first+2, … (one row of a multi-row INSERT).
  template <class... Args>
  void bind_row(int first, const Args&... args) {
    int i = first;
    (bind(++i, args), ...);
  }

  // Calls on_row(const Row&) for each result row.
  template <class F>
  void each(F&& on_row) {
    while (next()) on_row(row());
  }
  // Every result row, mapped by map(const Row&).
  template <class F>
  auto rows(F&& map) {
    std::vector<std::invoke_result_t<F&, const Row&>> out;
    while (next()) out.push_back(map(row()));
    return out;
  }
  // The first result row mapped by map(const Row&), or nullopt when there is none.
  template <class F>
  auto one(F&& map) -> std::optional<std::invoke_result_t<F&, const Row&>> {
    if (!next()) return std::nullopt;
    return map(row());
  }

 private:
  struct Reset {
    void operator()(sqlite3_stmt* s) const;
  };

  template <class T>
  void bind(int i, const T& v) {
    if constexpr (std::is_same_v<T, std::nullopt_t>) {
      bind_null(i);
    } else if constexpr (std::is_same_v<T, StaticText>) {
      bind_static_text(i, v.text);
    } else if constexpr (requires {
                           v.has_value();
                           *v;
                         }) {
      if (v)
        bind(i, *v);
      else
        bind_null(i);
    } else if constexpr (std::is_integral_v<T>) {
      bind_integer(i, static_cast<int64_t>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      bind_real(i, static_cast<double>(v));
    } else {
      bind_text(i, std::string_view(v));
    }
  }
  void bind_null(int i);
  void bind_integer(int i, int64_t v);
  void bind_real(int i, double v);
  void bind_text(int i, std::string_view v);
  void bind_static_text(int i, std::string_view v);
  void checked(int rc);

  // Declared first: released last, after the statement is reset.
  std::unique_lock<std::recursive_mutex> lock_;
  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, Reset> s_;
  What what_;
};

class Connection {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Opens path with sqlite3_open_v2's flags and sets the busy timeout (how long a statement
  // waits for another connection's lock). Throws "cannot open <name>: …" or
  // "<name>: setting the busy timeout: …".
  void open(const std::string& path, int flags, int busy_timeout_ms, const std::string& name);

  // Runs SQL without parameters or results (pragmas, scripts).
  void exec(const std::string& sql, const What& what);

  // The cached statement for sql (prepared on first use) with args bound to ?1, ?2, … (see
  // Statement). One statement for one SQL text at a time: finish with it before running the
  // same SQL again.
  template <class... Args>
  Statement query(const What& what, const std::string& sql, const Args&... args) {
    std::unique_lock lock(mu_);
    sqlite3_stmt* s = prepared(sql, what);
    return Statement(std::move(lock), db_, s, what, args...);
  }

  // Runs body() in one BEGIN IMMEDIATE transaction and returns what it returns: committed when
  // it returns, rolled back when it throws. BEGIN IMMEDIATE takes the write lock up front
  // (waiting in the busy handler, then retried with doubling sleeps when that gives up), so
  // the statements inside never meet SQLITE_BUSY half-way.
  template <class F>
  auto write(const What& what, F&& body) {
    std::lock_guard lock(mu_);
    begin_immediate(what);
    try {
      if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
        body();
        commit(what);
      } else {
        auto result = body();
        commit(what);
        return result;
      }
    } catch (...) {
      rollback();
      throw;
    }
  }

  // The rowid of the last row this connection inserted.
  int64_t last_insert_rowid() const;

  // BEGIN IMMEDIATE attempts when the busy handler gives up (another writer held the file for
  // the whole timeout), with doubling sleeps from kFirstBackoffMs.
  static constexpr int kBeginAttempts = 5;
  static constexpr int kFirstBackoffMs = 50;

 private:
  sqlite3_stmt* prepared(const std::string& sql, const What& what);
  void begin_immediate(const What& what);
  void commit(const What& what);
  void rollback();

  std::recursive_mutex mu_;
  sqlite3* db_ = nullptr;
  // Prepared statements by SQL text, prepared once per connection.
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace fp8rl::sqlite
