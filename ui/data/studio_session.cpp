#include "ui/data/studio_session.hpp"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QTimer>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "core/error.hpp"
#include "ipc/client.hpp"
#include "ipc/protocol.hpp"

namespace fp8rl::ui {

namespace {

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

StudioSession::StudioSession(QString cli, QObject* parent)
    : QObject(parent),
      cli_(std::move(cli)),
      drain_timer_(new QTimer(this)),
      refresh_timer_(new QTimer(this)) {
  drain_timer_->setObjectName(QStringLiteral("drain"));  // named in profiles
  refresh_timer_->setObjectName(QStringLiteral("refresh"));
  drain_timer_->setInterval(40);
  connect(drain_timer_, &QTimer::timeout, this, &StudioSession::drain);
  drain_timer_->start();
  refresh_timer_->setInterval(2000);
  connect(refresh_timer_, &QTimer::timeout, this, &StudioSession::refreshInBackground);
  refresh_timer_->start();
}

StudioSession::~StudioSession() {
  reader_.reset();  // joins the reader before anything it reports to goes away
}

QString StudioSession::openDatabase(const QString& path) {
  const QString abs = QFileInfo(path).absoluteFilePath();
  std::unique_ptr<RunStore> store;
  try {
    // A new, empty run store (its folder made 0700 and the file 0600, as every store).
    if (!QFileInfo::exists(abs)) RunStore create(abs.toStdString());
    // The studio reads through its own read-only connection: it never blocks a worker.
    store = std::make_unique<RunStore>(abs.toStdString(), /*read_only=*/true);
    (void)store->list_runs();  // fails now on an unreadable file rather than later
  } catch (const Error& e) {
    return QStringLiteral("cannot open run database %1: %2").arg(abs, q(e.message()));
  }
  reader_.reset();
  links_.clear();
  launching_.clear();
  retiring_.clear();
  data_.clear();
  runs_.clear();
  run_index_.clear();
  sweeps_.clear();
  sweep_points_.clear();
  groups_.reset();
  store_ = std::move(store);
  db_path_ = abs;
  last_problem_.clear();
  reader_ = std::make_unique<Reader>(abs.toStdString());
  ++generation_;
  refresh();
  return {};
}

const RunStore::RunRow* StudioSession::runRow(int64_t id) const {
  auto it = run_index_.find(id);
  return it == run_index_.end() ? nullptr : &runs_[it->second];
}

// A request to read the store: a run whose data the studio holds without a link, with the
// last step, status and precision summary it has of it.
struct PollRequest {
  int64_t id;
  int64_t after_step;
  std::string status, precision_summary;
};

// What one read of the store found (made off the GUI thread by the timer, on it by refresh()).
struct StudioSession::Snapshot {
  QString error;
  std::vector<RunStore::RunRow> runs;
  std::map<int64_t, RunData> polled;  // new data of the requested runs
  std::vector<RunStore::SweepRow> sweeps;
  std::map<int64_t, std::vector<RunStore::SweepPoint>> sweep_points;
};

namespace {

StudioSession::Snapshot readSnapshot(RunStore& store, const std::string& db_path,
                                     const std::vector<PollRequest>& polls, int64_t configs_known,
                                     GroupData* groups) {
  StudioSession::Snapshot snap;
  try {
    snap.runs = store.list_runs(configs_known);
    snap.sweeps = store.list_sweeps();
    for (const auto& s : snap.sweeps) snap.sweep_points[s.id] = store.sweep_points(s.id);
    if (groups) groups->update(store);
    // Workers of this host that are gone: mark their runs crashed (nothing recorded is lost).
    bool dead = false;
    for (const auto& r : snap.runs) dead = dead || run_process_gone(r);
    if (dead && mark_crashed_runs(db_path) > 0) snap.runs = store.list_runs(configs_known);
    for (const auto& p : polls)
      for (const auto& r : snap.runs)
        if (r.id == p.id && (run_status::is_live(r.status) || r.status != p.status ||
                             r.precision_summary != p.precision_summary ||
                             (r.last_step && *r.last_step > p.after_step)))
          snap.polled.emplace(p.id, loadRun(store, p.id, p.after_step));
  } catch (const Error& e) {
    snap.error = QStringLiteral("cannot read run database %1: %2")
                     .arg(QString::fromStdString(db_path), q(e.message()));
  }
  return snap;
}

}  // namespace

// Reads the store on a thread of its own (with its own read-only connection), so a slow or
// locked database never stalls the GUI; one read at a time, results handed to `done`.
class StudioSession::Reader {
 public:
  explicit Reader(std::string db) : db_(std::move(db)), thread_([this] { loop(); }) {}
  ~Reader() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Starts a read unless one is under way; done(snapshot) runs on the reader thread.
  bool post(std::vector<PollRequest> polls, int64_t configs_known,
            std::shared_ptr<GroupData> groups, std::function<void(Snapshot)> done) {
    std::lock_guard lock(mu_);
    if (busy_) return false;
    busy_ = true;
    polls_ = std::move(polls);
    configs_known_ = configs_known;
    groups_ = std::move(groups);
    done_ = std::move(done);
    cv_.notify_all();
    return true;
  }

