// What the studio shows of a run's precision autopilot (docs/autopilot.md), read from the
// run's recorded data — its settings in force, the scalars it records every RL step, its
// `autopilot` events and the person's precision edits — as plain text and lists: the widgets
// only display it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "contract/precision.hpp"
#include "core/json.hpp"

namespace fp8rl::ui {

struct RunData;

// A unit the autopilot moves: a layer's module.
using LinearRef = std::pair<int64_t, Module>;

struct AutopilotView {
  bool on = false;       // precision.autopilot in force
  std::string state;     // "off", "watching", "cooling down", "acting", "blocked"
  std::string headline;  // the state and what it watches, one line
  std::string budget;    // what it holds in BF16 against its budget, one line
  // Linears in BF16 by its decisions (a person's edit since takes them back), and linears a
  // person pinned (named by an edit, or by the launch configuration's overrides): never moved.
  std::vector<LinearRef> held, pinned;
};

// The view of run's autopilot (state "off" and empty lists for a run that never had one on).
AutopilotView autopilotView(const RunData& run);

// The evidence of an `autopilot` event (its data) for a tooltip, a line each: the decision, the
// watched metric against the threshold, the ranked candidates with their FP8 error (and KL when
// confirmed), the budget.
std::string autopilotEvidenceText(const Json& data);

// The overrides a person's `precision` event applied (its message: "0.gate=bf16, *.down=bf16");
// parts that do not parse are left out.
std::vector<PrecisionOverride> precisionEventOverrides(const std::string& message);

}  // namespace fp8rl::ui
