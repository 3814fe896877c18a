#include "ui/data/engine_cli.hpp"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryFile>
#include <string>
#include <vector>

#include "contract/rank_launch.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "ipc/endpoints.hpp"

namespace fp8rl::ui {

QString EngineCli::besideApplication() {
  return QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("fp8rl"));
}

bool EngineCli::run(const QStringList& args, QByteArray* out, QString* error,
                    int timeout_ms) const {
  QProcess p;
  p.start(exe_, args);
  if (!p.waitForStarted(5000)) {
    if (error) *error = QStringLiteral("cannot run %1: %2").arg(exe_, p.errorString());
    return false;
  }
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished(1000);
    if (error) *error = QStringLiteral("%1 %2 did not finish in time").arg(exe_, args.join(' '));
    return false;
  }
  if (out) *out = p.readAllStandardOutput();
  if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
    if (error) {
      QString msg = QString::fromUtf8(p.readAllStandardError()).trimmed();
      // "fp8rl train: error: <message> (file.cpp:12)": keep the message.
      static const QRegularExpression command(QStringLiteral("^fp8rl [a-z]+: error: "));
      msg.remove(command);
      static const QRegularExpression where(
          QStringLiteral("\\s*\\([A-Za-z0-9_]+\\.[ch]pp:\\d+\\)$"));
      msg.remove(where);
      *error = msg.isEmpty() ? QStringLiteral("%1 exited with code %2").arg(exe_).arg(p.exitCode())
                             : msg;
    }
    return false;
  }
  return true;
}

QStringList EngineCli::presets(QString* error) const {
  QByteArray out;
  if (!run({QStringLiteral("train"), QStringLiteral("--list-presets")}, &out, error)) return {};
  return QString::fromUtf8(out).split('\n', Qt::SkipEmptyParts);
}

QMap<QString, QStringList> EngineCli::settingChoices(QString* error) const {
  QByteArray out;
  if (!run({QStringLiteral("train"), QStringLiteral("--list-choices")}, &out, error)) return {};
  QMap<QString, QStringList> choices;
  try {
    const Json doc = Json::parse(out.toStdString());
    for (const auto& [key, values] : doc.as_object("the choices")) {
      QStringList list;
      for (const Json& v : values.as_array(key)) list << QString::fromStdString(v.as_string(key));
      choices.insert(QString::fromStdString(key), list);
    }
  } catch (const Error& e) {
    if (error)
      *error = QStringLiteral("unreadable setting choices from %1: %2")
                   .arg(exe_, QString::fromStdString(e.message()));
    return {};
  }
  return choices;
}

Json EngineCli::presetConfig(const QString& preset, QString* error) const {
  QByteArray out;
  if (!run({QStringLiteral("train"), QStringLiteral("--preset"), preset,
            QStringLiteral("--print-config")},
           &out, error))
    return Json();
  try {
    return Json::parse(out.toStdString());
  } catch (const Error& e) {
    if (error)
      *error = QStringLiteral("unreadable configuration from %1: %2")
                   .arg(exe_, QString::fromStdString(e.message()));
    return Json();
  }
}

std::unique_ptr<QTemporaryFile> EngineCli::configFile(const Json& config, QString* error) {
  auto f = std::make_unique<QTemporaryFile>(QDir::tempPath() +
                                            QStringLiteral("/fp8rl-config-XXXXXX.json"));
  if (!f->open() || f->write(QByteArray::fromStdString(config.dump(2))) < 0 || !f->flush()) {
    *error =
        QStringLiteral("cannot write a temporary configuration file: %1").arg(f->errorString());
    return nullptr;
  }
  return f;
}

QString EngineCli::validate(const Json& config) const {
  QString error;
  const auto f = configFile(config, &error);
  if (!f) return error;
  if (!run({QStringLiteral("train"), QStringLiteral("--config"), f->fileName(),
            QStringLiteral("--print-config")},
           nullptr, &error))
    return error.isEmpty() ? QStringLiteral("invalid configuration") : error;
  return {};
}

ProcessCommand EngineCli::workerCommand(const QString& db, const QString& control,
                                        const QString& telemetry, const RankLaunch& ranks) const {
  const QStringList args = {QStringLiteral("worker"),
                            QStringLiteral("--db"),
                            db,
                            QStringLiteral("--control"),
                            control,
                            QStringLiteral("--telemetry"),
                            telemetry,
                            QStringLiteral("--nice"),
                            QString::number(kWorkerNice)};
  std::vector<std::string> std_args;
  for (const QString& a : args) std_args.push_back(a.toStdString());
  const std::vector<std::string> cmd =
      ranks_command(ranks.count, ranks.hostfile.toStdString(), exe_.toStdString(), std_args);
  ProcessCommand c;
  c.program = QString::fromStdString(cmd.front());
  for (size_t i = 1; i < cmd.size(); ++i) c.arguments << QString::fromStdString(cmd[i]);
  return c;
}

