// fp8rl-studio: the Qt desktop app.
//   fp8rl-studio [--screenshots DIR]   (DIR: save a PNG of every tab once the window is ready,
//                                       then quit; used by tools/screenshots.sh)
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QIcon>
#include <QTabWidget>
#include <QTimer>

#include "ui/main_window.hpp"
#include "ui/system_report_view.hpp"

namespace {

// Saves every tab of the main window as DIR/<index>-<tab>.png.
void save_screenshots(fp8rl::ui::MainWindow& w, const QString& dir) {
  QDir().mkpath(dir);
  auto* tabs = w.findChild<QTabWidget*>();
  for (int i = 0; tabs && i < tabs->count(); ++i) {
    tabs->setCurrentIndex(i);
    QApplication::processEvents();
    const QString name = tabs->tabText(i).toLower().remove('&').replace(' ', '-');
    w.grab().save(QDir(dir).filePath(QStringLiteral("studio-%1.png").arg(name)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("FP8 RL Studio"));
  QApplication::setOrganizationName(QStringLiteral("fp8rl"));
  QCommandLineParser parser;
  parser.addHelpOption();
  const QCommandLineOption shots(QStringLiteral("screenshots"),
                                 QStringLiteral("Save a PNG of every tab into DIR, then quit."),
                                 QStringLiteral("DIR"));
  parser.addOption(shots);
  parser.process(app);

  const QString dir = QApplication::applicationDirPath();
  QApplication::setWindowIcon(
      QIcon(dir + QStringLiteral("/../share/fp8rl/icons/fp8rl-studio.svg")));
  fp8rl::ui::MainWindow window(QDir(dir).filePath(QStringLiteral("fp8rl")));
  window.show();
  if (parser.isSet(shots)) {
    const QString out = parser.value(shots);
    QObject::connect(window.system_report(), &fp8rl::ui::SystemReportView::finished, &app,
                     [&window, out] {
                       QTimer::singleShot(300, [&window, out] {
                         save_screenshots(window, out);
                         QApplication::quit();
                       });
                     });
  }
  return QApplication::exec();
}
