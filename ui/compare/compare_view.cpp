#include "ui/compare/compare_view.hpp"

#include <qcustomplot.h>

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "contract/metrics.hpp"
#include "contract/step_record.hpp"
#include "ui/charts/chart_style.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/histogram_view.hpp"
#include "ui/data/compare.hpp"
#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

namespace {

QString runLabel(const RunData& run) {
  const QString id = QStringLiteral("run %1").arg(static_cast<qint64>(run.id));
  return run.row.name.empty()
             ? id
             : QStringLiteral("%1 (%2)").arg(id, QString::fromStdString(run.row.name));
}

QString fixed(const std::optional<double>& v, int decimals, const QString& suffix = QString()) {
  if (!v) return QStringLiteral("—");
  if (std::isnan(*v)) return QStringLiteral("NaN");
  if (std::isinf(*v)) return *v > 0 ? QStringLiteral("+inf") : QStringLiteral("−inf");
  return QString::number(*v, 'f', decimals) + suffix;
}

QTableWidgetItem* cell(const QString& text, bool number) {
  auto* item = new QTableWidgetItem(text);
  if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

// Refills a combo with items when they changed, keeping the current text (signals blocked).
void setItems(QComboBox* box, const QStringList& items) {
  QStringList now;
  for (int i = 0; i < box->count(); ++i) now << box->itemText(i);
  if (now == items) return;
  const QSignalBlocker block(box);
  const QString current = box->currentText();
  box->clear();
  box->addItems(items);
  box->setCurrentIndex(box->findText(current));  // -1 (none) when it is gone: caller picks
}

// A row of "label: control" pairs, left-aligned.
QHBoxLayout* choiceRow(std::initializer_list<std::pair<QString, QWidget*>> choices) {
  auto* row = new QHBoxLayout;
  for (const auto& [label, control] : choices) {
    if (row->count() > 0) row->addSpacing(16);
    row->addWidget(new QLabel(label));
    row->addWidget(control);
  }
  row->addStretch(1);
  return row;
}

// A widget of a header row above a body that takes the height, without margins (a splitter's
// pane).
QWidget* stacked(QLayout* head, QWidget* body) {
  auto* pane = new QWidget;
  auto* layout = new QVBoxLayout(pane);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(head);
  layout->addWidget(body, 1);
  return pane;
}

QWidget* titled(const QString& title, QWidget* body) {
  auto* head = new QHBoxLayout;
  head->addWidget(new QLabel(title));
  return stacked(head, body);
}

}  // namespace

CompareView::CompareView(QWidget* parent)
    : QWidget(parent),
      metric_(new QComboBox),
      base_box_(new QComboBox),
      hist_name_(new QComboBox),
      hist_step_(new QSpinBox),
      chart_(new ChartView(tr("Compared metric"))),
      histogram_(new HistogramView(tr("Histogram overlay"))),
      summary_(new QTableWidget(0, 10)),
      diff_(new QTableWidget(0, 0)) {
  metric_->setMinimumContentsLength(24);
  metric_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  hist_name_->setMinimumContentsLength(24);
  hist_name_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  hist_step_->setRange(0, 0);
  hist_step_->setToolTip(tr("Step of the histograms (each run shows its nearest recorded step)"));
  histogram_->setNormalized(true);

  // Two-line headers: the ten columns fit the view's width at the default window size.
  summary_->setHorizontalHeaderLabels({tr("run"), tr("precision"), tr("steps"), tr("final\nval acc"),
                                       tr("best\nval acc"), tr("rollout\ntok/s"), tr("train\ntok/s"),
                                       tr("step\ntime s"), tr("speedup\nvs base"),
                                       tr("median mult-\nprob error")});
  for (QTableWidget* t : {summary_, diff_}) {
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setTextElideMode(Qt::ElideMiddle);
    t->setWordWrap(false);
  }
  summary_->verticalHeader()->setVisible(false);
  // The numbers as wide as they need; the run's name takes the rest (elided in the middle when
  // short of room, its tooltip whole).
  summary_->horizontalHeader()->setStretchLastSection(false);
  summary_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  summary_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);

  auto* top = stacked(choiceRow({{tr("Metric:"), metric_}, {tr("Base run:"), base_box_}}), chart_);
  // The summary and the differences one above the other, each the view's whole width.
  auto* tables = new QSplitter(Qt::Vertical);
  tables->addWidget(titled(tr("Summary (means over RL steps)"), summary_));
  tables->addWidget(titled(tr("Config differences"), diff_));
  tables->setStretchFactor(0, 1);
  tables->setStretchFactor(1, 1);
  auto* bottom =
      stacked(choiceRow({{tr("Histogram:"), hist_name_}, {tr("Step:"), hist_step_}}), histogram_);

  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(top);
  split->addWidget(tables);
  split->addWidget(bottom);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);

  connect(metric_, &QComboBox::currentTextChanged, this, [this](const QString& key) {
    if (!key.isEmpty()) setMetric(key);
  });
  connect(base_box_, &QComboBox::currentIndexChanged, this, [this](int i) {
    if (i >= 0) setBaseRun(i);
  });
  connect(hist_name_, &QComboBox::currentTextChanged, this, [this] { updateHistogram(); });
  connect(hist_step_, &QSpinBox::valueChanged, this, [this](int step) {
    hist_at_latest_ = step == hist_step_->maximum();
    updateHistogram();
  });
}

