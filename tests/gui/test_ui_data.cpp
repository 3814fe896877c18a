// The studio's data layer: telemetry payloads into run data, merging telemetry with the
// store's history, the fp8rl executable as presets/validation source, and a session driving
// real worker processes (launch, stream, pause, precision edit, crash, bad database).
#include <QtTest>

#include <QFile>
#include <QTemporaryDir>
#include <algorithm>
#include <cmath>
#include <csignal>

#include "contract/live_edit.hpp"
#include "contract/metrics.hpp"
#include "contract/step_record.hpp"
#include "core/error.hpp"
#include "store/run_store.hpp"
#include "ui/data/engine_cli.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/studio_session.hpp"
#include "worker_test_support.hpp"

using namespace fp8rl;
using namespace fp8rl::ui;

namespace {

Json step_payload(int64_t step, double reward, double tokens) {
  return Json::parse(R"({"step": )" + std::to_string(step) +
                     R"(, "phase": "rl", "wall_seconds": )" + std::to_string(step * 0.5) +
                     R"(, "run_id": 1, "precision": "fp8",
      "scalars": {"reward/mean": )" +
                     std::to_string(reward) + R"(, "tokens/total": )" + std::to_string(tokens) +
                     R"(, "loss": "nan", "grad_norm": "inf"},
      "samples": [{"prompt": "ab=", "response": "ba", "answer": "ba", "reward": 1}]})");
}

// A demo config small enough to stream steps quickly on two cores.
Json tiny_config(EngineCli& cli, int steps) {
  QString err;
  Json c = cli.presetConfig(QStringLiteral("demo"), &err);
  if (c.is_null()) throw Error("presetConfig: " + err.toStdString());
  c["sft"]["steps"] = 0;
  c["grpo"]["steps"] = steps;
  c["grpo"]["prompts_per_step"] = 4;
  c["grpo"]["group_size"] = 4;
  c["validation"]["every"] = 5;
  c["task"]["validation_size"] = 8;
  return c;
}

}  // namespace

class TestUiData : public QObject {
  Q_OBJECT
 private slots:
  void stepPayloadKeepsNonFiniteAndTokens() {
    RunData d, delta;
    addStepPayload(delta, step_payload(1, 0.25, 100));
    addStepPayload(delta, step_payload(2, 0.5, 250));
    mergeInto(d, std::move(delta));
    QCOMPARE(d.series("reward/mean").size(), size_t(2));
    QCOMPARE(d.series("reward/mean")[1].value, 0.5);
    QCOMPARE(d.series("reward/mean")[1].tokens, 250.0);
    QCOMPARE(d.series("reward/mean")[1].wall, 1.0);
    QVERIFY(std::isnan(d.series("loss")[0].value));
    QVERIFY(std::isinf(d.series("grad_norm")[0].value));
    QCOMPARE(d.samples.size(), size_t(2));
    QCOMPARE(d.last_step, int64_t(2));
    const auto v = d.version;
    // Overlap (telemetry and store both delivering step 2) adds nothing.
    RunData again;
    addStepPayload(again, step_payload(2, 0.5, 250));
    mergeInto(d, std::move(again));
    QCOMPARE(d.series("reward/mean").size(), size_t(2));
    QCOMPARE(d.version, v);
  }

