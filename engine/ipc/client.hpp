// A client of fp8rl workers (Qt-free): requests on a DEALER socket, telemetry on a SUB socket.
// Used by `fp8rl runs attach` and by the studio's receive threads.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/json.hpp"

namespace fp8rl::ipc {

class Client {
 public:
  // Connects to a worker's endpoints (either may be empty to skip that socket). server_key: the
  // worker's public CURVE key when it serves beyond loopback (its run row's server_key); the
  // client then authenticates with this install's client key (from keys_dir, default
  // ipc::keys_dir()), and a worker whose install has not authorized it never answers.
  Client(const std::string& control, const std::string& telemetry,
         const std::string& server_key = "", const std::string& keys_dir = "");
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends {"id": <fresh>, "command": command, "protocol": 1, ...fields} and waits for the reply
  // with that id; throws Error on timeout ("worker did not answer within …").
  Json request(const std::string& command, Json fields = Json(Json::Object{}),
               int timeout_ms = 5000);

  struct Message {
    std::string topic;
    Json payload;
  };
  // The next telemetry message, or nullopt after timeout_ms. Malformed messages are skipped
  // and counted (dropped()).
  std::optional<Message> receive(int timeout_ms);
  int64_t dropped() const { return dropped_; }

 private:
  void* ctx_ = nullptr;
  void* dealer_ = nullptr;
  void* sub_ = nullptr;
  int64_t next_id_ = 1;
  int64_t dropped_ = 0;
};

}  // namespace fp8rl::ipc
