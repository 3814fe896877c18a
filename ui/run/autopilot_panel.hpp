// The precision autopilot of a run (docs/autopilot.md), in the Precision tab: what it is doing
// (off, watching the metric, cooling down, acting, blocked — ui/data/autopilot_view), what it
// holds in BF16 against its budget, and its live settings to switch it on or off or change it
// (sent with the tab's Apply as part of one live edit).
#pragma once

#include <QGroupBox>

#include "contract/live_edit.hpp"

class QLabel;

namespace fp8rl::ui {

struct RunData;
class LiveSettingsPanel;

class AutopilotPanel : public QGroupBox {
  Q_OBJECT
 public:
  explicit AutopilotPanel(QWidget* parent = nullptr);

  // Shows run's autopilot (nullptr: none); keeps the fields' edits.
  void setRun(const RunData* run);
  LiveSettingsPanel* settings() const { return settings_; }
  QLabel* state() const { return state_; }    // the state and what it watches
  QLabel* budget() const { return budget_; }  // what it holds against its budget

 private:
  QLabel* state_;
  QLabel* budget_;
  LiveSettingsPanel* settings_;
};

}  // namespace fp8rl::ui
