#include "studio_bench.hpp"

#include <time.h>
#include <unistd.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <vector>

#include "contract/histogram.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "dispatch_profile.hpp"
#include "store/run_store.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/data/engine_cli.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/studio_session.hpp"
#include "ui/main_window.hpp"
#include "ui/run/run_view.hpp"
#include "ui/runs/runs_panel.hpp"

namespace fp8rl::studio {

namespace {

void waitMs(int ms) {
  QEventLoop loop;
  QTimer::singleShot(ms, &loop, &QEventLoop::quit);
  loop.exec();
}

// A database of finished runs shaped like demo runs: the headline scalars of every step (the
// dozen a chart or the runs panel reads; a real run records ~40), a validation accuracy and an
// importance-weight histogram every 10 steps, a sample at the end; one transaction per run.
void makeDatabase(const QString& path, int runs, int steps) {
  RunStore store(path.toStdString());
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0, 0.05);
  Json config = Json::parse(R"({"name":"demo","model":{"num_hidden_layers":2},
      "precision":{"default":"fp8","kv_cache":"bf16","overrides":[]},"seed":1})");
  for (int r = 0; r < runs; ++r) {
    config["seed"] = r;
    config["precision"]["default"] = r % 2 ? "bf16" : "fp8";
    const int64_t id =
        store.create_run("bench-" + std::to_string(r), "demo", config, r % 2 ? "bf16" : "fp8");
    std::vector<StepRecord> records;
    records.reserve(static_cast<size_t>(steps));
    for (int s = 1; s <= steps; ++s) {
      StepRecord& rec = records.emplace_back();
      rec.step = s;
      rec.phase = "rl";
      rec.wall_seconds = 0.5 * s;
      const double p = 1 - std::exp(-s / 20.0);
      for (const char* k : {metric::kReward, metric::kTrainAccuracy, metric::kLoss,
                            metric::kTokenMultProbError, metric::kGenKlError, metric::kMeanWeight,
                            metric::kTimeGeneration, metric::kTimeTraining, metric::kTimeTotal,
                            metric::kRolloutTps, metric::kTrainTps, metric::kEntropy})
        rec.scalars[k] = p + noise(rng);
      rec.scalars[metric::kTokensTotal] = 1000.0 * s;
      if (s % 10 == 0) {
        rec.scalars[metric::kValAccuracy] = p;
        std::vector<double> log_w(256);
        for (auto& x : log_w) x = 2.0 * noise(rng);  // sd 0.1
        const double range = histogram::kImportanceLogWeightRange;
        rec.histograms.push_back(
            {histogram::kImportanceLogWeight,
             linear_histogram(log_w, -range, range, histogram::kImportanceLogWeightBins)});
      }
      if (s == steps) rec.samples.push_back({"abc=", "cba", "cba", 1.0, {}, {}});
    }
    store.record_steps(id, records);
    store.set_status(id, "finished");
  }
}

struct Latency {
  double max_ms = 0, p99_ms = 0, mean_ms = 0;
  int samples = 0;
  // The GUI thread's own CPU time: the most spent between two ticks (the stall the studio's
  // work alone would cause on an idle machine) and its share of the wall time.
  double max_work_ms = 0, busy = 0;
};

double threadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// How late a 10 ms timer fires while the event loop does the studio's work, for `ms`.
Latency measureLatency(int ms, DispatchProfile* profile) {
  std::vector<double> late;
  double max_work = 0;
  const double cpu0 = threadCpuMs();
  double cpu_last = cpu0;
  QElapsedTimer clock;
  clock.start();
  QElapsedTimer since;
  since.start();
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    late.push_back(std::max(0.0, since.nsecsElapsed() / 1e6 - 10.0));
    since.restart();
    if (profile) profile->tick(late.back());
    const double cpu = threadCpuMs();
    max_work = std::max(max_work, cpu - cpu_last);
    cpu_last = cpu;
  });
  tick.start(10);
  QEventLoop loop;
  QTimer::singleShot(ms, &loop, &QEventLoop::quit);
  loop.exec();
  tick.stop();
  Latency l;
  l.max_work_ms = max_work;
  l.busy = (threadCpuMs() - cpu0) / std::max<double>(1, static_cast<double>(clock.elapsed()));
  l.samples = static_cast<int>(late.size());
  if (late.empty()) return l;
  std::sort(late.begin(), late.end());
  l.max_ms = late.back();
  l.p99_ms = late[static_cast<size_t>(0.99 * static_cast<double>(late.size() - 1))];
  double sum = 0;
  for (double x : late) sum += x;
  l.mean_ms = sum / static_cast<double>(late.size());
  return l;
}

