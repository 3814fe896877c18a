// The header above a line chart: its title, the x-axis choice, the EMA weight, the log-y and
// robust-y switches and the export menu. One row when the title and the controls fit side by
// side; otherwise the title gets a row of its own above the controls, so it is never cut (two
// charts side by side on a laptop screen are narrower than both). The show…() setters update
// the controls without emitting; the signals report what the user chose.
#pragma once

#include <QString>
#include <QWidget>

#include "ui/charts/chart_view.hpp"

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QSlider;

namespace fp8rl::ui {

class ChartHeader : public QWidget {
  Q_OBJECT
 public:
  ChartHeader(const QString& title, QWidget* parent);

  void showXAxis(XAxisKind kind);
  // weight: in [0, 0.999], shown in permille steps.
  void showSmoothing(double weight);
  void showLogY(bool on);
  void showIgnoreOutliers(bool on);
  // Hides the x-axis choice (charts whose points have steps only, such as a group's mean).
  void setXAxisChoosable(bool on);
  // Whether the title and the controls share one row (else the title is above them).
  bool oneRow() const { return one_row_; }
  // The narrowest the header can be: its controls' width (the title may then be elided).
  QSize minimumSizeHint() const override;

 signals:
  void xAxisChosen(XAxisKind kind);
  void smoothingChosen(double weight);
  void logYChosen(bool on);
  void ignoreOutliersChosen(bool on);
  void exportPngChosen();
  void exportCsvChosen();

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  void placeControls(int width);

  QLabel* title_ = nullptr;
  QWidget* controls_ = nullptr;
  QHBoxLayout* title_row_ = nullptr;
  QHBoxLayout* controls_row_ = nullptr;
  bool one_row_ = true;
  QComboBox* x_combo_ = nullptr;
  QSlider* smooth_slider_ = nullptr;
  QLabel* smooth_value_ = nullptr;
  QCheckBox* log_check_ = nullptr;
  QCheckBox* outlier_check_ = nullptr;
};

}  // namespace fp8rl::ui
