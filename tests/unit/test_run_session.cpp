// One run lifecycle for `fp8rl train` and `fp8rl worker`: the same small config run both ways
// records the same rows (run row, scalars, histograms, samples, events, precision history); and
// the session applies requests at step boundaries and refuses bad ones.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>
#include <chrono>
#include <functional>
#include <limits>
#include <thread>

#include "backend/backend_registry.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "ipc/client.hpp"
#include "rl/run_loop.hpp"
#include "session/run_session.hpp"
#include "store/run_store.hpp"

using namespace fp8rl;

namespace {

const QStringList kSets = {"grpo.steps=3",
                           "sft.steps=2",
                           "validation.every=2",
                           "task.validation_size=8",
                           "grpo.prompts_per_step=4",
                           "grpo.group_size=4",
                           "checkpoint.every=2"};

std::string text(const Json& j) {
  return j.dump();
}

// Everything a run recorded except what measures the machine (times, throughput, memory),
// the process (pid, host, endpoints, times) or its name.
struct Recorded {
  RunStore::RunRow row;
  std::map<std::string, std::vector<RunStore::ScalarPoint>> scalars;
  std::map<std::string, std::vector<std::pair<int64_t, Histogram>>> histograms;
  std::vector<std::pair<int64_t, SampleRecord>> samples;
  std::vector<RunStore::EventRow> events;
  std::vector<std::pair<int64_t, Json>> precision;
};

Recorded read(RunStore& s, int64_t id) {
  Recorded r;
  r.row = *s.find_run(id);
  for (const auto& k : s.scalar_keys(id)) r.scalars[k] = s.scalar_series(id, k);
  for (const auto& n : s.histogram_names(id)) r.histograms[n] = s.histogram_series(id, n);
  r.samples = s.samples(id, -1);
  r.events = s.events(id);
  r.precision = s.precision_history(id);
  return r;
}

}  // namespace

