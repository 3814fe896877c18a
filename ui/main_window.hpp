// The studio's main window. For now: the welcome page saying what the engine can do and the
// system report; runs, plots and steering arrive with the run store and workers.
#pragma once

#include <QMainWindow>

class QAction;

namespace fp8rl::ui {

class SystemReportView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // cli: path of the fp8rl executable (workers and reports run as separate processes).
  explicit MainWindow(QString cli, QWidget* parent = nullptr);

  SystemReportView* system_report() const { return report_; }
  QAction* launch_action() const { return launch_; }

 private:
  SystemReportView* report_;
  QAction* launch_;
};

}  // namespace fp8rl::ui