 private:
  void loop() {
    std::unique_ptr<RunStore> store;
    for (;;) {
      std::vector<PollRequest> polls;
      int64_t configs_known = -1;
      std::shared_ptr<GroupData> groups;
      std::function<void(Snapshot)> done;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || done_; });
        if (stop_) return;
        polls = std::move(polls_);
        configs_known = configs_known_;
        groups = std::move(groups_);
        done = std::exchange(done_, nullptr);
      }
      Snapshot snap;
      try {
        if (!store) store = std::make_unique<RunStore>(db_, /*read_only=*/true);
        snap = readSnapshot(*store, db_, polls, configs_known, groups.get());
      } catch (const Error& e) {
        snap.error = QStringLiteral("cannot read run database %1: %2")
                         .arg(QString::fromStdString(db_), q(e.message()));
        store.reset();
      }
      done(std::move(snap));
      std::lock_guard lock(mu_);
      busy_ = false;
    }
  }

  std::string db_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false;
  std::vector<PollRequest> polls_;
  int64_t configs_known_ = -1;
  std::shared_ptr<GroupData> groups_;
  std::function<void(Snapshot)> done_;
  std::thread thread_;
};

int64_t StudioSession::configsKnown() const {
  // Ids grow: every run up to the last one held has its configuration.
  return runs_.empty() ? -1 : runs_.back().id;
}

std::vector<PollRequest> StudioSession::pollRequests() const {
  std::vector<PollRequest> out;
  for (const auto& [id, d] : data_)
    if (!links_.count(id))
      out.push_back({id, d->last_step, d->row.status, d->row.precision_summary});
  return out;
}

void StudioSession::refresh() {
  if (!store_) return;
  apply(
      readSnapshot(*store_, db_path_.toStdString(), pollRequests(), configsKnown(), groups_.get()));
}

void StudioSession::refreshInBackground() {
  if (!reader_) return;
  const int generation = generation_;
  reader_->post(pollRequests(), configsKnown(), groups_, [this, generation](Snapshot snap) {
    auto s = std::make_shared<Snapshot>(std::move(snap));
    QMetaObject::invokeMethod(
        this,
        [this, s, generation] {
          if (generation == generation_) apply(std::move(*s));
        },
        Qt::QueuedConnection);
  });
}

