// The Samples & events tab of a run: the recent sample responses (step, prompt, response,
// answer, reward; newest first, reward coloured from red 0 to green 1) and the run's events
// (step, wall time, kind, message; newest first, errors in red), both updated incrementally.
#pragma once

#include <QWidget>
#include <cstdint>
#include <optional>

class QTableWidget;

namespace fp8rl::ui {

struct RunData;

class SamplesTab : public QWidget {
  Q_OBJECT
 public:
  explicit SamplesTab(QWidget* parent = nullptr);

  void setRun(const RunData* run);
  void refresh();

  QTableWidget* sampleTable() const { return samples_; }  // step, prompt, response, answer, reward
  QTableWidget* eventTable() const { return events_; }    // step, wall time, kind, message

 private:
  void updateSamples();
  void updateEvents();

  const RunData* run_ = nullptr;
  int64_t version_ = -1;
  std::optional<int64_t> sample_step_;  // step of the newest sample shown
  size_t events_shown_ = 0;             // run->events already in the table
  QTableWidget* samples_;
  QTableWidget* events_;
};

}  // namespace fp8rl::ui
