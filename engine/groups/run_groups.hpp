// Groups of runs: the runs of a sweep that share every axis value but the replicate's (the
// seeds of one configuration), or a list of runs given by id. What `fp8rl compare --group`,
// `fp8rl report` and the studio's runs panel compare.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "store/run_store.hpp"

namespace fp8rl {

struct RunGroup {
  std::string label;                // "fp8" (one axis besides the replicate), "lr=0.001, precision=fp8"
  std::optional<int64_t> sweep_id;  // nullopt for a list of runs
  std::string sweep_name;
  Json key;               // the axis values the group's runs share (object; null for a list)
  std::string replicate;  // the sweep's replicate axis ("" when none)
  std::vector<RunStore::RunRow> runs;  // by sweep point (a list: as given)
  int64_t queued = 0;     // points of the group without a run yet

  // The run's replicate label ("" without a replicate axis or value).
  std::string replicate_of(const RunStore::RunRow& run) const;
};

// The groups of a sweep, from rows already read: its points grouped by every axis value but
// the replicate's, in the order of their first point. Each point counts with its current run
// (the latest attempt); a point without a run counts as queued.
std::vector<RunGroup> sweep_groups(const RunStore::SweepRow& sweep,
                                   const std::vector<RunStore::SweepPoint>& points,
                                   const std::vector<RunStore::RunRow>& runs);
// The same, read from the store.
std::vector<RunGroup> sweep_groups(RunStore& store, int64_t sweep);

// A group named on the command line:
//   SWEEP:AXIS=VALUE[,AXIS=VALUE…]   the runs of sweep SWEEP with those axis values
//   SWEEP:VALUE                      … with VALUE on an axis other than the replicate
//   SWEEP                            the sweep's only group
//   runs:ID,ID,…  (or ID,ID,…)       these runs
// Throws Error saying what is wrong (no such sweep, no group matches, several do: naming them).
RunGroup resolve_group(RunStore& store, const std::string& spec);

}  // namespace fp8rl