void StudioSession::apply(Snapshot snap) {
  if (!snap.error.isEmpty()) {
    if (snap.error != last_problem_) emit problem(snap.error);
    last_problem_ = snap.error;
    return;
  }
  last_problem_.clear();
  // Rows read without their configuration keep the one already held (never changed once
  // stored): moved over, so the previous list goes without freeing them.
  for (auto& r : snap.runs)
    if (r.config.is_null())
      if (const auto it = run_index_.find(r.id); it != run_index_.end())
        r.config = std::move(runs_[it->second].config);
  runs_ = std::move(snap.runs);
  sweeps_ = std::move(snap.sweeps);
  sweep_points_ = std::move(snap.sweep_points);
  run_index_.clear();
  for (size_t i = 0; i < runs_.size(); ++i) run_index_[runs_[i].id] = i;
  for (auto& r : runs_) {
    if (run_status::is_live(r.status) && !r.control_endpoint.empty() && !links_.count(r.id))
      attach(r);
    auto it = data_.find(r.id);
    if (!run_status::is_live(r.status) && links_.count(r.id)) {
      // Take what the link still holds, then let it go (its thread ends on its own: joined once
      // it has, by drain()); the store has the rest.
      drain();
      auto link = links_.find(r.id);
      link->second->stopAsync();
      retiring_.push_back(std::move(link->second));
      links_.erase(link);
      // What the link missed, if anything, the reader thread reads at its next poll (the run
      // has no link now): never the store on this thread, where many runs ending at once would
      // stall the window.
    }
    if (it == data_.end()) continue;
    RunData& d = *it->second;
    const bool row_changed = d.row.status != r.status ||
                             d.row.precision_summary != r.precision_summary ||
                             d.row.tags != r.tags || d.row.notes != r.notes;
    {
      // The row without copying its configuration, which never changes once stored (with a
      // hundred open runs, copying theirs every 2 s was most of this function).
      // (A moved-from Json is no value: exchanged for null.)
      Json config = std::exchange(r.config, Json()), held = std::exchange(d.row.config, Json());
      d.row = r;
      r.config = std::move(config);
      d.row.config = held.is_null() ? r.config : std::move(held);
    }
    const int64_t before = d.version;
    if (auto p = snap.polled.find(r.id); p != snap.polled.end()) mergeInto(d, std::move(p->second));
    if (row_changed && d.version == before) ++d.version;
    if (d.version != before) emit runUpdated(r.id);
  }
  emit runsChanged();
  if (groups_) {
    const auto g = groups_->snapshot();
    if (g->version != groups_version_) {
      groups_version_ = g->version;
      emit groupsUpdated();
    }
  }
}

const std::vector<RunStore::SweepPoint>& StudioSession::sweepPoints(int64_t sweep) const {
  static const std::vector<RunStore::SweepPoint> none;
  auto it = sweep_points_.find(sweep);
  return it == sweep_points_.end() ? none : it->second;
}

SweepProgress StudioSession::sweepProgress(int64_t sweep) const {
  for (const auto& s : sweeps_)
    if (s.id == sweep)
      return sweep_progress(s, sweepPoints(sweep), runs_,
                            QDateTime::currentMSecsSinceEpoch() / 1000.0);
  return {};
}

std::vector<RunGroup> StudioSession::sweepGroups(int64_t sweep) const {
  for (const auto& s : sweeps_)
    if (s.id == sweep) return sweep_groups(s, sweepPoints(sweep), runs_);
  return {};
}

void StudioSession::showGroups(int64_t sweep) {
  if (sweep < 0) {
    groups_.reset();
    return;
  }
  if (groups_ && groups_->sweep() == sweep) return;
  const double target = groups_ ? groups_->snapshot()->target : 0.5;
  groups_ = std::make_shared<GroupData>(sweep, target);
  groups_version_ = -1;
  refreshInBackground();
}

std::shared_ptr<const GroupSnapshot> StudioSession::groupSnapshot() const {
  return groups_ ? groups_->snapshot() : std::make_shared<const GroupSnapshot>();
}

void StudioSession::setGroupTarget(double target) {
  if (!groups_) return;
  groups_->setTarget(target);
  refreshInBackground();
}

QString StudioSession::startSweep(const QString& file) {
  if (!store_) return tr("open a run database first");
  QString error;
  if (!cli_.spawnSweep(db_path_, file, nullptr, nullptr, &error)) return error;
  return {};
}

