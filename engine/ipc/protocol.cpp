#include "ipc/protocol.hpp"

#include <array>

#include "core/error.hpp"

namespace fp8rl::ipc {
namespace {
constexpr std::array<std::pair<const char*, Command>, 10> kCommands = {{
    {"hello", Command::hello},
    {"start", Command::start},
    {"pause", Command::pause},
    {"resume", Command::resume},
    {"stop", Command::stop},
    {"checkpoint", Command::checkpoint},
    {"status", Command::status},
    {"edit", Command::edit},
    // The older one-part forms of an edit (protocol 2).
    {"set_precision", Command::edit},
    {"set", Command::edit},
}};

// The live edit of an "edit", "set_precision" or "set" request; throws naming the bad field.
LiveEdit parse_edit(const std::string& name, const Json& j) {
  Json e(Json::Object{});
  if (name == "set_precision") {
    check(j.contains("overrides") && j.at("overrides").is_array(),
          "set_precision needs \"overrides\": a list like [\"0.gate=bf16\"]");
    e["precision"] = j.at("overrides");
  } else if (name == "set") {
    check(j.contains("key") && j.at("key").is_string() && j.contains("value") &&
              (j.at("value").is_number() || j.at("value").is_bool() || j.at("value").is_string()),
          "set needs \"key\" (string) and \"value\" (a number, true/false or a name)");
    e["settings"] = Json(Json::Object{{j.at("key").as_string(), j.at("value")}});
  } else {
    for (const char* part : {"precision", "settings"})
      if (j.contains(part)) e[part] = j.at(part);
  }
  return LiveEdit::from_json(e);
}
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
  for (const auto& [n, k] : kCommands) {
    if (name != n) continue;
    Request r{*id, k, j, {}};
    if (k == Command::edit) {
      try {
        r.edit = parse_edit(name, j);
      } catch (const Error& e) {
        *error = e.message();
        return std::nullopt;
      }
    }
    return r;
  }
  std::string allowed;
  for (const auto& [n, k] : kCommands) allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  *error = "unknown command \"" + name + "\" (allowed: " + allowed + ")";
  return std::nullopt;
}

Json edit_request_fields(const LiveEdit& edit) {
  return edit.to_json();
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
