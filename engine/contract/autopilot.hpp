// The precision autopilot's names (docs/autopilot.md): its settings' keys, the metrics it may
// watch, the scalars it records while it is on and the fields of its decisions' evidence (the
// data of an `autopilot` event). The run loop writes them, the store keeps them, the studio
// reads them: each is spelled here once.
#pragma once

#include <string>

#include "contract/precision.hpp"

namespace fp8rl::autopilot {

// Settings (rows of the settings schema, contract/settings.cpp; all live). The switch is in the
// precision section, the rest in their own section.
inline constexpr const char* kSwitchKey = "precision.autopilot";
inline constexpr const char* kSectionPrefix = "autopilot.";
// Live keys (LiveEdit settings).
inline constexpr const char* kLive = "autopilot";
inline constexpr const char* kLiveMetric = "autopilot_metric";
inline constexpr const char* kLiveThreshold = "autopilot_threshold";
inline constexpr const char* kLivePatience = "autopilot_patience";
inline constexpr const char* kLiveMoves = "autopilot_moves";
inline constexpr const char* kLiveBudget = "autopilot_budget";
inline constexpr const char* kLiveBudgetUnit = "autopilot_budget_unit";
inline constexpr const char* kLiveCooldown = "autopilot_cooldown";
inline constexpr const char* kLiveHysteresis = "autopilot_hysteresis";
inline constexpr const char* kLiveReturn = "autopilot_return";
inline constexpr const char* kLiveCalmSteps = "autopilot_calm_steps";
inline constexpr const char* kLiveConfirm = "autopilot_confirm";
// Whether a setting's configuration key is one of the autopilot's.
inline bool is_autopilot_setting(const std::string& config_key) {
  return config_key == kSwitchKey || config_key.rfind(kSectionPrefix, 0) == 0;
}

// The budget's units (autopilot.budget_unit): the share of the decoder's GEMM FLOPs per token,
// or of its linears, that the autopilot may hold in BF16.
inline constexpr const char* kUnitFlops = "flops";
inline constexpr const char* kUnitLinears = "linears";

// The metrics it may watch (autopilot.metric's choices are these scalar names).
inline constexpr const char* kWatchTokenMultProbError = "token_mult_prob_error";
inline constexpr const char* kWatchGenKlError = "gen_kl_error";
inline constexpr const char* kWatchPolicyKl = "fp8/policy_kl";
// A watched metric's ideal value (the calm level lies between it and the threshold).
inline double ideal_value(const std::string& metric) {
  return metric == kWatchTokenMultProbError ? 1.0 : 0.0;
}

// Scalars of every RL step the autopilot is on.
inline constexpr const char* kScalarValue = "autopilot/value";        // the watched metric's value
inline constexpr const char* kScalarStreak = "autopilot/streak";      // observed steps above it
inline constexpr const char* kScalarCalm = "autopilot/calm";          // observed steps calm
inline constexpr const char* kScalarCooldown = "autopilot/cooldown";  // steps left
inline constexpr const char* kScalarBudgetUsed = "autopilot/budget_used";  // share held in BF16
inline constexpr const char* kScalarHeld = "autopilot/held";     // linears it holds in BF16
inline constexpr const char* kTimeAutopilot = "time/autopilot";  // its measurements, seconds

// The actions of an `autopilot` event (data "action").
inline constexpr const char* kActionMove = "move";            // linears to BF16
inline constexpr const char* kActionReturn = "return";        // a linear back to FP8
inline constexpr const char* kActionBlocked = "blocked";      // over the threshold, nothing to move
inline constexpr const char* kActionWithdrawn = "withdrawn";  // a person's edit came first

// Whether a person's precision override pins the autopilot's unit (layer, module): it names the
// module of that layer (an index or *; "experts.E.M" names M), except the whole-map override
// `*.*=P`, a new default, which pins nothing; a router override names no unit of its.
inline bool pins(const PrecisionOverride& o, int64_t layer, Module module) {
  if (o.target == PrecisionOverride::Target::router) return false;
  if (o.target == PrecisionOverride::Target::module && !o.layer && !o.module) return false;
  if (o.layer && *o.layer != layer) return false;
  if (o.module && *o.module != module) return false;
  return o.target != PrecisionOverride::Target::experts || module == Module::gate ||
         module == Module::up || module == Module::down;
}
// Whether it reaches the unit at all (the whole-map override too: it takes back what the
// autopilot held).
inline bool reaches(const PrecisionOverride& o, int64_t layer, Module module) {
  if (o.target == PrecisionOverride::Target::module && !o.layer && !o.module) return true;
  return pins(o, layer, module);
}

}  // namespace fp8rl::autopilot
