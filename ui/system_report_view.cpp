#include "ui/system_report_view.hpp"

#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QVBoxLayout>

namespace fp8rl::ui {

SystemReportView::SystemReportView(QString cli, QWidget* parent)
    : QWidget(parent),
      cli_(std::move(cli)),
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
  connect(refresh_button_, &QPushButton::clicked, this, &SystemReportView::refresh);
}

SystemReportView::~SystemReportView() {
  // A report still running must not call back into this half-destroyed widget.
  if (process_) {
    process_->disconnect(this);
    process_->kill();
    process_->waitForFinished(1000);
  }
}

QString SystemReportView::text() const {
  return output_->toPlainText();
}

void SystemReportView::refresh() {
  if (process_) return;  // one report at a time
  if (!QFileInfo(cli_).isExecutable()) {
    status_->setText(tr("Cannot run %1: not found or not executable.").arg(cli_));
    emit finished(-1);
    return;
  }
  status_->setText(tr("Running fp8rl doctor…"));
  refresh_button_->setEnabled(false);
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::MergedChannels);
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus st) {
    output_->setPlainText(QString::fromUtf8(process_->readAll()));
    status_->setText(st == QProcess::NormalExit && code == 0
                         ? tr("System report from %1").arg(cli_)
                         : tr("fp8rl doctor failed (exit code %1)").arg(code));
    process_->deleteLater();
    process_ = nullptr;
    refresh_button_->setEnabled(true);
    emit finished(st == QProcess::NormalExit ? code : -1);
  });
  process_->start(cli_, {QStringLiteral("doctor")});
}

}  // namespace fp8rl::ui