namespace {

// Whether program (a path, or a name looked up in PATH) names an executable file.
bool findsExecutable(const QString& program) {
  if (program.contains(QLatin1Char('/'))) {
    const QFileInfo f(program);
    return f.isFile() && f.isExecutable();
  }
  return !QStandardPaths::findExecutable(program).isEmpty();
}

// Creates the log file at path (and its folder) as the user's alone: 0600 in a 0700 folder, as
// the run database beside it (docs/security.md). False with *error set when it cannot.
bool createPrivateLog(const QString& path, QString* error) {
  try {
    create_private_directories(QFileInfo(path).absolutePath().toStdString());
    open_private_file(path.toStdString(), std::ios::app);
  } catch (const Error& e) {
    if (error) *error = QString::fromStdString(e.message());
    return false;
  }
  return true;
}

}  // namespace

bool EngineCli::spawnWorker(const QString& db, const RankLaunch& ranks, Spawned* out,
                            QString* error) const {
  const QString tag =
      QStringLiteral("fp8rl-studio-%1-%2-%3")
          .arg(QCoreApplication::applicationPid())
          .arg(QDateTime::currentMSecsSinceEpoch())
          .arg(QRandomGenerator::global()->generate() & 0xffff, 4, 16, QLatin1Char('0'));
  ProcessCommand cmd;
  try {
    // Sockets in the user's private runtime folder (only this user can connect: ipc/endpoints).
    const ipc::Endpoints own = ipc::private_endpoints(tag.toStdString());
    out->control = QString::fromStdString(own.control);
    out->telemetry = QString::fromStdString(own.telemetry);
    cmd = workerCommand(db, out->control, out->telemetry, ranks);
  } catch (const Error& e) {
    if (error)
      *error = QStringLiteral("cannot start a worker: %1").arg(QString::fromStdString(e.message()));
    return false;
  }
  // Said before anything is created: QProcess's own message would only be "No such file".
  const bool via_launcher = cmd.program != exe_;  // ranks_command put mpirun in front
  if (via_launcher && !findsExecutable(cmd.program)) {
    if (error)
      *error =
          QStringLiteral(
              "cannot start %1: Open MPI's mpirun was not found (no executable "
              "'%2'%3; install openmpi-bin)")
              .arg(ranks.count == 1 ? QStringLiteral("the run on its hostfile")
                                    : QStringLiteral("%1 ranks").arg(ranks.count),
                   cmd.program,
                   cmd.program.contains(QLatin1Char('/')) ? QString() : QStringLiteral(" in PATH"));
    return false;
  }
  out->log = QFileInfo(db).absoluteDir().filePath(QStringLiteral("logs/%1.log").arg(tag));
  if (!createPrivateLog(out->log, error)) return false;
  QProcess p;
  // Workers are batch jobs: below the studio's priority (--nice), so that training on every core
  // never makes the window it is watched in stutter (an idle studio costs them nothing).
  p.setProgram(cmd.program);
  p.setArguments(cmd.arguments);
  p.setStandardOutputFile(out->log, QIODevice::Append);
  p.setStandardErrorFile(out->log, QIODevice::Append);
  p.setStandardInputFile(QProcess::nullDevice());
  if (!p.startDetached(&out->pid)) {
    if (error) {
      if (via_launcher)
        *error = QStringLiteral("cannot start %1 (Open MPI's mpirun; install openmpi-bin): %2")
                     .arg(cmd.program, p.errorString());
      else
        *error = QStringLiteral("cannot start %1 worker: %2").arg(exe_, p.errorString());
    }
    return false;
  }
  return true;
}

QString EngineCli::checkSweep(const QString& file, QString* summary) const {
  QByteArray out;
  QString error;
  if (!run({QStringLiteral("sweep"), file, QStringLiteral("--check")}, &out, &error, 60000))
    return error.isEmpty() ? QStringLiteral("the sweep file was refused") : error;
  if (summary) *summary = QString::fromUtf8(out).trimmed();
  return {};
}

ProcessCommand EngineCli::sweepCommand(const QString& db, const QString& file) const {
  return {exe_, {QStringLiteral("sweep"), file, QStringLiteral("--db"), db}};
}

bool EngineCli::spawnSweep(const QString& db, const QString& file, qint64* pid, QString* log,
                           QString* error) const {
  const QDir logs(QFileInfo(db).absoluteDir().filePath(QStringLiteral("logs")));
  const QString path = logs.filePath(QStringLiteral("sweep-%1-%2.log")
                                         .arg(QFileInfo(file).completeBaseName())
                                         .arg(QDateTime::currentMSecsSinceEpoch()));
  if (!createPrivateLog(path, error)) return false;
  const ProcessCommand cmd = sweepCommand(db, file);
  QProcess p;
  p.setProgram(cmd.program);
  p.setArguments(cmd.arguments);
  p.setStandardOutputFile(path, QIODevice::Append);
  p.setStandardErrorFile(path, QIODevice::Append);
  p.setStandardInputFile(QProcess::nullDevice());
  qint64 started = 0;
  if (!p.startDetached(&started)) {
    if (error) *error = QStringLiteral("cannot start %1 sweep: %2").arg(exe_, p.errorString());
    return false;
  }
  if (pid) *pid = started;
  if (log) *log = path;
  return true;
}

}  // namespace fp8rl::ui