void CompareView::setRuns(const std::vector<const RunData*>& runs) {
  runs_.clear();
  for (const RunData* r : runs)
    if (r) runs_.push_back(r);
  base_ = 0;
  {
    const QSignalBlocker block(base_box_);
    base_box_->clear();
    for (const RunData* r : runs_) base_box_->addItem(runLabel(*r));
    base_box_->setCurrentIndex(runs_.empty() ? -1 : 0);
  }
  hist_at_latest_ = true;
  updateChoices();
  rebuildCurves();
  updateSummary();
  updateDiff();
  updateHistogram();
}

void CompareView::refresh() {
  updateChoices();
  updateCurves();
  updateSummary();
  updateDiff();
  updateHistogram();
}

void CompareView::setBaseRun(int index) {
  if (index < 0 || static_cast<size_t>(index) >= runs_.size()) return;
  base_ = index;
  if (base_box_->currentIndex() != index) {
    const QSignalBlocker block(base_box_);
    base_box_->setCurrentIndex(index);
  }
  updateSummary();
}

void CompareView::setMetric(const QString& key) {
  {
    const QSignalBlocker block(metric_);
    if (metric_->findText(key) < 0) metric_->addItem(key);
    metric_->setCurrentIndex(metric_->findText(key));
  }
  if (key == metric_key_ && chart_->curveCount() == static_cast<int>(runs_.size())) return;
  metric_key_ = key;
  rebuildCurves();
}

void CompareView::setHistogram(const QString& name, int step) {
  {
    const QSignalBlocker block(hist_name_);
    if (hist_name_->findText(name) < 0) hist_name_->addItem(name);
    hist_name_->setCurrentIndex(hist_name_->findText(name));
  }
  hist_at_latest_ = false;
  updateHistogram();  // the step range of this histogram
  {
    const QSignalBlocker block(hist_step_);
    hist_step_->setValue(step);
  }
  hist_at_latest_ = step >= hist_step_->maximum();
  updateHistogram();
}

void CompareView::updateChoices() {
  std::set<std::string> scalars, histograms;
  for (const RunData* r : runs_) {
    for (const auto& [key, points] : r->scalars) scalars.insert(key);
    for (const auto& [name, by_step] : r->histograms) histograms.insert(name);
  }
  QStringList keys, names;
  for (const auto& k : scalars) keys << QString::fromStdString(k);
  for (const auto& n : histograms) names << QString::fromStdString(n);
  setItems(metric_, keys);
  setItems(hist_name_, names);

  if (metric_key_.isEmpty() || !keys.contains(metric_key_)) {
    QString pick;
    if (keys.contains(QLatin1String(metric::kValAccuracy)))
      pick = QLatin1String(metric::kValAccuracy);
    else if (keys.contains(QLatin1String(metric::kReward)))
      pick = QLatin1String(metric::kReward);
    else if (!keys.isEmpty() && metric_key_.isEmpty())
      pick = keys.front();
    if (!pick.isEmpty() && pick != metric_key_) {
      metric_key_ = pick;
      rebuildCurves();
    }
  }
  {
    const QSignalBlocker block(metric_);
    metric_->setCurrentIndex(metric_->findText(metric_key_));
  }
  if (hist_name_->currentIndex() < 0 && hist_name_->count() > 0) {
    const QSignalBlocker block(hist_name_);
    const int iw = hist_name_->findText(QString::fromLatin1(histogram::kImportanceLogWeight));
    hist_name_->setCurrentIndex(iw >= 0 ? iw : 0);
  }
}

void CompareView::rebuildCurves() {
  chart_->clearCurves();
  const std::string key = metric_key_.toStdString();
  for (size_t i = 0; i < runs_.size(); ++i) {
    const int c = chart_->addCurve(runLabel(*runs_[i]), seriesColor(i));
    chart_->setCurveData(c, runs_[i]->series(key));
  }
}

void CompareView::updateCurves() {
  if (chart_->curveCount() != static_cast<int>(runs_.size())) {
    rebuildCurves();
    return;
  }
  const std::string key = metric_key_.toStdString();
  for (size_t i = 0; i < runs_.size(); ++i)
    chart_->setCurveData(static_cast<int>(i), runs_[i]->series(key));
}

