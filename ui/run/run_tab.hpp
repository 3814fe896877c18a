// What the tabs of the run view have in common: each shows one run's data (a RunData owned by
// the studio session) and brings itself up to date when told the run changed, drawing only
// what is new since the run's version it showed last.
#pragma once

#include <QString>
#include <QWidget>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fp8rl::ui {

struct RunData;

class RunTab : public QWidget {
  Q_OBJECT
 public:
  // Shows this run (nullptr: nothing); the pointer must stay valid until the next setRun.
  void setRun(const RunData* run);
  const RunData* run() const { return run_; }
  // Shows what the run recorded since the last refresh (cheap when its version is unchanged).
  void refresh();

 protected:
  explicit RunTab(QWidget* parent = nullptr);
  // Forgets what the previous run showed; run_ is already the new run (or null).
  virtual void clearRun() = 0;
  // Shows what is new in run_ (never null here): its version moved since the last call.
  virtual void showNew() = 0;
  // Called on every refresh of a run, before showNew: for what changes without new data
  // (the run's status).
  virtual void poll() {}

  const RunData* run_ = nullptr;
  int64_t version_ = -1;  // the run's version shown (-1: none yet)
  size_t markers_ = 0;    // precision markers the tab's charts show (syncPrecisionMarkers)
};

// The index in steps (ascending, not empty) of the step nearest to step (the later on a tie).
int nearestStepIndex(const std::vector<int64_t>& steps, int64_t step);
// "step 12 (3 of 40)": steps[index] and where it stands among steps.
QString stepPosition(const std::vector<int64_t>& steps, int index);

}  // namespace fp8rl::ui
