// Histograms as bars (one histogram) or outlines (several overlaid: runs or steps compared),
// over linear or log-x bins as recorded (edges), with the underflow and overflow counts shown
// as labelled bars beyond the ends. Counts may be normalized to fractions so histograms of
// different sizes compare.
#pragma once

#include <QColor>
#include <QString>
#include <vector>

#include "contract/histogram.hpp"
#include "ui/charts/plot_view.hpp"

namespace fp8rl::ui {

struct HistogramCurve {
  QString label;
  QColor color;
  Histogram hist;  // edges (bins + 1), counts (bins + 2: underflow, bins…, overflow)
};

class HistogramView : public PlotView {
  Q_OBJECT
 public:
  explicit HistogramView(const QString& title, QWidget* parent = nullptr);
  ~HistogramView() override;

  // Replaces what is shown. Histograms with inconsistent edges/counts are skipped and
  // reported in the view's caption (never a crash).
  void setHistograms(const std::vector<HistogramCurve>& curves);
  int histogramCount() const;
  // Log-scaled x axis (importance weights); edges must then be positive.
  void setLogX(bool on);
  // Fractions instead of counts.
  void setNormalized(bool on);
  // A vertical dashed line (e.g. the TIS bounds).
  void addVerticalLine(double x, const QString& label);
  void clearVerticalLines();
  // The x positions of the vertical lines shown, in the order they were added.
  std::vector<double> verticalLines() const;

  // Writes what is shown as CSV: bin_lo, bin_hi, then one column per histogram (counts, or
  // fractions when normalized); the underflow row is (-inf, first edge), the overflow row
  // (last edge, inf). False with a message on failure.
  bool exportCsv(const QString& path, QString* error = nullptr);

 private:
  struct Impl;
  Impl* d_;
};

}  // namespace fp8rl::ui
