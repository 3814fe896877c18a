#include "ui/run/samples_tab.hpp"

#include <QFontDatabase>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/data/run_data.hpp"

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

}  // namespace

SamplesTab::SamplesTab(QWidget* parent)
    : QWidget(parent),
      samples_(makeTable({tr("step"), tr("prompt"), tr("response"), tr("answer"), tr("reward")})),
      events_(makeTable({tr("step"), tr("wall time"), tr("kind"), tr("message")})) {
  samples_->horizontalHeader()->setStretchLastSection(false);
  samples_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  samples_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
  samples_->horizontalHeader()->setSectionResizeMode(3, QHeaderView::Interactive);

  auto* top = new QWidget;
  auto* top_layout = new QVBoxLayout(top);
  top_layout->setContentsMargins(0, 0, 0, 0);
  top_layout->addWidget(new QLabel(tr("Recent samples (newest first)")));
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
  setRun(nullptr);
}

void SamplesTab::setRun(const RunData* run) {
  run_ = run;
  version_ = -1;
  sample_step_.reset();
  events_shown_ = 0;
  samples_->setRowCount(0);
  events_->setRowCount(0);
  refresh();
}

void SamplesTab::refresh() {
  if (!run_ || run_->version == version_) return;
  version_ = run_->version;
  updateSamples();
  updateEvents();
}

void SamplesTab::updateSamples() {
  const auto& all = run_->samples;
  // The new samples are those after the newest shown (samples arrive a step at a time).
  size_t first_new = 0;
  if (sample_step_) {
    first_new = all.size();
    while (first_new > 0 && all[first_new - 1].first > *sample_step_) --first_new;
    const bool consistent = first_new > 0 && all[first_new - 1].first == *sample_step_;
    if (!consistent) {  // the run's history was rebuilt: show it again
      samples_->setRowCount(0);
      first_new = 0;
    }
  }
  if (first_new == all.size()) return;
  const QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  for (size_t i = first_new; i < all.size(); ++i) {
    const auto& [step, s] = all[i];
    samples_->insertRow(0);  // newest on top
    samples_->setItem(0, 0, stepItem(step));
    samples_->setItem(0, 1, textItem(QString::fromStdString(s.prompt), &mono));
    samples_->setItem(0, 2, textItem(QString::fromStdString(s.response), &mono));
    samples_->setItem(0, 3, textItem(QString::fromStdString(s.answer), &mono));
    auto* reward = new QTableWidgetItem;
    reward->setData(Qt::DisplayRole, s.reward);
    reward->setBackground(rewardColor(s.reward));
    reward->setForeground(QColor(Qt::black));
    reward->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    samples_->setItem(0, 4, reward);
  }
  if (samples_->rowCount() > static_cast<int>(RunData::kMaxSamples))
    samples_->setRowCount(static_cast<int>(RunData::kMaxSamples));
  sample_step_ = all.back().first;
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
    }
    events_->setItem(0, 2, kind);
    events_->setItem(0, 3, message);
  }
}

}  // namespace fp8rl::ui
