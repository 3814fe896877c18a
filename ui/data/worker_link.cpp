#include "ui/data/worker_link.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>

#include "core/error.hpp"
#include "ipc/client.hpp"
#include "ipc/protocol.hpp"

namespace fp8rl::ui {

namespace {

double steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

WorkerLink::WorkerLink(int64_t run, QString control, QString telemetry, QString server_key,
                       double run_started_at, Json start, QObject* parent)
    : QObject(parent),
      run_(run),
      control_(std::move(control)),
      telemetry_(std::move(telemetry)),
      server_key_(std::move(server_key)),
      started_at_(run_started_at),
      start_(std::move(start)),
      keep_(!start_.is_null()) {
  pending_.id = run;
  thread_ = std::thread([this] {
    // Below the GUI thread: with a hundred live runs their parsing must never delay a redraw.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kThreadNice);
    loop();
    finished_ = true;
  });
}

WorkerLink::~WorkerLink() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

RunData WorkerLink::takePending() {
  std::lock_guard lock(mu_);
  RunData out = std::move(pending_);
  pending_ = RunData();
  pending_.id = run_.load();
  signalled_ = false;
  return out;
}

void WorkerLink::send(const QString& command, Json fields) {
  std::lock_guard lock(mu_);
  commands_.emplace_back(command, std::move(fields));
}

WorkerLink::Health WorkerLink::health() const {
  std::lock_guard lock(mu_);
  Health h = health_;
  h.heartbeat_age = last_heartbeat_ > 0 ? steadySeconds() - last_heartbeat_ : -1;
  return h;
}

void WorkerLink::handle(const std::string& topic, const Json& payload) {
  if (topic == ipc::kTopicHeartbeat) {
    std::lock_guard lock(mu_);
    last_heartbeat_ = steadySeconds();
    if (payload.is_object() && payload.contains("state") && payload.at("state").is_string())
      health_.state = QString::fromStdString(payload.at("state").as_string());
  }
  // A launching link learns its run id from the first message that carries one.
  if (run_.load() < 0 && payload.is_object() && payload.contains("run_id") &&
      payload.at("run_id").is_number()) {
    const int64_t id = payload.at("run_id").as_int("run_id");
    if (id >= 0) {
      run_ = id;
      {
        std::lock_guard lock(mu_);
        pending_.id = id;
      }
      emit runIdentified(id);
    }
  }
  if (topic == ipc::kTopicHeartbeat) return;
  RunData delta;
  if (topic == ipc::kTopicStep)
    addStepPayload(delta, payload);
  else if (topic == ipc::kTopicHistogram)
    addHistogramPayload(delta, payload);
  else if (topic == ipc::kTopicEvent)
    addEventPayload(delta, payload, started_at_);
  else
    return;
  // Parsed either way (a malformed message counts in health), kept only for a reader.
  if (!keep_.load()) return;
  bool notify = false;
  {
    std::lock_guard lock(mu_);
    mergeInto(pending_, std::move(delta));
    notify = !std::exchange(signalled_, true);
  }
  if (notify) emit dataReady();
}

void WorkerLink::loop() {
  std::unique_ptr<ipc::Client> client;
  auto connect = [&] {
    try {
      client = std::make_unique<ipc::Client>(control_.toStdString(), telemetry_.toStdString(),
                                             server_key_.toStdString());
      return true;
    } catch (const Error& e) {
      std::lock_guard lock(mu_);
      health_.error = QString::fromStdString(e.message());
      return false;
    }
  };
  if (!connect()) return;
  double last_message = steadySeconds();
  int64_t dropped_earlier = 0;  // by clients replaced on reconnecting
  // hello: the worker's backend and device, and a protocol check. A freshly spawned worker
  // may take a moment to bind, so keep asking for a while.
  const double t0 = steadySeconds();
  bool greeted = false;
  while (!stop_ && !greeted) {
    try {
      const Json r = client->request("hello", Json(Json::Object{}), 1000);
      std::lock_guard lock(mu_);
      if (r.contains("ok") && r.at("ok").is_bool() && r.at("ok").as_bool()) {
        health_.backend = QString::fromStdString(r.at("backend").as_string("backend"));
        health_.device = QString::fromStdString(r.at("device").as_string("device"));
        health_.error.clear();
      } else {
        health_.error =
            QStringLiteral("worker refused hello: %1")
                .arg(QString::fromStdString(r.contains("error") ? r.at("error").dump() : r.dump()));
      }
      greeted = true;
    } catch (const Error& e) {
      std::lock_guard lock(mu_);
      health_.error = QString::fromStdString(e.message());
      if (steadySeconds() - t0 > 15) break;  // keep listening to telemetry anyway
    }
  }
  if (!start_.is_null() && !stop_) {
    std::lock_guard lock(mu_);
    commands_.emplace_front(QStringLiteral("start"), start_);
  }
  while (!stop_) {
    std::pair<QString, Json> cmd;
    bool have = false;
    {
      std::lock_guard lock(mu_);
      if (!commands_.empty()) {
        cmd = std::move(commands_.front());
        commands_.pop_front();
        have = true;
      }
    }
    if (have) {
      bool ok = false;
      QString message;
      try {
        const Json r = client->request(cmd.first.toStdString(), cmd.second, 5000);
        ok = r.contains("ok") && r.at("ok").is_bool() && r.at("ok").as_bool();
        if (!ok && r.contains("error") && r.at("error").is_string())
          message = QString::fromStdString(r.at("error").as_string());
        else if (r.contains("note") && r.at("note").is_string())
          message = QString::fromStdString(r.at("note").as_string());
      } catch (const Error& e) {
        message = QString::fromStdString(e.message());
      }
      emit replied(cmd.first, ok, message);
      continue;
    }
    try {
      auto m = client->receive(50);
      if (m) {
        last_message = steadySeconds();
        handle(m->topic, m->payload);
      } else if (steadySeconds() - last_message > kReconnectSeconds) {
        // A worker heartbeats twice a second: silence this long means the telemetry connection
        // may be gone (ZeroMQ closes one that brings a message beyond kMaxTelemetryBytes and
        // does not reopen it). Connect afresh; the steps missed meanwhile are in the store.
        dropped_earlier += client->dropped();
        if (!connect()) return;
        last_message = steadySeconds();
        std::lock_guard lock(mu_);
        ++health_.reconnects;
      }
    } catch (const Error& e) {
      // A payload that parsed as JSON but does not follow the protocol: count and go on.
      std::lock_guard lock(mu_);
      ++bad_payloads_;
    }
    std::lock_guard lock(mu_);
    health_.dropped = bad_payloads_ + dropped_earlier + client->dropped();
  }
}

}  // namespace fp8rl::ui
