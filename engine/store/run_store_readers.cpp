// The run store's readers: each sees the latest committed state.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <ostream>

#include "store/run_store.hpp"
#include "store/run_store_impl.hpp"
#include "store/stored_values.hpp"
#include "store/table_columns.hpp"

namespace fp8rl {
namespace {

using sqlite::Row;

using RunRow = RunStore::RunRow;

// The runs table's columns, in the order they are read. A read-only store may be older than
// this build: version 1 has no tags or notes, 4 added the server key, 5 the sweep, 6 the source.
const TableColumn<RunRow> kRunColumns[] = {
    {"id", [](const Row& s, int i, RunRow& r) { r.id = s.integer(i); }},
    {"name", [](const Row& s, int i, RunRow& r) { r.name = s.text(i); }},
    {"status", [](const Row& s, int i, RunRow& r) { r.status = s.text(i); }},
    {"preset", [](const Row& s, int i, RunRow& r) { r.preset = s.text(i); }},
    {"config", [](const Row& s, int i, RunRow& r) { r.config = s.json(i); }},
    {"precision_summary", [](const Row& s, int i, RunRow& r) { r.precision_summary = s.text(i); }},
    {"host", [](const Row& s, int i, RunRow& r) { r.host = s.text(i); }},
    {"pid", [](const Row& s, int i, RunRow& r) { r.pid = s.integer(i); }},
    {"created_at", [](const Row& s, int i, RunRow& r) { r.created_at = s.real(i); }},
    {"started_at", [](const Row& s, int i, RunRow& r) { r.started_at = s.opt_real(i); }},
    {"ended_at", [](const Row& s, int i, RunRow& r) { r.ended_at = s.opt_real(i); }},
    {"last_step", [](const Row& s, int i, RunRow& r) { r.last_step = s.opt_integer(i); }},
    {"last_heartbeat", [](const Row& s, int i, RunRow& r) { r.last_heartbeat = s.opt_real(i); }},
    {"control_endpoint", [](const Row& s, int i, RunRow& r) { r.control_endpoint = s.text(i); }},
    {"telemetry_endpoint",
     [](const Row& s, int i, RunRow& r) { r.telemetry_endpoint = s.text(i); }},
    {"checkpoint_dir", [](const Row& s, int i, RunRow& r) { r.checkpoint_dir = s.text(i); }},
    {"checkpoint_step",
     [](const Row& s, int i, RunRow& r) { r.checkpoint_step = s.opt_integer(i); }},
    {"tags", [](const Row& s, int i, RunRow& r) { r.tags = s.text(i); }, 2, "''"},
    {"notes", [](const Row& s, int i, RunRow& r) { r.notes = s.text(i); }, 2, "''"},
    {"server_key", [](const Row& s, int i, RunRow& r) { r.server_key = s.text(i); }, 4, "''"},
    {"sweep_id", [](const Row& s, int i, RunRow& r) { r.sweep_id = s.opt_integer(i); }, 5},
    {"sweep_point",
     [](const Row& s, int i, RunRow& r) { r.sweep_point = s.opt_integer(i).value_or(-1); }, 5},
    {"axis_values",
     [](const Row& s, int i, RunRow& r) {
       if (!s.is_null(i) && !s.text(i).empty()) r.axis_values = s.json(i);
     },
     5, "''"},
    {"source", [](const Row& s, int i, RunRow& r) { r.source = s.text(i); }, 6, "''"},
    {"source_path", [](const Row& s, int i, RunRow& r) { r.source_path = s.text(i); }, 6, "''"},
};

RunRow run_row(const Row& s) {
  return read_columns(kRunColumns, s);
}

std::string first_text(const Row& s) {
  return s.text(0);
}

// The SQL listing the distinct values of `column` of `table` for run ?1, sorted: a skip scan
// over the table's (run_id, column, step) index, one index seek per distinct value instead of
// reading every row of the run.
std::string distinct_per_run(const std::string& table, const std::string& column) {
  const std::string least = "(SELECT min(" + column + ") FROM " + table + " WHERE run_id = ?1";
  return "WITH RECURSIVE d(v) AS (SELECT " + least + ") UNION ALL SELECT " + least + " AND " +
         column + " > d.v) FROM d WHERE d.v IS NOT NULL) SELECT v FROM d WHERE v IS NOT NULL";
}

// Shortest text that reads back as the same double; nan, inf, -inf otherwise.
std::string format_number(double v) {
  if (!std::isfinite(v)) return stored::nonfinite_name(v);
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

}  // namespace

std::vector<RunStore::RunRow> RunStore::list_runs(int64_t configs_known) {
  return impl_->db
      .query("list_runs",
             select_columns(kRunColumns, impl_->version, "runs ORDER BY id",
                            {{"config", "CASE WHEN id > ?1 THEN config ELSE 'null' END"}}),
             configs_known)
      .rows(run_row);
}

std::optional<RunStore::RunRow> RunStore::find_run(int64_t id) {
  return impl_->db
      .query(run_what("find_run", id),
             select_columns(kRunColumns, impl_->version, "runs WHERE id = ?1"), id)
      .one(run_row);
}

std::vector<std::string> RunStore::scalar_keys(int64_t run) {
  if (impl_->version < 7)  // an older store read as it is: the name in every row
    return impl_->db.query(run_what("scalar_keys", run), distinct_per_run("scalars", "key"), run)
        .rows(first_text);
  return impl_->db
      .query(run_what("scalar_keys", run),
             "WITH ids(id) AS (" + distinct_per_run("scalar_rows", "key_id") +
                 ") SELECT k.key FROM ids JOIN scalar_keys k ON k.id = ids.id ORDER BY k.key",
             run)
      .rows(first_text);
}

std::vector<RunStore::ScalarPoint> RunStore::scalar_series(int64_t run, const std::string& key,
                                                           int64_t after_step) {
  return impl_->db
      .query(run_what("scalar_series", run) + " '" + key + "'",
             impl_->version < 7
                 ? "SELECT step, wall, value, nonfinite FROM scalars "
                   "WHERE run_id = ?1 AND key = ?2 AND step > ?3 ORDER BY step, rowid"
                 : "SELECT step, wall, value, nonfinite FROM scalar_rows "
                   "WHERE run_id = ?1 AND key_id = (SELECT id FROM scalar_keys WHERE key = ?2) "
                   "AND step > ?3 ORDER BY step, rowid",
             run, key, after_step)
      .rows([](const Row& s) {
        return ScalarPoint{s.integer(0), s.real(1), stored::scalar(s, 2)};
      });
}

std::vector<std::string> RunStore::histogram_names(int64_t run) {
  return impl_->db
      .query(run_what("histogram_names", run), distinct_per_run("histograms", "name"), run)
      .rows(first_text);
}

std::vector<std::pair<int64_t, Histogram>> RunStore::histogram_series(int64_t run,
                                                                      const std::string& name) {
  return impl_->db
      .query(run_what("histogram_series", run) + " '" + name + "'",
             "SELECT step, edges, counts FROM histograms "
             "WHERE run_id = ?1 AND name = ?2 ORDER BY step, rowid",
             run, name)
      .rows([](const Row& s) { return std::pair(s.integer(0), stored::histogram(s, 1)); });
}

std::vector<std::pair<int64_t, SampleRecord>> RunStore::samples(int64_t run, int64_t limit) {
  return impl_->db
      .query(run_what("samples", run),
             "SELECT step, prompt, response, answer, reward, detail FROM samples "
             "WHERE run_id = ?1 ORDER BY step DESC, rowid DESC LIMIT ?2",
             run, limit < 0 ? -1 : limit)  // LIMIT -1: no limit
      .rows([](const Row& s) {
        SampleRecord x{s.text(1), s.text(2), s.text(3), s.real(4), {}, {}};
        stored::read_sample_detail(s, 5, x);
        return std::pair(s.integer(0), std::move(x));
      });
}

std::vector<std::pair<int64_t, AuditRow>> RunStore::audit(int64_t run, int64_t step) {
  return impl_->db
      .query(run_what("layer_audit", run),
             "SELECT step, layer, module, generator, trainer, max_abs_diff, ok FROM layer_audit "
             "WHERE run_id = ?1 AND (?2 < 0 OR step = ?2) ORDER BY step, layer, rowid",
             run, step)
      .rows([](const Row& s) {
        AuditRow a;
        a.layer = s.integer(1);
        a.module = s.text(2);
        a.generator_precision = s.text(3);
        a.trainer_precision = s.text(4);
        a.max_abs_diff = s.is_null(5) ? std::nan("") : s.real(5);
        a.ok = s.integer(6) != 0;
        return std::pair(s.integer(0), std::move(a));
      });
}

std::vector<RunStore::EventRow> RunStore::events(int64_t run) {
  return impl_->db
      .query(run_what("events", run),
             "SELECT step, wall, kind, message, data FROM events "
             "WHERE run_id = ?1 ORDER BY rowid",
             run)
      .rows([](const Row& s) {
        return EventRow{s.integer(0), s.real(1), EventRecord{s.text(2), s.text(3), s.json(4)}};
      });
}

std::vector<std::pair<int64_t, Json>> RunStore::precision_history(int64_t run) {
  return impl_->db
      .query(run_what("precision_history", run),
             "SELECT step, map FROM precision_history WHERE run_id = ?1 "
             "ORDER BY step, rowid",
             run)
      .rows([](const Row& s) { return std::pair(s.integer(0), s.json(1)); });
}

void RunStore::export_csv(int64_t run, std::ostream& out) {
  // The keys first (they fix the columns), then every scalar row in step order.
  const std::vector<std::string> keys = scalar_keys(run);
  std::map<std::string, size_t> column;
  for (size_t i = 0; i < keys.size(); ++i) column.emplace(keys[i], i);

  out << "step,wall";
  for (const std::string& k : keys) out << ',' << csv_field(k);
  out << '\n';

  bool have_row = false;
  int64_t step = 0;
  double wall = 0;
  std::vector<std::optional<double>> cells(keys.size());
  auto flush = [&] {
    out << step << ',' << format_number(wall);
    for (const auto& c : cells) out << ',' << (c ? format_number(*c) : "");
    out << '\n';
  };
  impl_->db
      .query(run_what("export_csv", run),
             impl_->version < 7
                 ? "SELECT step, wall, key, value, nonfinite FROM scalars WHERE run_id = ?1 "
                   "ORDER BY step, rowid"
                 : "SELECT r.step, r.wall, k.key, r.value, r.nonfinite FROM scalar_rows r "
                   "JOIN scalar_keys k ON k.id = r.key_id WHERE r.run_id = ?1 "
                   "ORDER BY r.step, r.rowid",
             run)
      .each([&](const Row& s) {
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
        if (it != column.end()) cells[it->second] = stored::scalar(s, 3);
      });
  if (have_row) flush();
  if (!out) throw Error(run_what("export_csv", run) + ": writing the CSV failed");
}

std::string RunStore::integrity_check() {
  std::string result;
  impl_->db.query(impl_->name() + ": integrity_check", "PRAGMA integrity_check")
      .each([&](const Row& s) {
        if (!result.empty()) result += '\n';
        result += s.text(0);
      });
  return result;
}

}  // namespace fp8rl
