// The studio offscreen: the main window opens, the system report runs `fp8rl doctor` in a
// separate process and shows it, and launching is honestly unavailable in this build.
#include <QtTest>

#include <QAction>
#include <QTabWidget>

#include "ui/main_window.hpp"
#include "ui/system_report_view.hpp"

class TestStudio : public QObject {
  Q_OBJECT
 private slots:
  void mainWindowShowsSystemReport() {
    fp8rl::ui::MainWindow w(QStringLiteral(FP8RL_CLI));
    QSignalSpy done(w.system_report(), &fp8rl::ui::SystemReportView::finished);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(done.count() > 0 || done.wait(60000));
    QCOMPARE(done.first().first().toInt(), 0);
    QVERIFY2(w.system_report()->text().contains("CPU backend"),
             qPrintable(w.system_report()->text()));
    QCOMPARE(w.windowTitle(), QStringLiteral("FP8 RL Studio"));
    QVERIFY(!w.launch_action()->isEnabled());
  }

  void missingCliIsReportedNotCrashed() {
    fp8rl::ui::SystemReportView v(QStringLiteral("/nonexistent/fp8rl"));
    QSignalSpy done(&v, &fp8rl::ui::SystemReportView::finished);
    v.refresh();
    QCOMPARE(done.count(), 1);
    QCOMPARE(done.first().first().toInt(), -1);
  }
};

QTEST_MAIN(TestStudio)
#include "test_studio.moc"
