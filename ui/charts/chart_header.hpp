// The row above a line chart: its title (which yields its width first, so two charts fit side
// by side on a laptop screen), the x-axis choice, the EMA weight, the log-y and robust-y
// switches and the export menu. The show…() setters update the controls without emitting; the
// signals report what the user chose.
#pragma once

#include <QString>
#include <QWidget>

#include "ui/charts/chart_view.hpp"

class QCheckBox;
class QComboBox;
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

 signals:
  void xAxisChosen(XAxisKind kind);
  void smoothingChosen(double weight);
  void logYChosen(bool on);
  void ignoreOutliersChosen(bool on);
  void exportPngChosen();
  void exportCsvChosen();

 private:
  QComboBox* x_combo_ = nullptr;
  QSlider* smooth_slider_ = nullptr;
  QLabel* smooth_value_ = nullptr;
  QCheckBox* log_check_ = nullptr;
  QCheckBox* outlier_check_ = nullptr;
};

}  // namespace fp8rl::ui
