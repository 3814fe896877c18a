// Run store: step records read back identically (NaN and ±inf included), many runs in one file,
// incremental polling, statuses, CSV export, schema migration and refusal of newer or foreign
// files, read-only opening, and two processes writing one file at once.
#include <QtTest>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "store/run_store.hpp"

using fp8rl::AuditRow;
using fp8rl::Error;
using fp8rl::EventRecord;
using fp8rl::HistogramRecord;
using fp8rl::Json;
using fp8rl::RunStore;
using fp8rl::SampleRecord;
using fp8rl::StepRecord;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Equal as recorded, NaN equal to NaN. (−0 reads back as +0: SQLite writes integral REALs as
// integers. No metric tells the two apart.)
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;
}

// A direct SQLite connection, for building databases the way an older build (or another
// program) would have left them.
class RawDb {
 public:
  explicit RawDb(const QString& path) {
    if (sqlite3_open(path.toStdString().c_str(), &db_) != SQLITE_OK)
      throw std::runtime_error(std::string("sqlite3_open: ") + sqlite3_errmsg(db_));
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error("sqlite3_exec(" + sql + "): " + msg);
    }
  }
  // The first column of the first row of sql, as an integer.
  int64_t integer(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error("prepare(" + sql + "): " + sqlite3_errmsg(db_));
    const int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

fp8rl::Histogram histogram(double lo, int bins, int64_t seed) {
  fp8rl::Histogram h;
  for (int i = 0; i <= bins; ++i)
    h.edges.push_back(lo + 0.1 * i + 1e-9 * static_cast<double>(seed));
  for (int i = 0; i < bins + 2; ++i) h.counts.push_back(seed * 1000 + i);
  return h;
}

// A step with every kind of content, NaN and ±inf among the scalars.
StepRecord full_record(int64_t step) {
  StepRecord r;
  r.step = step;
  r.phase = "rl";
  r.wall_seconds = 12.345678901234567 + static_cast<double>(step);
  r.scalars = {{"reward/mean", 0.1 * static_cast<double>(step)},
               {"loss", kNaN},
               {"grad_norm", kInf},
               {"kl_ref", -kInf},
               {"lr", 1e-6},
               {"zero", -0.0},
               {"time/total_step", 1.0 / 3.0}};
  r.histograms = {{"importance_log_weight", histogram(-3, 8, step)},
                  {"fp8_scale_log2/L0/weight", histogram(-20, 4, step + 7)}};
  r.samples = {{"What is 2+3?", "5", "5", 1.0, {"5", "<eos>"}, {0.0, -1.0 / 3.0}},
               {"What is 7*6?", "It is 41", "42", 0.0, {}, {}},
               {"Prompt with \"quotes\",\ncommas and ünïcode", "…", "x", 0.25, {"…"}, {0.5}}};
  r.audit = {{0, "q", "fp8", "fp8", 0.0, true}, {1, "down", "fp8", "bf16", 0.125, false}};
  Json data(Json::Object{});
  data["layer"] = "L3.mlp";
  data["from"] = "fp8";
  data["to"] = "bf16";
  r.events = {{"precision", "L3.mlp back to bf16", data}, {"validation", "accuracy 0.5", Json()}};
  return r;
}

StepRecord scalar_record(int64_t step, std::map<std::string, double> scalars, double wall) {
  StepRecord r;
  r.step = step;
  r.wall_seconds = wall;
  r.scalars = std::move(scalars);
  return r;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

class TestStore : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string path(const QString& name) const { return dir_.filePath(name).toStdString(); }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void stepRecordRoundTrips() {
    RunStore store(path("round_trip/runs.db"));  // the directory is created
    QCOMPARE(store.schema_version(), RunStore::latest_schema_version());
    const Json config = Json::parse(R"({"preset": "tiny", "lr": 1e-05, "layers": [1, 2]})");
    const double before = QDateTime::currentMSecsSinceEpoch() / 1000.0;
    const int64_t id = store.create_run("tiny-gsm8k", "tiny", config, "linears e4m3, kv e4m3");
    const StepRecord r = full_record(3);
    store.record_step(id, r);

    // Scalars: one point each, NaN and the infinities (and −0) as recorded.
    std::vector<std::string> expected_keys;
    for (const auto& [k, v] : r.scalars) expected_keys.push_back(k);
    QCOMPARE(store.scalar_keys(id), expected_keys);
    for (const auto& [k, v] : r.scalars) {
      const auto series = store.scalar_series(id, k);
      QCOMPARE(series.size(), size_t{1});
      QCOMPARE(series[0].step, int64_t{3});
      QVERIFY(same(series[0].wall, r.wall_seconds));
      QVERIFY2(same(series[0].value, v), k.c_str());
    }

    // Histograms: bit-identical edges and counts.
    QCOMPARE(store.histogram_names(id),
             (std::vector<std::string>{"fp8_scale_log2/L0/weight", "importance_log_weight"}));
    for (const HistogramRecord& h : r.histograms) {
      const auto series = store.histogram_series(id, h.name);
      QCOMPARE(series.size(), size_t{1});
      QCOMPARE(series[0].first, int64_t{3});
      QCOMPARE(series[0].second.counts, h.hist.counts);
      QCOMPARE(series[0].second.edges.size(), h.hist.edges.size());
      for (size_t i = 0; i < h.hist.edges.size(); ++i)
        QVERIFY(same(series[0].second.edges[i], h.hist.edges[i]));
    }

    // Samples: newest first (within a step, the last recorded first).
    const auto samples = store.samples(id, -1);
    QCOMPARE(samples.size(), r.samples.size());
    for (size_t i = 0; i < samples.size(); ++i) {
      const SampleRecord& want = r.samples[r.samples.size() - 1 - i];
      QCOMPARE(samples[i].first, int64_t{3});
      QCOMPARE(samples[i].second.prompt, want.prompt);
      QCOMPARE(samples[i].second.response, want.response);
      QCOMPARE(samples[i].second.answer, want.answer);
      QVERIFY(same(samples[i].second.reward, want.reward));
      QCOMPARE(samples[i].second.tokens, want.tokens);
      QCOMPARE(samples[i].second.logprob_diff.size(), want.logprob_diff.size());
      for (size_t t = 0; t < want.logprob_diff.size(); ++t)
        QVERIFY(same(samples[i].second.logprob_diff[t], want.logprob_diff[t]));
    }
    QCOMPARE(store.samples(id, 2).size(), size_t{2});
    QCOMPARE(store.samples(id, 0).size(), size_t{0});

    // The layer audit, by layer, each field intact.
    const auto audit = store.audit(id);
    QCOMPARE(audit.size(), r.audit.size());
    for (size_t i = 0; i < audit.size(); ++i) {
      const AuditRow& want = r.audit[i];
      QCOMPARE(audit[i].first, int64_t{3});
      QCOMPARE(audit[i].second.layer, want.layer);
      QCOMPARE(audit[i].second.module, want.module);
      QCOMPARE(audit[i].second.generator_precision, want.generator_precision);
      QCOMPARE(audit[i].second.trainer_precision, want.trainer_precision);
      QVERIFY(same(audit[i].second.max_abs_diff, want.max_abs_diff));
      QCOMPARE(audit[i].second.ok, want.ok);
    }
    QCOMPARE(store.audit(id, 3).size(), r.audit.size());
    QVERIFY(store.audit(id, 2).empty());

    // Events in order, their data intact (null stays null).
    const auto events = store.events(id);
    QCOMPARE(events.size(), r.events.size());
    for (size_t i = 0; i < events.size(); ++i) {
      QCOMPARE(events[i].step, int64_t{3});
      QVERIFY(same(events[i].wall, r.wall_seconds));
      QCOMPARE(events[i].event.kind, r.events[i].kind);
      QCOMPARE(events[i].event.message, r.events[i].message);
      QCOMPARE(events[i].event.data.dump(), r.events[i].data.dump());
    }
    QVERIFY(events[1].event.data.is_null());

    // The run row.
    const auto row = store.find_run(id);
    QVERIFY(row.has_value());
    QCOMPARE(row->id, id);
    QCOMPARE(row->name, std::string("tiny-gsm8k"));
    QCOMPARE(row->status, std::string("running"));
    QCOMPARE(row->preset, std::string("tiny"));
    QCOMPARE(row->config.dump(), config.dump());
    QCOMPARE(row->precision_summary, std::string("linears e4m3, kv e4m3"));
    QVERIFY(!row->host.empty());
    QCOMPARE(row->pid, static_cast<int64_t>(getpid()));
    QVERIFY(row->created_at >= before - 1 && row->created_at <= before + 60);
    QVERIFY(row->started_at.has_value());
    QVERIFY(!row->ended_at.has_value());
    QCOMPARE(row->last_step, std::optional<int64_t>(3));
    QVERIFY(row->last_heartbeat.has_value() && *row->last_heartbeat >= row->created_at);
    QVERIFY(!row->checkpoint_step.has_value());
    QCOMPARE(store.integrity_check(), std::string("ok"));
  }

  void nonFiniteJsonIsStoredAsText() {
    // JSON has no NaN: event data keeps it visible as "nan" rather than becoming unreadable.
    RunStore store(path("nonfinite.db"));
    const int64_t id = store.create_run("r", "", Json(Json::Object{}), "");
    Json data(Json::Object{});
    data["loss"] = kNaN;
    data["grad_norm"] = Json(Json::Array{Json(kInf), Json(-kInf), Json(1.5)});
    store.record_event(id, 7, {"error", "loss is NaN", data});
    const auto events = store.events(id);
    QCOMPARE(events.size(), size_t{1});
    QCOMPARE(events[0].step, int64_t{7});
    QCOMPARE(events[0].event.data.dump(),
             std::string(R"({"grad_norm":["inf","-inf",1.5],"loss":"nan"})"));
  }

  void severalRunsShareOneFile() {
    RunStore store(path("several.db"));
    std::vector<int64_t> ids;
    for (int i = 0; i < 3; ++i)
      ids.push_back(store.create_run("run" + std::to_string(i), "p", Json(Json::Object{}), ""));
    for (int64_t step = 1; step <= 4; ++step)
      for (int i = 0; i < 3; ++i)
        store.record_step(ids[static_cast<size_t>(i)],
                          scalar_record(step, {{"loss", 100.0 * i + static_cast<double>(step)}},
                                        static_cast<double>(step)));
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t{3});
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(runs[static_cast<size_t>(i)].id, ids[static_cast<size_t>(i)]);
      QCOMPARE(runs[static_cast<size_t>(i)].name, "run" + std::to_string(i));
      QCOMPARE(runs[static_cast<size_t>(i)].last_step, std::optional<int64_t>(4));
      const auto series = store.scalar_series(ids[static_cast<size_t>(i)], "loss");
      QCOMPARE(series.size(), size_t{4});
      for (size_t k = 0; k < series.size(); ++k) {
        QCOMPARE(series[k].step, static_cast<int64_t>(k + 1));
        QCOMPARE(series[k].value, 100.0 * i + static_cast<double>(k + 1));
      }
    }
    QVERIFY(!store.find_run(999).has_value());
    QVERIFY(store.scalar_keys(999).empty());
    QVERIFY(store.scalar_series(999, "loss").empty());
  }

  void recordStepIsAllOrNothing() {
    const std::string file = path("atomic.db");
    RunStore store(file);
    const int64_t id = store.create_run("r", "", Json(Json::Object{}), "");
    store.record_step(id, scalar_record(1, {{"loss", 1.0}}, 1.0));

    // Unknown run: an Error naming it, and nothing written.
    try {
      store.record_step(999, scalar_record(1, {{"loss", 1.0}}, 1.0));
      QFAIL("record_step on an unknown run did not throw");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), "no run with id 999"), e.what());
    }
    QVERIFY(store.scalar_keys(999).empty());

    // A failure after the scalars were inserted (an event the database refuses) rolls the
    // whole step back.
    RawDb(QString::fromStdString(file))
        .exec(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON events WHEN NEW.kind = 'boom' "
            "BEGIN SELECT RAISE(ABORT, 'boom refused'); END");
    StepRecord bad = scalar_record(2, {{"loss", 2.0}, {"reward/mean", 0.5}}, 2.0);
    bad.samples = {{"p", "r", "a", 1.0, {}, {}}};
    bad.events = {{"boom", "", Json()}};
    try {
      store.record_step(id, bad);
      QFAIL("record_step did not throw");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), "boom refused"), e.what());
      QVERIFY2(!e.status().empty(), e.what());
    }
    QCOMPARE(store.scalar_series(id, "loss").size(), size_t{1});
    QVERIFY(store.scalar_series(id, "reward/mean").empty());
    QVERIFY(store.samples(id, -1).empty());
    QCOMPARE(store.find_run(id)->last_step, std::optional<int64_t>(1));
    // The store stays usable.
    store.record_step(id, scalar_record(2, {{"loss", 2.0}}, 2.0));
    QCOMPARE(store.scalar_series(id, "loss").size(), size_t{2});
  }

  void seriesPollsIncrementally() {
    const std::string file = path("poll.db");
    RunStore writer(file);
    const int64_t id = writer.create_run("r", "", Json(Json::Object{}), "");
    RunStore reader(file, /*read_only=*/true);  // opened once, polled as a GUI would
    for (int64_t s = 1; s <= 5; ++s)
      writer.record_step(id, scalar_record(s, {{"loss", static_cast<double>(s)}}, 0.5 * s));
    auto points = reader.scalar_series(id, "loss");
    QCOMPARE(points.size(), size_t{5});
    int64_t last = points.back().step;
    QCOMPARE(last, int64_t{5});
    QVERIFY(reader.scalar_series(id, "loss", last).empty());
    for (int64_t s = 6; s <= 8; ++s)
      writer.record_step(id, scalar_record(s, {{"loss", static_cast<double>(s)}}, 0.5 * s));
    points = reader.scalar_series(id, "loss", last);
    QCOMPARE(points.size(), size_t{3});
    QCOMPARE(points[0].step, int64_t{6});
    QCOMPARE(points[2].step, int64_t{8});
    QCOMPARE(points[2].wall, 4.0);
    // Warm-up steps are negative: the default after_step includes them.
    writer.record_step(id, scalar_record(-2, {{"loss", -2.0}}, 0.0));
    QCOMPARE(reader.scalar_series(id, "loss").front().step, int64_t{-2});
    QCOMPARE(reader.scalar_series(id, "loss", 0).size(), size_t{8});
  }

  void statusChanges() {
    RunStore store(path("status.db"));
    const int64_t id = store.create_run("r", "", Json(Json::Object{}), "");
    QCOMPARE(store.find_run(id)->status, std::string("running"));
    store.set_status(id, "paused");
    QCOMPARE(store.find_run(id)->status, std::string("paused"));
    QVERIFY(!store.find_run(id)->ended_at.has_value());
    store.set_status(id, "finished");
    auto row = store.find_run(id);
    QCOMPARE(row->status, std::string("finished"));
    QVERIFY(row->ended_at.has_value() && *row->ended_at >= row->created_at);
    store.set_status(id, "running");  // resumed from its checkpoint
    QVERIFY(!store.find_run(id)->ended_at.has_value());
    for (const char* s : {"failed", "crashed", "stopped"}) {
      store.set_status(id, s);
      QCOMPARE(store.find_run(id)->status, std::string(s));
      QVERIFY(store.find_run(id)->ended_at.has_value());
    }
    try {
      store.set_status(id, "exploded");
      QFAIL("an invalid status was accepted");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), "'exploded'"), e.what());
      QVERIFY2(contains(e.message(), "running, paused, finished, failed, crashed, stopped"),
               e.what());
    }
    QCOMPARE(store.find_run(id)->status, std::string("stopped"));
    QVERIFY_THROWS_EXCEPTION(Error, store.set_status(12345, "paused"));
  }

  void otherWriters() {
    RunStore store(path("setters.db"));
    const int64_t id = store.create_run("r", "", Json(Json::Object{}), "");
    const double hb = *store.find_run(id)->last_heartbeat;
    store.heartbeat(id);
    QVERIFY(*store.find_run(id)->last_heartbeat >= hb);
    store.set_endpoints(id, "tcp://10.0.0.2:5555", "tcp://10.0.0.2:5556",
                        "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
    store.set_checkpoint(id, "/runs/r/ckpt-40", 40);
    store.set_tags_notes(id, "baseline,fp8", "first try\nwith notes");
    const auto row = store.find_run(id);
    QCOMPARE(row->control_endpoint, std::string("tcp://10.0.0.2:5555"));
    QCOMPARE(row->telemetry_endpoint, std::string("tcp://10.0.0.2:5556"));
    QCOMPARE(row->server_key, std::string("rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"));
    QCOMPARE(row->checkpoint_dir, std::string("/runs/r/ckpt-40"));
    QCOMPARE(row->checkpoint_step, std::optional<int64_t>(40));
    QCOMPARE(row->tags, std::string("baseline,fp8"));
    QCOMPARE(row->notes, std::string("first try\nwith notes"));

    const Json m1 = Json::parse(R"({"L0.attn": "fp8", "L0.mlp": "fp8"})");
    const Json m2 = Json::parse(R"({"L0.attn": "fp8", "L0.mlp": "bf16"})");
    store.record_precision(id, 0, m1);
    store.record_precision(id, 12, m2);
    const auto history = store.precision_history(id);
    QCOMPARE(history.size(), size_t{2});
    QCOMPARE(history[0].first, int64_t{0});
    QCOMPARE(history[0].second.dump(), m1.dump());
    QCOMPARE(history[1].first, int64_t{12});
    QCOMPARE(history[1].second.dump(), m2.dump());

    store.record_event(id, 12, {"pause", "paused by the user", Json()});
    const auto events = store.events(id);
    QCOMPARE(events.size(), size_t{1});
    QVERIFY(events[0].wall >= 0 && events[0].wall < 600);

    QVERIFY_THROWS_EXCEPTION(Error, store.heartbeat(777));
    QVERIFY_THROWS_EXCEPTION(Error, store.set_checkpoint(777, "/x", 1));
    QVERIFY_THROWS_EXCEPTION(Error, store.record_precision(777, 1, m1));
    QVERIFY_THROWS_EXCEPTION(Error, store.record_event(777, 1, {"x", "", Json()}));
  }

  void exportsCsv() {
    RunStore store(path("csv.db"));
    const int64_t id = store.create_run("r", "", Json(Json::Object{}), "");
    store.record_step(id, scalar_record(1, {{"a", 1.0}, {"b", 0.5}}, 1.5));
    store.record_step(id, scalar_record(2, {{"a", kNaN}, {"c", kInf}}, 3.0));
    store.record_step(id, scalar_record(3, {{"b", -kInf}, {"x,y", 0.1}}, 4.25));
    std::ostringstream out;
    store.export_csv(id, out);
    QCOMPARE(out.str(), std::string("step,wall,a,b,c,\"x,y\"\n"
                                    "1,1.5,1,0.5,,\n"
                                    "2,3,nan,,inf,\n"
                                    "3,4.25,,-inf,,0.1\n"));
    std::ostringstream empty;
    store.export_csv(999, empty);
    QCOMPARE(empty.str(), std::string("step,wall\n"));
  }

  void migratesFromVersion1() {
    const QString file = dir_.filePath("v1.db");
    {
      RawDb db(file);
      db.exec(RunStore::migration_script(1));
      db.exec("PRAGMA user_version = 1");
      db.exec(
          "INSERT INTO runs(name, status, preset, config, created_at, last_step) "
          "VALUES ('old run', 'finished', 'tiny', '{\"lr\":0.001}', 1700000000.5, 2)");
      db.exec(
          "INSERT INTO scalars(run_id, step, wall, key, value, nonfinite) VALUES "
          "(1, 1, 0.5, 'loss', 2.5, NULL), (1, 2, 1.0, 'loss', NULL, 'inf')");
    }
    {
      RunStore store(file.toStdString());
      QCOMPARE(store.schema_version(), RunStore::latest_schema_version());
      QVERIFY(RunStore::latest_schema_version() >= 2);
      const auto row = store.find_run(1);
      QVERIFY(row.has_value());
      QCOMPARE(row->name, std::string("old run"));
      QCOMPARE(row->status, std::string("finished"));
      QCOMPARE(row->config.dump(), std::string(R"({"lr":0.001})"));
      QCOMPARE(row->created_at, 1700000000.5);
      QCOMPARE(row->tags, std::string());
      QCOMPARE(row->notes, std::string());
      const auto series = store.scalar_series(1, "loss");
      QCOMPARE(series.size(), size_t{2});
      QCOMPARE(series[0].value, 2.5);
      QVERIFY(same(series[1].value, kInf));
      store.set_tags_notes(1, "old", "migrated");  // a version 2 column
      QCOMPARE(store.find_run(1)->notes, std::string("migrated"));
      QCOMPARE(store.integrity_check(), std::string("ok"));
    }
    RawDb db(file);
    QCOMPARE(db.integer("PRAGMA user_version"), int64_t{RunStore::latest_schema_version()});
    QCOMPARE(db.integer("SELECT count(*) FROM sqlite_master WHERE name = 'samples_run_step'"),
             int64_t{1});
    // Opening an up-to-date store again migrates nothing.
    RunStore again(file.toStdString());
    QCOMPARE(again.schema_version(), RunStore::latest_schema_version());
    QCOMPARE(again.list_runs().size(), size_t{1});
  }

  // A version 4 store (before sweeps) opens and migrates: its runs belong to no sweep; read-only
  // it is read as it is (no sweeps).
  void migratesFromVersion4() {
    const QString file = dir_.filePath("v4.db");
    {
      RawDb db(file);
      for (int v = 1; v <= 4; ++v) db.exec(RunStore::migration_script(v));
      db.exec("PRAGMA user_version = 4");
      db.exec(
          "INSERT INTO runs(name, status, created_at, last_step) VALUES ('v4', 'finished', 1.0, "
          "3)");
    }
    {
      RunStore ro(file.toStdString(), /*read_only=*/true);
      QCOMPARE(ro.schema_version(), 4);
      QVERIFY(ro.list_sweeps().empty());
      QVERIFY(!ro.find_run(1)->sweep_id.has_value());
    }
    RunStore store(file.toStdString());
    QCOMPARE(store.schema_version(), RunStore::latest_schema_version());
    const auto row = store.find_run(1);
    QCOMPARE(row->name, std::string("v4"));
    QVERIFY(!row->sweep_id.has_value());
    QCOMPARE(row->sweep_point, int64_t{-1});
    QVERIFY(row->axis_values.is_null());
    QVERIFY(store.list_sweeps().empty());
    QCOMPARE(store.integrity_check(), std::string("ok"));
  }

  // A version 6 store (a scalar's name in every row) reads the same read-only and after the
  // migration to 7 (names stored once); the view `scalars` keeps the old columns for SQL.
  void migratesFromVersion6() {
    const QString file = dir_.filePath("v6.db");
    {
      RawDb db(file);
      for (int v = 1; v <= 6; ++v) db.exec(RunStore::migration_script(v));
      db.exec("PRAGMA user_version = 6");
      db.exec(
          "INSERT INTO runs(name, status, created_at, last_step) VALUES ('a', 'finished', 1.0, 2), "
          "('b', 'finished', 2.0, 1)");
      db.exec(
          "INSERT INTO scalars(run_id, step, wall, key, value, nonfinite) VALUES "
          "(1, 1, 0.5, 'reward/mean', 0.25, NULL), (1, 1, 0.5, 'loss', 2.5, NULL), "
          "(2, 1, 0.7, 'kl', 0.01, NULL), (1, 2, 1.0, 'loss', NULL, 'nan'), "
          "(1, 2, 1.0, 'reward/mean', 0.5, NULL)");
    }
    auto read = [](RunStore& s) {
      std::ostringstream csv;
      s.export_csv(1, csv);
      std::string text = csv.str();
      for (const auto& k : s.scalar_keys(1)) text += " " + k;
      for (const auto& k : s.scalar_keys(2)) text += " " + k;
      for (const auto& p : s.scalar_series(1, "loss", 1)) text += " " + std::to_string(p.step);
      return text;
    };
    std::string before;
    {
      RunStore ro(file.toStdString(), /*read_only=*/true);
      QCOMPARE(ro.schema_version(), 6);
      before = read(ro);
    }
    QCOMPARE(before, std::string("step,wall,loss,reward/mean\n1,0.5,2.5,0.25\n2,1,nan,0.5\n"
                                 " loss reward/mean kl 2"));
    {
      RunStore store(file.toStdString());
      QCOMPARE(store.schema_version(), RunStore::latest_schema_version());
      QCOMPARE(read(store), before);
      StepRecord r;
      r.step = 3;
      r.wall_seconds = 1.5;
      r.scalars = {{"loss", 1.5}, {"entropy", 0.75}};
      store.record_step(1, r);
      QCOMPARE(store.scalar_keys(1), (std::vector<std::string>{"entropy", "loss", "reward/mean"}));
      QCOMPARE(store.scalar_series(1, "loss", 2).size(), size_t{1});
      store.truncate_after(1, 2);
      QCOMPARE(read(store), before);
      QCOMPARE(store.integrity_check(), std::string("ok"));
    }
    RawDb db(file);
    QCOMPARE(db.integer("SELECT count(*) FROM scalars WHERE run_id = 1 AND key = 'loss'"),
             int64_t{2});
    QCOMPARE(db.integer("SELECT count(*) FROM scalar_keys"), int64_t{4});  // entropy stays
  }

  // A sweep's rows; a run created for a point names it and the point the run, in one
  // transaction; one runner at a time.
  void sweepRowsAndRunners() {
    RunStore store(dir_.filePath("sweeps.db").toStdString());
    RunStore::SweepRow sweep;
    sweep.name = "demo-precision";
    sweep.spec = Json::parse(R"({"preset":"demo"})");
    sweep.spec_hash = "abc";
    sweep.axes = {"seed", "precision"};
    sweep.replicate = "seed";
    sweep.concurrency = 2;
    std::vector<RunStore::SweepPoint> points(2);
    points[0].point = 0;
    points[0].name = "demo-precision seed=1 precision=bf16";
    points[0].axis_values = Json::parse(R"({"precision":"bf16","seed":"1"})");
    points[0].config = Json::parse(R"({"seed":1})");
    points[1].point = 1;
    points[1].name = "demo-precision seed=1 precision=fp8";
    points[1].axis_values = Json::parse(R"({"precision":"fp8","seed":"1"})");
    const int64_t id = store.create_sweep(sweep, points);
    const auto row = store.find_sweep(id);
    QVERIFY(row.has_value());
    QCOMPARE(row->axes, (std::vector<std::string>{"seed", "precision"}));
    QCOMPARE(row->replicate, std::string("seed"));
    QCOMPARE(row->concurrency, int64_t{2});
    QVERIFY(!row->ended_at);
    const auto stored = store.sweep_points(id);
    QCOMPARE(stored.size(), size_t{2});
    QVERIFY(!stored[1].run_id);
    QCOMPARE(stored[0].config.dump(), std::string(R"({"seed":1})"));

    // A run of no sweep, then a run of point 1.
    const int64_t plain = store.create_run("plain", "", Json(Json::Object{}), "");
    QVERIFY(!store.find_run(plain)->sweep_id);
    store.set_next_run_sweep_point(id, 1);
    const int64_t run = store.create_run(points[1].name, "demo", Json(Json::Object{}), "fp8");
    const auto r = store.find_run(run);
    QCOMPARE(r->sweep_id.value_or(-1), id);
    QCOMPARE(r->sweep_point, int64_t{1});
    QCOMPARE(r->axis_values.at("precision").as_string(), std::string("fp8"));
    QCOMPARE(store.sweep_points(id)[1].run_id.value_or(-1), run);
    QCOMPARE(store.sweep_points(id)[1].attempts, int64_t{1});
    // Only the next run: the one after belongs to no sweep.
    QVERIFY(!store.find_run(store.create_run("later", "", Json(Json::Object{}), ""))->sweep_id);
    try {
      store.set_next_run_sweep_point(id, 7);
      QFAIL("a point that does not exist was taken");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), "has no point 7"), e.what());
    }

    // This process runs the sweep; another process (a live one: the parent) holds it against us.
    QCOMPARE(store.claim_sweep(id), std::string());
    QCOMPARE(store.claim_sweep(id), std::string());  // again: still ours
    RawDb(dir_.filePath("sweeps.db"))
        .exec("UPDATE sweeps SET runner_pid = " + std::to_string(getppid()) +
              ", runner_heartbeat = " + std::to_string(static_cast<double>(time(nullptr))));
    QVERIFY2(
        contains(store.claim_sweep(id), "is being run by process " + std::to_string(getppid())),
        store.claim_sweep(id).c_str());
    // A stale heartbeat lets it go.
    RawDb(dir_.filePath("sweeps.db")).exec("UPDATE sweeps SET runner_heartbeat = 1.0");
    QCOMPARE(store.claim_sweep(id), std::string());
    store.release_sweep(id, /*ended=*/true);
    QVERIFY(store.find_sweep(id)->ended_at.has_value());
    QCOMPARE(store.find_sweep(id)->runner_pid, int64_t{0});
  }

  void refusesNewerSchema() {
    const QString file = dir_.filePath("newer.db");
    const int newer = RunStore::latest_schema_version() + 1;
    {
      RawDb db(file);
      db.exec("CREATE TABLE runs (id INTEGER PRIMARY KEY, future TEXT)");
      db.exec("PRAGMA user_version = " + std::to_string(newer));
    }
    const std::string want = "database schema version " + std::to_string(newer) +
                             " is newer than this build supports (" +
                             std::to_string(RunStore::latest_schema_version()) + ")";
    for (bool read_only : {false, true}) {
      try {
        RunStore store(file.toStdString(), read_only);
        QFAIL("a newer schema was accepted");
      } catch (const Error& e) {
        QVERIFY2(contains(e.message(), want), e.what());
      }
    }
    RawDb db(file);
    QCOMPARE(db.integer("PRAGMA user_version"), int64_t{newer});
  }

  void refusesGarbageAndForeignFiles() {
    const QString file = dir_.filePath("garbage.db");
    std::string garbage;
    for (int i = 0; i < 200; ++i) garbage += "this is not a database, only text. ";
    { std::ofstream(file.toStdString(), std::ios::binary) << garbage; }
    for (bool read_only : {false, true}) {
      try {
        RunStore store(file.toStdString(), read_only);
        QFAIL("a garbage file was accepted");
      } catch (const Error& e) {
        QVERIFY2(contains(e.message(), file.toStdString()), e.what());
        QVERIFY2(contains(e.message(), "file is not a database"), e.what());
        QCOMPARE(e.status(), std::string(sqlite3_errstr(SQLITE_NOTADB)));
      }
    }
    QFile f(file);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll().toStdString(), garbage);  // untouched

    // A SQLite database of some other program.
    const QString foreign = dir_.filePath("foreign.db");
    RawDb(foreign).exec("CREATE TABLE contacts (name TEXT)");
    try {
      RunStore store(foreign.toStdString());
      QFAIL("a foreign database was accepted");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), "is not a run store"), e.what());
    }
    QCOMPARE(RawDb(foreign).integer("PRAGMA user_version"), int64_t{0});
  }

  void readOnlyNeverCreatesOrMigrates() {
    // A missing file is an error, and neither it nor its directory appears.
    const QString missing = dir_.filePath("absent/runs.db");
    try {
      RunStore store(missing.toStdString(), /*read_only=*/true);
      QFAIL("a missing file opened read-only");
    } catch (const Error& e) {
      QVERIFY2(contains(e.message(), missing.toStdString()), e.what());
    }
    QVERIFY(!QFileInfo::exists(missing));
    QVERIFY(!QFileInfo::exists(dir_.filePath("absent")));

    // A version 1 file is read as it is.
    const QString file = dir_.filePath("v1_readonly.db");
    {
      RawDb db(file);
      db.exec(RunStore::migration_script(1));
      db.exec("PRAGMA user_version = 1");
      db.exec("INSERT INTO runs(name, status, created_at) VALUES ('old', 'finished', 1.0)");
    }
    {
      RunStore store(file.toStdString(), /*read_only=*/true);
      QVERIFY(store.read_only());
      QCOMPARE(store.schema_version(), 1);
      const auto runs = store.list_runs();
      QCOMPARE(runs.size(), size_t{1});
      QCOMPARE(runs[0].name, std::string("old"));
      QCOMPARE(runs[0].tags, std::string());
      try {
        store.create_run("new", "", Json(Json::Object{}), "");
        QFAIL("a read-only store wrote");
      } catch (const Error& e) {
        QVERIFY2(contains(e.message(), "read-only"), e.what());
      }
      QVERIFY_THROWS_EXCEPTION(Error, store.set_status(1, "crashed"));
    }
    RawDb db(file);
    QCOMPARE(db.integer("PRAGMA user_version"), int64_t{1});
    QCOMPARE(db.integer("SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'tags'"),
             int64_t{0});
    QCOMPARE(db.integer("SELECT count(*) FROM runs"), int64_t{1});

    // An empty file is not a run store, and stays empty.
    const QString empty = dir_.filePath("empty.db");
    { QFile(empty).open(QIODevice::WriteOnly); }
    QVERIFY_THROWS_EXCEPTION(Error, RunStore(empty.toStdString(), /*read_only=*/true));
    QCOMPARE(QFileInfo(empty).size(), qint64{0});
  }

  void twoProcessesWriteOneFile() {
    const std::string file = path("shared/runs.db");
    int64_t run_a = 0, run_b = 0;
    {
      RunStore store(file);
      run_a = store.create_run("A", "", Json(Json::Object{}), "");
      run_b = store.create_run("B", "", Json(Json::Object{}), "");
    }  // no connection crosses the fork
    constexpr int kSteps = 200;
    auto write_steps = [&](int64_t run) {
      RunStore store(file);
      for (int64_t s = 1; s <= kSteps; ++s) {
        StepRecord r = full_record(s);
        r.scalars["run"] = static_cast<double>(run);
        store.record_step(run, r);
        if (s % 50 == 0) store.heartbeat(run);
      }
      store.set_status(run, "finished");
    };

    int ready[2];
    QCOMPARE(pipe(ready), 0);
    const pid_t child = fork();
    QVERIFY(child >= 0);
    if (child == 0) {
      // The child writes run A and leaves without running any destructor of the parent's
      // objects (the temporary directory would be removed).
      int code = 0;
      try {
        close(ready[0]);
        const char go = 'g';
        if (write(ready[1], &go, 1) != 1) _exit(3);
        write_steps(run_a);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        code = 1;
      }
      _exit(code);
    }
    close(ready[1]);
    char go = 0;
    QCOMPARE(read(ready[0], &go, 1), ssize_t{1});
    close(ready[0]);
    std::string parent_error;
    try {
      write_steps(run_b);
    } catch (const std::exception& e) {
      parent_error = e.what();
    }
    int status = 0;
    QCOMPARE(waitpid(child, &status, 0), child);
    QVERIFY2(parent_error.empty(), parent_error.c_str());
    QVERIFY(WIFEXITED(status));
    QCOMPARE(WEXITSTATUS(status), 0);

    RunStore store(file, /*read_only=*/true);
    QCOMPARE(store.integrity_check(), std::string("ok"));
    for (int64_t run : {run_a, run_b}) {
      const auto row = store.find_run(run);
      QCOMPARE(row->status, std::string("finished"));
      QCOMPARE(row->last_step, std::optional<int64_t>(kSteps));
      const auto series = store.scalar_series(run, "run");
      QCOMPARE(series.size(), size_t{kSteps});
      for (const auto& p : series) QCOMPARE(p.value, static_cast<double>(run));
      QCOMPARE(store.scalar_series(run, "loss").size(), size_t{kSteps});
      QCOMPARE(store.histogram_series(run, "importance_log_weight").size(), size_t{kSteps});
      QCOMPARE(store.samples(run, -1).size(), size_t{3 * kSteps});
      QCOMPARE(store.events(run).size(), size_t{2 * kSteps});
    }
  }
};

QTEST_APPLESS_MAIN(TestStore)
#include "test_store.moc"
