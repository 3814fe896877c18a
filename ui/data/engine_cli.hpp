// What the studio asks the fp8rl executable (the engine stays out of the GUI process): the
// presets, a preset's full configuration, validation of an edited configuration, and spawning
// a worker that outlives the studio (one process, or several data-parallel ranks under Open MPI's
// mpirun).
#pragma once

#include <QMap>
#include <QString>
#include <QStringList>
#include <QTemporaryFile>
#include <memory>

#include "core/json.hpp"

namespace fp8rl::ui {

// How many data-parallel ranks a run's worker starts as, and on which machines
// (docs/distributed.md). A launch choice, not part of the run's configuration.
struct RankLaunch {
  int count = 1;
  QString hostfile;  // Open MPI hostfile (`host slots=N` lines); empty: all on this machine
};

// A process to start: the program and its arguments.
struct ProcessCommand {
  QString program;
  QStringList arguments;
};

class EngineCli {
 public:
  explicit EngineCli(QString executable) : exe_(std::move(executable)) {}
  const QString& executable() const { return exe_; }
  // The fp8rl executable installed beside the running application (bin/fp8rl next to
  // bin/fp8rl-studio).
  static QString besideApplication();

  // Preset names (`fp8rl train --list-presets`); empty with *error set on failure.
  QStringList presets(QString* error = nullptr) const;
  // The allowed values of the string settings with a fixed set, by dotted key
  // (`fp8rl train --list-choices`); empty with *error set on failure.
  QMap<QString, QStringList> settingChoices(QString* error = nullptr) const;
  // A preset's full configuration (`--print-config`), or null with *error set.
  Json presetConfig(const QString& preset, QString* error = nullptr) const;
  // The configuration in a temporary JSON file (what --config reads), removed when the
  // returned object goes; nullptr with *error set when it cannot be written.
  static std::unique_ptr<QTemporaryFile> configFile(const Json& config, QString* error);
  // "" when the configuration is valid, else the engine's message (naming the setting).
  QString validate(const Json& config) const;

  // The niceness of the workers the studio starts (fp8rl worker --nice).
  static constexpr int kWorkerNice = 10;

  // The command spawnWorker starts: `EXE worker --db DB --control C --telemetry T --nice N`,
  // wrapped by fp8rl::ranks_command (contract/rank_launch.hpp: `mpirun -np N …`, which decides
  // when a launcher is needed). Every rank gets the same endpoints: rank 0 binds them, the others
  // bind nothing. Throws fp8rl::Error when ranks.count < 1.
  ProcessCommand workerCommand(const QString& db, const QString& control, const QString& telemetry,
                               const RankLaunch& ranks = {}) const;

  // `fp8rl sweep FILE --check`: "" when every point of the sweep file is valid (*summary: the
  // engine's line, "sweep 'x': 15 points: …"), else the engine's message naming the key.
  QString checkSweep(const QString& file, QString* summary = nullptr) const;
  // The command spawnSweep starts: `EXE sweep FILE --db DB`.
  ProcessCommand sweepCommand(const QString& db, const QString& file) const;
  // Starts the sweep's queue runner detached (it keeps going when the studio exits; its runs
  // are `fp8rl train` processes recorded in db), its output in a log beside the database.
  bool spawnSweep(const QString& db, const QString& file, qint64* pid, QString* log,
                  QString* error) const;

  struct Spawned {
    qint64 pid = 0;  // the started process: the worker, or mpirun for a launcher command (the
                     // run store records rank 0's worker pid either way)
    QString control, telemetry, log;
  };
  // Starts workerCommand() detached (it keeps running when the studio exits) on fresh IPC
  // endpoints in the user's private runtime folder, recording into db; its output goes to a
  // log file (0600) in a logs folder (0700) beside the database. Returns false with *error set when
  // it cannot start (a launcher command whose mpirun is missing says so: install openmpi-bin).
  bool spawnWorker(const QString& db, const RankLaunch& ranks, Spawned* out, QString* error) const;

 private:
  // Runs the executable with args; false (and *error: what failed, with stderr) unless it
  // exits 0 within timeout_ms.
  bool run(const QStringList& args, QByteArray* out, QString* error, int timeout_ms = 15000) const;
  QString exe_;
};

}  // namespace fp8rl::ui
