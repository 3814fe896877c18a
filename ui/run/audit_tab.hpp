// The Audit tab of a run: the latest layer audit (contract AuditRow) as a table — layer,
// module, the generator's and the trainer's precision, the largest |Δ| between the generator's
// weights and the trainer's quantization of its masters, ok — mismatched rows in red first.
#pragma once

#include "ui/run/run_tab.hpp"

class QLabel;
class QTableWidget;

namespace fp8rl::ui {

class AuditTab : public RunTab {
  Q_OBJECT
 public:
  explicit AuditTab(QWidget* parent = nullptr);

  QLabel* caption() const { return caption_; }
  QTableWidget* table() const { return table_; }  // layer, module, generator, trainer, max |Δ|, ok

 private:
  void clearRun() override;
  void showNew() override;

  int64_t audit_step_ = -1;  // step of the audit shown (-1: none)
  QLabel* caption_;
  QTableWidget* table_;
};

}  // namespace fp8rl::ui
