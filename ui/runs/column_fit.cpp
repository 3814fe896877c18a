#include "ui/runs/column_fit.hpp"

#include <algorithm>
#include <limits>

namespace fp8rl::ui {

std::vector<int> fitColumns(const std::vector<ColumnNeed>& needs, int width) {
  // One request per column to be shown and one to grow, served in order of priority (showing
  // before growing on a tie, then in table order).
  struct Request {
    int priority;
    bool grow;
    size_t column;
  };
  std::vector<Request> requests;
  for (size_t i = 0; i < needs.size(); ++i) {
    const ColumnNeed& c = needs[i];
    requests.push_back({c.stretch ? std::numeric_limits<int>::max() : c.priority, false, i});
    if (c.want > c.min)
      requests.push_back({c.grow_priority >= 0 ? c.grow_priority : c.priority, true, i});
  }
  std::stable_sort(requests.begin(), requests.end(), [](const Request& a, const Request& b) {
    return a.priority != b.priority ? a.priority > b.priority : (!a.grow && b.grow);
  });
  std::vector<int> widths(needs.size(), 0);
  int left = width;
  for (const Request& r : requests) {
    const ColumnNeed& c = needs[r.column];
    int& w = widths[r.column];
    if (!r.grow) {
      if (c.min <= left || c.stretch) {
        w = c.min;
        left -= c.min;
      }
    } else if (w > 0) {
      const int grow = std::clamp(c.want - w, 0, std::max(0, left));
      w += grow;
      left -= grow;
    }
  }
  for (size_t i = 0; i < needs.size(); ++i)
    if (needs[i].stretch && left > 0) {
      widths[i] += left;
      break;
    }
  return widths;
}

}  // namespace fp8rl::ui
