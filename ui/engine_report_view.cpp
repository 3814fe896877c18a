#include "ui/engine_report_view.hpp"

#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QVBoxLayout>

namespace fp8rl::ui {

EngineReportView::EngineReportView(QString cli, QStringList args, QWidget* parent)
    : QWidget(parent),
      cli_(std::move(cli)),
      args_(std::move(args)),
      status_(new QLabel(this)),
      output_(new QPlainTextEdit(this)),
      refresh_button_(new QPushButton(tr("Refresh"), this)) {
  output_->setReadOnly(true);
  output_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  output_->setLineWrapMode(QPlainTextEdit::NoWrap);
  auto* top = new QHBoxLayout;
  top->addWidget(status_, 1);
  top->addWidget(refresh_button_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(output_, 1);
  connect(refresh_button_, &QPushButton::clicked, this, &EngineReportView::refresh);
}

EngineReportView::~EngineReportView() {
  // A report still running must not call back into this half-destroyed widget.
  if (process_) {
    process_->disconnect(this);
    process_->kill();
    process_->waitForFinished(1000);
  }
}

QString EngineReportView::command() const {
  return (QStringList{QStringLiteral("fp8rl")} + args_).join(QLatin1Char(' '));
}

void EngineReportView::setWrapped(bool on) {
  output_->setLineWrapMode(on ? QPlainTextEdit::WidgetWidth : QPlainTextEdit::NoWrap);
}

QString EngineReportView::text() const {
  return output_->toPlainText();
}

void EngineReportView::refresh() {
  if (process_) return;  // one report at a time
  if (!QFileInfo(cli_).isExecutable()) {
    status_->setText(tr("Cannot run %1: not found or not executable.").arg(cli_));
    emit finished(-1);
    return;
  }
  status_->setText(tr("Running %1…").arg(command()));
  refresh_button_->setEnabled(false);
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::MergedChannels);
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus st) {
    output_->setPlainText(QString::fromUtf8(process_->readAll()));
    status_->setText(st == QProcess::NormalExit && code == 0
                         ? tr("From %1").arg(cli_)
                         : tr("%1 failed (exit code %2)").arg(command()).arg(code));
    process_->deleteLater();
    process_ = nullptr;
    refresh_button_->setEnabled(true);
    emit finished(st == QProcess::NormalExit ? code : -1);
  });
  process_->start(cli_, args_);
}

}  // namespace fp8rl::ui
