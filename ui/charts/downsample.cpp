#include "ui/charts/downsample.hpp"

#include <algorithm>

namespace fp8rl::ui {
namespace {

// The first index in [begin, end) with x >= v, searched outwards from begin: a column's end
// lies close to its start, so this touches a few cache lines instead of log2(n) far ones.
size_t gallopLowerBound(const std::vector<double>& x, size_t begin, size_t end, double v) {
  size_t lo = begin, hi = begin, step = 1;
  while (hi < end && x[hi] < v) {
    lo = hi + 1;
    hi = begin + step;
    step *= 2;
  }
  hi = std::min(hi, end);
  return static_cast<size_t>(std::lower_bound(x.begin() + static_cast<ptrdiff_t>(lo),
                                              x.begin() + static_cast<ptrdiff_t>(hi), v) -
                             x.begin());
}

}  // namespace

void MinMaxIndex::clear() {
  blocks_.clear();
  indexed_ = 0;
}

void MinMaxIndex::rebuild(const std::vector<double>& y) {
  clear();
  extend(y);
}

void MinMaxIndex::extend(const std::vector<double>& y) {
  // The last block may have been partial: recompute it from its start.
  const size_t first_block = indexed_ / kBlock;
  blocks_.resize(first_block);
  for (size_t b = first_block * kBlock; b < y.size(); b += kBlock) {
    const size_t e = std::min(y.size(), b + kBlock);
    Block blk{y[b], y[b], b, b};
    for (size_t i = b + 1; i < e; ++i) {
      if (y[i] < blk.min) blk.min = y[i], blk.argmin = i;
      if (y[i] > blk.max) blk.max = y[i], blk.argmax = i;
    }
    blocks_.push_back(blk);
  }
  indexed_ = y.size();
}

std::pair<size_t, size_t> MinMaxIndex::argminmax(const std::vector<double>& y, size_t begin,
                                                 size_t end) const {
  size_t lo = begin, hi = begin;
  double vlo = y[begin], vhi = y[begin];
  auto scan = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      if (y[i] < vlo) vlo = y[i], lo = i;
      if (y[i] > vhi) vhi = y[i], hi = i;
    }
  };
  const size_t first_full = (begin + kBlock - 1) / kBlock;   // first block starting at >= begin
  const size_t end_full = std::min(end, indexed_) / kBlock;  // blocks ending at <= end
  if (first_full >= end_full) {
    scan(begin + 1, end);
    return {lo, hi};
  }
  scan(begin + 1, first_full * kBlock);
  for (size_t b = first_full; b < end_full; ++b) {
    const Block& blk = blocks_[b];
    if (blk.min < vlo) vlo = blk.min, lo = blk.argmin;
    if (blk.max > vhi) vhi = blk.max, hi = blk.argmax;
  }
  scan(end_full * kBlock, end);
  return {lo, hi};
}

void splitColumns(const std::vector<double>& x, double lo, double hi, int columns,
                   ColumnSplit& split) {
  const size_t n = x.size();
  split.size = n;
  split.ends.clear();
  split.first = static_cast<size_t>(std::lower_bound(x.begin(), x.end(), lo) - x.begin());
  split.last = static_cast<size_t>(
      std::upper_bound(x.begin() + static_cast<ptrdiff_t>(split.first), x.end(), hi) - x.begin());
  if (columns < 1) columns = 1;
  split.all = split.last - split.first <= 4 * static_cast<size_t>(columns) || !(hi > lo);
  if (split.all) return;
  const double width = (hi - lo) / columns;
  split.ends.reserve(static_cast<size_t>(columns));
  size_t begin = split.first;
  for (int c = 0; c + 1 < columns; ++c) {
    // Column c holds the points with x < lo + (c + 1) · width (the last one: all the rest).
    begin = gallopLowerBound(x, begin, split.last, lo + width * (c + 1));
    split.ends.push_back(begin);
  }
  split.ends.push_back(split.last);
}

void reduceMinMax(const std::vector<double>& y, const MinMaxIndex& index,
                    const ColumnSplit& split, std::vector<size_t>& out) {
  out.clear();
  if (split.size == 0 || y.size() < split.size) return;
  if (split.first > 0) out.push_back(split.first - 1);
  if (split.all) {
    for (size_t i = split.first; i < split.last; ++i) out.push_back(i);
  } else {
    size_t begin = split.first;
    for (size_t end : split.ends) {
      if (end == begin) continue;
      const auto [mn, mx] = index.argminmax(y, begin, end);
      const size_t pick[4] = {begin, std::min(mn, mx), std::max(mn, mx), end - 1};
      for (size_t i : pick)
        if (out.empty() || out.back() < i) out.push_back(i);
      begin = end;
    }
  }
  if (split.last < split.size) out.push_back(split.last);
}

void reduceMinMax(const std::vector<double>& x, const std::vector<double>& y,
                    const MinMaxIndex& index, double lo, double hi, int columns,
                    std::vector<size_t>& out) {
  ColumnSplit split;
  splitColumns(x, lo, hi, columns, split);
  reduceMinMax(y, index, split, out);
}

}  // namespace fp8rl::ui
