// The Precision tab of a run — its live edits: the precision grid (layers × modules, BF16/FP8)
// showing the map in effect, with each layer's FP8 weight quantization error (the latest
// fp8/L<layer>/weight/rel_error) in the row headers, and the live settings beside it; Apply
// sends the edited cells and settings to the live run as one live edit (a signal), Revert drops
// them; beside them the layer-sensitivity heatmap (SensitivityPanel); under them the
// precision autopilot (AutopilotPanel: its state and live settings) — the grid's heat column
// shows the per-linear FP8 error signal it ranks by, its cells what it holds and what a person
// pinned; below, the history of precision changes (the autopilot's in its own words).
#pragma once

#include <QStringList>
#include <QWidget>
#include <cstdint>
#include <vector>

#include "contract/live_edit.hpp"
#include "ui/run/run_tab.hpp"

class QLabel;
class QGroupBox;
class QPushButton;
class QTableWidget;

namespace fp8rl::ui {

struct RunData;
class PrecisionGrid;
class LiveSettingsPanel;
class SensitivityPanel;
class AutopilotPanel;

// refresh() shows a new precision map when one arrived (dropping edits), updates the layer
// errors and the history, and re-reads the run's status for Apply every time.
class PrecisionTab : public RunTab {
  Q_OBJECT
 public:
  explicit PrecisionTab(QWidget* parent = nullptr);

  // Whether the run accepts precision edits (status running or paused).
  bool runIsLive() const;

  PrecisionGrid* grid() const { return grid_; }
  LiveSettingsPanel* settings() const { return settings_; }
  QPushButton* applyButton() const { return apply_; }
  QPushButton* revertButton() const { return revert_; }
  QTableWidget* history() const { return history_; }  // columns: step, change
  QLabel* status() const { return status_; }
  SensitivityPanel* sensitivity() const { return sensitivity_; }
  AutopilotPanel* autopilot() const { return autopilot_; }

 signals:
  // Apply was pressed: the precision edits ("LAYER.MODULE=PRECISION") and setting edits for
  // run `run`.
  void applyRequested(qint64 run, const LiveEdit& edit);

 private:
  void clearRun() override;
  void poll() override;
  void showNew() override;
  void updateButtons();
  void updateErrors();
  void updateAutopilot();
  // The live edit the fields hold: both settings panels' values (no precision).
  LiveEdit settingEdits() const;
  void updateHistory();
  void apply();

  size_t maps_ = 0;                    // precision maps seen
  int64_t last_map_step_ = 0;          // step of the newest map shown
  std::vector<double> errors_;         // shown in the grid's row headers
  std::vector<double> linear_errors_;  // the grid's heat column
  PrecisionGrid* grid_;
  LiveSettingsPanel* settings_;
  QLabel* caption_;
  QLabel* status_;
  QPushButton* apply_;
  QPushButton* revert_;
  QTableWidget* history_;
  SensitivityPanel* sensitivity_;
  AutopilotPanel* autopilot_;
};

}  // namespace fp8rl::ui
