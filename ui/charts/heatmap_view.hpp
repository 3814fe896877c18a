// A heatmap (QCPColorMap): columns are steps, rows are bins or layers. Used for "histogram
// over time" (importance weights per step), "layers × steps" FP8 statistics and, with labelled
// columns, "layers × modules" sensitivities. Empty cells (no data) are transparent; non-finite
// cells are drawn in a distinct colour and counted; marked cells are outlined.
#pragma once

#include <QString>
#include <QStringList>
#include <vector>

#include "ui/charts/plot_view.hpp"

namespace fp8rl::ui {

struct HeatmapData {
  std::vector<double> steps;  // column x positions (sorted)
  int rows = 0;
  double row_lo = 0, row_hi = 1;  // y range covered by the rows (row r spans a 1/rows slice)
  QStringList row_labels;         // optional: one label per row (e.g. "L0" …), else numeric
  // values[c * rows + r]; NaN where a cell has no data.
  std::vector<double> values;
  QString value_label;  // colour-scale caption
  bool log_color = false;
  QString x_label = QStringLiteral("Step");
  QStringList column_labels;  // optional: one label per column, shown instead of the steps
  QStringList cell_tips;      // optional: one tooltip per cell (values' layout), else the value
  // optional: cells drawn with an outline (values' layout); neighbours in a row with the same
  // value share one outline.
  std::vector<char> marked;
};

class HeatmapView : public PlotView {
  Q_OBJECT
 public:
  explicit HeatmapView(const QString& title, QWidget* parent = nullptr);
  ~HeatmapView() override;

  void setData(const HeatmapData& data);
  const HeatmapData& data() const;

 private:
  struct Impl;
  Impl* d_;
};

}  // namespace fp8rl::ui
