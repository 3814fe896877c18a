// A group's curve over steps: for one metric, each run's values gathered on step buckets (the
// run's mean over the steps in a bucket), and per bucket the mean over the runs that reached
// it with a 95 % bootstrap percentile band over those runs (seeded, so the same data draw the
// same band). Buckets are one step wide until there would be more than max_buckets; then their
// width doubles (adjacent buckets merge), so memory stays bounded however long the runs are,
// while every value still counts in its bucket's mean. The run store keeps the full series.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "groups/run_groups.hpp"
#include "stats/stats.hpp"

namespace fp8rl {

struct BandPoint {
  double step = 0;  // the mean step of the values in the bucket
  double mean = 0;  // over the runs' bucket means
  double lo = 0, hi = 0;  // the band (lo = hi = mean for a single run)
  int n = 0;              // runs in the bucket
};

class GroupSeries {
 public:
  explicit GroupSeries(size_t runs = 0, size_t max_buckets = 1024);

  // Makes room for `runs` runs (indices 0 … runs − 1).
  void resize_runs(size_t runs);
  // Adds run's value at step (non-finite values are left out).
  void add(size_t run, int64_t step, double value);
  // The band per bucket, by step; buckets that changed since the last call are recomputed.
  const std::vector<BandPoint>& bands(const stats::BootstrapOptions& opt);
  int64_t bucket_width() const { return width_; }
  size_t bucket_count() const { return buckets_.size(); }
  size_t run_count() const { return runs_; }

 private:
  struct Cell {
    double sum = 0;
    int64_t n = 0;
  };
  struct Bucket {
    std::vector<Cell> runs;
    double step_sum = 0;
    int64_t step_n = 0;
    bool dirty = true;
    BandPoint band;
  };
  int64_t bucket_of(int64_t step) const;
  void coarsen();

  size_t runs_ = 0, max_buckets_;
  int64_t width_ = 1;
  std::map<int64_t, Bucket> buckets_;
  std::vector<BandPoint> out_;
  bool changed_ = true;
};

}  // namespace fp8rl

namespace fp8rl {

// The metrics a group chart shows by default (the headline charts of a single run): scalar key
// and title.
const std::vector<std::pair<std::string, std::string>>& group_chart_metrics();

// The series of `key` of every run of every group, read from the store: one GroupSeries per
// group (run index = the run's place in its group).
std::vector<GroupSeries> read_group_series(RunStore& store, const std::vector<RunGroup>& groups,
                                           const std::string& key, size_t max_buckets = 1024);

}  // namespace fp8rl
