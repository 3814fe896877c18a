#include "ui/main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <algorithm>

#include "ui/about_dialog.hpp"
#include "ui/compare/compare_view.hpp"
#include "ui/data/folder_watch.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/studio_session.hpp"
#include "ui/engine_report_view.hpp"
#include "ui/groups/group_view.hpp"
#include "ui/run/run_view.hpp"
#include "ui/runs/launch_dialog.hpp"
#include "ui/runs/runs_panel.hpp"
#include "ui/runs/sweep_dialog.hpp"
#include "ui/runs/sweeps_panel.hpp"

namespace fp8rl::ui {

MainWindow::MainWindow(QString cli, QString db, QWidget* parent)
    : QMainWindow(parent),
      session_(new StudioSession(cli, this)),
      runs_(new RunsPanel(this)),
      run_view_(new RunView(this)),
      compare_(new CompareView(this)),
      groups_(new GroupView(this)),
      report_(new EngineReportView(cli, {QStringLiteral("doctor")}, this)),
      watches_(new FolderWatches(cli, this)),
      tabs_(new QTabWidget(this)) {
  setWindowTitle(tr("FP8 RL Studio"));
  resize(1440, 900);
  buildActions();

  tabs_->setObjectName(QStringLiteral("central_tabs"));
  tabs_->addTab(run_view_, tr("Run"));
  tabs_->addTab(compare_, tr("Compare"));
  tabs_->addTab(groups_, tr("Groups"));
  tabs_->addTab(report_, tr("System"));
  setCentralWidget(tabs_);

  auto* dock = new QDockWidget(tr("Runs"), this);
  dock->setObjectName(QStringLiteral("runs_dock"));
  dock->setWidget(runs_);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  addDockWidget(Qt::LeftDockWidgetArea, dock);
  runs_->setMinimumWidth(280);

  db_label_ = new QLabel(this);
  health_label_ = new QLabel(this);
  statusBar()->addPermanentWidget(health_label_);
  statusBar()->addPermanentWidget(db_label_);

  connect(runs_, &RunsPanel::currentRunChanged, this, [this](qint64 id) {
    if (id >= 0) showRun(id);
  });
  connect(runs_, &RunsPanel::selectionChanged, this, &MainWindow::updateActions);
  connect(runs_, &RunsPanel::tagsNotesEdited, this,
          [this](qint64 id, const QString& tags, const QString& notes) {
            const QString err = session_->setTagsNotes(id, tags, notes);
            if (!err.isEmpty()) statusBar()->showMessage(err, 10000);
          });
  connect(session_, &StudioSession::runsChanged, this, [this] {
    runs_->setRuns(session_->runs(), QDateTime::currentMSecsSinceEpoch() / 1000.0);
    updateSweeps();
    updateActions();
  });
  connect(session_, &StudioSession::groupsUpdated, this,
          [this] { groups_->setSnapshot(session_->groupSnapshot()); });
  connect(groups_, &GroupView::targetChanged, this,
          [this](double target) { session_->setGroupTarget(target); });
  connect(runs_->sweeps(), &SweepsPanel::groupsChosen, this,
          [this](qint64 sweep, const QString& label) { showGroups(sweep, label); });
  connect(runs_->sweeps(), &SweepsPanel::compareChosen, this,
          [this](qint64 sweep, const QString& a, const QString& b) { showGroups(sweep, a, b); });
  connect(runs_->sweeps(), &SweepsPanel::runChosen, this, [this](qint64 id) {
    runs_->selectRun(id);
    showRun(id);
  });
  connect(session_, &StudioSession::runUpdated, this, [this](qint64 id) {
    if (id == current_) run_view_->refreshShown();
    // The compare view catches up when shown (below); updating it hidden costs for nothing.
    if (tabs_->currentWidget() == compare_ &&
        std::find(compared_.begin(), compared_.end(), id) != compared_.end())
      compare_->refresh();
    if (id == current_) updateActions();
  });
  connect(session_, &StudioSession::runLaunched, this, [this](qint64 id) {
    statusBar()->showMessage(tr("Run %1 launched").arg(id), 5000);
    runs_->selectRun(id);
    showRun(id);
  });
  connect(session_, &StudioSession::commandFinished, this, &MainWindow::onCommandFinished);
  connect(session_, &StudioSession::problem, this,
          [this](const QString& m) { statusBar()->showMessage(m, 15000); });
  connect(run_view_, &RunView::liveEditRequested, this, [this](qint64 id, const LiveEdit& edit) {
    session_->applyLive(id, edit);
    statusBar()->showMessage(tr("Sent to run %1: %2 (applies at the next step boundary)")
                                 .arg(id)
                                 .arg(QString::fromStdString(edit.describe())),
                             8000);
  });

  auto* ticker = new QTimer(this);
  ticker->setObjectName(QStringLiteral("status"));
  connect(ticker, &QTimer::timeout, this, &MainWindow::updateStatus);
  ticker->start(1000);

  QSettings s;
  restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
  const bool restored = restoreState(s.value(QStringLiteral("window/state")).toByteArray());
  // Without a saved layout the runs dock opens wide enough for the id, name, status, step,
  // precision and preset columns, and at most 35 % of the window; the width applies once the
  // window has its size.
  QTimer::singleShot(0, this, [this, dock, restored] {
    const int wanted = runs_->sizeHint().width();
    if (!restored || dock->width() < runs_->minimumWidth())
      resizeDocks({dock}, {std::min(wanted, width() * 35 / 100)}, Qt::Horizontal);
  });
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    if (tabs_->currentWidget() == compare_ && !compared_.empty()) compare_->refresh();
  });
  tabs_->setCurrentIndex(0);
  if (db.isEmpty()) db = s.value(QStringLiteral("database"), defaultDatabase()).toString();
  openDatabase(db, /*quiet=*/true);
  report_->refresh();
  updateActions();
  updateStatus();
}

