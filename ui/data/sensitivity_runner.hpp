// Runs `fp8rl sensitivity --json` for a run as a child process (the engine stays out of the
// studio): the run's configuration goes to a temporary file (--config), its checkpoint folder,
// when it has one, to --checkpoint. Progress lines on stderr become progress(); the JSON on
// stdout becomes finished(report); a failure becomes failed(message with the end of stderr).
#pragma once

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>

#include "store/run_store.hpp"
#include "ui/data/sensitivity_report.hpp"

class QProcess;
class QTemporaryFile;

Q_DECLARE_METATYPE(fp8rl::ui::SensitivityReport)

namespace fp8rl::ui {

class SensitivityRunner : public QObject {
  Q_OBJECT
 public:
  // executable: the fp8rl command (EngineCli::besideApplication() in the studio).
  explicit SensitivityRunner(QString executable, QObject* parent = nullptr);
  ~SensitivityRunner() override;
  void setExecutable(const QString& executable) { exe_ = executable; }

  // The command's arguments for a run whose configuration is at config_path.
  static QStringList arguments(const QString& config_path, const RunStore::RunRow& run);

  // Starts a measurement of the run; false with *error set when it cannot (one at a time).
  bool start(const RunStore::RunRow& run, QString* error);
  // Ends the measurement under way (failed() says it was cancelled).
  void cancel();
  bool running() const;
  // The run being (or last) measured.
  int64_t run() const { return run_; }

 signals:
  void progress(qint64 done, qint64 planned, const QString& what);
  void finished(qint64 run, const fp8rl::ui::SensitivityReport& report);
  void failed(qint64 run, const QString& message);

 private:
  void readProgress();
  void processFinished(int code, bool crashed);
  QString stderrTail() const;

  QString exe_;
  int64_t run_ = -1;
  QProcess* process_ = nullptr;
  std::unique_ptr<QTemporaryFile> config_;
  QByteArray partial_;  // stderr not yet split into lines
  QStringList tail_;    // the last lines of stderr that were not progress lines
  bool cancelled_ = false;
};

}  // namespace fp8rl::ui