const RunData* StudioSession::data(int64_t run) {
  auto it = data_.find(run);
  if (it != data_.end()) return it->second.get();
  if (!store_ || !runRow(run)) {
    last_error_ = QStringLiteral("no run %1 in %2").arg(run).arg(db_path_);
    return nullptr;
  }
  // The link keeps what arrives from now on, before the store is read: the worker records a
  // step before sending it, so whatever the link dropped until now is in what is read below
  // (and what both have, mergeInto takes once).
  if (auto l = links_.find(run); l != links_.end()) l->second->setKeep(true);
  try {
    auto d = std::make_unique<RunData>(loadRun(*store_, run));
    d->version = 1;
    // What the link receives from here on is merged on the next drain.
    return data_.emplace(run, std::move(d)).first->second.get();
  } catch (const Error& e) {
    last_error_ = QStringLiteral("cannot read run %1: %2").arg(run).arg(q(e.message()));
    return nullptr;
  }
}

void StudioSession::attach(const RunStore::RunRow& r) {
  auto link = std::make_unique<WorkerLink>(r.id, q(r.control_endpoint), q(r.telemetry_endpoint),
                                           q(r.server_key), r.started_at.value_or(r.created_at));
  WorkerLink* l = link.get();
  const int64_t id = r.id;
  connect(l, &WorkerLink::replied, this, [this, id](const QString& c, bool ok, const QString& m) {
    emit commandFinished(id, c, ok, m);
  });
  l->setKeep(data_.count(id) > 0);  // a run already open (its link came back)
  links_[id] = std::move(link);
}

void StudioSession::drain() {
  // Links of ended runs whose thread has ended go now (nothing to wait for).
  std::erase_if(retiring_, [](const std::unique_ptr<WorkerLink>& l) { return l->finished(); });
  // Launching links that learned their run id become ordinary links.
  for (size_t i = 0; i < launching_.size();) {
    const int64_t id = launching_[i]->run();
    if (id < 0) {
      ++i;
      continue;
    }
    WorkerLink* l = launching_[i].get();
    disconnect(l, nullptr, this, nullptr);
    connect(l, &WorkerLink::replied, this, [this, id](const QString& c, bool ok, const QString& m) {
      emit commandFinished(id, c, ok, m);
    });
    links_[id] = std::move(launching_[i]);
    launching_.erase(launching_.begin() + static_cast<std::ptrdiff_t>(i));
    // Identified, a launch's link keeps telemetry only for an open run, like any link (the
    // window opening it on runLaunched sets it again before reading the store).
    l->setKeep(data_.count(id) > 0);
    // A continued run: its worker has dropped the steps after the checkpoint from the store;
    // reread them in place (views hold the data's address).
    if (auto d = data_.find(id); stale_.erase(id) && d != data_.end() && store_) {
      try {
        const int64_t version = d->second->version;
        *d->second = loadRun(*store_, id);
        d->second->version = version + 1;
      } catch (const Error& e) {
        emit problem(tr("cannot reread run %1: %2").arg(id).arg(q(e.message())));
      }
    }
    refresh();
    emit runLaunched(id);
  }
  for (auto& [id, link] : links_) {
    RunData delta = link->takePending();
    if (delta.scalars.empty() && delta.histograms.empty() && delta.events.empty() &&
        delta.samples.empty() && delta.precision.empty() && delta.last_step == 0)
      continue;
    auto it = data_.find(id);
    if (it == data_.end()) continue;  // nobody looks at this run yet; its history is in the store
    const int64_t before = it->second->version;
    mergeInto(*it->second, std::move(delta));
    if (it->second->version != before) emit runUpdated(id);
  }
}

QString StudioSession::launch(const Json& config, const QString& name, const QString& preset,
                              const RankLaunch& ranks) {
  if (!store_) return tr("open a run database first");
  Json start;
  start["config"] = config;
  if (!name.isEmpty()) start["name"] = name.toStdString();
  // The configuration is complete; the preset only names where it came from.
  if (!preset.isEmpty()) start["preset"] = preset.toStdString();
  return startWorker(start, ranks);
}

