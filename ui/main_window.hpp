// The studio's main window: the runs panel (dock, left), the run view / compare view / groups
// view / system report (tabs, centre), the toolbar and menus (launch, pause/resume, stop, checkpoint, compare,
// open database, export) and the status bar (database, worker health, backend and device,
// memory). It wires views to the StudioSession; it holds no protocol or SQL code itself.
#pragma once

#include <QMainWindow>
#include <vector>

#include "core/json.hpp"

class QAction;
class QLabel;
class QTabWidget;

namespace fp8rl::ui {

class CompareView;
class GroupView;
class LaunchDialog;
class SweepDialog;
class RunView;
class RunsPanel;
class StudioSession;
class AboutDialog;
class EngineReportView;
class FolderWatches;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // cli: path of the fp8rl executable (workers and reports run as separate processes).
  // db: the run database to open ("" = the last one used, else the default location).
  explicit MainWindow(QString cli, QString db = QString(), QWidget* parent = nullptr);
  ~MainWindow() override;

  StudioSession* session() const { return session_; }
  RunsPanel* runsPanel() const { return runs_; }
  RunView* runView() const { return run_view_; }
  CompareView* compareView() const { return compare_; }
  GroupView* groupView() const { return groups_; }
  EngineReportView* systemReport() const { return report_; }
  QTabWidget* centralTabs() const { return tabs_; }
  QAction* launchAction() const { return launch_; }
  QAction* pauseAction() const { return pause_; }
  QAction* resumeAction() const { return resume_; }
  QAction* continueAction() const { return continue_; }
  QAction* stopAction() const { return stop_; }
  QAction* checkpointAction() const { return checkpoint_; }
  QAction* compareAction() const { return compare_action_; }
  QAction* sweepAction() const { return sweep_; }
  QAction* watchAction() const { return watch_; }
  FolderWatches* folderWatches() const { return watches_; }
  // Follows a TensorBoard log folder (File › Watch folder…): `fp8rl runs import DIR --follow`
  // into the open database as a child process; its runs appear live and read-only. Returns ""
  // or why not.
  QString watchFolder(const QString& dir);
  QString statusText() const;

  // Opens the launch dialog (modeless; returned so tests can fill it in).
  LaunchDialog* openLaunchDialog();
  // Opens Help › About (modeless, deleted when closed): versions and the engine's backends.
  AboutDialog* openAboutDialog();
  // Opens the Sweep… form (modeless) over this configuration (the launch form's, or the
  // current run's); on Start the sweep runs in the background (`fp8rl sweep`).
  SweepDialog* openSweepDialog(const Json& config, const QString& name);
  // Shows the groups of a sweep in the Groups view, A against B when given.
  void showGroups(qint64 sweep, const QString& a = QString(), const QString& b = QString());
  // Shows the run in the run view (and selects it in the panel).
  void showRun(qint64 run);
  // Compares these runs in the compare view.
  void compareRuns(const std::vector<int64_t>& runs);
  // Opens a database; shows the error in a message box unless quiet.
  bool openDatabase(const QString& path, bool quiet = false);

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildActions();
  void updateActions();
  void updateStatus();
  void onCommandFinished(qint64 run, const QString& command, bool ok, const QString& message);
  void updateSweeps();
  QString defaultDatabase() const;

  StudioSession* session_;
  RunsPanel* runs_;
  RunView* run_view_;
  CompareView* compare_;
  GroupView* groups_;
  EngineReportView* report_;
  FolderWatches* watches_;
  QTabWidget* tabs_;
  QAction *launch_, *pause_, *resume_, *stop_, *checkpoint_, *continue_, *compare_action_, *open_db_,
      *export_csv_, *sweep_, *watch_, *unwatch_;
  QLabel *db_label_, *health_label_;
  LaunchDialog* dialog_ = nullptr;
  SweepDialog* sweep_dialog_ = nullptr;
  qint64 current_ = -1;
  std::vector<int64_t> compared_;
};

}  // namespace fp8rl::ui
