// The Overview tab of a run: headline numbers (step, latest reward, validation accuracy and
// token_mult_prob_error; the ranks of a data-parallel run) over a grid of charts: reward, accuracy
// (train and validation), loss, KL to the reference, and the generator/trainer mismatch
// (token_mult_prob_error with its 1.05 alert line, gen_kl_error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ui/run/run_tab.hpp"

class QLabel;

namespace fp8rl::ui {

class ChartView;
class LineLabel;

class OverviewTab : public RunTab {
  Q_OBJECT
 public:
  explicit OverviewTab(QWidget* parent = nullptr);

  QLabel* headline() const { return headline_; }
  ChartView* rewardChart() const { return reward_; }
  ChartView* accuracyChart() const { return accuracy_; }  // curves: 0 train, 1 validation
  ChartView* lossChart() const { return loss_; }
  ChartView* klChart() const { return kl_; }
  ChartView* multProbChart() const { return mult_prob_; }
  ChartView* genKlChart() const { return gen_kl_; }
  std::vector<ChartView*> charts() const;

 private:
  struct Binding {
    ChartView* chart;
    int curve;
    std::string key;
  };
  void clearRun() override;
  void showNew() override;
  void poll() override { updateHeadline(); }  // the status may change without new data
  void updateHeadline();
  void updateKlMessage();

  LineLabel* headline_line_;  // holds headline_: its changes repaint it alone
  QLabel* headline_;
  ChartView *reward_, *accuracy_, *loss_, *kl_, *mult_prob_, *gen_kl_;
  std::vector<Binding> bindings_;
};

}  // namespace fp8rl::ui
