// The Overview tab of a run: headline numbers (step, latest reward, validation accuracy and
// token_mult_prob_error) over a grid of charts: reward, accuracy (train and validation), loss,
// KL to the reference, and the generator/trainer mismatch (token_mult_prob_error with its
// 1.05 alert line, gen_kl_error).
#pragma once

#include <QWidget>
#include <cstdint>
#include <string>
#include <vector>

class QLabel;

namespace fp8rl::ui {

struct RunData;
class ChartView;

class OverviewTab : public QWidget {
  Q_OBJECT
 public:
  explicit OverviewTab(QWidget* parent = nullptr);

  // Shows this run (nullptr: nothing); the pointer stays valid until the next setRun.
  void setRun(const RunData* run);
  // Appends what the run recorded since the last refresh (nothing when its version is unchanged).
  void refresh();

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
  void updateHeadline();

  const RunData* run_ = nullptr;
  int64_t version_ = -1;
  size_t markers_ = 0;
  QLabel* headline_;
  ChartView *reward_, *accuracy_, *loss_, *kl_, *mult_prob_, *gen_kl_;
  std::vector<Binding> bindings_;
};

}  // namespace fp8rl::ui
