// The run store's sweeps (docs/sweeps.md): a sweep's definition and points, and which process
// runs it.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "store/run_store.hpp"
#include "store/run_store_impl.hpp"
#include "store/stored_values.hpp"
#include "store/table_columns.hpp"

namespace fp8rl {
namespace {

using sqlite::Row;

using SweepRow = RunStore::SweepRow;
using SweepPoint = RunStore::SweepPoint;

// The sweeps table's columns, in the order they are read.
const TableColumn<SweepRow> kSweepColumns[] = {
    {"id", [](const Row& s, int i, SweepRow& r) { r.id = s.integer(i); }},
    {"name", [](const Row& s, int i, SweepRow& r) { r.name = s.text(i); }},
    {"source", [](const Row& s, int i, SweepRow& r) { r.source = s.text(i); }},
    {"spec", [](const Row& s, int i, SweepRow& r) { r.spec = s.json(i); }},
    {"spec_hash", [](const Row& s, int i, SweepRow& r) { r.spec_hash = s.text(i); }},
    {"axes",
     [](const Row& s, int i, SweepRow& r) {
       const Json axes = s.json(i);
       if (axes.is_array())
         for (const Json& a : axes.as_array())
           if (a.is_string()) r.axes.push_back(a.as_string());
     }},
    {"replicate", [](const Row& s, int i, SweepRow& r) { r.replicate = s.text(i); }},
    {"concurrency", [](const Row& s, int i, SweepRow& r) { r.concurrency = s.integer(i); }},
    {"created_at", [](const Row& s, int i, SweepRow& r) { r.created_at = s.real(i); }},
    {"ended_at", [](const Row& s, int i, SweepRow& r) { r.ended_at = s.opt_real(i); }},
    {"runner_host", [](const Row& s, int i, SweepRow& r) { r.runner_host = s.text(i); }},
    {"runner_pid", [](const Row& s, int i, SweepRow& r) { r.runner_pid = s.integer(i); }},
    {"runner_heartbeat",
     [](const Row& s, int i, SweepRow& r) { r.runner_heartbeat = s.opt_real(i); }},
};

SweepRow sweep_row(const Row& s) {
  return read_columns(kSweepColumns, s);
}

std::string sweeps_select(const std::string& rest) {
  return select_columns(kSweepColumns, 5, "sweeps " + rest);  // sweeps came with version 5
}

// The sweep_points table's columns, in the order they are read.
const TableColumn<SweepPoint> kPointColumns[] = {
    {"sweep_id", [](const Row& s, int i, SweepPoint& p) { p.sweep_id = s.integer(i); }},
    {"point", [](const Row& s, int i, SweepPoint& p) { p.point = s.integer(i); }},
    {"name", [](const Row& s, int i, SweepPoint& p) { p.name = s.text(i); }},
    {"axis_values", [](const Row& s, int i, SweepPoint& p) { p.axis_values = s.json(i); }},
    {"config", [](const Row& s, int i, SweepPoint& p) { p.config = s.json(i); }},
    {"run_id", [](const Row& s, int i, SweepPoint& p) { p.run_id = s.opt_integer(i); }},
    {"attempts", [](const Row& s, int i, SweepPoint& p) { p.attempts = s.integer(i); }},
};

std::string sweep_what(const std::string& op, int64_t sweep) {
  return op + "(sweep " + std::to_string(sweep) + ")";
}

}  // namespace

int64_t RunStore::create_sweep(const SweepRow& sweep, const std::vector<SweepPoint>& points) {
  Impl& m = *impl_;
  const std::string what = "create_sweep('" + sweep.name + "')";
  Json::Array axes;
  for (const auto& a : sweep.axes) axes.emplace_back(a);
  return m.write(what, [&] {
    m.db.query(what,
               "INSERT INTO sweeps(name, source, spec, spec_hash, axes, replicate, concurrency, "
               "created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
               sweep.name, sweep.source, stored::json_text(sweep.spec), sweep.spec_hash,
               stored::json_text(Json(axes)), sweep.replicate, sweep.concurrency, Impl::now_unix())
        .run();
    const int64_t id = m.db.last_insert_rowid();
    for (const SweepPoint& p : points)
      m.db.query(what + ": point " + std::to_string(p.point),
                 "INSERT INTO sweep_points(sweep_id, point, name, axis_values, config) "
                 "VALUES (?1, ?2, ?3, ?4, ?5)",
                 id, p.point, p.name, stored::json_text(p.axis_values), stored::json_text(p.config))
          .run();
    return id;
  });
}

std::vector<RunStore::SweepRow> RunStore::list_sweeps() {
  if (impl_->version < 5) return {};  // an older store, read as it is: no sweeps
  return impl_->db.query("list_sweeps", sweeps_select("ORDER BY id")).rows(sweep_row);
}

std::optional<RunStore::SweepRow> RunStore::find_sweep(int64_t id) {
  if (impl_->version < 5) return std::nullopt;
  return impl_->db.query(sweep_what("find_sweep", id), sweeps_select("WHERE id = ?1"), id)
      .one(sweep_row);
}

std::vector<RunStore::SweepPoint> RunStore::sweep_points(int64_t sweep) {
  if (impl_->version < 5) return {};
  return impl_->db
      .query(sweep_what("sweep_points", sweep),
             select_columns(kPointColumns, 5, "sweep_points WHERE sweep_id = ?1 ORDER BY point"),
             sweep)
      .rows([](const Row& s) { return read_columns(kPointColumns, s); });
}

std::string RunStore::claim_sweep(int64_t sweep, double stale_seconds) {
  Impl& m = *impl_;
  const std::string what = sweep_what("claim_sweep", sweep);
  return m.write(what, [&]() -> std::string {
    const auto row = m.db.query(what, sweeps_select("WHERE id = ?1"), sweep).one(sweep_row);
    if (!row) throw Error(what + ": no sweep with id " + std::to_string(sweep));
    const double now = Impl::now_unix();
    const bool mine = row->runner_host == Impl::host_name() && row->runner_pid == getpid();
    const bool fresh = row->runner_heartbeat && now - *row->runner_heartbeat < stale_seconds;
    if (row->runner_pid > 0 && !mine && fresh) {
      // This host's runner counts only while its process lives (a pid can be reused, hence
      // the heartbeat too); another host's, while its heartbeat is fresh.
      const bool here = row->runner_host == Impl::host_name();
      const bool alive =
          !here || ::kill(static_cast<pid_t>(row->runner_pid), 0) == 0 || errno == EPERM;
      if (alive)
        return "sweep " + std::to_string(sweep) + " is being run by process " +
               std::to_string(row->runner_pid) + " on " + row->runner_host;
    }
    m.db.query(what,
               "UPDATE sweeps SET runner_host = ?2, runner_pid = ?3, runner_heartbeat = ?4 "
               "WHERE id = ?1",
               sweep, Impl::host_name(), static_cast<int64_t>(getpid()), now)
        .run();
    return {};
  });
}

void RunStore::sweep_heartbeat(int64_t sweep) {
  Impl& m = *impl_;
  const std::string what = sweep_what("sweep_heartbeat", sweep);
  m.write(what, [&] {
    m.db.query(what, "UPDATE sweeps SET runner_heartbeat = ?2 WHERE id = ?1", sweep,
               Impl::now_unix())
        .run();
  });
}

void RunStore::release_sweep(int64_t sweep, bool ended) {
  Impl& m = *impl_;
  const std::string what = sweep_what("release_sweep", sweep);
  m.write(what, [&] {
    m.db.query(what,
               "UPDATE sweeps SET runner_host = '', runner_pid = 0, runner_heartbeat = NULL, "
               "ended_at = CASE WHEN ?2 THEN coalesce(ended_at, ?3) ELSE NULL END WHERE id = ?1",
               sweep, ended, Impl::now_unix())
        .run();
  });
}

std::string RunStore::SweepRow::recorded_preset() const {
  return spec.is_object() && spec.contains("preset") && spec.at("preset").is_string()
             ? spec.at("preset").as_string()
             : "sweep " + name;
}

void RunStore::set_next_run_sweep_point(int64_t sweep, int64_t point) {
  const std::string what = sweep_what("set_next_run_sweep_point", sweep);
  const auto found =
      impl_->db
          .query(what, "SELECT count(*) FROM sweep_points WHERE sweep_id = ?1 AND point = ?2",
                 sweep, point)
          .one([](const Row& r) { return r.integer(0); });
  if (found.value_or(0) == 0)
    throw Error("sweep " + std::to_string(sweep) + " has no point " + std::to_string(point) +
                " in " + impl_->path);
  impl_->next_sweep_point = std::make_pair(sweep, point);
}

}  // namespace fp8rl
