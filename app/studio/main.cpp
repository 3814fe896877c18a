// fp8rl-studio: the Qt desktop app.
#include <QApplication>
#include <QDir>
#include <QIcon>

#include "ui/main_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("FP8 RL Studio"));
  QApplication::setOrganizationName(QStringLiteral("fp8rl"));
  const QString dir = QApplication::applicationDirPath();
  QApplication::setWindowIcon(QIcon(dir + QStringLiteral("/../share/fp8rl/icons/fp8rl-studio.svg")));
  fp8rl::ui::MainWindow window(QDir(dir).filePath(QStringLiteral("fp8rl")));
  window.show();
  return QApplication::exec();
}
