// What the chart widgets have in common: a column of a header row, one QCustomPlot (object
// name "plot") taking the height, and an optional caption below; the small font of their tick
// labels, legends and captions; the legend in a row under the axis rect (placeLegendBelow),
// hidden until a chart shows it; export of the plot as PNG.
#pragma once

#include <QFont>
#include <QSize>
#include <QString>
#include <QWidget>

class QCustomPlot;
class QLabel;
class QVBoxLayout;

namespace fp8rl::ui {

class PlotView : public QWidget {
  Q_OBJECT
 public:
  ~PlotView() override;

  // Writes the plot as PNG at its size on screen (the view's default size while it is smaller
  // than 100 × 80, e.g. never shown); false with a message on failure.
  bool exportPng(const QString& path, QString* error = nullptr);

  QCustomPlot* plot() const;

 protected:
  // export_size: the PNG size while the plot is not laid out.
  PlotView(QSize export_size, QWidget* parent);

  // Puts the header row (a title, controls) above the plot.
  void setHeader(QWidget* header);
  // Adds a caption below the plot in the small font (object name "caption").
  QLabel* addCaption();
  // The font of tick labels, legends and captions: a point smaller than the plot's, at least 6.
  QFont smallFont() const;
  // Brings what the plot draws up to date: an export draws it without a replot.
  virtual void prepareExport() {}

 private:
  QVBoxLayout* layout_ = nullptr;
  QCustomPlot* plot_ = nullptr;
  QSize export_size_;
};

}  // namespace fp8rl::ui
