#include "ui/run/samples_tab.hpp"

#include <QApplication>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QPainter>
#include <QSignalBlocker>
#include <QSlider>
#include <QSplitter>
#include <QStyledItemDelegate>
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "contract/metrics.hpp"
#include "ui/data/autopilot_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/run_text.hpp"

namespace fp8rl::ui {

namespace {

QTableWidget* makeTable(const QStringList& headers) {
  auto* t = new QTableWidget(0, static_cast<int>(headers.size()));
  t->setHorizontalHeaderLabels(headers);
  t->verticalHeader()->setVisible(false);
  t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
  t->horizontalHeader()->setStretchLastSection(true);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setWordWrap(false);
  return t;
}

QTableWidgetItem* textItem(const QString& text, const QFont* font = nullptr) {
  auto* item = new QTableWidgetItem(text);
  item->setToolTip(text);
  if (font) item->setFont(*font);
  return item;
}

QTableWidgetItem* stepItem(int64_t step) {
  auto* item = new QTableWidgetItem;
  item->setData(Qt::DisplayRole, static_cast<qlonglong>(step));
  item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

QString wallText(double s) {
  if (!std::isfinite(s)) return QStringLiteral("—");
  if (s < 60) return QStringLiteral("%1 s").arg(s, 0, 'f', 1);
  const auto t = static_cast<qint64>(s);
  return QStringLiteral("%1:%2:%3")
      .arg(t / 3600)
      .arg(t / 60 % 60, 2, 10, QLatin1Char('0'))
      .arg(t % 60, 2, 10, QLatin1Char('0'));
}

// Red (0) through yellow to green (1); grey when not finite.
QColor rewardColor(double reward) {
  if (!std::isfinite(reward)) return QColor(0xcc, 0xcc, 0xcc);
  const double x = std::clamp(reward, 0.0, 1.0);
  return QColor::fromHsvF(static_cast<float>(x / 3.0), 0.35f, 1.0f);
}

// Draws a completion token by token, each on the colour of its p − g, and tells a hovered
// token's value; cells without tokens are drawn as plain text.
class TokenDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

  void paint(QPainter* p, const QStyleOptionViewItem& option,
             const QModelIndex& index) const override {
    const QStringList tokens = index.data(SamplesTab::kTokensRole).toStringList();
    if (tokens.isEmpty()) {
      QStyledItemDelegate::paint(p, option, index);
      return;
    }
    QStyleOptionViewItem o(option);
    initStyleOption(&o, index);
    o.text.clear();  // the background and selection only
    const QWidget* w = option.widget;
    (w ? w->style() : QApplication::style())->drawControl(QStyle::CE_ItemViewItem, &o, p, w);
    const QVariantList diffs = index.data(SamplesTab::kDiffsRole).toList();
    const auto boxes = tokenBoxes(o.font, option.rect, tokens);
    p->save();
    p->setClipRect(option.rect);
    p->setFont(o.font);
    for (size_t i = 0; i < boxes.size(); ++i) {
      const int t = static_cast<int>(i);
      p->fillRect(boxes[i], SamplesTab::tokenColor(t < diffs.size() ? diffs[t].toDouble() : 0.0));
      p->setPen(Qt::black);
      p->drawText(boxes[i], Qt::AlignCenter, tokens[t]);
    }
    p->restore();
  }

  bool helpEvent(QHelpEvent* e, QAbstractItemView* view, const QStyleOptionViewItem& option,
                 const QModelIndex& index) override {
    const QStringList tokens = index.data(SamplesTab::kTokensRole).toStringList();
    if (e->type() != QEvent::ToolTip || tokens.isEmpty())
      return QStyledItemDelegate::helpEvent(e, view, option, index);
    const QVariantList diffs = index.data(SamplesTab::kDiffsRole).toList();
    const auto boxes = tokenBoxes(option.font, option.rect, tokens);
    for (size_t i = 0; i < boxes.size(); ++i) {
      const int t = static_cast<int>(i);
      if (!boxes[i].contains(e->pos())) continue;
      const double diff = t < diffs.size() ? diffs[t].toDouble() : 0.0;
      QToolTip::showText(e->globalPos(),
                         QObject::tr("token %1 of %2: %3 (p − g = log π_train − log π_gen)")
                             .arg(t + 1)
                             .arg(tokens.size())
                             .arg(QString::fromStdString(tokenText(tokens[t].toStdString(), diff))),
                         view);
      return true;
    }
    return QStyledItemDelegate::helpEvent(e, view, option, index);
  }

 private:
  // Where each token stands in the cell, left to right; those beyond its right edge are left
  // out.
  static std::vector<QRect> tokenBoxes(const QFont& font, const QRect& cell,
                                       const QStringList& tokens) {
    const QFontMetrics fm(font);
    std::vector<QRect> out;
    int x = cell.left() + 3;
    for (const QString& t : tokens) {
      if (x >= cell.right()) break;
      const int w = fm.horizontalAdvance(t) + 2;
      out.emplace_back(x, cell.top() + 1, w, cell.height() - 2);
      x += w;
    }
    return out;
  }
};

}  // namespace

QColor SamplesTab::tokenColor(double diff) {
  const Rgb c = logprobDiffColor(diff);
  return QColor(c.r, c.g, c.b);
}

QList<QColor> SamplesTab::tokenColors(int row) const {
  QList<QColor> out;
  const QTableWidgetItem* item = samples_->item(row, 1);
  if (!item) return out;
  for (const QVariant& d : item->data(kDiffsRole).toList()) out.append(tokenColor(d.toDouble()));
  return out;
}

SamplesTab::SamplesTab(QWidget* parent)
    : RunTab(parent),
      slider_(new QSlider(Qt::Horizontal)),
      step_label_(new QLabel),
      samples_(makeTable({tr("prompt"), tr("completion"), tr("answer"), tr("reward")})),
      events_(makeTable({tr("step"), tr("wall time"), tr("kind"), tr("message")})) {
  samples_->horizontalHeader()->setStretchLastSection(false);
  samples_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Interactive);
  samples_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  samples_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Interactive);
  samples_->setItemDelegateForColumn(1, new TokenDelegate(samples_));
  slider_->setToolTip(tr("The step whose samples are shown"));
  slider_->setPageStep(10);
  step_label_->setMinimumWidth(
      step_label_->fontMetrics().horizontalAdvance(QStringLiteral("step 000000 (0000 of 0000)")));
  auto* legend = new QLabel(
      tr("Completion tokens coloured by p − g (log π_train − log π_gen): "
         "<span style=\"background:%1\">&nbsp;−0.05&nbsp;</span>"
         "<span style=\"background:#ffffff\">&nbsp;0&nbsp;</span>"
         "<span style=\"background:%2\">&nbsp;+0.05&nbsp;</span> (hover a token for its value)")
          .arg(tokenColor(-kLogprobDiffScale).name(), tokenColor(kLogprobDiffScale).name()));

  auto* top = new QWidget;
  auto* top_layout = new QVBoxLayout(top);
  top_layout->setContentsMargins(0, 0, 0, 0);
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Samples of step:")));
  controls->addWidget(slider_, 1);
  controls->addWidget(step_label_);
  top_layout->addLayout(controls);
  top_layout->addWidget(legend);
  top_layout->addWidget(samples_);
  auto* bottom = new QWidget;
  auto* bottom_layout = new QVBoxLayout(bottom);
  bottom_layout->setContentsMargins(0, 0, 0, 0);
  bottom_layout->addWidget(new QLabel(tr("Events (newest first)")));
  bottom_layout->addWidget(events_);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(top);
  split->addWidget(bottom);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);
  connect(slider_, &QSlider::valueChanged, this, [this](int index) {
    follow_ = index == slider_->maximum();
    showIndex(index);
  });
  setRun(nullptr);
}

