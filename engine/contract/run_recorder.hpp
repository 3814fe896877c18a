// Where a run records itself: the writes a run session makes, as an interface, so that the
// session (engine/session) does not depend on SQLite. The run store (engine/store) implements
// it; `fp8rl train --no-db` runs without one.
#pragma once

#include <cstdint>
#include <string>

#include "contract/metrics.hpp"  // run_status
#include "contract/step_record.hpp"
#include "core/json.hpp"

namespace fp8rl {

class RunRecorder {
 public:
  virtual ~RunRecorder() = default;
  // Registers a new run (status running); returns its id.
  virtual int64_t create_run(const std::string& name, const std::string& preset, const Json& config,
                             const std::string& precision_summary) = 0;
  virtual void set_status(int64_t run, const std::string& status) = 0;
  // A recorded run continues in this process (a resume): its host and process become this
  // one's and its status running.
  virtual void reopen_run(int64_t run) = 0;
  virtual void record_step(int64_t run, const StepRecord& r) = 0;
  virtual void record_event(int64_t run, int64_t step, const EventRecord& e) = 0;
  // The precision map (PrecisionMap::to_json) in effect from step on.
  virtual void record_precision(int64_t run, int64_t step, const Json& map) = 0;
  virtual void set_precision_summary(int64_t run, const std::string& summary) = 0;
  virtual void set_endpoints(int64_t run, const std::string& control, const std::string& telemetry,
                             const std::string& server_key) = 0;
  virtual void set_checkpoint(int64_t run, const std::string& dir, int64_t step) = 0;
  // Deletes what the run recorded after step (a resumed run records those steps again).
  virtual void truncate_after(int64_t run, int64_t step) = 0;
  virtual void heartbeat(int64_t run) = 0;
};

}  // namespace fp8rl