MainWindow::~MainWindow() {
  // The followed folders' processes mark their runs finished as they go.
  disconnect(watches_, nullptr, this, nullptr);
  watches_->stopAll();
}

QString MainWindow::watchFolder(const QString& dir) {
  if (!session_->hasDatabase()) return tr("open a run database first");
  const QString error = watches_->watch(session_->databasePath(), dir);
  if (error.isEmpty())
    statusBar()->showMessage(
        tr("Watching %1: its runs appear as they are read (live, read-only)").arg(dir), 8000);
  updateActions();
  return error;
}

QString MainWindow::defaultDatabase() const {
  const QByteArray env = qgetenv("FP8RL_DB");
  if (!env.isEmpty()) return QString::fromLocal8Bit(env);
  return QDir::homePath() + QStringLiteral("/.local/share/fp8rl/runs.sqlite");
}

void MainWindow::buildActions() {
  launch_ = new QAction(QIcon::fromTheme(QStringLiteral("media-playback-start")),
                        tr("&Launch run…"), this);
  launch_->setShortcut(QKeySequence::New);
  launch_->setToolTip(tr("Launch a run from a preset in a new worker process"));
  pause_ = new QAction(tr("&Pause"), this);
  pause_->setToolTip(tr("Pause the run at the next step boundary"));
  resume_ = new QAction(tr("&Resume"), this);
  stop_ = new QAction(tr("&Stop"), this);
  stop_->setToolTip(tr("Checkpoint, then stop the run"));
  checkpoint_ = new QAction(tr("&Checkpoint"), this);
  continue_ = new QAction(tr("Co&ntinue"), this);
  continue_->setToolTip(tr("Continue a stopped, crashed or failed run from its last checkpoint "
                           "in a new worker, with the live edits made before it"));
  sweep_ = new QAction(tr("S&weep…"), this);
  sweep_->setToolTip(tr("Run a configuration over seeds and precision variants in the "
                        "background, then compare the groups with a verdict"));
  compare_action_ = new QAction(tr("C&ompare selected"), this);
  compare_action_->setToolTip(tr("Compare the runs selected in the runs panel (two or more)"));
  open_db_ = new QAction(tr("&Open database…"), this);
  open_db_->setShortcut(QKeySequence::Open);
  export_csv_ = new QAction(tr("&Export run as CSV…"), this);
  watch_ = new QAction(tr("&Watch folder…"), this);
  watch_->setToolTip(
      tr("Follow a TensorBoard log folder (NeMo RL, verl, TRL): its runs are "
         "imported and stay live while it grows"));
  unwatch_ = new QAction(tr("Stop &watching folders"), this);
  auto* quit = new QAction(tr("&Quit"), this);
  quit->setShortcut(QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);

  connect(launch_, &QAction::triggered, this, [this] { openLaunchDialog(); });
  connect(pause_, &QAction::triggered, this, [this] { session_->pause(current_); });
  connect(resume_, &QAction::triggered, this, [this] { session_->resume(current_); });
  connect(stop_, &QAction::triggered, this, [this] {
    if (QMessageBox::question(this, tr("Stop run"),
                              tr("Checkpoint and stop run %1? Run › Continue picks it up "
                                 "again from that checkpoint in a new worker.")
                                  .arg(current_)) == QMessageBox::Yes)
      session_->stop(current_);
  });
  connect(checkpoint_, &QAction::triggered, this, [this] { session_->checkpoint(current_); });
  connect(continue_, &QAction::triggered, this, [this] {
    const QString error = session_->continueRun(current_);
    statusBar()->showMessage(error.isEmpty() ? tr("Continuing run %1 in a new worker…").arg(current_)
                                             : tr("Cannot continue: %1").arg(error),
                             8000);
  });
  connect(compare_action_, &QAction::triggered, this,
          [this] { compareRuns(runs_->selectedRuns()); });
  connect(sweep_, &QAction::triggered, this, [this] {
    // Over the current run's configuration, else the demo preset's.
    if (const auto* row = session_->runRow(current_); row && row->config.is_object()) {
      openSweepDialog(row->config, QString::fromStdString(row->name) + QStringLiteral("-sweep"));
      return;
    }
    QString error;
    const Json demo = session_->cli().presetConfig(QStringLiteral("demo"), &error);
    if (demo.is_null())
      statusBar()->showMessage(tr("Sweep: %1").arg(error), 10000);
    else
      openSweepDialog(demo, QStringLiteral("demo-sweep"));
  });
  connect(open_db_, &QAction::triggered, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open run database"), QFileInfo(session_->databasePath()).absolutePath(),
        tr("Run databases (*.sqlite *.db);;All files (*)"));
    if (!path.isEmpty()) openDatabase(path);
  });
  connect(export_csv_, &QAction::triggered, this, [this] {
    if (current_ < 0) return;
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export run %1").arg(current_),
        QDir::home().filePath(QStringLiteral("run-%1.csv").arg(current_)), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    const QString err = session_->exportCsv(current_, path);
    if (!err.isEmpty())
      QMessageBox::warning(this, tr("Export failed"), err);
    else
      statusBar()->showMessage(tr("Wrote %1").arg(path), 5000);
  });

  connect(watch_, &QAction::triggered, this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(
        this, tr("Watch a TensorBoard log folder"), QDir::homePath());
    if (dir.isEmpty()) return;
    if (const QString error = watchFolder(dir); !error.isEmpty())
      QMessageBox::warning(this, tr("Watch folder"), error);
  });
  connect(unwatch_, &QAction::triggered, this, [this] { watches_->stopAll(); });
  connect(watches_, &FolderWatches::message, this,
          [this](const QString&, const QString& line) { statusBar()->showMessage(line, 8000); });
  connect(watches_, &FolderWatches::ended, this, [this](const QString& dir, const QString& why) {
    statusBar()->showMessage(why.isEmpty() ? tr("Stopped watching %1").arg(dir)
                                           : tr("Watching %1 ended: %2").arg(dir, why),
                             15000);
    updateActions();
  });

  auto* file = menuBar()->addMenu(tr("&File"));
  file->addAction(open_db_);
  file->addAction(watch_);
  file->addAction(unwatch_);
  file->addAction(export_csv_);
  file->addSeparator();
  file->addAction(quit);
  auto* run = menuBar()->addMenu(tr("&Run"));
  for (QAction* a : {launch_, sweep_, pause_, resume_, stop_, checkpoint_, continue_})
    run->addAction(a);
  run->addSeparator();
  run->addAction(compare_action_);
  auto* help = menuBar()->addMenu(tr("&Help"));
  auto* about = help->addAction(tr("&About"));
  connect(about, &QAction::triggered, this, [this] { openAboutDialog(); });

  auto* toolbar = addToolBar(tr("Runs"));
  toolbar->setObjectName(QStringLiteral("runs_toolbar"));
  toolbar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  for (QAction* a : {launch_, sweep_, pause_, resume_, stop_, checkpoint_, continue_})
    toolbar->addAction(a);
  toolbar->addSeparator();
  toolbar->addAction(compare_action_);
  toolbar->addSeparator();
  toolbar->addAction(open_db_);
  toolbar->addAction(export_csv_);
}

