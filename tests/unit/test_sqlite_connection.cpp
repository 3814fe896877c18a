// The run store's SQLite helpers: typed binding and columns, the row-mapping shapes, errors that
// name what failed (at the caller's line, SQLite's text as status), statements that hold no
// read snapshot after use, write transactions (commit, rollback, BEGIN IMMEDIATE retried while
// another connection holds the write lock, giving up after the last attempt), and one
// connection shared by threads.
#include <QtTest>

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "store/sqlite_connection.hpp"

using fp8rl::Error;
using fp8rl::sqlite::Connection;
using fp8rl::sqlite::Row;

namespace {

constexpr int kOpenFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string base_name(const char* path) {
  const std::string p = path;
  return p.substr(p.find_last_of('/') + 1);
}

int64_t count_rows(Connection& db, const std::string& table) {
  return db.query("count", "SELECT count(*) FROM " + table)
      .one([](const Row& r) { return r.integer(0); })
      .value_or(-1);
}

// A second connection of its own, holding the write lock between begin() and end().
class RawWriter {
 public:
  explicit RawWriter(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK)
      throw std::runtime_error(std::string("sqlite3_open: ") + sqlite3_errmsg(db_));
  }
  ~RawWriter() { sqlite3_close(db_); }
  RawWriter(const RawWriter&) = delete;
  RawWriter& operator=(const RawWriter&) = delete;

  void exec(const char* sql) {
    if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string(sql) + ": " + sqlite3_errmsg(db_));
  }

 private:
  sqlite3* db_ = nullptr;
};

// Opens file as the store does (WAL) with one table t.
void open_wal(Connection& db, const std::string& file, int busy_timeout_ms = 5000) {
  db.open(file, kOpenFlags, busy_timeout_ms, "test db");
  db.query("wal", "PRAGMA journal_mode = WAL").run();
  db.exec("CREATE TABLE IF NOT EXISTS t (x INTEGER)", "create t");
}

// A connection to file whose busy handler gives up after 10 ms (so that the retries, not the
// handler, do the waiting), and another connection holding the file's write lock.
struct Contended {
  explicit Contended(const std::string& file) : other(file) {
    open_wal(db, file, /*busy_timeout_ms=*/10);
    other.exec("BEGIN IMMEDIATE");
  }
  Connection db;
  RawWriter other;
};

}  // namespace

class TestSqliteConnection : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string path(const QString& name) const { return dir_.filePath(name).toStdString(); }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void bindsAndReadsTypedValues() {
    Connection db;
    db.open(":memory:", kOpenFlags, 1000, "memory");
    db.exec("CREATE TABLE v (i INTEGER, b INTEGER, r REAL, s TEXT, c TEXT, n, o, j TEXT)",
            "create");
    const std::string text("with\0nul", 8);
    db.query("insert",
             "INSERT INTO v VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8), "
             "(?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
             int64_t{-7}, true, 2.5, text, "literal", std::nullopt, std::optional<int64_t>(),
             std::string(R"({"a":[1,2]})"), 3, false, std::numeric_limits<double>::quiet_NaN(),
             std::optional<std::string>("some"), std::string_view("view"),
             std::optional<double>(0.25), std::optional<int64_t>(9), std::nullopt)
        .run();
    const auto rows =
        db.query("select", "SELECT i, b, r, s, c, n, o, j FROM v ORDER BY rowid")
            .rows([](const Row& r) {
              return std::tuple(r.integer(0), r.integer(1), r.real(2), r.text(3), r.text(4),
                                r.opt_real(5), r.opt_integer(6), r.json(7));
            });
    QCOMPARE(rows.size(), size_t{2});
    QCOMPARE(std::get<0>(rows[0]), int64_t{-7});
    QCOMPARE(std::get<1>(rows[0]), int64_t{1});
    QCOMPARE(std::get<2>(rows[0]), 2.5);
    QCOMPARE(std::get<3>(rows[0]), text);  // the whole string, NUL included
    QCOMPARE(std::get<4>(rows[0]), std::string("literal"));
    QVERIFY(!std::get<5>(rows[0]).has_value());
    QVERIFY(!std::get<6>(rows[0]).has_value());
    QCOMPARE(std::get<7>(rows[0]).dump(), std::string(R"({"a":[1,2]})"));
    QCOMPARE(std::get<0>(rows[1]), int64_t{3});
    QCOMPARE(std::get<1>(rows[1]), int64_t{0});
    QVERIFY(std::isnan(std::get<2>(rows[1])));  // NaN is stored as NULL and reads back as NaN
    QCOMPARE(std::get<3>(rows[1]), std::string("some"));
    QCOMPARE(std::get<4>(rows[1]), std::string("view"));
    QCOMPARE(std::get<5>(rows[1]), std::optional<double>(0.25));
    QCOMPARE(std::get<6>(rows[1]), std::optional<int64_t>(9));
    QVERIFY(std::get<7>(rows[1]).is_null());

