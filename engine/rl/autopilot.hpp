// The precision autopilot's policy (docs/autopilot.md): a small, pure state machine that
// watches a run-level metric step by step and decides which FP8 linears go to BF16 (and, when
// allowed, back). It measures nothing and changes nothing itself: the run loop hands it each
// RL step's observation (the watched metric and the per-linear FP8 error signal) and, when it
// asks for confirmation, each candidate's KL; it answers with a decision — a precision edit of
// the same typed kind a person sends (contract/live_edit.hpp) plus its evidence — that the run
// session applies at the next step boundary and records as an `autopilot` event.
//
// The rules, in the order they apply after each RL step:
//   off                  nothing counts (streak and calm restart when it is switched on);
//   no metric value      nothing counts (the metric was not measured at this step);
//   cooldown             for `cooldown` steps after an action it only watches;
//   above the threshold  `patience` steps in a row (a NaN counts as above) → move the `moves`
//                        worst FP8 linears by their error signal (re-ranked by the KL the policy
//                        has with each of them in BF16 when `confirm`), those a person pinned
//                        never, within the budget (the share of GEMM FLOPs or of linears the
//                        autopilot holds in BF16); nothing to move → one `blocked` event;
//   calm                 below the threshold by `hysteresis` × its distance from the metric's
//                        ideal, `calm_steps` in a row, with return_to_fp8 → the linear it moved
//                        last goes back to FP8; one moved again after a return stays in BF16.
// A person's precision edit always wins: every linear it names is pinned (the whole-map
// override `*.*=P` pins nothing: it is a new default), and any the autopilot held among them is
// the person's from then on; a decision waiting for the boundary drops them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "contract/live_edit.hpp"
#include "contract/precision.hpp"
#include "core/json.hpp"

namespace fp8rl {

// The autopilot's settings: precision.autopilot and the autopilot.* rows of the settings schema
// (RunConfig::from_json binds them; live edits change them through the run's configuration).
struct AutopilotSettings {
  bool on = false;
  std::string metric = "token_mult_prob_error";  // a scalar name (contract/autopilot.hpp)
  double threshold = 1.05;
  int64_t patience = 3, moves = 1, cooldown = 5, calm_steps = 20;
  double budget = 0.25;      // share in [0, 1]
  bool budget_flops = true;  // of GEMM FLOPs per token (else of linears)
  double hysteresis = 0.5;
  bool return_to_fp8 = false, confirm = false;

  // Below this a step is calm: threshold − hysteresis × (threshold − the metric's ideal value).
  double calm_level() const;
};

// What the autopilot moves: a layer's module (in a layer with experts, every expert's).
struct AutopilotUnit {
  int64_t layer = 0;
  Module module = Module::q;
  std::string name() const;                      // "L1.down"
  std::string override_text(Precision p) const;  // "1.down=bf16"
  bool operator==(const AutopilotUnit&) const = default;
};

// A unit of the model and what it weighs in the budget.
struct AutopilotLinear {
  AutopilotUnit unit;
  double flops = 0;  // GEMM FLOPs per token (any positive measure of its cost)
};

// One RL step as the autopilot sees it.
struct AutopilotObservation {
  int64_t step = 0;
  std::optional<double> value;  // the watched metric (nullopt: not measured at this step)
  struct Signal {
    AutopilotUnit unit;
    double error = 0;  // the per-linear FP8 error signal (metric::fp8_error)
    // Its operands' parts (NaN where the step has none): relative error + flushed share +
    // saturated share of the weight, the activation it reads and the gradient it receives.
    double weight = 0, activation = 0, gradient = 0;
  };
  std::vector<Signal> per_linear;  // the FP8 linears measured at this step
};

struct AutopilotDecision {
  std::string action;  // autopilot::kActionMove, kActionReturn, kActionBlocked, kActionWithdrawn
  int64_t step = 0;    // the step observed
  std::vector<AutopilotUnit> linears;
  Json evidence;        // the event's data (docs/autopilot.md)
  std::string message;  // one line: what and why

