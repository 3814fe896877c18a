#include "ipc/client.hpp"

#include <signal.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "ipc/curve.hpp"
#include "ipc/protocol.hpp"
#include "ipc/zmq_frames.hpp"

namespace fp8rl::ipc {

Client::Client(const std::string& control, const std::string& telemetry,
               const std::string& server_key, const std::string& keys) {
  std::optional<CurveKeyPair> curve;
  if (!server_key.empty()) curve = load_or_create_keys(keys.empty() ? keys_dir() : keys).client;
  ctx_ = zmq_ctx_new();
  const int linger = 0;
  if (!control.empty()) {
    dealer_ = zmq_socket(ctx_, ZMQ_DEALER);
    zmq_setsockopt(dealer_, ZMQ_LINGER, &linger, sizeof linger);
    if (curve) make_curve_client(dealer_, server_key, *curve);
    if (zmq_connect(dealer_, control.c_str()) != 0)
      throw Error("cannot connect to " + control + ": " + zmq_strerror(zmq_errno()));
  }
  if (!telemetry.empty()) {
    sub_ = zmq_socket(ctx_, ZMQ_SUB);
    zmq_setsockopt(sub_, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sub_, ZMQ_SUBSCRIBE, "", 0);
    const int64_t max_size = static_cast<int64_t>(kMaxTelemetryBytes);
    zmq_setsockopt(sub_, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size);
    if (curve) make_curve_client(sub_, server_key, *curve);
    if (zmq_connect(sub_, telemetry.c_str()) != 0)
      throw Error("cannot connect to " + telemetry + ": " + zmq_strerror(zmq_errno()));
  }
}

Client::~Client() {
  if (dealer_) zmq_close(dealer_);
  if (sub_) zmq_close(sub_);
  if (ctx_) zmq_ctx_term(ctx_);
}

Json Client::request(const std::string& command, Json fields, int timeout_ms) {
  check(dealer_ != nullptr, "client has no control connection");
  if (!fields.is_object()) fields = Json(Json::Object{});
  const std::string id = "c" + std::to_string(next_id_++);
  fields["id"] = id;
  fields["command"] = command;
  fields["protocol"] = kProtocolVersion;
  const std::string text = fields.dump();
  zmq_send(dealer_, text.data(), text.size(), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0)
      throw Error("worker did not answer \"" + command + "\" within " + std::to_string(timeout_ms) +
                  " ms");
    zmq_pollitem_t items[] = {{dealer_, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, 1, static_cast<long>(left));
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    auto frames = recv_frames(dealer_);
    if (frames.empty()) continue;
    Json reply;
    try {
      reply = Json::parse(frames.back());
    } catch (const Error&) {
      ++dropped_;
      continue;
    }
    if (reply.contains("id") && reply.at("id").is_string() && reply.at("id").as_string() == id)
      return reply;
  }
}

std::optional<Client::Message> Client::receive(int timeout_ms) {
  check(sub_ != nullptr, "client has no telemetry connection");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    auto frames = recv_frames(sub_);
    if (!frames.empty()) {
      if (frames.size() != 2) {
        ++dropped_;
        continue;
      }
      try {
        return Message{frames[0], Json::parse(frames[1])};
      } catch (const Error&) {
        ++dropped_;
        continue;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return std::nullopt;
    zmq_pollitem_t items[] = {{sub_, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, 1, static_cast<long>(left));
  }
}

}  // namespace fp8rl::ipc