QString StudioSession::continueRefusal(int64_t run) const {
  const RunStore::RunRow* row = runRow(run);
  if (!row) return tr("no run %1").arg(run);
  const std::string& s = row->status;
  if (s != run_status::kStopped && s != run_status::kCrashed && s != run_status::kFailed)
    return tr("run %1 is %2: only a stopped, crashed or failed run continues").arg(run).arg(q(s));
  if (row->checkpoint_dir.empty() || !row->checkpoint_step)
    return tr("run %1 has no checkpoint to continue from").arg(run);
  return {};
}

QString StudioSession::continueRun(int64_t run) {
  if (!store_) return tr("open a run database first");
  if (const QString why = continueRefusal(run); !why.isEmpty()) return why;
  Json start;
  start["resume"] = run;
  const QString error = startWorker(start, {});
  if (error.isEmpty()) stale_.insert(run);
  return error;
}

QString StudioSession::startWorker(const Json& start, const RankLaunch& ranks) {
  EngineCli::Spawned w;
  QString error;
  if (!cli_.spawnWorker(db_path_, ranks, &w, &error)) return error;
  // Spawned here on IPC endpoints: plain ZeroMQ, no server key.
  auto link = std::make_unique<WorkerLink>(-1, w.control, w.telemetry, QString(),
                                           QDateTime::currentMSecsSinceEpoch() / 1000.0, start);
  connect(link.get(), &WorkerLink::replied, this,
          [this](const QString& c, bool ok, const QString& m) {
            if (c == QLatin1String("start") && !ok)
              emit problem(tr("the worker refused the run: %1").arg(m));
            emit commandFinished(-1, c, ok, m);
          });
  launching_.push_back(std::move(link));
  return {};
}

void StudioSession::send(int64_t run, const QString& command, Json fields) {
  auto it = links_.find(run);
  if (it == links_.end()) {
    emit commandFinished(run, command, false,
                         tr("run %1 has no live worker the studio can reach").arg(run));
    return;
  }
  it->second->send(command, std::move(fields));
}

void StudioSession::pause(int64_t run) {
  send(run, QStringLiteral("pause"));
}
void StudioSession::resume(int64_t run) {
  send(run, QStringLiteral("resume"));
}
void StudioSession::stop(int64_t run) {
  send(run, QStringLiteral("stop"));
}
void StudioSession::checkpoint(int64_t run) {
  send(run, QStringLiteral("checkpoint"));
}

void StudioSession::applyLive(int64_t run, const LiveEdit& edit) {
  if (!edit.empty()) send(run, QStringLiteral("edit"), ipc::edit_request_fields(edit));
}

QString StudioSession::setTagsNotes(int64_t run, const QString& tags, const QString& notes) {
  try {
    RunStore rw(db_path_.toStdString());
    rw.set_tags_notes(run, tags.toStdString(), notes.toStdString());
  } catch (const Error& e) {
    return QStringLiteral("cannot save tags and notes of run %1: %2").arg(run).arg(q(e.message()));
  }
  refresh();
  return {};
}

QString StudioSession::exportCsv(int64_t run, const QString& path) {
  if (!store_) return tr("no run database is open");
  std::ofstream out(path.toStdString());
  if (!out) return tr("cannot write %1").arg(path);
  try {
    store_->export_csv(run, out);
  } catch (const Error& e) {
    return q(e.message());
  }
  return out.good() ? QString() : tr("cannot write %1").arg(path);
}

bool StudioSession::isLinked(int64_t run) const {
  return links_.count(run) > 0;
}

WorkerLink::Health StudioSession::health(int64_t run) const {
  auto it = links_.find(run);
  return it == links_.end() ? WorkerLink::Health{} : it->second->health();
}

}  // namespace fp8rl::ui
