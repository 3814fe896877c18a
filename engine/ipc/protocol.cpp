#include "ipc/protocol.hpp"

#include <array>

#include "core/error.hpp"

namespace fp8rl::ipc {
namespace {
constexpr std::array<std::pair<const char*, Command>, 9> kCommands = {{
    {"hello", Command::hello},
    {"start", Command::start},
    {"pause", Command::pause},
    {"resume", Command::resume},
    {"stop", Command::stop},
    {"checkpoint", Command::checkpoint},
    {"status", Command::status},
    {"set_precision", Command::set_precision},
    {"set", Command::set},
}};
}  // namespace

const char* command_name(Command c) {
  for (const auto& [n, k] : kCommands)
    if (k == c) return n;
  return "?";
}

std::optional<Request> parse_request(const std::string& frame, std::string* error,
                                     std::string* id) {
  id->clear();
  if (frame.size() > kMaxMessageBytes) {
    *error = "message of " + std::to_string(frame.size()) + " bytes exceeds the limit of " +
             std::to_string(kMaxMessageBytes);
    return std::nullopt;
  }
  Json j;
  try {
    j = Json::parse(frame);
  } catch (const Error& e) {
    *error = "malformed request: " + e.message();
    return std::nullopt;
  }
  if (!j.is_object()) {
    *error = "a request must be a JSON object";
    return std::nullopt;
  }
  if (j.contains("id")) {
    const Json& v = j.at("id");
    if (v.is_string())
      *id = v.as_string();
    else if (v.is_number())
      *id = v.dump();
  }
  if (!j.contains("id") || !(j.at("id").is_string() || j.at("id").is_number())) {
    *error = "request needs an \"id\" (string or number)";
    return std::nullopt;
  }
  if (!j.contains("command") || !j.at("command").is_string()) {
    *error = "request needs a \"command\" string";
    return std::nullopt;
  }
  const std::string name = j.at("command").as_string();
  for (const auto& [n, k] : kCommands)
    if (name == n) return Request{*id, k, j};
  std::string allowed;
  for (const auto& [n, k] : kCommands) allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  *error = "unknown command \"" + name + "\" (allowed: " + allowed + ")";
  return std::nullopt;
}

std::string ok_reply(const std::string& id, Json fields) {
  if (!fields.is_object()) fields = Json(Json::Object{});
  fields["id"] = id;
  fields["ok"] = true;
  return fields.dump();
}

std::string error_reply(const std::string& id, const std::string& message) {
  Json j;
  j["id"] = id;
  j["ok"] = false;
  j["error"] = message;
  return j.dump();
}

}  // namespace fp8rl::ipc
