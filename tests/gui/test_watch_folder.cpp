// File › Watch folder…: the studio follows a growing TensorBoard log folder through a child
// `fp8rl runs import --follow` process — the run shows up live (read-only: no pause or stop),
// its data (under our names) grows in the run view's data as the folder does, and stopping the
// watch leaves it finished. Imported runs are compared with ours like any run (~5 s).
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>

#include "contract/metrics.hpp"
#include "tblog/tb_event.hpp"
#include "tblog/tfrecord.hpp"
#include "ui/data/compare.hpp"
#include "ui/data/folder_watch.hpp"
#include "ui/data/studio_session.hpp"
#include "ui/main_window.hpp"

using namespace fp8rl;
namespace ui = fp8rl::ui;

namespace {

// NeMo RL's scalars for steps [from, to] appended to the event file.
void appendSteps(const std::string& file, int from, int to) {
  std::string out;
  if (from == 1) tblog::append_record(out, tblog::encode_file_version(1.7e9));
  for (int s = from; s <= to; ++s) {
    tblog::append_record(out, tblog::encode_simple_value(1.7e9 + s, s, "train/reward", 0.1f * s));
    tblog::append_record(out, tblog::encode_simple_value(
                                  1.7e9 + s, s, "train/token_mult_prob_error", 1.0f + 0.001f * s));
    tblog::append_record(
        out, tblog::encode_simple_value(1.7e9 + s, s, "timing/train/total_step_time", 2.0f));
  }
  std::ofstream f(file, std::ios::binary | std::ios::app);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
}

template <class F>
bool waitFor(F&& cond, int ms = 20000) {
  QElapsedTimer t;
  t.start();
  while (!cond() && t.elapsed() < ms) QTest::qWait(50);
  return cond();
}

}  // namespace

class TestWatchFolder : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName(QStringLiteral("fp8rl-tests"));
  }

  void watchedFolderIsALiveReadOnlyRun() {
    QTemporaryDir dir;
    const std::string logs = dir.filePath("logs/exp_007/tensorboard").toStdString();
    std::filesystem::create_directories(logs);
    const std::string file = logs + "/events.out.tfevents.1700000000.node.1.0";
    appendSteps(file, 1, 3);
    ui::MainWindow w(QStringLiteral(FP8RL_CLI), dir.filePath("runs.sqlite"));
    w.resize(1440, 900);
    w.show();
    ui::StudioSession* s = w.session();
    QCOMPARE(w.watchFolder(dir.filePath("logs")), QString());
    QCOMPARE(w.folderWatches()->folders().size(), 1);
    const auto imported = [&]() -> const RunStore::RunRow* {
      s->refresh();
      for (const auto& r : s->runs())
        if (r.source == "tensorboard") return &r;
      return nullptr;
    };
    QVERIFY(waitFor([&] { return imported() && imported()->last_step == 3; }));
    const int64_t id = imported()->id;
    QCOMPARE(imported()->name, std::string("exp_007"));
    QCOMPARE(imported()->status, std::string(run_status::kRunning));
    w.showRun(id);
    const ui::RunData* d = s->data(id);
    QVERIFY(d);
    QCOMPARE(d->series(metric::kReward).size(), size_t{3});
    // Live, but nothing to steer: no worker.
    QVERIFY(!s->isLinked(id));
    QVERIFY(!w.pauseAction()->isEnabled() && !w.stopAction()->isEnabled());
    // The folder grows: the shown run follows (the session polls the store).
    appendSteps(file, 4, 6);
    QVERIFY(waitFor([&] {
      s->refresh();
      return s->data(id)->series(metric::kReward).size() == 6;
    }));
    QVERIFY(w.statusText().contains(QStringLiteral("followed from its log folder")));
    // Compared with another run like any run: summary from our names.
    const auto summary = ui::summarize({d, d}, 0);
    QCOMPARE(summary[0].steps, int64_t{6});
    QVERIFY(summary[0].median_mult_prob_error.has_value());
    // Stopping the watch ends the process, which marks the run finished.
    QSignalSpy ended(w.folderWatches(), &ui::FolderWatches::ended);
    w.folderWatches()->stopAll();
    QVERIFY(waitFor([&] { return ended.count() == 1; }));
    QCOMPARE(ended.at(0).at(1).toString(), QString());
    QVERIFY(waitFor([&] {
      s->refresh();
      return s->runRow(id)->status == run_status::kFinished;
    }));
  }
};

QTEST_MAIN(TestWatchFolder)
#include "test_watch_folder.moc"
