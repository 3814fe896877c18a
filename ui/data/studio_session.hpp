// The studio's model of the world: the open run database (read through its own connection),
// the run list, the data of runs being viewed, and one WorkerLink per live worker. The GUI
// thread drains the links on a 40 ms timer and polls the store every 2 s (run list, crashed
// workers, runs that have no link such as `fp8rl train` runs); views are told what changed.
// Everything the widgets need from processes, sockets and SQL goes through here.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "contract/live_edit.hpp"
#include "core/json.hpp"
#include "store/run_store.hpp"
#include "groups/run_groups.hpp"
#include "groups/sweep_progress.hpp"
#include "ui/data/engine_cli.hpp"
#include "ui/data/group_data.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/worker_link.hpp"

class QTimer;

namespace fp8rl::ui {

struct PollRequest;

class StudioSession : public QObject {
  Q_OBJECT
 public:
  // cli: the fp8rl executable (presets, validation, workers).
  explicit StudioSession(QString cli, QObject* parent = nullptr);
  ~StudioSession() override;

  EngineCli& cli() { return cli_; }

  // Opens the run database at path (created when missing), replacing the current one.
  // Returns "" or a message naming the file and what is wrong (not a database, locked, newer
  // schema, …); on failure the previous database stays open.
  QString openDatabase(const QString& path);
  QString databasePath() const { return db_path_; }
  bool hasDatabase() const { return store_ != nullptr; }

  // The runs of the database as last read (by id).
  const std::vector<RunStore::RunRow>& runs() const { return runs_; }
  // Its sweeps (docs/sweeps.md) and their points, as last read.
  const std::vector<RunStore::SweepRow>& sweeps() const { return sweeps_; }
  const std::vector<RunStore::SweepPoint>& sweepPoints(int64_t sweep) const;
  // Where a sweep stands (done, running, queued, the time left) and its groups, from the rows
  // last read.
  SweepProgress sweepProgress(int64_t sweep) const;
  std::vector<RunGroup> sweepGroups(int64_t sweep) const;

  // The sweep whose groups are shown: its curves and run outcomes are read on the reader
  // thread (groupsUpdated() when they change); -1 for none.
  void showGroups(int64_t sweep);
  int64_t groupsShown() const { return groups_ ? groups_->sweep() : -1; }
  std::shared_ptr<const GroupSnapshot> groupSnapshot() const;
  // The validation accuracy the groups' time-to-target waits for.
  void setGroupTarget(double target);
  // Starts `fp8rl sweep FILE` on the open database, detached (it outlives the studio); returns
  // "" or why not. Its runs appear in the runs panel as it starts them.
  QString startSweep(const QString& file);
  const RunStore::RunRow* runRow(int64_t id) const;
  // Re-reads the run list now, on this thread: marks runs of dead local workers crashed,
  // attaches to live workers, polls runs without a link. Emits runsChanged.
  void refresh();
  // The same, read on the session's reader thread (what the 2 s timer does), so a slow or
  // locked database never stalls the GUI; results are applied on this thread when they come.
  void refreshInBackground();

  struct Snapshot;

  // The data of a run, loaded from the store on first use and kept current; nullptr when
  // there is no such run or it cannot be read (lastError() says why).
  const RunData* data(int64_t run);
  QString lastError() const { return last_error_; }

  // Starts a worker and a run with this configuration; returns "" or why it failed. The run
  // appears with runLaunched(id) once the worker has created it.
  // preset: the preset the configuration came from (recorded with the run; "" for none).
  // ranks: how many data-parallel ranks the worker starts as, and where (RankLaunch; a
  // launch choice, not configuration): rank 0 records the run and serves the studio.
  QString launch(const Json& config, const QString& name, const QString& preset = QString(),
                 const RankLaunch& ranks = {});
  // Why a recorded run cannot be continued ("" when it can): it must be stopped, crashed or
  // failed, with a checkpoint.
  QString continueRefusal(int64_t run) const;
  // Continues a stopped, crashed or failed run from its last checkpoint in a new worker, with
  // the configuration and live edits saved there; returns "" or why not. The steps after the
  // checkpoint are recorded again; the run's data here is reread once the worker has it.
  QString continueRun(int64_t run);

  // Control of a live run (errors and notes arrive as commandFinished).
  void pause(int64_t run);
  void resume(int64_t run);
  void stop(int64_t run);
  void checkpoint(int64_t run);
  // Sends a live edit (precision overrides and settings) as one "edit" request; the worker
  // checks it whole and applies it at the next step boundary. Its reply arrives as
  // commandFinished (command "edit": accepted, or why not).
  void applyLive(int64_t run, const LiveEdit& edit);
  // Writes the run's tags and notes (through a short-lived writing connection).
  QString setTagsNotes(int64_t run, const QString& tags, const QString& notes);
  // Writes the run's scalars as CSV.
  QString exportCsv(int64_t run, const QString& path);

  // Whether the studio has a link to the run's worker (so it can be steered).
  bool isLinked(int64_t run) const;
  WorkerLink::Health health(int64_t run) const;

  // Drains the links now (the timer does this every 40 ms).
  void drain();

 signals:
  void runsChanged();
  void runUpdated(qint64 run);
  void runLaunched(qint64 run);
  // The shown groups' curves or outcomes changed (groupSnapshot()).
  void groupsUpdated();
  void commandFinished(qint64 run, const QString& command, bool ok, const QString& message);
  // Something went wrong outside a command (database unreadable, worker unreachable).
  void problem(const QString& message);

 private:
  void attach(const RunStore::RunRow& row);
  // Spawns a worker and sends it `start`; its link waits in launching_ for the run id.
  QString startWorker(const Json& start, const RankLaunch& ranks);
  void send(int64_t run, const QString& command, Json fields = Json(Json::Object{}));
  class Reader;
  std::vector<PollRequest> pollRequests() const;
  // The largest run id whose configuration runs_ holds (the reader reads only newer ones).
  int64_t configsKnown() const;
  void apply(Snapshot snap);

  EngineCli cli_;
  QString db_path_;
  std::unique_ptr<RunStore> store_;
  std::vector<RunStore::RunRow> runs_;
  std::map<int64_t, size_t> run_index_;
  std::vector<RunStore::SweepRow> sweeps_;
  std::map<int64_t, std::vector<RunStore::SweepPoint>> sweep_points_;
  std::shared_ptr<GroupData> groups_;
  int64_t groups_version_ = -1;
  std::map<int64_t, std::unique_ptr<RunData>> data_;
  std::map<int64_t, std::unique_ptr<WorkerLink>> links_;  // by run id
  std::vector<std::unique_ptr<WorkerLink>> launching_;    // run id not known yet
  std::vector<std::unique_ptr<WorkerLink>> retiring_;     // ended runs' links, their threads ending
  std::set<int64_t> stale_;  // continued runs whose data is reread once their worker reports
  QTimer* drain_timer_;
  QTimer* refresh_timer_;
  QString last_error_;
  QString last_problem_;
  std::unique_ptr<Reader> reader_;
  int generation_ = 0;  // bumped per database opened: late reads of the previous one are dropped
};

}  // namespace fp8rl::ui
