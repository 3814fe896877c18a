// The Samples & events tab of a run: the samples of one step (prompt, completion, answer,
// reward; a slider picks the step, by default the latest, and follows new steps unless moved
// off the latest), each completion drawn token by token on a colour of its p − g (trainer minus
// generator log-prob: blue negative, white 0, red positive, saturating at ±0.05; hover a token
// for its value), the reward coloured from red 0 to green 1; below, the run's events (step, wall
// time, kind, message; newest first, errors in red), updated incrementally.
#pragma once

#include <QColor>
#include <QList>
#include <cstdint>
#include <optional>
#include <vector>

#include "ui/run/run_tab.hpp"

class QLabel;
class QSlider;
class QTableWidget;

namespace fp8rl::ui {

class SamplesTab : public RunTab {
  Q_OBJECT
 public:
  // Item data roles of a completion cell: its tokens (QStringList) and their p − g
  // (QVariantList of double); both empty for samples without tokens (validation).
  static constexpr int kTokensRole = Qt::UserRole + 1;
  static constexpr int kDiffsRole = Qt::UserRole + 2;

  explicit SamplesTab(QWidget* parent = nullptr);

  // Shows the samples of the recorded step nearest to step; follows new steps again only when
  // that is the latest.
  void showStep(int64_t step);
  std::optional<int64_t> shownStep() const { return shown_; }
  bool followLatest() const { return follow_; }
  // The background of a token whose log-probs differ by diff (run_text's colour).
  static QColor tokenColor(double diff);
  // The token backgrounds of a row's completion (empty: drawn as plain text).
  QList<QColor> tokenColors(int row) const;

  QSlider* stepSlider() const { return slider_; }  // index into the steps with samples
  QLabel* stepLabel() const { return step_label_; }
  QTableWidget* sampleTable() const { return samples_; }  // prompt, completion, answer, reward
  QTableWidget* eventTable() const { return events_; }    // step, wall time, kind, message

 private:
  void clearRun() override;
  void showNew() override;
  void updateSteps();
  void showIndex(int index);
  void updateEvents();

  bool follow_ = true;
  std::optional<int64_t> shown_;  // step whose samples the table holds
  size_t shown_count_ = 0;        // samples of that step shown
  std::vector<int64_t> steps_;    // steps with samples, ascending
  size_t events_shown_ = 0;       // run->events already in the table
  QSlider* slider_;
  QLabel* step_label_;
  QTableWidget* samples_;
  QTableWidget* events_;
};

}  // namespace fp8rl::ui