void MainWindow::updateActions() {
  const auto* row = session_->runRow(current_);
  const bool linked = row && session_->isLinked(current_) && run_status::is_live(row->status);
  launch_->setEnabled(session_->hasDatabase());
  sweep_->setEnabled(session_->hasDatabase());
  pause_->setEnabled(linked && row->status == "running");
  resume_->setEnabled(linked && row->status == "paused");
  stop_->setEnabled(linked);
  checkpoint_->setEnabled(linked);
  const QString refusal = row ? session_->continueRefusal(current_) : tr("no run selected");
  continue_->setEnabled(session_->hasDatabase() && refusal.isEmpty());
  continue_->setStatusTip(refusal);
  export_csv_->setEnabled(row != nullptr);
  watch_->setEnabled(session_->hasDatabase());
  unwatch_->setEnabled(!watches_->folders().isEmpty());
  compare_action_->setEnabled(runs_->selectedRuns().size() >= 2);
}

QString MainWindow::statusText() const {
  return health_label_->text();
}

void MainWindow::updateStatus() {
  db_label_->setText(
      session_->hasDatabase()
          ? tr("%1 runs · %2").arg(session_->runs().size()).arg(session_->databasePath())
          : tr("no database"));
  const auto* row = session_->runRow(current_);
  if (!row) {
    health_label_->setText(tr("no run selected"));
    return;
  }
  QString text = tr("run %1: %2").arg(current_).arg(QString::fromStdString(row->status));
  if (session_->isLinked(current_)) {
    const auto h = session_->health(current_);
    if (!h.error.isEmpty() && h.heartbeat_age < 0)
      text += tr(" · worker unreachable: %1").arg(h.error);
    else if (h.heartbeat_age < 0)
      text += tr(" · waiting for heartbeat");
    else if (h.heartbeat_age > 3)
      text += tr(" · no heartbeat for %1 s (busy or dead?)").arg(h.heartbeat_age, 0, 'f', 0);
    else
      text += tr(" · heartbeat %1 s ago").arg(h.heartbeat_age, 0, 'f', 1);
    if (!h.backend.isEmpty()) text += tr(" · %1 (%2)").arg(h.backend, h.device);
    if (h.dropped > 0) text += tr(" · %1 bad messages dropped").arg(h.dropped);
    if (h.reconnects > 0) text += tr(" · telemetry reconnected %n time(s)", "", h.reconnects);
  } else if (!row->source.empty()) {
    text += run_status::is_live(row->status)
                ? tr(" · followed from its log folder (read-only)")
                : tr(" · imported from %1").arg(QString::fromStdString(row->source));
  } else if (run_status::is_live(row->status)) {
    text += tr(" · not steerable here (no reachable worker; following the database)");
  }
  if (const RunData* d = session_->data(current_)) {
    const auto& mem = d->series("memory/rss_mb");
    if (!mem.empty()) text += tr(" · RSS %1 MB").arg(mem.back().value, 0, 'f', 0);
    const auto& gpu = d->series("memory/gpu_mb");
    if (!gpu.empty()) text += tr(" · GPU %1 MB").arg(gpu.back().value, 0, 'f', 0);
  }
  health_label_->setText(text);
  updateActions();
}

