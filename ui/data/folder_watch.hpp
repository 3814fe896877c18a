// Log folders the studio follows (File › Watch folder…): each one a child process
// `fp8rl runs import DIR --follow --db DB` (the importer is engine work: the studio never links
// it; docs/tensorboard.md). Its runs appear in the run list as the process records them, live
// and read-only while followed; stopping a watch (or quitting the studio) ends the process,
// which marks them finished.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <map>

class QProcess;

namespace fp8rl::ui {

class FolderWatches : public QObject {
  Q_OBJECT
 public:
  // executable: the fp8rl command.
  explicit FolderWatches(QString executable, QObject* parent = nullptr);
  // Stops every watch, waiting a few seconds for each process to mark its runs finished.
  ~FolderWatches() override;

  // The arguments of the follow command for folder dir and database db.
  static QStringList arguments(const QString& db, const QString& dir);
  // Starts following dir (absolute or relative) into db; "" or why not (already watched, or
  // the process cannot start).
  QString watch(const QString& db, const QString& dir);
  // Stops following dir (its runs become finished once the process has marked them).
  void stop(const QString& dir);
  void stopAll();
  // The folders followed now, absolute.
  QStringList folders() const;

 signals:
  // A line the importer printed: a run imported, or a warning (a damaged file, …).
  void message(const QString& dir, const QString& line);
  // The process following dir ended; why: "" when stopped on request, else what went wrong.
  void ended(const QString& dir, const QString& why);

 private:
  QString exe_;
  std::map<QString, QProcess*> procs_;  // by folder
};

}  // namespace fp8rl::ui