void SamplesTab::clearRun() {
  follow_ = true;
  shown_.reset();
  shown_count_ = 0;
  steps_.clear();
  events_shown_ = 0;
  samples_->setRowCount(0);
  events_->setRowCount(0);
  const QSignalBlocker block(slider_);
  slider_->setRange(0, 0);
  slider_->setEnabled(false);
  step_label_->setText(tr("no samples yet"));
}

void SamplesTab::showNew() {
  updateSteps();
  updateEvents();
}

void SamplesTab::showStep(int64_t step) {
  if (steps_.empty()) return;
  slider_->setValue(nearestStepIndex(steps_, step));  // sets follow_ and shows it
  showIndex(slider_->value());
}

void SamplesTab::updateSteps() {
  steps_.clear();
  for (const auto& [step, s] : run_->samples)
    if (steps_.empty() || steps_.back() != step) steps_.push_back(step);
  const int n = static_cast<int>(steps_.size());
  {
    const QSignalBlocker block(slider_);
    slider_->setEnabled(n > 0);
    slider_->setRange(0, std::max(0, n - 1));
    if (n > 0 && (follow_ || !shown_)) {
      slider_->setValue(n - 1);
    } else if (n > 0) {
      // Keep the step shown (its index moves as old samples are dropped).
      slider_->setValue(nearestStepIndex(steps_, *shown_));
    }
  }
  if (n == 0) {
    samples_->setRowCount(0);
    shown_.reset();
    step_label_->setText(tr("no samples yet"));
    return;
  }
  showIndex(slider_->value());
}