  // The precision edit it makes (empty for blocked and withdrawn).
  LiveEdit edit() const;
  Json to_json() const;  // evidence with action, step and linears (what checkpoints keep)
  static AutopilotDecision from_json(const Json& j);
};

class PrecisionAutopilot {
 public:
  // The KL of the policy with each candidate in BF16 (the rest as the map has it), in their
  // order: lower is better. The run measures it on the step's first micro-batch.
  using Confirm = std::function<std::vector<double>(const std::vector<AutopilotUnit>&)>;

  PrecisionAutopilot() = default;
  // The model's units with their cost (every decoder linear, FP8 or not).
  explicit PrecisionAutopilot(std::vector<AutopilotLinear> linears);

  // A person's precision override reached the map (a launch configuration's overrides count
  // as edits made before the first step): pins the units it names and takes back those the
  // autopilot held among them; a whole-map override pins nothing.
  void person_edit(const PrecisionOverride& o);
  // Observes a finished RL step with the map then in force. A decision it makes waits for the
  // next step boundary (pending()).
  void observe(const AutopilotObservation& o, const PrecisionMap& map, const AutopilotSettings& s,
               const Confirm& confirm = {});
  const std::optional<AutopilotDecision>& pending() const { return pending_; }
  // At the step boundary, after the person's edits: the pending decision checked against the
  // map and the pins (linears pinned since, or no longer in the precision it moves them from,
  // are dropped; none left: a withdrawn decision that changes nothing), and forgotten. The
  // caller applies its edit and then calls applied().
  std::optional<AutopilotDecision> take(const PrecisionMap& map);
  // A decision's edit reached the map: the autopilot holds (move) or releases (return) its
  // linears.
  void applied(const AutopilotDecision& d);

  // Share of the budget's measure the autopilot holds in BF16 (0–1).
  double budget_used(bool flops) const;
  struct Held {
    AutopilotUnit unit;
    int64_t step = 0;       // the step whose observation moved it
    bool returned = false;  // it went back to FP8 once and was moved again: it stays
  };
  const std::vector<Held>& held() const { return held_; }
  const std::vector<AutopilotUnit>& pinned() const { return pinned_; }
  bool is_pinned(const AutopilotUnit& u) const;
  int64_t streak() const { return streak_; }
  int64_t calm() const { return calm_; }
  int64_t cooldown() const { return cooldown_; }

  // Everything it remembers (counters, held and pinned linears, the pending decision): what a
  // checkpoint keeps, so a resumed run decides as the uninterrupted one would. restore() throws
  // naming a bad field.
  Json state_json() const;
  void restore(const Json& state);

 private:
  double weight(const AutopilotUnit& u, bool flops) const;
  std::optional<AutopilotDecision> decide_move(const AutopilotObservation& o,
                                               const PrecisionMap& map, const AutopilotSettings& s,
                                               const Confirm& confirm);
  std::optional<AutopilotDecision> decide_return(const AutopilotObservation& o,
                                                 const AutopilotSettings& s);

  std::vector<AutopilotLinear> linears_;
  std::vector<Held> held_;
  std::vector<AutopilotUnit> pinned_;
  std::vector<AutopilotUnit> returned_;  // went back to FP8 at least once
  int64_t streak_ = 0, calm_ = 0, cooldown_ = 0;
  bool blocked_said_ = false;  // a blocked decision was recorded for the current streak
  std::optional<AutopilotDecision> pending_;
};

// The units of a model's precision map with their GEMM FLOPs per token (in × out of each
// module; a layer with experts counts top_k of its experts' gate, up and down): in, out per
// (layer, module) from `shape(layer, module)`, experts_per_token for layers with experts.
std::vector<AutopilotLinear> autopilot_linears(
    const PrecisionMap& map,
    const std::function<std::pair<int64_t, int64_t>(int64_t, Module)>& shape,
    int64_t experts_per_token);

}  // namespace fp8rl
