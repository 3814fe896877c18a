// The run store's state and the helpers its readers and writers share (private to the store).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "store/run_store.hpp"
#include "store/sqlite_connection.hpp"

namespace fp8rl {

// "<op>(run <id>)", how errors name an operation on one run.
inline std::string run_what(const std::string& op, int64_t run) {
  return op + "(run " + std::to_string(run) + ")";
}

struct RunStore::Impl {
  std::string path;
  bool read_only = false;
  int version = 0;
  sqlite::Connection db;
  // set_next_run_sweep_point's sweep and point, taken by the next create_run.
  std::optional<std::pair<int64_t, int64_t>> next_sweep_point;

  std::string name() const { return "run store '" + path + "'"; }

  // Scalar names and their ids in scalar_keys (schema 7), as far as this connection has seen
  // them committed. Keys are never deleted and an id never changes once committed, so the map
  // stays true whatever other processes write.
  std::mutex key_ids_mu;
  std::unordered_map<std::string, int64_t> key_ids;

  // The ids of keys, in order, adding the names scalar_keys lacks in a write transaction of
  // their own (a name without rows is harmless; keeping it out of the caller's transaction
  // means a rolled-back step cannot leave an id here that the file does not have). Call it
  // before, not inside, the transaction that inserts the rows.
  std::vector<int64_t> scalar_key_ids(const sqlite::What& what,
                                      const std::vector<const std::string*>& keys);
  // Unix seconds now; this machine's host name.
  static double now_unix();
  static std::string host_name();

  // Runs body() in one write transaction (see sqlite::Connection::write) and returns what it
  // returns; throws without writing when the store is read-only.
  template <class F>
  auto write(const sqlite::What& what, F&& body) {
    if (read_only) throw Error(name() + " is open read-only: cannot " + what.text, {}, what.where);
    return db.write(what, std::forward<F>(body));
  }

  // Runs sql, one statement on the run's row (an UPDATE of runs, or an INSERT … SELECT FROM
  // runs), in its own write transaction with ?1 bound to run and args to ?2, ?3, …; throws
  // "<what>: no run with id <run>" when it changed no row.
  template <class... Args>
  void write_run(const sqlite::What& what, int64_t run, const std::string& sql,
                 const Args&... args) {
    write(what, [&] { require_run(what, run, db.query(what, sql, run, args...).run()); });
  }

  // The rows of one step (scalars, histograms, samples, audit, events) and the run's last_step,
  // inside the caller's write transaction.
  void insert_step(int64_t run, const StepRecord& r, std::span<const int64_t> scalar_ids);

  // Throws "<what>: no run with id <run>" when a statement on the run's row changed none.
  static void require_run(const sqlite::What& what, int64_t run, int64_t changed) {
    if (changed == 0)
      throw Error(what.text + ": no run with id " + std::to_string(run), {}, what.where);
  }
};

}  // namespace fp8rl
