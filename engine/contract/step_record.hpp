// What a run reports and how it reads as JSON: per-step scalars (names in metrics.hpp),
// histograms, sample responses and events. The run loop produces StepRecords; sinks (the run
// store, the terminal, a worker's telemetry) consume them; the studio reads them back. The JSON
// forms here are the `fp8rl train --json` lines and the telemetry payloads of docs/protocol.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "contract/histogram.hpp"
#include "core/json.hpp"

namespace fp8rl {

struct HistogramRecord {
  std::string name;  // "importance_weight", "fp8_scale_log2/L0/weight", ... (metrics.hpp)
  Histogram hist;
};

struct SampleRecord {
  std::string prompt, response, answer;
  double reward = 0;
  // Per response token (RL samples; empty for validation samples): its text, and the
  // trainer's minus the generator's log-prob, p − g (0 when the two agree bit for bit).
  std::vector<std::string> tokens;
  std::vector<double> logprob_diff;
};

// One linear's entry of a layer audit: the precision the generator computes it in and the one
// the trainer's precision map holds, and for FP8 (or BF16) the largest |Δ| between the
// generator's weights and the trainer's quantization of its master weights (0: bit-identical
// codes and scales). ok when both precisions agree and the weights are bit-identical.
struct AuditRow {
  int64_t layer = 0;
  std::string module;  // short module name (contract/precision.hpp)
  std::string generator_precision, trainer_precision;
  double max_abs_diff = 0;
  bool ok = true;
};

struct EventRecord {
  std::string kind;  // one of the event kinds in metrics.hpp (start, pause, precision, …)
  std::string message;
  Json data;  // precision: the map (PrecisionMap::to_json); set: {"key", "value"}; else null
};

struct StepRecord {
  int64_t step = 0;         // 1-based RL step (warm-up steps are negative: −N … −1)
  std::string phase;        // "sft" or "rl"
  double wall_seconds = 0;  // since the run started
  std::map<std::string, double> scalars;
  std::vector<HistogramRecord> histograms;
  std::vector<SampleRecord> samples;
  std::vector<EventRecord> events;
  // The layer audit of the weights this step's rollout used (empty when not audited).
  std::vector<AuditRow> audit;

  // {"step", "phase", "wall_seconds", "scalars", "samples"?, "events"?, "audit"?}: NaN and ±inf as the
  // strings "nan", "inf", "-inf" (JSON has no such numbers; they must stay visible).
  // Histograms are not included (they travel as their own messages).
  Json to_json() const;
  // The inverse of to_json; throws fp8rl::Error naming the bad field.
  static StepRecord from_json(const Json& j);
};

// A scalar as to_json writes it: a number or "nan" / "inf" / "-inf"; throws naming `key`.
double scalar_from_json(const Json& v, const std::string& key);

// {"step", "name", "edges", "counts"} (the telemetry "histogram" payload) and its inverse;
// from_json checks the edges/counts shape and throws naming what is wrong.
Json histogram_to_json(const HistogramRecord& h, int64_t step);
HistogramRecord histogram_from_json(const Json& j, int64_t* step = nullptr);

// {"layer", "module", "generator", "trainer", "max_abs_diff", "ok"} and its inverse.
Json audit_row_to_json(const AuditRow& a);
AuditRow audit_row_from_json(const Json& j);

// {"step", "kind", "message", "time", "data"?} (the telemetry "event" payload; time in unix
// seconds) and its inverse (time → *unix_time when given).
Json event_to_json(const EventRecord& e, int64_t step, double unix_time);
EventRecord event_from_json(const Json& j, int64_t* step = nullptr, double* unix_time = nullptr);

}  // namespace fp8rl