AboutDialog* MainWindow::openAboutDialog() {
  auto* about = new AboutDialog(session_->cli().executable(), this);
  about->setAttribute(Qt::WA_DeleteOnClose);
  about->show();
  return about;
}

LaunchDialog* MainWindow::openLaunchDialog() {
  QString error;
  QStringList presets = session_->cli().presets(&error);
  if (presets.isEmpty()) {
    QMessageBox::warning(
        this, tr("Launch run"),
        tr("No presets found: %1").arg(error.isEmpty() ? tr("none installed") : error));
    return nullptr;
  }
  delete dialog_;
  auto& cli = session_->cli();
  // Without the engine's choices the fields are free text; the engine still validates them.
  const LaunchDialog::Choices choices = cli.settingChoices(&error);
  if (choices.isEmpty()) statusBar()->showMessage(error, 10000);
  dialog_ = new LaunchDialog(
      presets, [&cli](const QString& p, QString* err) { return cli.presetConfig(p, err); },
      [&cli](const Json& c) { return cli.validate(c); }, choices, this);
  connect(dialog_, &QDialog::accepted, this, [this] {
    const RankLaunch ranks{dialog_->ranks(), dialog_->hostfile()};
    const QString err =
        session_->launch(dialog_->config(), dialog_->runName(), dialog_->preset(), ranks);
    if (!err.isEmpty())
      QMessageBox::warning(this, tr("Launch failed"), err);
    else if (ranks.count > 1)
      statusBar()->showMessage(
          tr("Starting %1 ranks for %2 (mpirun)…").arg(ranks.count).arg(dialog_->runName()), 5000);
    else
      statusBar()->showMessage(tr("Starting a worker for %1…").arg(dialog_->runName()), 5000);
  });
  connect(dialog_, &LaunchDialog::sweepRequested, this, [this] {
    openSweepDialog(dialog_->config(),
                    (dialog_->preset().isEmpty() ? dialog_->runName() : dialog_->preset()) +
                        QStringLiteral("-sweep"));
  });
  dialog_->show();
  return dialog_;
}

