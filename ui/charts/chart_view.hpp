// A line chart of scalar series (one curve per run or per metric) built on QCustomPlot, with
// what users know from TensorBoard and W&B: x axis by step / wall time / tokens, EMA smoothing
// (debiased) with the raw line faint behind, log-y, autoscale that ignores outliers, hover
// read-out, zoom and pan (wheel/drag; double-click resets), export PNG and CSV, horizontal
// thresholds and vertical step markers (precision changes). Non-finite values are drawn as
// red triangles on the top (+inf, NaN) or bottom (−inf) edge, never dropped. Large curves are
// reduced to min/max per pixel column before drawing, so spikes survive.
//
// Data is pushed by the owner (no protocol or store code here): setCurveData() with the full
// series appends only the new tail when the series grew, so live updates are O(new points).
// Redraws are queued (QCustomPlot::rpQueuedReplot), coalescing bursts of updates.
#pragma once

#include <QColor>
#include <QString>
#include <vector>

#include "ui/charts/plot_view.hpp"
#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

enum class XAxisKind { step, wall, tokens };

struct ChartMarker {
  double step = 0;  // converted to wall/tokens through the first curve's points
  QString label;    // shown at the top of the line and in the hover read-out
};

class ChartView : public PlotView {
  Q_OBJECT
 public:
  // title: shown above the plot and used as the default export file name.
  explicit ChartView(const QString& title, QWidget* parent = nullptr);
  ~ChartView() override;

  // Adds an empty curve; returns its index.
  int addCurve(const QString& label, const QColor& color);
  int curveCount() const;
  // Removes every curve (and its data).
  void clearCurves();
  // The curve's data, sorted by step. When points extends what the curve already holds (same
  // size-prefix), only the tail is appended; otherwise the curve is rebuilt.
  void setCurveData(int curve, const std::vector<SeriesPoint>& points);
  // Number of points the curve holds (all of them, before any reduction for drawing).
  int64_t pointCount(int curve) const;
  // A band around the curve (a group's 95 % interval): filled between lo and hi, in the
  // curve's colour, below the lines; its x from the points as the curve's. Empty vectors remove
  // it. Bands count in the autoscale.
  void setCurveBand(int curve, const std::vector<SeriesPoint>& lo,
                    const std::vector<SeriesPoint>& hi);
  int bandCount() const;

  // Dashed horizontal line at y (e.g. token_mult_prob_error 1.05), with a label.
  void addThreshold(double y, const QString& label);
  // Vertical lines at steps (replaces the previous markers).
  void setMarkers(const std::vector<ChartMarker>& markers);
  int markerCount() const;

  void setXAxis(XAxisKind kind);
  XAxisKind xAxis() const;
  // Whether the header offers the x-axis choice (default: yes).
  void setXAxisChoosable(bool on);
  // Whether the plot draws its legend when it has 2 to 12 curves (default: yes; off where one
  // legend serves several charts).
  void setLegendShown(bool on);
  // EMA weight in [0, 0.999]; 0 draws the raw line only. The default is 0.6 (TensorBoard's).
  void setSmoothing(double weight);
  double smoothing() const;
  void setLogY(bool on);
  bool logY() const;
  // Autoscale y to the 1st–99th percentile of the visible data (with a margin) instead of
  // the full range.
  void setIgnoreOutliers(bool on);
  bool ignoreOutliers() const;
  // Fits both axes to the data (also on double-click).
  void rescale();

  // Writes the raw data as CSV (step, wall, tokens, then one column per curve); false with a
  // message on failure. (exportPng() writes the chart as PNG.)
  bool exportCsv(const QString& path, QString* error = nullptr);

  // Text of the hover read-out for the data point nearest to pixel x (empty if none); the
  // widget shows it as a tooltip-like label while the mouse is over the plot.
  QString readoutAt(double pixel_x) const;

  // Redraws now (blocking) and returns how long it took, in milliseconds (benchmarks).
  double replotNow();
  // Requests a coalesced redraw.
  void requestReplot();

  // In plot(), curve i is drawn by graph(3 i) (raw), graph(3 i + 1) (smoothed, hidden at
  // smoothing 0) and graph(3 i + 2) (non-finite markers). Their data is the reduced visible
  // part, refreshed at each replot (replotNow() or the queued one), not by setCurveData().

  // The title given at construction.
  QString title() const;
  // A message drawn in the middle of the plot (why the chart is empty, say); "" removes it.
  void setMessage(const QString& text);
  QString message() const;

 signals:
  // The user changed the x axis, smoothing, log-y or outlier setting from the chart's own
  // controls (owners may apply it to sibling charts).
  void optionsChanged();

 protected:
  void prepareExport() override;

 private:
  struct Impl;
  Impl* d_;
};

}  // namespace fp8rl::ui