double residentMb() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double loadAverage() {
  std::ifstream f("/proc/loadavg");
  double l = 0;
  f >> l;
  return l;
}

const char* verdict(bool ok) {
  return ok ? "PASS" : "FAIL";
}

}  // namespace

int runBench(const QString& cli, const BenchOptions& opt) {
  QTemporaryDir tmp;
  if (!tmp.isValid()) {
    std::fprintf(stderr, "fp8rl-studio --bench: cannot create a temporary directory\n");
    return 1;
  }
  const QString db = opt.db.isEmpty() ? tmp.filePath(QStringLiteral("bench.sqlite")) : opt.db;
  const int finished_runs = opt.runs, live_runs = opt.live;
  QElapsedTimer t;
  t.start();
  int stored_runs = 0;
  try {
    if (!QFileInfo::exists(db)) makeDatabase(db, opt.runs, opt.steps);
    RunStore store(db.toStdString(), /*read_only=*/true);
    stored_runs = static_cast<int>(store.list_runs().size());
  } catch (const Error& e) {
    std::fprintf(stderr, "fp8rl-studio --bench: %s\n", e.message().c_str());
    return 1;
  }
  std::printf("studio benchmark: %s (%d runs, %.2f GB), %d live workers for %d s\n",
              db.toLocal8Bit().constData(), stored_runs,
              static_cast<double>(QFileInfo(db).size()) / 1e9, live_runs, opt.seconds);
  std::printf("  database ready in %.1f s (%d finished runs × %d steps asked)\n",
              t.elapsed() / 1000.0, finished_runs, opt.steps);
  std::fflush(stdout);

  // 1. Opening the database: window up, the run list read, every run in the runs panel.
  t.restart();
  ui::MainWindow w(cli, db);
  w.show();
  QApplication::processEvents();
  while (w.runsPanel()->visibleCount() < stored_runs && t.elapsed() < 60000) waitMs(5);
  const double open_s = t.elapsed() / 1000.0;
  const int listed = w.runsPanel()->visibleCount();
  const double rss_start = residentMb();

  // 2. Live runs streaming while the studio shows one of them and compares two: training
  // workers launched through the studio's session (one engine thread each, so they share the
  // cores with the GUI as they would on a laptop), or recorded runs replayed by `fp8rl replay`.
  std::vector<qint64> live;
  QProcess replay;
  const bool replaying = !opt.replay.isEmpty();
  if (replaying) {
    const int colon = opt.replay.lastIndexOf(QLatin1Char(':'));
    if (colon <= 0) {
      std::fprintf(stderr, "fp8rl-studio --bench: --replay wants DB:RUN\n");
      return 1;
    }
    QStringList args = {QStringLiteral("replay"), QStringLiteral("--db"), db,
                        QStringLiteral("--source-db"), opt.replay.left(colon),
                        QStringLiteral("--source-run"), opt.replay.mid(colon + 1),
                        QStringLiteral("--runs"), QString::number(live_runs),
                        QStringLiteral("--seconds"), QString::number(opt.seconds + 120),
                        QStringLiteral("--nice"), QString::number(ui::EngineCli::kWorkerNice)};
    if (opt.rate > 0) args << QStringLiteral("--rate") << QString::number(opt.rate);
    replay.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    // In a session of its own, as the studio starts workers: its --nice lowers its own
    // autogroup, not the studio's.
    replay.setChildProcessModifier([] { setsid(); });
    replay.start(cli, args);
    if (!replay.waitForReadyRead(60000)) {
      std::fprintf(stderr, "fp8rl-studio --bench: fp8rl replay did not start\n");
      return 1;
    }
    const Json started = Json::parse(replay.readLine().toStdString());
    for (const Json& id : started.at("runs").as_array()) live.push_back(id.as_int());
    // The studio attaches to them as to workers, from the run list.
    QElapsedTimer wait;
    wait.start();
    const auto linked = [&] {
      for (qint64 id : live)
        if (!w.session()->isLinked(id)) return false;
      return true;
    };
    while (!linked() && wait.elapsed() < 60000) waitMs(100);
    if (!linked()) std::printf("  not every replayed run was linked within 60 s\n");
  } else {
    qputenv("FP8RL_THREADS", "1");
    QString err;
    Json cfg = w.session()->cli().presetConfig(QStringLiteral("demo"), &err);
    if (cfg.is_null()) {
      std::fprintf(stderr, "fp8rl-studio --bench: %s\n", err.toLocal8Bit().constData());
      return 1;
    }
    cfg["sft"]["steps"] = 0;
    cfg["grpo"]["steps"] = 100000;
    cfg["grpo"]["prompts_per_step"] = 8;
    cfg["validation"]["every"] = 5;
    QObject::connect(w.session(), &ui::StudioSession::runLaunched,
                     [&live](qint64 id) { live.push_back(id); });
    for (int i = 0; i < live_runs; ++i) {
      const QString e =
          w.session()->launch(cfg, QStringLiteral("live-%1").arg(i), QStringLiteral("demo"));
      if (!e.isEmpty()) {
        std::fprintf(stderr, "fp8rl-studio --bench: %s\n", e.toLocal8Bit().constData());
        return 1;
      }
    }
    QElapsedTimer wait;
    wait.start();
    while (static_cast<int>(live.size()) < live_runs && wait.elapsed() < 60000) waitMs(50);
    if (static_cast<int>(live.size()) < live_runs)
      std::printf("  only %zu of %d workers started within 60 s\n", live.size(), live_runs);
  }
  if (!live.empty()) {
    w.showRun(live.front());
    if (live.size() >= 2) w.compareRuns({live[0], live[1]});
    w.showRun(live.front());
  }
  if (opt.all_data)
    for (qint64 id : live) (void)w.session()->data(id);
  waitMs(3000);  // let them stream
  const ui::RunData* shown = live.empty() ? nullptr : w.session()->data(live.front());
  const int64_t steps_before = shown ? shown->last_step : 0;
  const double rss_live = residentMb();
  // The latency in minutes (or the whole span when shorter), each minute's worst said.
  Latency lat;
  std::vector<double> minute_max;
  double sum_ms = 0;
  std::vector<double> p99s;
  // What the studio holds of the live runs' data, per run (MB), after each minute: it levels off
  // at the bounds of RunData.
  const auto held_per_run = [&] {
    size_t bytes = 0, n = 0;
    for (qint64 id : live)
      if (const ui::RunData* d = w.session()->data(id)) bytes += d->approxBytes(), ++n;
    return n ? static_cast<double>(bytes) / 1e6 / static_cast<double>(n) : 0.0;
  };
  std::vector<double> held_minutes;
  std::shared_ptr<DispatchProfile> profile;
  if (opt.profile) StudioApplication::setProfile(profile = std::make_shared<DispatchProfile>());
  for (int left = opt.seconds; left > 0; left -= 60) {
    const Latency part = measureLatency(std::min(left, 60) * 1000, profile.get());
    if (opt.all_data) held_minutes.push_back(held_per_run());
    minute_max.push_back(part.max_ms);
    lat.max_ms = std::max(lat.max_ms, part.max_ms);
    lat.max_work_ms = std::max(lat.max_work_ms, part.max_work_ms);
    lat.busy += part.busy * std::min(left, 60) / std::max(1, opt.seconds);
    p99s.push_back(part.p99_ms);
    sum_ms += part.mean_ms * part.samples;
    lat.samples += part.samples;
  }
  StudioApplication::setProfile(nullptr);
  lat.mean_ms = lat.samples > 0 ? sum_ms / lat.samples : 0;
  lat.p99_ms = p99s.empty() ? 0 : *std::max_element(p99s.begin(), p99s.end());
  const int64_t steps_after = shown ? shown->last_step : 0;
  const double rss_end = residentMb();
  // What the studio holds of the live runs' data.
  size_t held = 0, held_runs = 0, max_run = 0;
  int64_t reduced = 0;
  for (qint64 id : live) {
    const ui::RunData* d = w.session()->data(id);
    if (!d) continue;
    held += d->approxBytes();
    max_run = std::max(max_run, d->approxBytes());
    reduced += d->reduced_points;
    ++held_runs;
  }
  if (replaying) {
    replay.terminate();
    replay.waitForFinished(30000);
  } else {
    for (qint64 id : live) w.session()->stop(id);
  }

  // 3. Replot of a chart with 1,000,000 points per curve.
  ui::ChartView chart(QStringLiteral("bench"));
  chart.resize(900, 350);
  chart.show();
  std::vector<ui::SeriesPoint> pts(1000000);
  std::mt19937 rng(2);
  std::normal_distribution<double> n01;
  for (size_t i = 0; i < pts.size(); ++i)
    pts[i] = {static_cast<double>(i), 0.01 * static_cast<double>(i), 10.0 * static_cast<double>(i),
              std::sin(static_cast<double>(i) * 1e-4) + 0.1 * n01(rng)};
  pts[500000].value = 50;  // a spike that must survive reduction
  t.restart();
  for (int c = 0; c < 3; ++c) {
    const int k =
        chart.addCurve(QStringLiteral("curve %1").arg(c), QColor::fromHsv(c * 100, 200, 200));
    chart.setCurveData(k, pts);
  }
  const double load_ms = static_cast<double>(t.nsecsElapsed()) / 1e6;
  chart.setSmoothing(0.6);
  chart.replotNow();
  std::vector<double> replots;
  for (int i = 0; i < 7; ++i) replots.push_back(chart.replotNow());
  std::sort(replots.begin(), replots.end());
  const double replot_ms = replots[replots.size() / 2];

  // The workers checkpoint and exit; wait for that before the temporary directory goes.
  QElapsedTimer stopping;
  stopping.start();
  const auto all_stopped = [&] {
    w.session()->refresh();
    for (qint64 id : live) {
      const auto* row = w.session()->runRow(id);
      if (row && run_status::is_live(row->status)) return false;
    }
    return true;
  };
  while (!all_stopped() && stopping.elapsed() < 60000) waitMs(200);

  std::printf("\n%-52s %12s %10s %s\n", "measure", "value", "target", "");
  std::printf("%-52s %10.2f s %8s s %s\n",
              ("open database (" + std::to_string(listed) + " runs listed)").c_str(), open_s, "1",
              verdict(open_s < 1 && listed == stored_runs));
  const double target_ms = replaying ? 16 : 50;
  std::printf("%-52s %9.1f ms %7.0f ms %s\n",
              ("event-loop latency, max (" + std::to_string(live.size()) + " live, " +
               std::to_string(lat.samples) + " ticks)")
                  .c_str(),
              lat.max_ms, target_ms, verdict(lat.max_ms <= target_ms && !live.empty()));
  std::printf("%-52s %9.1f ms\n", "event-loop latency, p99 (worst minute)", lat.p99_ms);
  std::printf("%-52s %9.1f ms\n", "event-loop latency, mean", lat.mean_ms);
  std::string minutes;
  for (double m : minute_max) minutes += (minutes.empty() ? "" : " ") + std::to_string(static_cast<int>(std::lround(m)));
  std::printf("%-52s %s\n", "  max per minute, ms", minutes.c_str());
  std::printf("%-52s %9.1f ms\n", "GUI thread's own work between two ticks, max (CPU)",
              lat.max_work_ms);
  std::printf("%-52s %9.1f %%\n", "GUI thread busy (CPU time / wall time)", 100 * lat.busy);
  std::printf("%-52s %9.2f\n", "machine load average (1 min) at the end", loadAverage());
  std::printf("%-52s %12lld\n",
              ("steps streamed into the run view in " + std::to_string(opt.seconds) + " s").c_str(),
              static_cast<long long>(steps_after - steps_before));
  std::printf("%-52s %9.0f MB\n", "studio resident memory, before the live runs", rss_start);
  std::printf("%-52s %+9.0f MB\n", "  grown until the measurement started", rss_live - rss_start);
  std::printf("%-52s %+9.0f MB\n", "  grown while they streamed", rss_end - rss_live);
  if (held_runs > 0) {
    std::printf("%-52s %9.1f MB\n",
                ("live runs' data held (" + std::to_string(held_runs) + " runs)").c_str(),
                static_cast<double>(held) / 1e6);
    std::printf("%-52s %9.2f MB (largest %.2f MB)\n", "  per run", static_cast<double>(held) / 1e6 / static_cast<double>(held_runs),
                static_cast<double>(max_run) / 1e6);
    std::printf("%-52s %12lld\n", "  scalar points reduced away (kept in the store)",
                static_cast<long long>(reduced));
    std::string per_minute;
    for (double m : held_minutes) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2f", per_minute.empty() ? "" : " ", m);
      per_minute += buf;
    }
    if (!per_minute.empty())
      std::printf("%-52s %s\n", "  per run after each minute, MB", per_minute.c_str());
    if (shown)
      std::printf("%-52s %12lld\n", "  steps the shown run has streamed", static_cast<long long>(shown->last_step));
  }
  std::printf("%-52s %9.1f ms %7s ms %s\n", "replot, 3 curves × 1,000,000 points (median of 7)",
              replot_ms, "30", verdict(replot_ms < 30));
  std::printf("%-52s %9.1f ms\n", "load 3 curves × 1,000,000 points", load_ms);
  std::printf("%-52s %9.2f×\n", "replot headroom (target / measured)", 30.0 / replot_ms);
  if (profile) std::printf("\n%s", profile->report(25).c_str());
  return 0;
}

}  // namespace fp8rl::studio