class TestRunSession : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private slots:
  void trainAndWorkerRecordTheSameRun() {
    const QString db = dir_.filePath("same.sqlite");
    // 1. fp8rl train.
    QStringList train = {"train", "--preset", "demo", "--backend", "cpu", "--db", db, "--json"};
    for (const auto& s : kSets) train << "--set" << s;
    QProcess p;
    p.start(QStringLiteral(FP8RL_CLI), train);
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());

    // 2. The same config through a worker, as the studio launches it.
    QProcess w;
    w.start(QStringLiteral(FP8RL_CLI), {"worker", "--db", db, "--backend", "cpu"});
    w.setReadChannel(QProcess::StandardOutput);
    QVERIFY(w.waitForReadyRead(30000) && w.canReadLine());
    const Json hello = Json::parse(w.readLine().toStdString());
    {
      ipc::Client client(hello.at("control").as_string(), "");
      Json::Array sets;
      for (const auto& s : kSets) sets.push_back(Json(s.toStdString()));
      Json start;
      start["preset"] = "demo";
      start["set"] = Json(sets);
      const Json reply = client.request("start", start, 30000);
      QVERIFY2(reply.at("ok").as_bool(), reply.dump().c_str());
    }
    QVERIFY(w.waitForFinished(120000));
    QCOMPARE(w.exitCode(), 0);

    RunStore store(db.toStdString(), /*read_only=*/true);
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t(2));
    const Recorded a = read(store, runs[0].id), b = read(store, runs[1].id);

    // The run rows.
    QCOMPARE(QString::fromStdString(a.row.status), QString("finished"));
    QCOMPARE(b.row.status, a.row.status);
    QCOMPARE(b.row.preset, a.row.preset);
    QCOMPARE(b.row.name, a.row.name);
    QCOMPARE(text(b.row.config), text(a.row.config));
    QCOMPARE(b.row.precision_summary, a.row.precision_summary);
    QCOMPARE(b.row.checkpoint_step, a.row.checkpoint_step);
    QVERIFY(a.row.control_endpoint.empty() && !b.row.control_endpoint.empty());

    // Metric names, and every value that describes the computation, bit for bit.
    std::vector<std::string> ka, kb;
    for (const auto& [k, v] : a.scalars) ka.push_back(k);
    for (const auto& [k, v] : b.scalars) kb.push_back(k);
    QCOMPARE(kb, ka);
    QVERIFY(a.scalars.count(metric::kTimeTelemetry));
    for (const auto& [k, pa] : a.scalars) {
      const auto& pb = b.scalars.at(k);
      QCOMPARE(pb.size(), pa.size());
      if (metric::measures_machine(k)) continue;
      for (size_t i = 0; i < pa.size(); ++i) {
        QCOMPARE(pb[i].step, pa[i].step);
        QVERIFY2(std::memcmp(&pb[i].value, &pa[i].value, sizeof(double)) == 0 ||
                     (std::isnan(pb[i].value) && std::isnan(pa[i].value)),
                 qPrintable(QString::fromStdString(k)));
      }
    }
    QCOMPARE(b.histograms.size(), a.histograms.size());
    for (const auto& [n, ha] : a.histograms) {
      const auto& hb = b.histograms.at(n);
      QCOMPARE(hb.size(), ha.size());
      for (size_t i = 0; i < ha.size(); ++i) {
        QCOMPARE(hb[i].first, ha[i].first);
        QCOMPARE(hb[i].second.counts, ha[i].second.counts);
        QCOMPARE(hb[i].second.edges, ha[i].second.edges);
      }
    }
    QCOMPARE(b.samples.size(), a.samples.size());
    for (size_t i = 0; i < a.samples.size(); ++i)
      QCOMPARE(b.samples[i].second.response, a.samples[i].second.response);

    // Events: the same kinds at the same steps (messages differ only where they name the
    // checkpoint directory of each run).
    QCOMPARE(b.events.size(), a.events.size());
    for (size_t i = 0; i < a.events.size(); ++i) {
      QCOMPARE(b.events[i].step, a.events[i].step);
      QCOMPARE(b.events[i].event.kind, a.events[i].event.kind);
    }
    QCOMPARE(QString::fromStdString(a.events.front().event.kind), QString("start"));
    QCOMPARE(QString::fromStdString(a.events.back().event.kind), QString("finish"));

    // `fp8rl train` records the precision history (the studio draws its timeline from it).
    QCOMPARE(a.precision.size(), size_t(1));
    QCOMPARE(b.precision.size(), a.precision.size());
    QCOMPARE(text(b.precision[0].second), text(a.precision[0].second));
  }

  // Requests made during a run apply at the next boundary and are recorded as events with
  // their data; a stop checkpoints and records why.
  void requestsApplyAtStepBoundaries() {
    const std::string db = dir_.filePath("session.sqlite").toStdString();
    std::vector<std::string> sets;
    for (const auto& s : kSets) sets.push_back(s.toStdString());
    sets.back() = "checkpoint.every=0";
    sets[0] = "grpo.steps=50";
    RunConfig cfg = RunConfig::load("demo", "", sets);
    auto be = make_cpu_backend();
    RunStore store(db);

    struct Driver : SessionListener {
      RunSession* s = nullptr;
      int steps = 0;
      void on_step(StepRecord& r, int64_t) override {
        if (r.phase != "rl") return;
        ++steps;
        if (r.step == 1) {
          LiveEdit edit;
          edit.add_precision("0.gate=bf16");
          edit.add_precision("*.down=bf16");
          edit.set("is_max", 3.0);
          edit.set("lr", 1e-4);
          s->request_edit(edit);
          s->request_checkpoint();
        }
        if (r.step == 2) s->request_stop("test is done");
      }
    } driver;
    SessionOptions opt;
    opt.preset = "demo";
    const std::string ckpt = dir_.filePath("ckpt").toStdString();
    opt.checkpoint_dir = [&](int64_t) { return ckpt; };
    RunSession session(cfg, *be, &store, opt, &driver);
    driver.s = &session;
    QCOMPARE(QString::fromStdString(session.run()), QString("stopped"));
    QCOMPARE(driver.steps, 2);

    const auto st = session.status();
    QCOMPARE(QString::fromStdString(st.state), QString("stopped"));
    const Recorded r = read(store, st.run_id);
    QCOMPARE(QString::fromStdString(r.row.status), QString("stopped"));
    QCOMPARE(r.precision.size(), size_t(2));
    QCOMPARE(r.precision[1].first, int64_t(1));
    const PrecisionMap pm = PrecisionMap::from_json(r.precision[1].second);
    QCOMPARE(pm.at(0, Module::gate), Precision::bf16);
    QCOMPARE(pm.at(1, Module::down), Precision::bf16);
    QCOMPARE(pm.at(1, Module::gate), Precision::fp8);
    QCOMPARE(QString::fromStdString(r.row.precision_summary), pm.summary().c_str());
    std::vector<std::string> kinds;
    for (const auto& e : r.events) {
      kinds.push_back(e.event.kind);
      if (e.event.kind == "set") QCOMPARE(e.step, int64_t(1));
    }
    const std::vector<std::string> want = {"start",      "precision",  "set", "set",
                                           "checkpoint", "checkpoint", "stop"};
    QCOMPARE(kinds, want);
    QCOMPARE(QString::fromStdString(r.events[2].event.data.at("key").as_string()),
             QString("is_max"));
    QCOMPARE(r.events[2].event.data.at("value").as_number(), 3.0);
    QCOMPARE(QString::fromStdString(r.events.back().event.message), QString("test is done"));
    QCOMPARE(r.row.checkpoint_step, std::optional<int64_t>(2));
    QCOMPARE(session.loop()->config().loss.is_max, 3.0);
    QCOMPARE(session.loop()->config().optimizer.lr, 1e-4);
  }

  // The precision autopilot end to end: dead MLP channels with huge down_proj columns injected
  // into layer 1 make FP8 hurt there (fp8/policy_kl above the threshold); after the first step
  // the autopilot moves the damaged linear, and it alone, to BF16 at the boundary — an
  // `autopilot` event with its evidence, a precision history entry — and the KL falls below the
  // threshold. Resumed from the checkpoint, the run keeps the move and the autopilot's memory.
  void autopilotMovesTheDamagedLinearFirst() {
    const std::string db = dir_.filePath("autopilot.sqlite").toStdString();
    const std::vector<std::string> sets = {"grpo.steps=3",
                                           "sft.steps=10",
                                           "grpo.prompts_per_step=4",
                                           "grpo.group_size=4",
                                           "task.validation_size=8",
                                           "validation.every=0",
                                           "outliers.linears=[\"1.down\"]",
                                           "precision.autopilot=true",
                                           "autopilot.metric=fp8/policy_kl",
                                           "autopilot.threshold=0.001",
                                           "autopilot.patience=1",
                                           "autopilot.cooldown=1"};
    auto be = make_cpu_backend();
    RunStore store(db);
    const std::string ckpt = dir_.filePath("autopilot-ckpt").toStdString();
    SessionOptions opt;
    opt.checkpoint_dir = [&](int64_t) { return ckpt; };
    opt.checkpoint_at_end = true;
    int64_t id = -1;
    {
      RunSession session(RunConfig::load("demo", "", sets), *be, &store, opt);
      QCOMPARE(QString::fromStdString(session.run()), QString("finished"));
      id = session.status().run_id;
    }
    Recorded r = read(store, id);
    std::vector<RunStore::EventRow> auto_events, precision_events;
    bool injected = false;
    for (const auto& e : r.events) {
      if (e.event.kind == event::kAutopilot) auto_events.push_back(e);
      if (e.event.kind == event::kPrecision) precision_events.push_back(e);
      injected = injected || (e.event.kind == event::kOutliers && e.step == 1);
    }
    QVERIFY(injected);
    // The move is a precision event too, with the whole map, as a person's edit is: a live
    // studio's history and chart markers come from those.
    QCOMPARE(precision_events.size(), size_t{1});
    QCOMPARE(precision_events[0].step, int64_t{1});
    QCOMPARE(QString::fromStdString(precision_events[0].event.message),
             QString("autopilot: 1.down=bf16"));
    QCOMPARE(PrecisionMap::from_json(precision_events[0].event.data).at(1, Module::down),
             Precision::bf16);
    QCOMPARE(auto_events.size(), size_t{1});
    const RunStore::EventRow& move = auto_events[0];
    QCOMPARE(move.step, int64_t{1});
    const Json& ev = move.event.data;
    QCOMPARE(QString::fromStdString(ev.at("action").as_string()), QString("move"));
    QCOMPARE(text(ev.at("linears")), std::string(R"(["L1.down"])"));
    const Json& best = ev.at("ranking").as_array()[0];
    QCOMPARE(QString::fromStdString(best.at("linear").as_string()), QString("L1.down"));
    QVERIFY(best.at("weight").as_number() > 0.5);  // its tiles flushed to zero
    QVERIFY(ev.at("ranking").as_array()[1].at("error").as_number() < 0.1);
    QVERIFY(ev.at("value").as_number() > 0.001);
    QVERIFY2(QString::fromStdString(move.event.message).startsWith("L1.down to BF16"),
             move.event.message.c_str());
    // The map changed at that boundary, that linear alone; the KL fell below the threshold.
    QCOMPARE(r.precision.size(), size_t{2});
    QCOMPARE(r.precision[1].first, int64_t{1});
    const PrecisionMap pm = PrecisionMap::from_json(r.precision[1].second);
    QCOMPARE(QString::fromStdString(pm.summary()), QString("fp8 (1 of 14 linears bf16)"));
    QCOMPARE(pm.at(1, Module::down), Precision::bf16);
    const auto& kl = r.scalars.at(metric::kFp8PolicyKl);
    QCOMPARE(kl.size(), size_t{3});
    QVERIFY(kl[0].value > 0.001);
    QVERIFY2(kl[1].value < 0.001 && kl[2].value < 0.001, std::to_string(kl[1].value).c_str());
    QVERIFY(r.scalars.count(metric::fp8_error(1, "down")));
    QCOMPARE(r.scalars.at("autopilot/held").back().value, 1.0);

    // Resumed (the checkpoint at the end): the move holds, the autopilot still holds it and
    // does not move it again.
    SessionOptions again = opt;
    again.resume_run = id;
    again.resume_dir = ckpt;
    RunSession resumed(resume_config(ckpt, {"grpo.steps=5"}), *be, &store, again);
    QCOMPARE(QString::fromStdString(resumed.run()), QString("finished"));
    QCOMPARE(resumed.loop()->model().precision().at(1, Module::down), Precision::bf16);
    QCOMPARE(resumed.loop()->autopilot().held().size(), size_t{1});
    QCOMPARE(resumed.loop()->autopilot().held()[0].step, int64_t{1});
    r = read(store, id);
    int moves = 0;
    for (const auto& e : r.events) moves += e.event.kind == event::kAutopilot;
    QCOMPARE(moves, 1);
    QCOMPARE(r.scalars.at(metric::kFp8PolicyKl).size(), size_t{5});
  }

  // Every live key with values out of its range, non-finite and inconsistent with the run as it
  // stands: each refused when it arrives, naming the problem; nothing queued; the run then goes
  // on and finishes with its settings as configured.
  void badRequestsAreRefusedNamingTheProblem() {
    RunConfig cfg = RunConfig::load("demo", "", {"grpo.steps=2", "sft.steps=1"});
    auto be = make_cpu_backend();
    struct Driver : SessionListener {
      RunSession* s = nullptr;
      int refused = 0, rl_steps = 0;
      QStringList misses;
      void expect_refused(const std::function<void()>& f, const char* text) {
        try {
          f();
          misses << QStringLiteral("accepted (wanted '%1')").arg(text);
        } catch (const Error& e) {
          if (QString(e.what()).contains(text))
            ++refused;
          else
            misses << QStringLiteral("'%1' does not say '%2'").arg(e.what(), text);
        }
      }
      void on_step(StepRecord& r, int64_t) override {
        if (r.phase != "rl") return;
        if (++rl_steps != 1) return;
        const double inf = std::numeric_limits<double>::infinity();
        const double nan = std::numeric_limits<double>::quiet_NaN();
        struct Bad {
          const char* key;
          double value;
          const char* says;
        };
        const Bad bad[] = {
            {"lr", 1e300, "bad value for lr: 1e+300"},  // found by trying it: it broke the run
            {"lr", 0, "bad value for lr: 0"},
            {"lr", -1, "bad value for lr"},
            {"lr", 2, "in (0, 1]"},
            {"lr", nan, "non-finite"},
            {"lr", inf, "non-finite"},
            {"temperature", 0, "bad value for temperature"},
            {"temperature", 1e6, "in (0, 100]"},
            {"temperature", -inf, "non-finite"},
            {"is_min", 1e300, "bad value for is_min"},  // above is_max: broke the run
            {"is_min", -0.5, "bad value for is_min"},
            {"is_min", nan, "non-finite"},
            {"is_max", 0.5, "in [1, 1e6]"},
            {"is_max", 1e300, "bad value for is_max"},
            {"is_max", inf, "non-finite"},
            {"validation_every", -1, "bad value for validation_every"},
            {"validation_every", 2.5, "whole number"},
            {"validation_every", 1e300, "in [0, 1e9]"},
            {"validation_every", nan, "non-finite"},
            {"learning_rate", 1e-4, "lr, temperature,"},
            {"", 1, "unknown setting"},
        };
        auto set = [&](const char* key, double value) {
          LiveEdit e;
          e.set(key, value);
          s->request_edit(e);
        };
        for (const Bad& b : bad) expect_refused([&] { set(b.key, b.value); }, b.says);
        // Inconsistent with the run as it stands or with a queued edit: the ranges meet only at
        // 1, so is_max 1 is refused once is_min 1 is queued.
        set("is_min", 1);
        expect_refused([&] { set("is_max", 1); }, "is_min < is_max");
        // One edit is checked whole: a valid is_max does not carry an invalid precision along.
        expect_refused(
            [&] {
              LiveEdit e;
              e.set("is_max", 20);
              e.add_precision("5.q=bf16");
              s->request_edit(e);
            },
            "the model has 2 layers");
        set("is_max", 10);
        set("is_min", 0.9);
        for (const char* o : {"2.gate=bf16", "0.gates=bf16", "0.gate=fp16", "0.gate", "x.q=fp8",
                              "=bf16", "0.gate=bf16=fp8"})
          expect_refused(
              [&] {
                LiveEdit e;
                e.add_precision(o);
                s->request_edit(e);
              },
              "");
        expect_refused([&] { s->request_edit(LiveEdit()); }, "changes nothing");
      }
    } driver;
    RunSession session(cfg, *be, nullptr, {}, &driver);
    driver.s = &session;
    QCOMPARE(QString::fromStdString(session.run()), QString("finished"));
    QVERIFY2(driver.misses.isEmpty(), qPrintable(driver.misses.join(QStringLiteral("\n"))));
    QCOMPARE(driver.refused, 31);
    QCOMPARE(driver.rl_steps, 2);
    // Only the two valid edits took effect.
    QCOMPARE(session.loop()->config().loss.is_max, 10.0);
    QCOMPARE(session.loop()->config().loss.is_min, 0.9);
    QCOMPARE(session.loop()->config().optimizer.lr, cfg.optimizer.lr);
    QCOMPARE(session.loop()->config().sampling.temperature, cfg.sampling.temperature);
  }
};

QTEST_GUILESS_MAIN(TestRunSession)
#include "test_run_session.moc"
