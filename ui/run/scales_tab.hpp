// The FP8 scales tab of a run. Selectors for the layer (L0 …) and the tensor kind (weight,
// activation, gradient, KV). For weight/activation/gradient: the histogram of log2 of the
// dequantization scales (fp8_scale_log2/L{l}/{kind}) at the latest or a chosen step, and
// charts of the saturated and flushed fractions and the relative error of that layer and
// kind. For KV: the generator's KV-cache scales of the layer over steps. Beside them: a
// layers × steps heatmap of a chosen statistic (rel_error, saturated_frac, flushed_frac) of
// the chosen kind — or every linear × steps by the per-linear FP8 error signal the precision
// autopilot ranks by (fp8_error/L…/…) — (for KV: the k and v scales of every layer) and a table
// of the latest KV scales.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <vector>

#include "ui/run/run_tab.hpp"

class QCheckBox;
class QComboBox;
class QLabel;
class QSpinBox;
class QStackedWidget;
class QTableWidget;

namespace fp8rl::ui {

class ChartView;
class HeatmapView;
class HistogramView;

class ScalesTab : public RunTab {
  Q_OBJECT
 public:
  explicit ScalesTab(QWidget* parent = nullptr);

  // Selects a layer and a kind ("weight", "activation", "gradient" or "kv").
  void setSelection(int layer, const QString& kind);
  int layer() const;
  QString kind() const;  // weight, activation, gradient or kv
  // Shows the histogram recorded nearest to step instead of the latest (nullopt: latest).
  void setHistogramStep(std::optional<int64_t> step);
  // The histogram shown: its name and step (empty name: none).
  QString shownHistogram() const { return shown_name_; }
  std::optional<int64_t> shownStep() const { return shown_step_; }

  QComboBox* layerBox() const { return layer_box_; }
  QComboBox* kindBox() const { return kind_box_; }
  QComboBox* statBox() const { return stat_box_; }
  HistogramView* histogram() const { return hist_; }
  HeatmapView* heatmap() const { return heatmap_; }
  ChartView* saturatedChart() const { return saturated_; }
  ChartView* flushedChart() const { return flushed_; }
  ChartView* relErrorChart() const { return rel_error_; }
  ChartView* kvChart() const { return kv_; }  // curves: 0 k, 1 v (KV kind)
  QTableWidget* kvTable() const { return kv_table_; }
  std::vector<ChartView*> charts() const { return {saturated_, flushed_, rel_error_, kv_}; }

 private:
  void clearRun() override;
  void showNew() override;
  void updateLayers();
  void selectionChanged();  // rebinds the charts to the new layer/kind
  void updateCharts();
  void updateHistogram();
  void updateHeatmap();
  void updateKvTable();

  int layers_ = 0;
  QString shown_name_;
  std::optional<int64_t> shown_step_;
  QComboBox *layer_box_, *kind_box_, *stat_box_;
  QCheckBox* latest_box_;
  QSpinBox* step_spin_;
  QLabel* hist_caption_;
  QStackedWidget* pages_;
  HistogramView* hist_;
  HeatmapView* heatmap_;
  ChartView *saturated_, *flushed_, *rel_error_, *kv_;
  QTableWidget* kv_table_;
  QLabel* kv_caption_;
};

}  // namespace fp8rl::ui
