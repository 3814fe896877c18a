#include "ui/main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolBar>
#include <QVBoxLayout>

#include "ui/system_report_view.hpp"

namespace fp8rl::ui {

MainWindow::MainWindow(QString cli, QWidget* parent)
    : QMainWindow(parent), report_(new SystemReportView(cli, this)) {
  setWindowTitle(tr("FP8 RL Studio"));
  resize(1200, 760);

  launch_ = new QAction(tr("&Launch run…"), this);
  launch_->setEnabled(false);
  launch_->setToolTip(
      tr("Training runs are not in this build yet: the engine has the FP8 "
         "numerics (fp8rl bench), not the run loop."));
  auto* quit = new QAction(tr("&Quit"), this);
  quit->setShortcut(QKeySequence::Quit);
  connect(quit, &QAction::triggered, qApp, &QApplication::quit);
  auto* about = new QAction(tr("&About"), this);
  connect(about, &QAction::triggered, this, [this] {
    QMessageBox::about(this, tr("About FP8 RL Studio"),
                       tr("FP8 RL Studio: end-to-end FP8 reinforcement learning of language "
                          "models, and a place to watch and steer the runs."));
  });

  auto* file = menuBar()->addMenu(tr("&File"));
  file->addAction(quit);
  auto* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(launch_);
  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(about);
  auto* toolbar = addToolBar(tr("Runs"));
  toolbar->setObjectName(QStringLiteral("runs_toolbar"));
  toolbar->addAction(launch_);

  auto* welcome = new QLabel(this);
  welcome->setWordWrap(true);
  welcome->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  welcome->setMargin(16);
  welcome->setText(
      tr("<h2>FP8 RL Studio</h2>"
         "<p>The engine trains language models with GRPO end to end in FP8: block-wise E4M3 "
         "linear layers (128×128 weight tiles, 1×128 activation blocks, FP32 scales) in "
         "generation and training, an optional FP8 KV cache, and truncated importance "
         "sampling. Try it in a terminal: <code>fp8rl train --preset demo</code>.</p>"
         "<p>Runs are recorded in a run database and can run as worker processes steered over "
         "ZeroMQ: <code>fp8rl runs list</code>, <code>fp8rl runs attach ID</code>.</p>"
         "<p><b>Not yet here:</b> the studio's own run views (launch dialog, live plots, "
         "precision grid, compare view).</p>"
         "<p>The <i>System</i> tab shows what this machine offers the engine.</p>"));
  auto* tabs = new QTabWidget(this);
  tabs->addTab(welcome, tr("Welcome"));
  tabs->addTab(report_, tr("System"));
  setCentralWidget(tabs);
  statusBar()->showMessage(tr("Run views are not in this build yet: see fp8rl runs list"));
  report_->refresh();
}

}  // namespace fp8rl::ui
