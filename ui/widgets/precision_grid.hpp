// The precision grid: layers × modules (q, k, v, o, gate, up, down), each cell a BF16/FP8
// toggle (click flips it); edited cells are highlighted until applied. Row headers show the
// layer's FP8 quantization error when known. Used by the launch dialog (the run's initial
// map) and the run view's Precision tab (live edits sent to the worker).
#pragma once

#include <QStringList>
#include <QWidget>
#include <vector>

#include "core/json.hpp"

class QLabel;
class QTableWidget;

namespace fp8rl::ui {

class PrecisionGrid : public QWidget {
  Q_OBJECT
 public:
  static const QStringList& modules();  // q, k, v, o, gate, up, down

  explicit PrecisionGrid(QWidget* parent = nullptr);

  // Shows map (a JSON array of layers, each {"q": "fp8", "k": "bf16", …}) as the applied
  // state; clears edits. An invalid map shows an empty grid with the reason.
  void setMap(const Json& map);
  // A grid of `layers` rows, every cell `precision` ("fp8" or "bf16").
  void setUniform(int layers, const QString& precision);
  int layers() const;
  // The grid as shown (edits included), in setMap's format.
  Json map() const;
  // The cells that differ from the applied map, as "LAYER.MODULE=PRECISION" (the worker's
  // set_precision and the config's precision.overrides format).
  QStringList edits() const;
  // All cells that differ from `base` ("fp8" or "bf16") as overrides (for a run config).
  QStringList overridesFrom(const QString& base) const;
  // Per-layer FP8 relative error (NaN: unknown) shown in the row headers.
  void setLayerErrors(const std::vector<double>& rel_error);
  // Flips one cell (what a click does).
  void toggle(int layer, int module);
  QString cell(int layer, int module) const;

  QTableWidget* table() const { return table_; }

  // --- Additions

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
  void setModule(int module, const QString& precision);
  void setLayer(int layer, const QString& precision);
  // The header label of a layer row: "L3", or "L3 · err 2.1%" when its error is known.
  QString layerLabel(int layer) const;

 signals:
  void edited();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void render();
  void showMessage(const QString& text);
  // Flips a whole column (module) or row (layer): all BF16 becomes FP8, anything else BF16.
  void toggleModule(int module);
  void toggleLayer(int layer);
  QTableWidget* table_;
  QLabel* message_;
  std::vector<QStringList> applied_, shown_;
  std::vector<double> errors_;
};

}  // namespace fp8rl::ui
