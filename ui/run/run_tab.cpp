#include "ui/run/run_tab.hpp"

#include <algorithm>

#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

RunTab::RunTab(QWidget* parent) : QWidget(parent) {}

void RunTab::setRun(const RunData* run) {
  run_ = run;
  version_ = -1;
  markers_ = 0;
  clearRun();
  refresh();
}

void RunTab::refresh() {
  if (!run_) return;
  poll();
  if (run_->version == version_) return;
  version_ = run_->version;
  showNew();
}

int nearestStepIndex(const std::vector<int64_t>& steps, int64_t step) {
  auto it = std::lower_bound(steps.begin(), steps.end(), step);
  if (it == steps.end() || (it != steps.begin() && step - *(it - 1) < *it - step)) --it;
  return static_cast<int>(it - steps.begin());
}

QString stepPosition(const std::vector<int64_t>& steps, int index) {
  return RunTab::tr("step %1 (%2 of %3)")
      .arg(static_cast<qint64>(steps.at(static_cast<size_t>(index))))
      .arg(index + 1)
      .arg(static_cast<qint64>(steps.size()));
}

}  // namespace fp8rl::ui
