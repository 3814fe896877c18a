// The studio's link to one live worker: a receive thread that owns an ipc::Client (control
// DEALER + telemetry SUB), parses telemetry into a RunData delta under a mutex and signals
// once per batch; the GUI thread takes the delta on its ~40 ms timer. Commands are queued to
// the same thread (ZeroMQ sockets belong to one thread) and their replies come back as signals.
// A link made for a launch first says hello, then sends `start`, then learns its run id from
// the telemetry.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "core/json.hpp"
#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

class WorkerLink : public QObject {
  Q_OBJECT
 public:
  // Follows the run `run` served at these endpoints. server_key: the worker's public CURVE key
  // when it serves beyond loopback ("" otherwise; see ipc::Client). run_started_at: unix
  // seconds (event times are made relative to it); start: when not null, the `start` request
  // (fields) this link sends after the worker answers hello (run is then -1 until the worker
  // reports it).
  WorkerLink(int64_t run, QString control, QString telemetry, QString server_key,
             double run_started_at, Json start = Json(), QObject* parent = nullptr);
  ~WorkerLink() override;  // stops and joins the thread

  // Asks the thread to end without waiting for it; finished() says when it has (then the
  // destructor does not wait). A session lets links of ended runs go this way, so that many runs
  // ending together never stall the GUI thread.
  void stopAsync() { stop_ = true; }
  bool finished() const { return finished_.load(); }

  int64_t run() const { return run_.load(); }
  QString control() const { return control_; }

  // Everything received since the last call (an empty RunData when nothing came).
  RunData takePending();
  // Whether someone reads this run's telemetry (the session holds its data). While not, the
  // link's thread parses and drops what arrives — the run's history is in the store, which the
  // worker writes before it sends — so that a hundred live runs nobody has open cost the GUI
  // thread nothing. Set before reading the store when a run is opened. Default: false for a
  // followed run, true for a launch (its window opens on it).
  void setKeep(bool keep) { keep_ = keep; }
  bool keeps() const { return keep_.load(); }
  // Queues a request; its reply arrives as replied().
  void send(const QString& command, Json fields = Json(Json::Object{}));

  struct Health {
    double heartbeat_age = -1;  // seconds since the last heartbeat; < 0: none heard yet
    QString state;              // the worker's state from its heartbeat / status
    QString backend, device;    // from hello
    QString error;              // why the worker is unreachable or refused, "" when fine
    int64_t dropped = 0;        // malformed telemetry messages dropped
    int64_t reconnects = 0;     // telemetry connections opened afresh after a silence
  };
  // The niceness of a link's thread (Linux; the GUI thread stays at the process's).
  static constexpr int kThreadNice = 5;
  // Seconds without any telemetry after which the link reconnects.
  static constexpr double kReconnectSeconds = 5.0;
  Health health() const;

 signals:
  // New data is waiting in takePending() (emitted once until taken).
  void dataReady();
  void replied(const QString& command, bool ok, const QString& message);
  // A launched worker reported its run id.
  void runIdentified(qint64 run);

 private:
  void loop();
  void handle(const std::string& topic, const Json& payload);

  std::atomic<int64_t> run_;
  QString control_, telemetry_, server_key_;
  double started_at_;
  Json start_;
  std::atomic<bool> keep_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  mutable std::mutex mu_;
  RunData pending_;
  bool signalled_ = false;
  std::deque<std::pair<QString, Json>> commands_;
  Health health_;
  double last_heartbeat_ = 0;  // steady seconds
  int64_t bad_payloads_ = 0;   // telemetry that parsed as JSON but broke the protocol
  std::thread thread_;
};

}  // namespace fp8rl::ui
