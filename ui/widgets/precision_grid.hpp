// The precision grid: layers × modules (the contract's module list), each cell a BF16/FP8
// toggle (click flips it); edited cells are highlighted until applied. Row headers show the
// layer's FP8 quantization error when known; a heat column shows each layer's worst linear by
// the per-linear FP8 error signal, and cells mark which linears the precision autopilot holds
// (violet) and which a person pinned (underlined), with a legend under the table. Used by the
// launch dialog (the run's initial map) and the run view's Precision tab (live edits sent to the
// worker). Maps, overrides and their text come from the run contract (contract/precision.hpp).
//
// A model with experts (Qwen3-MoE) adds a router column; a layer with experts shows in its
// gate/up/down cells what its experts share ("MIXED" when they differ; a click sets them all)
// and expands (a click on its row header) into one row per expert with that expert's gate, up
// and down — so a 48-layer × 128-expert model stays one screen until a layer is opened. A
// layer with a shared expert (DeepSeek-V3) opens with one more row, the shared expert's.
// Columns a model has no linear for (k, v of latent attention; q_a … kv_b of the others) are
// hidden, and a layer's cell stays empty where it lacks the module.
#pragma once

#include <QStringList>
#include <QWidget>
#include <optional>
#include <vector>

#include "contract/precision.hpp"
#include "core/json.hpp"

class QLabel;
class QTableWidget;

namespace fp8rl::ui {

class PrecisionGrid : public QWidget {
  Q_OBJECT
 public:
  // The column titles: the contract's short module names (q, k, v, o, gate, up, down, q_a,
  // q_b, kv_a, kv_b).
  static const QStringList& modules();

  explicit PrecisionGrid(QWidget* parent = nullptr);

  // Shows map as the applied state; clears edits. A map of fp32 (the all-FP32 reference) has
  // no per-layer FP8/BF16 choice: the grid is empty and says so.
  void setMap(const PrecisionMap& map);
  // The same from the map's JSON (PrecisionMap::to_json); one that is none shows an empty grid
  // with the contract's reason.
  void setMap(const Json& map);
  // A grid of `layers` rows, every cell `precision`.
  void setUniform(int layers, Precision precision);
  int layers() const;
  // The grid as shown (edits included), and as JSON.
  const PrecisionMap& shown() const { return shown_; }
  Json map() const;
  // The cells that differ from the applied map, as overrides ("0.gate=bf16": the config's
  // precision.overrides format).
  QStringList edits() const;
  // The same edits, typed (what a live edit carries).
  std::vector<PrecisionOverride> changes() const;
  // All cells that differ from a map of `base` everywhere, as overrides (for a run config).
  QStringList overridesFrom(Precision base) const;
  // Per-layer FP8 relative error (NaN: unknown) shown in the row headers.
  void setLayerErrors(const std::vector<double>& rel_error);
  // The per-linear FP8 error signal (metric fp8_error: the precision autopilot's), [layer ·
  // kModules + module], NaN where unknown: each cell's tooltip says its value, and the heat
  // column ("FP8 err", hidden while nothing is known) shows each layer's worst linear,
  // coloured from white (1% and less) to red (100%).
  void setLinearErrors(const std::vector<double>& errors);
  // Linears the autopilot holds in BF16 (violet cells) and linears a person pinned (the
  // autopilot never moves them: underlined), with a legend under the table while there are any.
  void setMarks(const std::vector<std::pair<int64_t, Module>>& autopilot,
                const std::vector<std::pair<int64_t, Module>>& pinned);
  // The heat column's table column, and the text of a layer's heat cell (its worst linear's
  // error: "98.8%"; "" when hidden).
  static constexpr int kHeatColumn = kModules + 1;
  QString heatText(int layer) const;
  // Flips one cell between FP8 and BF16 (what a click does). module kModules is the router.
  void toggle(int layer, int module);
  // The precision name of a shown cell ("fp8"; "mixed" for experts that differ; module
  // kModules: the router), "" outside the grid.
  QString cell(int layer, int module) const;
  // Experts: opens or closes a layer's rows of experts (what a click on its header does), and
  // flips one expert's gate, up or down.
  void setExpanded(int layer, bool expanded);
  bool expanded(int layer) const;
  void toggleExpert(int layer, int expert, Module m);
  // The table row of a layer's header row, of one of its experts or of its shared expert
  // (expert kSharedRow); −1: not shown.
  static constexpr int kSharedRow = -2;
  int rowOf(int layer, int expert = -1) const;

  QTableWidget* table() const { return table_; }
  QLabel* legend() const { return legend_; }

  // The message shown above the grid ("" when none): why a map was rejected, or the reason
  // given to setUnavailable.
  QString message() const;
  // Empties the grid and shows `reason` instead (e.g. an all-FP32 run has no per-layer map).
  void setUnavailable(const QString& reason);
  // Makes the shown state the applied one (edits() becomes empty), e.g. after the worker
  // confirmed a set_precision.
  void markApplied();
  // Drops the edits (the shown state goes back to the applied one).
  void revert();
  // Sets every shown cell of a whole column (module) or row (layer) to `precision`; emits
  // edited() once when anything changed.
  void setModule(int module, Precision precision);
  void setLayer(int layer, Precision precision);
  // The header label of a layer row: "L3", or "L3 · err 2.1%" when its error is known.
  QString layerLabel(int layer) const;

 signals:
  void edited();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  // Applies o to the shown map; renders and emits edited() when a cell changed.
  void edit(const PrecisionOverride& o);
  bool inGrid(int layer, int module) const;
  // A table row: a layer, one expert of a layer, or its shared expert.
  struct Row {
    int layer;
    int expert;  // −1: the layer's own row; kSharedRow: its shared expert
  };
  void clicked(int row, int column);
  void headerClicked(int row);
  // The shown precision of a layer row's cell (nullopt: experts that differ, or no router).
  std::optional<Precision> layerCell(const PrecisionMap& pm, int layer, int column) const;
  std::vector<Row> rows_;
  std::vector<char> expanded_;
  void render();
  void showMessage(const QString& text);
  // Flips a whole column (module) or row (layer): all BF16 becomes FP8, anything else BF16.
  void toggleModule(int module);
  void toggleLayer(int layer);
  QTableWidget* table_;
  QLabel* message_;
  QLabel* legend_;  // what the autopilot's and the pins' marks mean (shown while there are any)
  PrecisionMap applied_, shown_;
  std::vector<double> errors_;
  std::vector<double> linear_errors_;  // [layer · kModules + module]
  std::vector<std::pair<int64_t, Module>> auto_marks_, pin_marks_;
  double linearError(int layer, int module) const;
};

}  // namespace fp8rl::ui