  void malformedPayloadsThrowNamingTheProblem() {
    RunData d;
    QVERIFY_THROWS_EXCEPTION(Error, addStepPayload(d, Json::parse("[1]")));
    try {
      addStepPayload(d,
                       Json::parse(R"({"step": 1, "wall_seconds": 0, "scalars": {"x": "oops"}})"));
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString::fromStdString(e.message()).contains("'x'"), e.what());
    }
    try {
      addHistogramPayload(
          d, Json::parse(R"({"step": 1, "name": "h", "edges": [0, 1], "counts": [1]})"));
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString::fromStdString(e.message()).contains("counts"), e.what());
    }
  }

  void precisionEventsBecomeHistoryAndMarkers() {
    RunData d, delta;
    const Json a = Json::parse(
        R"([{"q":"fp8","k":"fp8","v":"fp8","o":"fp8","gate":"fp8","up":"fp8","down":"fp8"}])");
    const Json b = Json::parse(
        R"([{"q":"fp8","k":"fp8","v":"fp8","o":"fp8","gate":"bf16","up":"fp8","down":"fp8"}])");
    d.precision.emplace_back(0, a);
    Json ev =
        Json::parse(R"({"step": 7, "kind": "precision", "message": "0.gate=bf16", "time": 1010})");
    ev["data"] = b;
    addEventPayload(delta, ev, 1000);
    mergeInto(d, std::move(delta));
    QCOMPARE(d.events.size(), size_t(1));
    QCOMPARE(d.events[0].wall, 10.0);
    const auto changes = d.precisionChanges();
    QCOMPARE(changes.size(), size_t(1));
    QCOMPARE(changes[0].first, int64_t(7));
    QCOMPARE(QString::fromStdString(changes[0].second), QStringLiteral("L0.gate bf16"));
    QCOMPARE(d.layers(), int64_t(1));
  }

  // A live run's data stays bounded however long it streams: 20,000 steps of a scalar keep at
  // most kMaxSeriesPoints points (the newest whole, a spike and a NaN among the old ones kept),
  // the RL mean stays exact, histograms keep at most kMaxHistogramSteps steps.
  void liveDataStaysBounded() {
    RunData run;
    run.id = 1;
    const int64_t steps = 20000;
    double sum = 0;
    for (int64_t chunk = 0; chunk < steps; chunk += 8) {  // 8 steps per drain, as a fast link
      RunData delta;
      for (int64_t s = chunk + 1; s <= chunk + 8; ++s) {
        double v = std::sin(static_cast<double>(s) * 0.01);
        if (s == 1234) v = 50;               // a spike far back
        if (s == 2345) v = std::nan("");     // a NaN far back
        if (std::isfinite(v)) sum += v;
        delta.scalars[metric::kReward].push_back({static_cast<double>(s), 0.1 * s, 0, v});
        delta.histograms[histogram::kImportanceLogWeight][s] = Histogram{{0, 1}, {0, 1, 0}};
        delta.last_step = s;
      }
      mergeInto(run, std::move(delta));
      QVERIFY(run.series(metric::kReward).size() <= RunData::kMaxSeriesPoints);
      QVERIFY(run.histograms[histogram::kImportanceLogWeight].size() <= RunData::kMaxHistogramSteps);
    }
    const auto& s = run.series(metric::kReward);
    QVERIFY(s.size() >= RunData::kMaxSeriesPoints / 4);
    QVERIFY(run.reduced_points > 0);
    QCOMPARE(static_cast<size_t>(run.reduced_points) + s.size(), static_cast<size_t>(steps));
    QVERIFY(std::is_sorted(s.begin(), s.end(),
                           [](const SeriesPoint& a, const SeriesPoint& b) { return a.step < b.step; }));
    QCOMPARE(s.back().step, static_cast<double>(steps));
    // The newest quarter is whole: every step of it.
    for (size_t i = 1; i < RunData::kMaxSeriesPoints / 4; ++i)
      QCOMPARE(s[s.size() - i].step, static_cast<double>(steps + 1 - static_cast<int64_t>(i)));
    QVERIFY(std::any_of(s.begin(), s.end(), [](const SeriesPoint& p) { return p.value == 50; }));
    QVERIFY(std::any_of(s.begin(), s.end(), [](const SeriesPoint& p) { return std::isnan(p.value); }));
    QVERIFY(std::fabs(*run.rlMean(metric::kReward) - sum / (steps - 1)) < 1e-9);
    QCOMPARE(run.histograms[histogram::kImportanceLogWeight].rbegin()->first, steps);
  }

  void loadRunReadsTheStore() {
    QTemporaryDir dir;
    RunStore store(dir.filePath("r.sqlite").toStdString());
    const int64_t id =
        store.create_run("x", "demo", Json::parse(R"({"model":{"num_hidden_layers":3}})"), "fp8");
    for (int s = 1; s <= 3; ++s) {
      StepRecord r;
      r.step = s;
      r.wall_seconds = s;
      r.scalars["reward/mean"] = 0.1 * s;
      r.scalars["tokens/total"] = 10.0 * s;
      r.histograms.push_back(
          {histogram::kImportanceLogWeight, linear_histogram({0.0, 0.1}, -0.5, 0.5, 4)});
      store.record_step(id, r);
    }
    RunData d = loadRun(store, id);
    QCOMPARE(d.series("reward/mean").size(), size_t(3));
    QCOMPARE(d.series("reward/mean")[2].tokens, 30.0);
    QCOMPARE(d.histograms[histogram::kImportanceLogWeight].size(), size_t(3));
    QCOMPARE(d.layers(), int64_t(3));
    RunData more = loadRun(store, id, 2);
    QCOMPARE(more.series("reward/mean").size(), size_t(1));
  }

  void engineCliGivesPresetsAndValidates() {
    EngineCli cli(QStringLiteral(FP8RL_CLI));
    QString err;
    QVERIFY2(cli.presets(&err).contains(QStringLiteral("demo")), qPrintable(err));
    Json c = cli.presetConfig(QStringLiteral("demo"), &err);
    QVERIFY2(c.is_object(), qPrintable(err));
    QCOMPARE(cli.validate(c), QString());
    c["optimizer"]["lr"] = -1.0;
    QVERIFY(cli.validate(c).contains(QStringLiteral("optimizer.lr")));
    c["optimizer"]["lr"] = 0.001;
    c["grpo"]["bogus"] = 1;
    QVERIFY(cli.validate(c).contains(QStringLiteral("bogus")));
    QVERIFY(cli.presetConfig(QStringLiteral("no-such-preset"), &err).is_null());
    QVERIFY(err.contains(QStringLiteral("no-such-preset")));
    EngineCli missing(QStringLiteral("/nonexistent/fp8rl"));
    QVERIFY(missing.presets(&err).isEmpty());
    QVERIFY(!err.isEmpty());
  }

  void corruptDatabaseIsRefusedClearly() {
    QTemporaryDir dir;
    const QString bad = dir.filePath("bad.sqlite");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(4096, 'x'));
    f.close();
    StudioSession s(QStringLiteral(FP8RL_CLI));
    const QString err = s.openDatabase(bad);
    QVERIFY2(err.contains(bad), qPrintable(err));
    QVERIFY(!s.hasDatabase());
    QCOMPARE(s.openDatabase(dir.filePath("good.sqlite")), QString());
    QVERIFY(s.hasDatabase());
    QCOMPARE(s.runs().size(), size_t(0));
  }

  // A real worker: launch, stream, pause/resume, precision edit, stop.
  void sessionDrivesARealWorker() {
    QTemporaryDir dir;
    StudioSession s(QStringLiteral(FP8RL_CLI));
    QCOMPARE(s.openDatabase(dir.filePath("runs.sqlite")), QString());
    WorkerReaper reaper{s};
    QSignalSpy launched(&s, &StudioSession::runLaunched);
    QSignalSpy replies(&s, &StudioSession::commandFinished);
    QCOMPARE(s.launch(tiny_config(s.cli(), 400), QStringLiteral("studio-test")), QString());
    QVERIFY(launched.wait(60000) || launched.count() == 1);
    const qint64 id = launched.first().first().toLongLong();
    QVERIFY(s.isLinked(id));
    const RunData* d = s.data(id);
    QVERIFY(d);
    QCOMPARE(QString::fromStdString(d->row.name), QStringLiteral("studio-test"));
    QVERIFY2(wait_for([&] { return d->series("reward/mean").size() >= 3; }, 60000),
             "no steps streamed");
    QVERIFY(wait_for([&] { return s.health(id).heartbeat_age >= 0; }, 5000));
    QCOMPARE(s.health(id).backend, QStringLiteral("cpu"));

    s.pause(id);
    QVERIFY(wait_for(
        [&] {
          s.refresh();
          return s.runRow(id)->status == "paused";
        },
        30000));
    QTest::qWait(500);  // the last step's telemetry is drained
    const auto paused_at = d->last_step;
    QTest::qWait(1500);
    QCOMPARE(d->last_step, paused_at);
    QVERIFY(s.health(id).heartbeat_age < 2);  // heartbeats go on while paused

    LiveEdit edit;  // one request: the precision and the setting together
    edit.add_precision("0.gate=bf16");
    edit.set("is_max", 3.0);
    QSignalSpy finished(&s, &StudioSession::commandFinished);
    s.applyLive(id, edit);
    QVERIFY(wait_for([&] { return finished.count() >= 1; }, 10000));
    QCOMPARE(finished.at(0).at(1).toString(), QStringLiteral("edit"));
    QVERIFY2(finished.at(0).at(2).toBool(), qPrintable(finished.at(0).at(3).toString()));
    s.resume(id);
    QVERIFY2(wait_for([&] { return !d->precisionChanges().empty(); }, 30000),
             "no precision event arrived");
    QCOMPARE(QString::fromStdString(d->precisionChanges().back().second),
             QStringLiteral("L0.gate bf16"));
    QVERIFY(d->currentPrecision().as_array()[0].at("gate").as_string() == "bf16");
    QVERIFY2(
        wait_for([&] { return d->liveSetting("is_max") == std::optional<double>(3.0); }, 30000),
        "the live setting did not arrive");
    QVERIFY(wait_for([&] { return d->last_step > paused_at + 1; }, 30000));

    s.stop(id);
    QVERIFY(wait_for(
        [&] {
          s.refresh();
          return s.runRow(id)->status == "stopped";
        },
        60000));
    QVERIFY(!s.isLinked(id));
    bool all_ok = true;
    for (const auto& r : replies)
      if (!r.at(2).toBool()) all_ok = false;
    QVERIFY2(all_ok, "a command was refused");
  }

  // A worker killed with SIGKILL: the session marks its run crashed and keeps working.
  void killedWorkerIsMarkedCrashed() {
    QTemporaryDir dir;
    StudioSession s(QStringLiteral(FP8RL_CLI));
    QCOMPARE(s.openDatabase(dir.filePath("runs.sqlite")), QString());
    WorkerReaper reaper{s};
    QSignalSpy launched(&s, &StudioSession::runLaunched);
    QCOMPARE(s.launch(tiny_config(s.cli(), 400), QString()), QString());
    QVERIFY(launched.wait(60000) || launched.count() == 1);
    const qint64 id = launched.first().first().toLongLong();
    const RunData* d = s.data(id);
    QVERIFY(wait_for([&] { return d->last_step >= 2; }, 60000));
    QVERIFY(::kill(static_cast<pid_t>(s.runRow(id)->pid), SIGKILL) == 0);
    QVERIFY(wait_for(
        [&] {
          s.refresh();
          return s.runRow(id)->status == "crashed";
        },
        10000));
    QVERIFY(!s.isLinked(id));
    QVERIFY(s.data(id)->last_step >= 2);
  }

  // A crashed run continues from its checkpoint in a new worker: same run id, the data reread
  // (the steps after the checkpoint are recorded again), steerable again.
  void crashedRunContinues() {
    QTemporaryDir dir;
    StudioSession s(QStringLiteral(FP8RL_CLI));
    QCOMPARE(s.openDatabase(dir.filePath("runs.sqlite")), QString());
    WorkerReaper reaper{s};
    QSignalSpy launched(&s, &StudioSession::runLaunched);
    Json c = tiny_config(s.cli(), 400);
    c["checkpoint"]["every"] = 2;
    QCOMPARE(s.launch(c, QString()), QString());
    QVERIFY(launched.wait(60000) || launched.count() == 1);
    const qint64 id = launched.first().first().toLongLong();
    const RunData* d = s.data(id);
    QVERIFY(s.continueRefusal(id).contains("running"));
    QVERIFY(wait_for(
        [&] {
          s.refresh();
          return d->last_step >= 5 && s.runRow(id)->checkpoint_step.value_or(0) >= 2;
        },
        60000));
    QVERIFY(::kill(static_cast<pid_t>(s.runRow(id)->pid), SIGKILL) == 0);
    QVERIFY(wait_for(
        [&] {
          s.refresh();
          return s.runRow(id)->status == "crashed";
        },
        10000));
    QVERIFY(s.continueRefusal(id).isEmpty());
    // A worker records a step before sending it: killed between the two, its last step reaches
    // the studio with the next poll of the store (the run has no link now), not by telemetry.
    QVERIFY(wait_for(
        [&] {
          s.refresh();
          return d->last_step >= s.runRow(id)->checkpoint_step.value_or(0);
        },
        10000));
    const int64_t ckpt = *s.runRow(id)->checkpoint_step;
    const int64_t crashed_at = d->last_step;
    QVERIFY(ckpt <= crashed_at);
    launched.clear();
    QCOMPARE(s.continueRun(id), QString());
    QVERIFY(launched.wait(60000) || launched.count() == 1);
    QCOMPARE(launched.first().first().toLongLong(), id);
    QVERIFY(s.isLinked(id));
    QCOMPARE(s.data(id), d);  // reread in place
    // The continued worker may already have recorded steps past the checkpoint before the
    // studio reread the store, so what is pinned is the timeline, not a moment of it: the run
    // goes on past where it crashed, and every chart holds one point per step, in order.
    QVERIFY(wait_for([&] { return d->last_step >= crashed_at + 2; }, 60000));
    QVERIFY(!d->scalars.empty());
    for (const auto& [key, points] : d->scalars)
      for (size_t i = 1; i < points.size(); ++i)
        QVERIFY2(points[i - 1].step < points[i].step, key.c_str());
    s.refresh();
    QCOMPARE(QString::fromStdString(s.runRow(id)->status), QStringLiteral("running"));
    s.stop(id);
    QVERIFY(wait_for(
        [&] {
          s.refresh();
          return s.runRow(id)->status == "stopped";
        },
        60000));
  }
};

QTEST_MAIN(TestUiData)
#include "test_ui_data.moc"