void CompareView::updateSummary() {
  const auto rows = summarize(runs_, static_cast<size_t>(std::max(0, base_)));
  summary_->setRowCount(static_cast<int>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const RunSummary& s = rows[i];
    const int r = static_cast<int>(i);
    auto* name = cell(runLabel(*runs_[i]), false);
    name->setForeground(seriesColor(i));
    QFont font = name->font();
    font.setBold(static_cast<int>(i) == base_);
    name->setFont(font);
    if (static_cast<int>(i) == base_) name->setToolTip(tr("The base run of the speedup"));
    summary_->setItem(r, 0, name);
    summary_->setItem(r, 1, cell(QString::fromStdString(s.precision), false));
    summary_->setItem(r, 2, cell(QString::number(s.steps), true));
    summary_->setItem(r, 3, cell(fixed(s.final_validation, 3), true));
    summary_->setItem(r, 4, cell(fixed(s.best_validation, 3), true));
    summary_->setItem(r, 5, cell(fixed(s.rollout_tps, 0), true));
    summary_->setItem(r, 6, cell(fixed(s.training_tps, 0), true));
    summary_->setItem(r, 7, cell(fixed(s.step_time, 3), true));
    summary_->setItem(r, 8, cell(fixed(s.speedup, 2, QStringLiteral("×")), true));
    summary_->setItem(r, 9, cell(fixed(s.median_mult_prob_error, 4), true));
  }
  for (int r = 0; r < summary_->rowCount(); ++r)
    if (auto* item = summary_->item(r, 0)) item->setToolTip(item->text());
}

void CompareView::updateDiff() {
  std::vector<const Json*> configs;
  QStringList headers;
  for (const RunData* r : runs_) {
    configs.push_back(&r->row.config);
    headers << runLabel(*r);
  }
  const auto rows = configDiff(configs);
  diff_->setColumnCount(static_cast<int>(runs_.size()));
  // "run 3" above the run's name: headers are never cut to a fragment of a name.
  QStringList two_line;
  for (const RunData* r : runs_)
    two_line << (r->row.name.empty() ? QStringLiteral("run %1").arg(r->id)
                                     : QStringLiteral("run %1\n%2").arg(r->id).arg(QString::fromStdString(r->row.name)));
  headers = two_line;
  diff_->setHorizontalHeaderLabels(headers);
  diff_->setRowCount(static_cast<int>(rows.size()));
  QStringList keys;
  for (size_t i = 0; i < rows.size(); ++i) {
    keys << QString::fromStdString(rows[i].key);
    for (size_t c = 0; c < rows[i].values.size() && c < runs_.size(); ++c) {
      const QString v = QString::fromStdString(rows[i].values[c]);
      auto* item = cell(v, false);
      item->setToolTip(v);
      diff_->setItem(static_cast<int>(i), static_cast<int>(c), item);
    }
  }
  diff_->setVerticalHeaderLabels(keys);
  // Each run's column as wide as its name or its values (a long list elided, its tooltip whole),
  // the last one taking what is left.
  diff_->resizeColumnsToContents();
  const int cap = diff_->fontMetrics().horizontalAdvance(QString(40, QLatin1Char('x')));
  for (int c = 0; c < diff_->columnCount(); ++c)
    if (diff_->columnWidth(c) > cap) diff_->setColumnWidth(c, cap);
}

void CompareView::updateHistogram() {
  const std::string name = hist_name_->currentText().toStdString();
  std::vector<const std::map<int64_t, Histogram>*> maps(runs_.size(), nullptr);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < runs_.size(); ++i) {
    auto it = runs_[i]->histograms.find(name);
    if (it == runs_[i]->histograms.end() || it->second.empty()) continue;
    maps[i] = &it->second;
    lo = std::min(lo, it->second.begin()->first);
    hi = std::max(hi, it->second.rbegin()->first);
  }
  if (lo > hi) {
    histogram_->setHistograms({});
    const QSignalBlocker block(hist_step_);
    hist_step_->setRange(0, 0);
    return;
  }
  {
    const QSignalBlocker block(hist_step_);
    hist_step_->setRange(static_cast<int>(std::max<int64_t>(lo, INT_MIN)),
                         static_cast<int>(std::min<int64_t>(hi, INT_MAX)));
    if (hist_at_latest_) hist_step_->setValue(hist_step_->maximum());
  }
  const int64_t want = hist_step_->value();
  std::vector<HistogramCurve> curves;
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (!maps[i]) continue;
    auto pick = maps[i]->lower_bound(want);
    if (pick == maps[i]->end() ||
        (pick != maps[i]->begin() && want - std::prev(pick)->first < pick->first - want))
      pick = std::prev(pick);
    curves.push_back({QStringLiteral("run %1 @ step %2")
                          .arg(static_cast<qint64>(runs_[i]->id))
                          .arg(static_cast<qint64>(pick->first)),
                      seriesColor(i), pick->second});
  }
  // Every histogram the engine records has linear bins (log w, log2 of scales).
  histogram_->plot()->xAxis->setLabel(
      name == histogram::kImportanceLogWeight ? tr("log w = log π_train − log π_gen") : QString());
  histogram_->setHistograms(curves);
}

}  // namespace fp8rl::ui