void SamplesTab::showIndex(int index) {
  if (!run_ || index < 0 || static_cast<size_t>(index) >= steps_.size()) return;
  const int64_t step = steps_[static_cast<size_t>(index)];
  step_label_->setText(stepPosition(steps_, index));
  const auto& all = run_->samples;
  auto first = std::lower_bound(all.begin(), all.end(), step,
                                [](const auto& s, int64_t st) { return s.first < st; });
  auto last = std::upper_bound(first, all.end(), step,
                               [](int64_t st, const auto& s) { return st < s.first; });
  const size_t count = static_cast<size_t>(last - first);
  if (shown_ == step && shown_count_ == count) return;
  shown_ = step;
  shown_count_ = count;
  const QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  samples_->setRowCount(0);
  samples_->setRowCount(static_cast<int>(count));
  int row = 0;
  for (auto it = first; it != last; ++it, ++row) {
    const SampleRecord& s = it->second;
    samples_->setItem(row, 0, textItem(QString::fromStdString(s.prompt), &mono));
    auto* completion = textItem(QString::fromStdString(s.response), &mono);
    if (!s.tokens.empty()) {
      QStringList tokens;
      QVariantList diffs;
      for (size_t t = 0; t < s.tokens.size(); ++t) {
        tokens << QString::fromStdString(s.tokens[t]);
        diffs << (t < s.logprob_diff.size() ? s.logprob_diff[t] : 0.0);
      }
      completion->setData(kTokensRole, tokens);
      completion->setData(kDiffsRole, diffs);
    }
    samples_->setItem(row, 1, completion);
    samples_->setItem(row, 2, textItem(QString::fromStdString(s.answer), &mono));
    auto* reward = new QTableWidgetItem;
    reward->setData(Qt::DisplayRole, s.reward);
    reward->setBackground(rewardColor(s.reward));
    reward->setForeground(QColor(Qt::black));
    reward->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    samples_->setItem(row, 3, reward);
  }
}

void SamplesTab::updateEvents() {
  const auto& all = run_->events;
  if (all.size() < events_shown_) {  // rebuilt history
    events_->setRowCount(0);
    events_shown_ = 0;
  }
  for (; events_shown_ < all.size(); ++events_shown_) {
    const RunStore::EventRow& e = all[events_shown_];
    events_->insertRow(0);  // newest on top
    events_->setItem(0, 0, stepItem(e.step));
    auto* wall = new QTableWidgetItem(wallText(e.wall));
    wall->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    events_->setItem(0, 1, wall);
    auto* kind = textItem(QString::fromStdString(e.event.kind));
    auto* message = textItem(QString::fromStdString(e.event.message));
    if (e.event.kind == "error") {
      kind->setForeground(QColor(0xd6, 0x27, 0x28));
      message->setForeground(QColor(0xd6, 0x27, 0x28));
    } else if (e.event.kind == "precision") {
      kind->setForeground(QColor(0x1f, 0x77, 0xb4));
    } else if (e.event.kind == event::kAutopilot) {
      // The autopilot's decisions, with their evidence on hover.
      const QColor purple(0x8e, 0x24, 0xaa);
      kind->setForeground(purple);
      message->setForeground(purple);
      const QString evidence = QString::fromStdString(autopilotEvidenceText(e.event.data));
      kind->setToolTip(evidence);
      message->setToolTip(evidence);
    }
    events_->setItem(0, 2, kind);
    events_->setItem(0, 3, message);
  }
}

}  // namespace fp8rl::ui
