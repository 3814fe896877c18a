// The layer-sensitivity panel of the Precision tab: a `fp8rl sensitivity` report of the run as
// a heatmap (layers × the seven linears, the lm_head as its own row; colour = log10 of the KL
// with only that linear in FP8, or with every linear in FP8 but that one), the recommended
// BF16 linears outlined, every measure in a cell's tooltip. Measure… runs the command for the
// run (progress, Cancel), Load… reads a saved report; a report stays with its run while the
// studio runs. Apply recommendation asks for confirmation and sends the recommended overrides
// as one live edit (the signal the tab forwards to the session's live path).
#pragma once

#include <QString>
#include <QWidget>
#include <functional>
#include <map>
#include <utility>

#include "contract/live_edit.hpp"
#include "ui/data/sensitivity_report.hpp"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;

namespace fp8rl::ui {

struct RunData;
class HeatmapView;
class SensitivityRunner;

class SensitivityPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SensitivityPanel(QWidget* parent = nullptr);
  ~SensitivityPanel() override;

  // The fp8rl command Measure… runs (default: EngineCli::besideApplication()).
  void setExecutable(const QString& executable);
  // Shows the run's report when one was measured or loaded for it, else an empty map.
  void setRun(const RunData* run);
  // Re-reads the run's status (Apply recommendation needs a live run).
  void refresh();

  // Shows a report for the current run and remembers it for that run.
  void setReport(const SensitivityReport& report);
  // The report shown, or nullptr.
  const SensitivityReport* report() const;
  // Reads a report saved from `fp8rl sensitivity --json`; "" or what is wrong with the file.
  QString loadFile(const QString& path);

  // What Apply recommendation asks before it sends (default: a message box with the override
  // text); returns whether to send.
  void setConfirmation(std::function<bool(const QString& text)> confirm);
  // Sends the recommended overrides to the live run after the confirmation.
  void applyRecommendation();
  // Starts `fp8rl sensitivity` for the run; "" or why it cannot.
  QString measure();

  HeatmapView* heatmap() const { return heatmap_; }
  QComboBox* valueChoice() const { return value_; }  // which KL the colour shows
  QPushButton* applyButton() const { return apply_; }

 signals:
  // Apply recommendation was confirmed: the recommended overrides for run `run`.
  void applyRequested(qint64 run, const fp8rl::LiveEdit& edit);

 private:
  using RunKey = std::pair<int64_t, double>;  // id, created_at: unique across databases
  RunKey key() const;
  void showReport();
  void updateButtons();
  void setStatus(const QString& text);

  const RunData* run_ = nullptr;
  std::map<RunKey, SensitivityReport> reports_;
  RunKey measuring_{-1, 0};
  std::function<bool(const QString&)> confirm_;
  SensitivityRunner* runner_;
  HeatmapView* heatmap_;
  QComboBox* value_;
  QPushButton* measure_;
  QPushButton* cancel_;
  QPushButton* load_;
  QPushButton* apply_;
  QProgressBar* progress_;
  QLabel* status_;
  QLabel* summary_;
};

}  // namespace fp8rl::ui
