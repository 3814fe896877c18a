#include "ipc/telemetry_publisher.hpp"

#include <zmq.h>

#include "ipc/protocol.hpp"

namespace fp8rl::ipc {

std::vector<TelemetryMessage> encode_step_telemetry(const StepRecord& r, int64_t run_id,
                                                    const std::string& precision) {
  std::vector<TelemetryMessage> out;
  out.reserve(1 + r.histograms.size());
  Json sj = r.to_json();
  sj["run_id"] = run_id;
  sj["precision"] = precision;
  out.push_back({kTopicStep, sj.dump()});
  for (const auto& h : r.histograms)
    out.push_back({kTopicHistogram, histogram_to_json(h, r.step).dump()});
  return out;
}

size_t send_telemetry(void* pub, const std::vector<TelemetryMessage>& messages) {
  size_t bytes = 0;
  for (const auto& m : messages) {
    // As send_frames(), without copying the payload into a frame list first.
    zmq_send(pub, m.topic.data(), m.topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(pub, m.payload.data(), m.payload.size(), ZMQ_DONTWAIT);
    bytes += m.payload.size();
  }
  return bytes;
}

}  // namespace fp8rl::ipc
