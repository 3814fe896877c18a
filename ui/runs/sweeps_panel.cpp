#include "ui/runs/sweeps_panel.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QSet>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "contract/metrics.hpp"
#include "ui/runs/runs_table_model.hpp"

namespace fp8rl::ui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

// An item's identity, to keep expansion and selection across rebuilds.
QString keyOf(const QTreeWidgetItem* item) {
  return QStringLiteral("%1/%2/%3")
      .arg(item->data(0, SweepsPanel::kSweepRole).toLongLong())
      .arg(item->data(0, SweepsPanel::kGroupRole).toString())
      .arg(item->data(0, SweepsPanel::kRunRole).toLongLong());
}

// "3 running · 2 finished".
QString statusCounts(const RunGroup& g) {
  std::map<std::string, int> counts;
  for (const auto& r : g.runs) ++counts[r.status];
  QStringList parts;
  for (const auto& [status, n] : counts) parts << QStringLiteral("%1 %2").arg(n).arg(qs(status));
  if (g.queued) parts << QStringLiteral("%1 queued").arg(g.queued);
  return parts.join(QStringLiteral(" · "));
}

}  // namespace

SweepsPanel::SweepsPanel(QWidget* parent)
    : QWidget(parent),
      tree_(new QTreeWidget(this)),
      compare_(new QPushButton(tr("Compare groups"), this)),
      empty_(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  tree_->setColumnCount(kColumns);
  tree_->setHeaderLabels({tr("Sweep · group · run"), tr("Progress"), tr("Status")});
  tree_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  tree_->setUniformRowHeights(true);
  tree_->setAlternatingRowColors(true);
  tree_->setTextElideMode(Qt::ElideRight);
  auto* header = tree_->header();
  header->setStretchLastSection(true);
  header->setSectionResizeMode(kName, QHeaderView::Interactive);
  header->resizeSection(kName, fontMetrics().horizontalAdvance(QStringLiteral("3 demo-precision-x")) + 40);
  header->setSectionResizeMode(kProgress, QHeaderView::Interactive);
  header->resizeSection(kProgress, fontMetrics().horizontalAdvance(QStringLiteral("15/15 done · 1 running")) + 16);
  empty_->setText(tr("No sweeps in this database. Run › Sweep… (or `fp8rl sweep FILE`) starts "
                     "one: seeds × precision variants, queued, with a verdict at the end."));
  empty_->setWordWrap(true);
  empty_->setMargin(8);
  layout->addWidget(empty_);
  layout->addWidget(tree_, 1);
  auto* row = new QHBoxLayout;
  row->addStretch(1);
  compare_->setToolTip(tr("Select two groups of one sweep (Ctrl-click) to compare them: "
                          "the first against the second"));
  row->addWidget(compare_);
  layout->addLayout(row);
  compare_->setEnabled(false);

  connect(tree_, &QTreeWidget::currentItemChanged, this,
          [this](QTreeWidgetItem* item) { onCurrentChanged(item); });
  connect(tree_, &QTreeWidget::itemSelectionChanged, this, &SweepsPanel::updateCompareButton);
  connect(compare_, &QPushButton::clicked, this, [this] {
    const QStringList g = selectedGroups();
    if (g.size() == 2) emit compareChosen(selectedSweep(), g[0], g[1]);
  });
}

void SweepsPanel::onCurrentChanged(QTreeWidgetItem* item) {
  if (!item) return;
  const qint64 run = item->data(0, kRunRole).toLongLong();
  if (run > 0) {
    emit runChosen(run);
    return;
  }
  emit groupsChosen(item->data(0, kSweepRole).toLongLong(), item->data(0, kGroupRole).toString());
}

int64_t SweepsPanel::selectedSweep() const {
  for (QTreeWidgetItem* item : tree_->selectedItems())
    return item->data(0, kSweepRole).toLongLong();
  return -1;
}

QStringList SweepsPanel::selectedGroups() const {
  QStringList labels;
  QSet<qint64> sweeps;
  // In tree order, so that "A against B" reads top to bottom.
  for (QTreeWidgetItemIterator it(tree_, QTreeWidgetItemIterator::Selected); *it; ++it) {
    if ((*it)->data(0, kRunRole).toLongLong() > 0) continue;
    const QString g = (*it)->data(0, kGroupRole).toString();
    if (g.isEmpty()) continue;
    labels << g;
    sweeps.insert((*it)->data(0, kSweepRole).toLongLong());
  }
  return sweeps.size() == 1 ? labels : QStringList();
}

void SweepsPanel::selectGroups(int64_t sweep, const QStringList& labels) {
  tree_->clearSelection();
  QTreeWidgetItem* first = nullptr;
  for (QTreeWidgetItemIterator it(tree_); *it; ++it)
    if ((*it)->data(0, kSweepRole).toLongLong() == sweep && (*it)->data(0, kRunRole).toLongLong() == 0 &&
        labels.contains((*it)->data(0, kGroupRole).toString())) {
      (*it)->setSelected(true);
      if ((*it)->parent()) (*it)->parent()->setExpanded(true);
      if (!first) first = *it;
    }
  if (first) tree_->setCurrentItem(first, 0, QItemSelectionModel::NoUpdate);
  updateCompareButton();
}

