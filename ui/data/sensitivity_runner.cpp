#include "ui/data/sensitivity_runner.hpp"

#include <QDir>
#include <QProcess>
#include <QTemporaryFile>

#include "core/error.hpp"
#include "ui/data/engine_cli.hpp"

namespace fp8rl::ui {

namespace {
constexpr int kTailLines = 12;
}

SensitivityRunner::SensitivityRunner(QString executable, QObject* parent)
    : QObject(parent), exe_(std::move(executable)) {
  qRegisterMetaType<SensitivityReport>();
}

SensitivityRunner::~SensitivityRunner() {
  if (running()) {
    process_->disconnect(this);
    process_->kill();
    process_->waitForFinished(2000);
  }
}

QStringList SensitivityRunner::arguments(const QString& config_path, const RunStore::RunRow& run) {
  QStringList args{QStringLiteral("sensitivity"), QStringLiteral("--config"), config_path};
  const QString ckpt = QString::fromStdString(run.checkpoint_dir);
  if (!ckpt.isEmpty() && QDir(ckpt).exists()) args << QStringLiteral("--checkpoint") << ckpt;
  args << QStringLiteral("--json");
  return args;
}

bool SensitivityRunner::running() const {
  return process_ && process_->state() != QProcess::NotRunning;
}

bool SensitivityRunner::start(const RunStore::RunRow& run, QString* error) {
  if (running()) {
    *error = tr("a sensitivity measurement of run %1 is under way").arg(run_);
    return false;
  }
  if (!run.config.is_object()) {
    *error = tr("run %1 has no recorded configuration").arg(run.id);
    return false;
  }
  config_ = EngineCli::configFile(run.config, error);
  if (!config_) return false;
  run_ = run.id;
  partial_.clear();
  tail_.clear();
  cancelled_ = false;
  delete process_;
  process_ = new QProcess(this);
  connect(process_, &QProcess::readyReadStandardError, this, &SensitivityRunner::readProgress);
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    processFinished(code, status != QProcess::NormalExit);
  });
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart)
      emit failed(run_, tr("cannot run %1: %2").arg(exe_, process_->errorString()));
  });
  process_->start(exe_, arguments(config_->fileName(), run));
  return true;
}

void SensitivityRunner::cancel() {
  if (!running()) return;
  cancelled_ = true;
  process_->terminate();
  if (!process_->waitForFinished(3000)) process_->kill();
}

void SensitivityRunner::readProgress() {
  partial_ += process_->readAllStandardError();
  // A progress bar may redraw its line with \r: both end a line.
  qsizetype start = 0;
  for (qsizetype i = 0; i < partial_.size(); ++i) {
    if (partial_[i] != '\n' && partial_[i] != '\r') continue;
    const std::string line = partial_.mid(start, i - start).toStdString();
    start = i + 1;
    if (line.empty()) continue;
    if (const auto p = parseSensitivityProgress(line))
      emit progress(p->done, p->planned, QString::fromStdString(p->what));
    else {
      tail_ << QString::fromStdString(line);
      while (tail_.size() > kTailLines) tail_.removeFirst();
    }
  }
  partial_.remove(0, start);
}

QString SensitivityRunner::stderrTail() const {
  QStringList lines = tail_;
  if (!partial_.trimmed().isEmpty()) lines << QString::fromUtf8(partial_).trimmed();
  return lines.join('\n');
}

void SensitivityRunner::processFinished(int code, bool crashed) {
  readProgress();
  const QByteArray out = process_->readAllStandardOutput();
  config_.reset();
  if (cancelled_) {
    emit failed(run_, tr("cancelled"));
    return;
  }
  if (crashed || code != 0) {
    const QString tail = stderrTail();
    emit failed(run_, (crashed ? tr("fp8rl sensitivity crashed")
                               : tr("fp8rl sensitivity exited with code %1").arg(code)) +
                          (tail.isEmpty() ? QString() : QStringLiteral(":\n") + tail));
    return;
  }
  try {
    emit finished(run_, SensitivityReport::parse(out.toStdString()));
  } catch (const Error& e) {
    emit failed(run_, QString::fromStdString(e.message()));
  }
}

}  // namespace fp8rl::ui
