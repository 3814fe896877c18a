#include "ui/data/folder_watch.hpp"

#include <QDir>
#include <QFileInfo>
#include <QProcess>

namespace fp8rl::ui {

FolderWatches::FolderWatches(QString executable, QObject* parent)
    : QObject(parent), exe_(std::move(executable)) {}

FolderWatches::~FolderWatches() {
  blockSignals(true);  // whoever listens may be going too
  stopAll();
}

QStringList FolderWatches::arguments(const QString& db, const QString& dir) {
  return {QStringLiteral("runs"),     QStringLiteral("import"), dir,
          QStringLiteral("--follow"), QStringLiteral("--db"),   db};
}

QString FolderWatches::watch(const QString& db, const QString& dir) {
  const QString abs = QFileInfo(dir).absoluteFilePath();
  if (!QFileInfo(abs).isDir()) return tr("%1 is not a folder").arg(abs);
  if (procs_.count(abs)) return tr("%1 is watched already").arg(abs);
  auto* p = new QProcess(this);
  p->setProgram(exe_);
  p->setArguments(arguments(db, abs));
  p->setStandardInputFile(QProcess::nullDevice());
  const auto lines = [this, p, abs](QProcess::ProcessChannel channel) {
    p->setReadChannel(channel);
    while (p->canReadLine()) {
      const QString line = QString::fromUtf8(p->readLine()).trimmed();
      if (!line.isEmpty()) emit message(abs, line);
    }
  };
  connect(p, &QProcess::readyReadStandardOutput, this,
          [lines] { lines(QProcess::StandardOutput); });
  connect(p, &QProcess::readyReadStandardError, this, [lines] { lines(QProcess::StandardError); });
  connect(p, &QProcess::finished, this, [this, p, abs](int code, QProcess::ExitStatus status) {
    const bool requested = p->property("stopping").toBool();
    const QString rest = QString::fromUtf8(p->readAllStandardError()).trimmed();
    QString why;
    if (!requested && (status != QProcess::NormalExit || code != 0))
      why = rest.isEmpty() ? tr("the importer exited with code %1").arg(code) : rest;
    procs_.erase(abs);
    p->deleteLater();
    emit ended(abs, why);
  });
  p->start();
  if (!p->waitForStarted(5000)) {
    const QString error = tr("cannot start %1: %2").arg(exe_, p->errorString());
    delete p;
    return error;
  }
  procs_[abs] = p;
  return {};
}

void FolderWatches::stop(const QString& dir) {
  const auto it = procs_.find(QFileInfo(dir).absoluteFilePath());
  if (it == procs_.end()) return;
  it->second->setProperty("stopping", true);
  it->second->terminate();  // SIGTERM: the importer marks its runs finished, then exits
}

void FolderWatches::stopAll() {
  std::vector<QProcess*> all;
  for (const auto& [dir, p] : procs_) {
    p->setProperty("stopping", true);
    p->terminate();
    all.push_back(p);
  }
  for (QProcess* p : all)
    if (!p->waitForFinished(5000)) p->kill();
}

QStringList FolderWatches::folders() const {
  QStringList out;
  for (const auto& [dir, p] : procs_) out << dir;
  return out;
}

}  // namespace fp8rl::ui