    // one(): the first row, or nullopt.
    const auto first = db.query("first", "SELECT i FROM v WHERE i > ?1 ORDER BY i", int64_t{0})
                           .one([](const Row& r) { return r.integer(0); });
    QCOMPARE(first, std::optional<int64_t>(3));
    QVERIFY(!db.query("none", "SELECT i FROM v WHERE i > 100")
                 .one([](const Row& r) { return r.integer(0); })
                 .has_value());
    // run(): the rows changed.
    QCOMPARE(db.query("update", "UPDATE v SET i = i + 1").run(), int64_t{2});
  }

  void errorsNameWhatFailedAtTheCaller() {
    Connection db;
    db.open(":memory:", kOpenFlags, 1000, "memory");
    db.exec("CREATE TABLE u (k TEXT UNIQUE, j TEXT)", "create");
    auto expect = [](auto&& f, const std::string& message, const std::string& status, int line) {
      try {
        f();
        QFAIL("no error");
      } catch (const Error& e) {
        QVERIFY2(contains(e.message(), message), e.what());
        QCOMPARE(e.status(), status);
        QCOMPARE(base_name(e.file()), std::string("test_sqlite_connection.cpp"));
        QCOMPARE(e.line(), static_cast<unsigned>(line));
      }
    };
    // clang-format off
    expect([&] { db.query("reading nothing", "SELECT * FROM missing"); },
           "reading nothing: prepare: no such table: missing", sqlite3_errstr(SQLITE_ERROR), __LINE__ - 1);
    db.query("first", "INSERT INTO u VALUES (?1, ?2)", "a", "not json").run();
    expect([&] { db.query("second a", "INSERT INTO u VALUES (?1, ?2)", "a", "x").run(); },
           "second a: UNIQUE constraint failed: u.k", sqlite3_errstr(SQLITE_CONSTRAINT), __LINE__ - 1);
    expect([&] { db.query("too many", "SELECT ?1", 1, 2); },
           "too many: bind: column index out of range", sqlite3_errstr(SQLITE_RANGE), __LINE__ - 1);
    expect([&] { db.query("json", "SELECT j FROM u").one([](const Row& r) { return r.json(0); }); },
           "json: stored j is not JSON", "", __LINE__ - 1);
    expect([&] { db.exec("NOT SQL", "script"); },
           "script: near \"NOT\": syntax error", sqlite3_errstr(SQLITE_ERROR), __LINE__ - 1);
    // clang-format on
    // The connection stays usable.
    QCOMPARE(count_rows(db, "u"), int64_t{1});

    Connection missing;
    try {
      missing.open(path("absent/dir/x.db"), SQLITE_OPEN_READONLY, 1000, "the missing file");
      QFAIL("a missing file opened");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), "cannot open the missing file: unable to open"), e.what());
      QCOMPARE(e.status(), std::string(sqlite3_errstr(SQLITE_CANTOPEN)));
    }
  }

  void statementsHoldNoSnapshotAfterUse() {
    // A reader that stopped after the first row of a result must still see later commits.
    const std::string file = path("snapshot.db");
    Connection reader, writer;
    open_wal(writer, file);
    open_wal(reader, file);
    writer.query("seed", "INSERT INTO t VALUES (1), (2), (3)").run();
    const auto first = reader.query("first", "SELECT x FROM t ORDER BY x").one([](const Row& r) {
      return r.integer(0);
    });
    QCOMPARE(first, std::optional<int64_t>(1));
    writer.query("more", "INSERT INTO t VALUES (4)").run();
    QCOMPARE(count_rows(reader, "t"), int64_t{4});
  }

  void writeCommitsReturnsAndRollsBack() {
    Connection db;
    open_wal(db, path("write.db"));
    const int64_t n = db.write("insert two", [&] {
      db.query("a", "INSERT INTO t VALUES (1)").run();
      db.query("b", "INSERT INTO t VALUES (2)").run();
      return count_rows(db, "t");  // the body sees its own writes
    });
    QCOMPARE(n, int64_t{2});
    try {
      db.write("insert then fail", [&] {
        db.query("c", "INSERT INTO t VALUES (3)").run();
        throw Error("the body failed");
      });
      QFAIL("the write did not throw");
    } catch (const Error& e) {
      QCOMPARE(e.message(), std::string("the body failed"));
    }
    QCOMPARE(count_rows(db, "t"), int64_t{2});  // rolled back
    db.write("after", [&] { db.query("d", "INSERT INTO t VALUES (4)").run(); });
    QCOMPARE(count_rows(db, "t"), int64_t{3});
  }

  void beginImmediateRetriesWhileLocked() {
    // The other connection holds the write lock for longer than the busy timeout (10 ms) but
    // less than the retries' sleeps (50 + 100 + 200 + 400 ms): the write waits and succeeds.
    Contended c(path("busy.db"));
    Connection& db = c.db;
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      c.other.exec("COMMIT");
    });
    const auto start = std::chrono::steady_clock::now();
    try {
      db.write("retried", [&] { db.query("insert", "INSERT INTO t VALUES (1)").run(); });
    } catch (...) {
      release.join();
      throw;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    release.join();
    QVERIFY(waited >= std::chrono::milliseconds(150));
    QCOMPARE(count_rows(db, "t"), int64_t{1});
  }

  void beginImmediateGivesUpAfterTheLastAttempt() {
    Contended c(path("locked.db"));
    Connection& db = c.db;
    const auto start = std::chrono::steady_clock::now();
    try {
      db.write("never", [&] { db.query("insert", "INSERT INTO t VALUES (1)").run(); });
      QFAIL("a write began while another connection held the lock");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), "never: cannot begin a write transaction: database is locked"),
               e.what());
      QCOMPARE(e.status(), std::string(sqlite3_errstr(SQLITE_BUSY)));
    }
    // Every attempt was made: the sleeps between them add up to 750 ms.
    int sleeps_ms = 0;
    for (int a = 1; a < Connection::kBeginAttempts; ++a)
      sleeps_ms += Connection::kFirstBackoffMs << (a - 1);
    QVERIFY(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(sleeps_ms));
    c.other.exec("ROLLBACK");
    QCOMPARE(count_rows(db, "t"), int64_t{0});
  }

  void threadsShareOneConnection() {
    Connection db;
    open_wal(db, path("threads.db"));
    constexpr int kWrites = 200;
    auto writes = [&](int64_t base) {
      for (int64_t i = 0; i < kWrites; ++i)
        db.write("insert", [&] {
          db.query("insert", "INSERT INTO t VALUES (?1)", base + i).run();
          count_rows(db, "t");  // a read inside the transaction, on the same connection
        });
    };
    std::thread other(writes, 1000);
    writes(0);
    other.join();
    QCOMPARE(count_rows(db, "t"), int64_t{2 * kWrites});
  }
};

QTEST_APPLESS_MAIN(TestSqliteConnection)
#include "test_sqlite_connection.moc"
