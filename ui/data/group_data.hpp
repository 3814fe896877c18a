// The studio's data of a sweep's groups (engine/groups): each group's curve — the mean and a
// 95 % bootstrap band over its runs, per step — for the group chart metrics, and each run's
// outcome (final and best validation, reward, time to target, step time) for the verdict.
// Read from the store on the session's reader thread, incrementally (each run's points after
// the last step read), never on the GUI thread; the curves' memory is bounded (GroupSeries).
// Plain C++ with a mutex: no Qt.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "groups/group_series.hpp"
#include "groups/run_groups.hpp"
#include "groups/run_outcome.hpp"
#include "store/run_store.hpp"

namespace fp8rl::ui {

struct GroupSnapshot {
  int64_t sweep_id = -1;
  RunStore::SweepRow sweep;
  std::vector<RunGroup> groups;
  std::vector<std::vector<RunOutcome>> outcomes;  // per group, in its runs' order
  // Chart metric key → per group: the band points, by step.
  std::map<std::string, std::vector<std::vector<BandPoint>>> curves;
  double target = 0.5;  // the validation accuracy time-to-target waited for
  int64_t version = 0;  // bumped by every update that changed something
  std::string error;    // why the last update failed ("" when it did not)
};

class GroupData {
 public:
  // The groups of sweep `sweep`; target: the validation accuracy of time-to-target.
  GroupData(int64_t sweep, double target);

  int64_t sweep() const { return sweep_; }
  // Reader thread: reads what is new for the sweep's runs from the store and publishes a new
  // snapshot when anything changed.
  void update(RunStore& store);
  // Any thread: the latest snapshot (never null).
  std::shared_ptr<const GroupSnapshot> snapshot() const;
  // Changes the target; the outcomes are read again at the next update.
  void setTarget(double target);

  // Bootstrap draws per band point (bands of up to 4 runs are enumerated exactly).
  static constexpr int kBandResamples = 400;

 private:
  struct RunState {
    std::string group;
    size_t slot = 0;  // the run's index in its group's series
    std::optional<int64_t> last_step;
    std::string status;
    std::map<std::string, int64_t> read_to;  // key → last step read
    RunOutcome outcome;
  };

  const int64_t sweep_;
  std::mutex update_mu_;   // one update at a time
  mutable std::mutex mu_;  // guards snapshot_ and target_
  double target_;
  bool target_changed_ = false;
  std::shared_ptr<const GroupSnapshot> snapshot_;
  // Reader thread only:
  std::map<int64_t, RunState> runs_;
  std::map<std::string, std::map<std::string, GroupSeries>> series_;  // key → group → series
  std::map<std::string, size_t> slots_;                               // group → runs so far
  int64_t version_ = 0;
};

}  // namespace fp8rl::ui