void SweepsPanel::updateCompareButton() {
  compare_->setEnabled(selectedGroups().size() == 2);
}

void SweepsPanel::setSweeps(const std::vector<SweepEntry>& sweeps) {
  // What would be shown, as text: nothing to do when it is the same.
  QString shown;
  for (const auto& e : sweeps) {
    shown += QStringLiteral("%1|%2|").arg(e.sweep.id).arg(qs(e.progress.summary()));
    for (const auto& g : e.groups) {
      shown += qs(g.label) + QString::number(g.queued);
      for (const auto& r : g.runs)
        shown += QStringLiteral(",%1:%2:%3").arg(r.id).arg(qs(r.status)).arg(r.last_step.value_or(0));
    }
  }
  empty_->setVisible(sweeps.empty());
  if (shown == shown_) return;
  shown_ = shown;

  QSet<QString> expanded, selected;
  QString current;
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
    if ((*it)->isExpanded()) expanded.insert(keyOf(*it));
    if ((*it)->isSelected()) selected.insert(keyOf(*it));
  }
  if (tree_->currentItem()) current = keyOf(tree_->currentItem());
  const bool first_fill = tree_->topLevelItemCount() == 0;
  const int scrolled = tree_->verticalScrollBar()->value();
  const QSignalBlocker block(tree_);
  tree_->clear();
  for (auto e = sweeps.rbegin(); e != sweeps.rend(); ++e) {
    auto* top = new QTreeWidgetItem(tree_);
    top->setData(0, kSweepRole, static_cast<qint64>(e->sweep.id));
    top->setText(kName, QStringLiteral("%1 %2").arg(e->sweep.id).arg(qs(e->sweep.name)));
    top->setText(kProgress, qs(e->progress.summary()));
    top->setToolTip(kProgress, qs(e->progress.summary()));
    const bool live = e->sweep.runner_pid > 0 && !e->progress.complete();
    top->setText(kStatus, e->progress.complete() ? tr("complete")
                          : live               ? tr("running")
                                               : tr("waiting (fp8rl sweep continues it)"));
    QString axes;
    for (const auto& a : e->sweep.axes) axes += (axes.isEmpty() ? "" : " × ") + qs(a);
    top->setToolTip(kName, tr("Sweep %1: %2\naxes: %3 (replicate: %4)\n%5")
                               .arg(e->sweep.id)
                               .arg(qs(e->sweep.name), axes,
                                    e->sweep.replicate.empty() ? tr("none") : qs(e->sweep.replicate),
                                    qs(e->sweep.source)));
    for (const auto& g : e->groups) {
      auto* gi = new QTreeWidgetItem(top);
      gi->setData(0, kSweepRole, static_cast<qint64>(e->sweep.id));
      gi->setData(0, kGroupRole, qs(g.label));
      gi->setText(kName, qs(g.label));
      gi->setText(kProgress, (g.runs.size() == 1 ? tr("1 run") : tr("%1 runs").arg(g.runs.size())) +
                                 (g.queued ? tr(" + %1 queued").arg(g.queued) : QString()));
      gi->setText(kStatus, statusCounts(g));
      for (const auto& r : g.runs) {
        auto* ri = new QTreeWidgetItem(gi);
        ri->setData(0, kSweepRole, static_cast<qint64>(e->sweep.id));
        ri->setData(0, kGroupRole, qs(g.label));
        ri->setData(0, kRunRole, static_cast<qint64>(r.id));
        const std::string rep = g.replicate_of(r);
        ri->setText(kName, rep.empty() ? tr("run %1").arg(r.id)
                                       : tr("run %1 · %2=%3").arg(r.id).arg(qs(g.replicate), qs(rep)));
        const int64_t done = run_steps_done(r.config, r.last_step);
        const int64_t total = run_total_steps(r.config);
        ri->setText(kProgress, total > 0 ? tr("%1/%2 steps").arg(done).arg(total) : QString());
        ri->setText(kStatus, qs(r.status));
        ri->setIcon(kStatus, runStatusIcon(qs(r.status)));
        ri->setForeground(kStatus, runStatusColor(qs(r.status)));
        ri->setToolTip(kName, qs(r.name));
      }
    }
  }
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
    const QString k = keyOf(*it);
    // The newest sweep opens expanded the first time.
    if (expanded.contains(k) || (first_fill && !(*it)->parent() && *it == tree_->topLevelItem(0)))
      (*it)->setExpanded(true);
    if (selected.contains(k)) (*it)->setSelected(true);
    if (k == current) tree_->setCurrentItem(*it, 0, QItemSelectionModel::NoUpdate);
  }
  tree_->verticalScrollBar()->setValue(scrolled);
  updateCompareButton();
}

}  // namespace fp8rl::ui
