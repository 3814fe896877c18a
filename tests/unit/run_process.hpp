// Running a program the way a user does, for the tests that drive fp8rl: its exit code and what
// it printed (stdout then stderr).
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>
#include <functional>

struct ProcessResult {
  int code = -1;  // -1: it crashed or did not finish in time
  QString out;
};

// Runs program with args in env; child_setup (optional) runs in the child before exec (resource
// limits, signals).
inline ProcessResult run_process(
    const QString& program, const QStringList& args,
    const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment(),
    const std::function<void()>& child_setup = {}, int timeout_ms = 300000) {
  QProcess p;
  p.setProcessEnvironment(env);
  if (child_setup) p.setChildProcessModifier(child_setup);
  p.start(program, args);
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished(1000);
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError())};
}
