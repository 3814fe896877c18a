// Min/max reduction of a large line for drawing (Qt-free). A line of n points sorted by x is
// reduced, over a visible x range split into pixel columns, to at most four points per column:
// the first, the minimum, the maximum and the last (the "M4" reduction). Drawn with straight
// segments, the result covers exactly the pixels the full line would: a spike (one extreme
// point among millions) always survives, unlike plain decimation.
//
// Range minima/maxima come from a block index (argmin/argmax per block of kBlock points), so a
// column spanning m points costs O(kBlock + m / kBlock) and a whole reduction O(columns ·
// (kBlock + log n) + n / kBlock), independent of how dense the line is.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace fp8rl::ui {

class MinMaxIndex {
 public:
  static constexpr size_t kBlock = 64;

  // Indexes y from scratch.
  void rebuild(const std::vector<double>& y);
  // Indexes the points appended to y since the last rebuild()/extend() (y only grew).
  void extend(const std::vector<double>& y);
  void clear();
  // Indices of the smallest and the largest y in [begin, end) (first occurrence each);
  // begin < end <= y.size(). y must be the vector indexed. Values must be finite.
  std::pair<size_t, size_t> argminmax(const std::vector<double>& y, size_t begin, size_t end) const;
  size_t indexedSize() const { return indexed_; }

 private:
  struct Block {
    double min, max;
    size_t argmin, argmax;
  };
  std::vector<Block> blocks_;
  size_t indexed_ = 0;
};

// Where the visible range [lo, hi] of a sorted x splits into pixel columns.
struct ColumnSplit {
  size_t size = 0;           // x.size()
  size_t first = 0;          // first index with x >= lo
  size_t last = 0;           // one past the last index with x <= hi
  bool all = true;           // few enough points: draw every one in [first, last)
  std::vector<size_t> ends;  // when !all: one past the last index of each column
};

// Splits for `columns` equal columns; every point when the range holds at most 4 · columns
// points. x must be sorted ascending (ties allowed). Costs O(columns · log(n / columns)).
void splitColumns(const std::vector<double>& x, double lo, double hi, int columns,
                   ColumnSplit& split);

// Appends to out (cleared first) the sorted indices of the points to draw: all points of the
// range, or the first/min/max/last of each column; plus the nearest point outside the range
// on either side, so the line runs to the edges. y must be finite and indexed by index.
void reduceMinMax(const std::vector<double>& y, const MinMaxIndex& index,
                    const ColumnSplit& split, std::vector<size_t>& out);

// Both steps at once.
void reduceMinMax(const std::vector<double>& x, const std::vector<double>& y,
                    const MinMaxIndex& index, double lo, double hi, int columns,
                    std::vector<size_t>& out);

}  // namespace fp8rl::ui
