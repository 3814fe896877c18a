#include "ui/data/group_data.hpp"

#include <limits>
#include <utility>

#include "core/error.hpp"

namespace fp8rl::ui {

GroupData::GroupData(int64_t sweep, double target)
    : sweep_(sweep), target_(target), snapshot_(std::make_shared<GroupSnapshot>()) {}

std::shared_ptr<const GroupSnapshot> GroupData::snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

void GroupData::setTarget(double target) {
  std::lock_guard lock(mu_);
  if (target == target_) return;
  target_ = target;
  target_changed_ = true;
}

void GroupData::update(RunStore& store) {
  std::lock_guard serial(update_mu_);  // the reader thread, or refresh() on the GUI thread
  double target = 0;
  bool retarget = false;
  {
    std::lock_guard lock(mu_);
    target = target_;
    retarget = std::exchange(target_changed_, false);
  }
  auto next = std::make_shared<GroupSnapshot>();
  next->sweep_id = sweep_;
  next->target = target;
  try {
    const auto sweep = store.find_sweep(sweep_);
    if (!sweep) throw Error("no sweep " + std::to_string(sweep_));
    next->sweep = *sweep;
    const auto points = store.sweep_points(sweep_);
    std::vector<RunStore::RunRow> rows;
    for (const auto& p : points)
      if (p.run_id)
        if (auto r = store.find_run(*p.run_id)) rows.push_back(std::move(*r));
    next->groups = sweep_groups(*sweep, points, rows);

    // A run that left its group (a point started afresh) invalidates the curves: read again.
    bool reset = false;
    std::map<int64_t, std::string> now;
    for (const auto& g : next->groups)
      for (const auto& r : g.runs) now[r.id] = g.label;
    for (const auto& [id, st] : runs_)
      if (!now.count(id) || now[id] != st.group) reset = true;
    if (reset) {
      runs_.clear();
      series_.clear();
      slots_.clear();
    }
    bool changed = reset || retarget;
    for (const auto& g : next->groups) {
      for (const auto& r : g.runs) {
        auto [it, fresh] = runs_.try_emplace(r.id);
        RunState& st = it->second;
        if (fresh) {
          st.group = g.label;
          st.slot = slots_[g.label]++;
        }
        const bool moved = fresh || st.last_step != r.last_step || st.status != r.status;
        if (!moved && !retarget) continue;
        changed = true;
        st.last_step = r.last_step;
        st.status = r.status;
        for (const auto& [key, title] : group_chart_metrics()) {
          auto& s = series_[key][g.label];
          const auto from = st.read_to.find(key);
          const int64_t after =
              from == st.read_to.end() ? std::numeric_limits<int64_t>::min() : from->second;
          for (const auto& p : store.scalar_series(r.id, key, after)) {
            s.add(st.slot, p.step, p.value);
            st.read_to[key] = p.step;
          }
        }
        st.outcome = read_outcome(store, r, target);
        st.outcome.replicate = g.replicate_of(r);
      }
    }
    if (!changed) return;  // the published snapshot stands
    stats::BootstrapOptions band;
    band.resamples = kBandResamples;
    for (const auto& g : next->groups) {
      std::vector<RunOutcome> outcomes;
      for (const auto& r : g.runs) outcomes.push_back(runs_[r.id].outcome);
      next->outcomes.push_back(std::move(outcomes));
    }
    for (const auto& [key, title] : group_chart_metrics()) {
      auto& per_group = next->curves[key];
      for (const auto& g : next->groups) {
        auto it = series_[key].find(g.label);
        per_group.push_back(it == series_[key].end() ? std::vector<BandPoint>{}
                                                      : it->second.bands(band));
      }
    }
  } catch (const Error& e) {
    next = std::make_shared<GroupSnapshot>(*snapshot());
    next->error = e.message();
  }
  next->version = ++version_;
  std::lock_guard lock(mu_);
  snapshot_ = std::move(next);
}

}  // namespace fp8rl::ui
