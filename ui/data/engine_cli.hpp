// What the studio asks the fp8rl executable (the engine stays out of the GUI process): the
// presets, a preset's full configuration, validation of an edited configuration, and spawning
// a worker that outlives the studio.
#pragma once

#include <QMap>
#include <QString>
#include <QStringList>
#include <QTemporaryFile>
#include <memory>

#include "core/json.hpp"

namespace fp8rl::ui {

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

  struct Spawned {
    qint64 pid = 0;
    QString control, telemetry, log;
  };
  // Starts `fp8rl worker` detached (it keeps running when the studio exits) on fresh
  // abstract IPC endpoints, recording into db; its output goes to a log file beside the
  // database. Returns false with *error set when it cannot start.
  bool spawnWorker(const QString& db, Spawned* out, QString* error) const;

 private:
  // Runs the executable with args; false (and *error: what failed, with stderr) unless it
  // exits 0 within timeout_ms.
  bool run(const QStringList& args, QByteArray* out, QString* error, int timeout_ms = 15000) const;
  QString exe_;
};

}  // namespace fp8rl::ui
