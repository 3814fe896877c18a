// How a table's columns share a width that cannot hold them all (the runs panel in its dock):
// each column says the width its shortest useful form needs, the width its longest text needs,
// and how much it matters. No Qt: tested on its own (test_runs_text).
#pragma once

#include <vector>

namespace fp8rl::ui {

struct ColumnNeed {
  int min = 0;           // narrower than this the column is no use (hidden instead)
  int want = 0;          // wide enough for its longest text (at least min)
  int priority = 0;      // higher: shown first (at min)
  bool stretch = false;  // takes what is left at the end (one column; never hidden)
  // When the column grows from min toward want, among the other columns' showing and growing
  // (higher: earlier); -1: right after it is shown. Lower than other columns' priorities, it
  // lets them show at their min first.
  int grow_priority = -1;
};

// The widths (0: hidden) that fill width: in order of priority, each column is shown at its min
// if that still fits (the stretch column always is), and grows toward its want, as far as there
// is room, at its grow priority; what is left goes to the stretch column. A width too small even
// for the stretch column's min gives it the min all the same.
std::vector<int> fitColumns(const std::vector<ColumnNeed>& needs, int width);

}  // namespace fp8rl::ui