SweepDialog* MainWindow::openSweepDialog(const Json& config, const QString& name) {
  delete sweep_dialog_;
  const QString dir =
      QFileInfo(session_->databasePath()).absoluteDir().filePath(QStringLiteral("sweeps"));
  auto& cli = session_->cli();
  sweep_dialog_ = new SweepDialog(
      config, name, dir,
      [&cli](const QString& file, QString* summary) { return cli.checkSweep(file, summary); },
      this);
  connect(sweep_dialog_, &QDialog::accepted, this, [this] {
    const QString file = sweep_dialog_->sweepFile();
    const QString err = session_->startSweep(file);
    if (!err.isEmpty()) {
      QMessageBox::warning(this, tr("Sweep failed"), err);
      return;
    }
    if (dialog_) dialog_->close();
    runs_->tabs()->setCurrentWidget(runs_->sweeps());
    statusBar()->showMessage(tr("Sweep started in the background: fp8rl sweep %1").arg(file), 10000);
  });
  sweep_dialog_->show();
  return sweep_dialog_;
}

void MainWindow::showGroups(qint64 sweep, const QString& a, const QString& b) {
  session_->showGroups(sweep);
  groups_->setSnapshot(session_->groupSnapshot());
  if (!a.isEmpty() || !b.isEmpty()) groups_->setPair(a, b);
  tabs_->setCurrentWidget(groups_);
}

void MainWindow::updateSweeps() {
  std::vector<SweepEntry> entries;
  for (const auto& s : session_->sweeps())
    entries.push_back({s, session_->sweepProgress(s.id), session_->sweepGroups(s.id)});
  runs_->sweeps()->setSweeps(entries);
}

void MainWindow::showRun(qint64 run) {
  const RunData* d = session_->data(run);
  if (!d) {
    statusBar()->showMessage(session_->lastError(), 10000);
    return;
  }
  current_ = run;
  run_view_->setRun(d);
  if (tabs_->currentWidget() != run_view_ && tabs_->currentWidget() != report_)
    tabs_->setCurrentWidget(run_view_);
  setWindowTitle(tr("%1 — FP8 RL Studio").arg(QString::fromStdString(d->row.name)));
  updateActions();
  updateStatus();
}

void MainWindow::compareRuns(const std::vector<int64_t>& runs) {
  std::vector<const RunData*> shown;
  compared_.clear();
  for (int64_t id : runs)
    if (const RunData* d = session_->data(id)) {
      shown.push_back(d);
      compared_.push_back(id);
    }
  if (shown.size() < 2) {
    statusBar()->showMessage(tr("Select two or more runs to compare"), 5000);
    return;
  }
  compare_->setRuns(shown);
  tabs_->setCurrentWidget(compare_);
}

bool MainWindow::openDatabase(const QString& path, bool quiet) {
  const QString err = session_->openDatabase(path);
  if (!err.isEmpty()) {
    statusBar()->showMessage(err, 15000);
    if (!quiet) QMessageBox::warning(this, tr("Open database"), err);
    return false;
  }
  current_ = -1;
  compared_.clear();
  run_view_->setRun(nullptr);
  compare_->setRuns({});
  groups_->setSnapshot(nullptr);
  QSettings().setValue(QStringLiteral("database"), session_->databasePath());
  updateStatus();
  return true;
}

void MainWindow::onCommandFinished(qint64 run, const QString& command, bool ok,
                                   const QString& message) {
  if (ok)
    statusBar()->showMessage(tr("%1 → run %2: ok%3")
                                 .arg(command)
                                 .arg(run)
                                 .arg(message.isEmpty() ? QString() : tr(" (%1)").arg(message)),
                             6000);
  else
    statusBar()->showMessage(tr("%1 → run %2 failed: %3").arg(command).arg(run).arg(message),
                             15000);
}

void MainWindow::closeEvent(QCloseEvent* e) {
  QSettings s;
  s.setValue(QStringLiteral("window/geometry"), saveGeometry());
  s.setValue(QStringLiteral("window/state"), saveState());
  QMainWindow::closeEvent(e);
}

}  // namespace fp8rl::ui
