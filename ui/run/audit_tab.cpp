#include "ui/run/audit_tab.hpp"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/data/run_data.hpp"
#include "ui/data/run_text.hpp"

namespace fp8rl::ui {

AuditTab::AuditTab(QWidget* parent)
    : RunTab(parent), caption_(new QLabel), table_(new QTableWidget(0, 6)) {
  caption_->setWordWrap(true);
  table_->setHorizontalHeaderLabels(
      {tr("layer"), tr("module"), tr("generator"), tr("trainer"), tr("max |Δ|"), tr("ok")});
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(caption_);
  layout->addWidget(table_, 1);
  setRun(nullptr);
}

void AuditTab::clearRun() {
  audit_step_ = -1;
  table_->setRowCount(0);
  caption_->setText(tr("No run selected."));
}

void AuditTab::showNew() {
  if (run_->audit.empty()) {
    caption_->setText(
        tr("No layer audit recorded: the run audits its weights at the start and "
           "after each weight sync when audit.every is above 0."));
    return;
  }
  if (run_->audit_step == audit_step_) return;
  audit_step_ = run_->audit_step;
  caption_->setText(
      tr("%1. The generator's compute copy of each linear against the trainer's quantization "
         "of its master weights: a row is ok when both use the same precision and the weights "
         "are bit-identical.")
          .arg(QString::fromStdString(auditBadgeText(*run_))));
  // Mismatches first, then by layer and module as recorded.
  std::vector<const AuditRow*> rows;
  for (const AuditRow& a : run_->audit) rows.push_back(&a);
  std::stable_partition(rows.begin(), rows.end(), [](const AuditRow* a) { return !a->ok; });
  table_->setRowCount(static_cast<int>(rows.size()));
  const QColor bad(0xd6, 0x27, 0x28);
  for (int r = 0; r < table_->rowCount(); ++r) {
    const AuditRow& a = *rows[static_cast<size_t>(r)];
    auto* layer = new QTableWidgetItem;
    layer->setData(Qt::DisplayRole, static_cast<qlonglong>(a.layer));
    auto* diff = new QTableWidgetItem;
    diff->setData(Qt::DisplayRole, a.max_abs_diff);
    const QList<QTableWidgetItem*> items = {
        layer,
        new QTableWidgetItem(QString::fromStdString(a.module)),
        new QTableWidgetItem(QString::fromStdString(a.generator_precision)),
        new QTableWidgetItem(QString::fromStdString(a.trainer_precision)),
        diff,
        new QTableWidgetItem(a.ok ? tr("ok") : tr("mismatch"))};
    for (int c = 0; c < items.size(); ++c) {
      if (!a.ok) items[c]->setForeground(bad);
      table_->setItem(r, c, items[c]);
    }
  }
}

}  // namespace fp8rl::ui
