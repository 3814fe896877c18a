// The worker protocol (docs/protocol.md): JSON requests on a ZeroMQ ROUTER control socket, JSON
// replies; telemetry as two-frame [topic][JSON] messages on a PUB socket. This file holds the
// message rules shared by the worker and its clients — no sockets, so it is tested on its own.
#pragma once

#include <optional>
#include <string>

#include "contract/live_edit.hpp"
#include "core/json.hpp"

namespace fp8rl::ipc {

// 2: event payloads carry their data as "data" (precision events: the map; set events:
// {"key", "value"}). 3: one "edit" request carries a live edit (precision and settings
// together); "set_precision" and "set" remain as its one-part forms.
inline constexpr int kProtocolVersion = 3;
inline constexpr size_t kMaxMessageBytes = 1 << 20;  // larger requests are refused
// Telemetry messages larger than this are dropped by a client's transport (a step with its
// samples and audit is tens of kilobytes): a hostile publisher cannot make it hold gigabytes.
inline constexpr size_t kMaxTelemetryBytes = 16 << 20;

// Telemetry topics (the first frame of every PUB message).
inline constexpr const char* kTopicStep = "step";            // a StepRecord (scalars, samples)
inline constexpr const char* kTopicHistogram = "histogram";  // one histogram of a step
inline constexpr const char* kTopicEvent = "event";          // start, pause, precision, …
inline constexpr const char* kTopicHeartbeat = "heartbeat";  // ≥ 1 Hz, always

// The commands a worker accepts. "edit" also arrives as "set_precision" {"overrides": [...]}
// or "set" {"key", "value"}, its older one-part forms.
enum class Command { hello, start, pause, resume, stop, checkpoint, status, edit };

struct Request {
  std::string id;  // echoed in the reply
  Command command;
  Json args;      // the request object (command-specific fields)
  LiveEdit edit;  // Command::edit: the edit, parsed and checked (grammar, ranges)
};

// Parses and validates a request frame. Returns the request, or an error message naming what
// is wrong (bad JSON, missing "id"/"command", unknown command, wrong field type, too large);
// `id` receives the request id whenever one could be read, so the error can be correlated.
std::optional<Request> parse_request(const std::string& frame, std::string* error, std::string* id);

// {"id", "ok": true, ...fields} and {"id", "ok": false, "error": message}.
std::string ok_reply(const std::string& id, Json fields = Json(Json::Object{}));
std::string error_reply(const std::string& id, const std::string& message);

const char* command_name(Command c);

// The fields of an "edit" request carrying `edit` (LiveEdit::to_json: "precision", "settings").
Json edit_request_fields(const LiveEdit& edit);

}  // namespace fp8rl::ipc
