// A step's telemetry as a worker publishes it (docs/protocol.md): the step record on topic
// "step" and one message per histogram on topic "histogram", each a [topic][JSON] pair on the
// PUB socket. Encoding and sending are separate because a worker encodes on its training
// thread and sends on its serving thread (which owns the socket). Shared by the worker and
// `fp8rl bench telemetry`, which measures what this costs per step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contract/metrics.hpp"
#include "contract/step_record.hpp"
#include "core/json.hpp"

namespace fp8rl::ipc {

struct TelemetryMessage {
  std::string topic;    // kTopicStep, kTopicHistogram, kTopicEvent, ...
  std::string payload;  // UTF-8 JSON
};

// Encodes a step's messages, in publishing order: the record (StepRecord::to_json plus
// "run_id" and "precision", the precision summary in force) on topic "step", then each of
// r.histograms on topic "histogram".
std::vector<TelemetryMessage> encode_step_telemetry(const StepRecord& r, int64_t run_id,
                                                    const std::string& precision);

// Sends each message as two frames on a PUB socket without blocking; ZeroMQ drops what a slow
// or absent subscriber cannot take. Returns the payload bytes handed to ZeroMQ.
size_t send_telemetry(void* pub, const std::vector<TelemetryMessage>& messages);

}  // namespace fp8rl::ipc
