#include "ui/run/scales_tab.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "contract/metrics.hpp"
#include "contract/precision.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/charts/histogram_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/run/run_view.hpp"

namespace fp8rl::ui {

namespace {

const QString kKv = QStringLiteral("kv");
const QString kPerLinear = QStringLiteral("per-linear");

std::string fp8Key(int layer, const QString& kind, const char* stat) {
  return "fp8/L" + std::to_string(layer) + "/" + kind.toStdString() + "/" + stat;
}
std::string kvKey(int layer, char which) {
  return "kv_scale/L" + std::to_string(layer) + "/" + which;
}
std::string histogramName(int layer, const QString& kind) {
  return "fp8_scale_log2/L" + std::to_string(layer) + "/" + kind.toStdString();
}

// 1 + the highest layer index in names "<prefix><l>/…" (0 when none).
template <typename Map>
int layersIn(const Map& m, const std::string& prefix) {
  int n = 0;
  for (auto it = m.lower_bound(prefix); it != m.end() && it->first.starts_with(prefix); ++it) {
    const std::string& name = it->first;
    size_t pos = prefix.size();
    int l = 0;
    bool digits = false;
    while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9' && l < 100000) {
      l = l * 10 + (name[pos++] - '0');
      digits = true;
    }
    if (digits) n = std::max(n, l + 1);
  }
  return n;
}

QString valueText(double v) {
  if (std::isnan(v)) return QStringLiteral("NaN");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("+inf") : QStringLiteral("−inf");
  return QString::number(v, 'g', 5);
}

}  // namespace

ScalesTab::ScalesTab(QWidget* parent)
    : RunTab(parent),
      layer_box_(new QComboBox),
      kind_box_(new QComboBox),
      stat_box_(new QComboBox),
      latest_box_(new QCheckBox(tr("latest"))),
      step_spin_(new QSpinBox),
      hist_caption_(new QLabel),
      pages_(new QStackedWidget),
      hist_(new HistogramView(tr("log2 of the FP8 scales"))),
      heatmap_(new HeatmapView(tr("Layers × steps"))),
      saturated_(new ChartView(tr("Saturated fraction"))),
      flushed_(new ChartView(tr("Flushed fraction"))),
      rel_error_(new ChartView(tr("Relative error"))),
      kv_(new ChartView(tr("KV-cache scales"))),
      kv_table_(new QTableWidget(0, 2)),
      kv_caption_(new QLabel) {
  kind_box_->addItem(tr("weight"), QStringLiteral("weight"));
  kind_box_->addItem(tr("activation"), QStringLiteral("activation"));
  kind_box_->addItem(tr("gradient"), QStringLiteral("gradient"));
  kind_box_->addItem(tr("KV"), kKv);
  for (const char* s : {"rel_error", "saturated_frac", "flushed_frac"})
    stat_box_->addItem(QString::fromLatin1(s), QString::fromLatin1(s));
  // Every linear over time by the per-linear FP8 error signal (what the autopilot ranks by).
  stat_box_->addItem(tr("per-linear error"), kPerLinear);
  stat_box_->setItemData(stat_box_->count() - 1,
                         tr("Each linear's FP8 error signal (fp8_error/L…/…): relative error + "
                            "flushed share + saturated share of its worst operand"),
                         Qt::ToolTipRole);
  latest_box_->setChecked(true);
  step_spin_->setRange(INT_MIN, INT_MAX);
  step_spin_->setEnabled(false);
  step_spin_->setToolTip(tr("The step of the histogram (the nearest recorded step is shown)"));
  saturated_->addCurve(QString(), QColor(0xd6, 0x27, 0x28));
  flushed_->addCurve(QString(), QColor(0x1f, 0x77, 0xb4));
  rel_error_->addCurve(QString(), QColor(0x2c, 0xa0, 0x2c));
  kv_->addCurve(QStringLiteral("k"), QColor(0x1f, 0x77, 0xb4));
  kv_->addCurve(QStringLiteral("v"), QColor(0xff, 0x7f, 0x0e));
  kv_table_->setHorizontalHeaderLabels({tr("k scale"), tr("v scale")});
  kv_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  kv_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  kv_caption_->setWordWrap(true);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Layer:")));
  controls->addWidget(layer_box_);
  controls->addWidget(new QLabel(tr("Tensor:")));
  controls->addWidget(kind_box_);
  controls->addSpacing(16);
  controls->addWidget(new QLabel(tr("Histogram step:")));
  controls->addWidget(latest_box_);
  controls->addWidget(step_spin_);
  controls->addSpacing(16);
  controls->addWidget(new QLabel(tr("Heatmap:")));
  controls->addWidget(stat_box_);
  controls->addStretch(1);

  // Two columns (a chart's header needs ~600 px): the histogram and its kind's charts (or the
  // KV chart) on top, the heatmap and the KV table below.
  auto* fp8_page = new QWidget;
  auto* fp8_layout = new QGridLayout(fp8_page);
  fp8_layout->setContentsMargins(0, 0, 0, 0);
  auto* hist_box = new QVBoxLayout;
  hist_box->addWidget(hist_caption_);
  hist_box->addWidget(hist_, 1);
  fp8_layout->addLayout(hist_box, 0, 0);
  fp8_layout->addWidget(rel_error_, 0, 1);
  fp8_layout->addWidget(saturated_, 1, 0);
  fp8_layout->addWidget(flushed_, 1, 1);
  pages_->addWidget(fp8_page);
  pages_->addWidget(kv_);

  auto* kv_box = new QVBoxLayout;
  kv_box->addWidget(new QLabel(tr("KV-cache scales the generator holds (latest)")));
  kv_box->addWidget(kv_table_, 1);
  kv_box->addWidget(kv_caption_);

  auto* layout = new QGridLayout(this);
  layout->addLayout(controls, 0, 0, 1, 2);
  layout->addWidget(pages_, 1, 0, 1, 2);
  layout->addWidget(heatmap_, 2, 0);
  layout->addLayout(kv_box, 2, 1);
  layout->setRowStretch(1, 2);
  layout->setRowStretch(2, 1);
  layout->setColumnStretch(0, 3);
  layout->setColumnStretch(1, 1);

  connect(layer_box_, &QComboBox::currentIndexChanged, this, [this] { selectionChanged(); });
  connect(kind_box_, &QComboBox::currentIndexChanged, this, [this] { selectionChanged(); });
  connect(stat_box_, &QComboBox::currentIndexChanged, this, [this] { updateHeatmap(); });
  connect(latest_box_, &QCheckBox::toggled, this, [this](bool on) {
    step_spin_->setEnabled(!on);
    updateHistogram();
  });
  connect(step_spin_, &QSpinBox::valueChanged, this, [this] { updateHistogram(); });
  linkChartOptions(charts());
  setRun(nullptr);
}

int ScalesTab::layer() const {
  return std::max(0, layer_box_->currentIndex());
}
QString ScalesTab::kind() const {
  return kind_box_->currentData().toString();
}

void ScalesTab::clearRun() {
  layers_ = -1;
  {
    const QSignalBlocker block(step_spin_);
    step_spin_->setRange(INT_MIN, INT_MAX);  // set from the run's first histogram
  }
  updateLayers();
  selectionChanged();
}

void ScalesTab::setSelection(int layer, const QString& kind) {
  {
    const QSignalBlocker b1(layer_box_), b2(kind_box_);
    if (layer >= 0 && layer < layer_box_->count()) layer_box_->setCurrentIndex(layer);
    const int k = kind_box_->findData(kind.toLower());
    if (k >= 0) kind_box_->setCurrentIndex(k);
  }
  selectionChanged();
}

void ScalesTab::setHistogramStep(std::optional<int64_t> step) {
  {
    const QSignalBlocker b1(latest_box_), b2(step_spin_);
    latest_box_->setChecked(!step);
    step_spin_->setEnabled(step.has_value());
    if (step) step_spin_->setValue(static_cast<int>(std::clamp<int64_t>(*step, INT_MIN, INT_MAX)));
  }
  updateHistogram();
}

void ScalesTab::showNew() {
  updateLayers();
  updateCharts();
  updateHistogram();
  updateHeatmap();
  updateKvTable();
}

void ScalesTab::updateLayers() {
  int n = 0;
  if (run_) {
    n = static_cast<int>(std::max<int64_t>(0, run_->layers()));
    n = std::max({n, layersIn(run_->scalars, "fp8/L"), layersIn(run_->scalars, "kv_scale/L"),
                  layersIn(run_->histograms, "fp8_scale_log2/L")});
  }
  if (n == layers_) return;
  layers_ = n;
  const int keep = layer_box_->currentIndex();
  const QSignalBlocker block(layer_box_);
  layer_box_->clear();
  for (int l = 0; l < n; ++l) layer_box_->addItem(QStringLiteral("L%1").arg(l));
  if (n > 0) layer_box_->setCurrentIndex(std::clamp(keep, 0, n - 1));
  if (layer_box_->currentIndex() != keep && run_ && version_ >= 0) selectionChanged();
}

void ScalesTab::selectionChanged() {
  const bool kv = kind() == kKv;
  pages_->setCurrentIndex(kv ? 1 : 0);
  stat_box_->setEnabled(!kv);
  latest_box_->setEnabled(!kv);
  step_spin_->setEnabled(!kv && !latest_box_->isChecked());
  // The curves are rebuilt (new labels, data from another series), never appended to.
  const QString what = QStringLiteral("L%1 %2").arg(layer()).arg(kind_box_->currentText());
  struct Rebind {
    ChartView* chart;
    const char* stat;
    QColor color;
  };
  for (const Rebind& r : {Rebind{saturated_, "saturated_frac", QColor(0xd6, 0x27, 0x28)},
                          Rebind{flushed_, "flushed_frac", QColor(0x1f, 0x77, 0xb4)},
                          Rebind{rel_error_, "rel_error", QColor(0x2c, 0xa0, 0x2c)}}) {
    r.chart->clearCurves();
    r.chart->addCurve(QStringLiteral("%1 %2").arg(what, QLatin1String(r.stat)), r.color);
  }
  kv_->clearCurves();
  kv_->addCurve(QStringLiteral("L%1 k").arg(layer()), QColor(0x1f, 0x77, 0xb4));
  kv_->addCurve(QStringLiteral("L%1 v").arg(layer()), QColor(0xff, 0x7f, 0x0e));
  markers_ = SIZE_MAX;  // set them again on the new curves
  if (!run_) {
    clearCharts(charts());
    hist_->setHistograms({});
    shown_name_.clear();
    shown_step_.reset();
    hist_caption_->setText(tr("No run selected."));
    heatmap_->setData(HeatmapData{});
    kv_table_->setRowCount(0);
    kv_caption_->clear();
    return;
  }
  updateCharts();
  updateHistogram();
  updateHeatmap();
  updateKvTable();
  version_ = run_->version;
}

void ScalesTab::updateCharts() {
  if (!run_) return;
  const int l = layer();
  const QString k = kind();
  if (k == kKv) {
    kv_->setCurveData(0, run_->series(kvKey(l, 'k')));
    kv_->setCurveData(1, run_->series(kvKey(l, 'v')));
  } else {
    saturated_->setCurveData(0, run_->series(fp8Key(l, k, "saturated_frac")));
    flushed_->setCurveData(0, run_->series(fp8Key(l, k, "flushed_frac")));
    rel_error_->setCurveData(0, run_->series(fp8Key(l, k, "rel_error")));
  }
  syncPrecisionMarkers(run_, charts(), &markers_);
}

void ScalesTab::updateHistogram() {
  if (!run_ || kind() == kKv) {
    if (!shown_name_.isEmpty() || shown_step_) hist_->setHistograms({});
    shown_name_.clear();
    shown_step_.reset();
    hist_caption_->setText(run_ ? tr("KV-cache scales have no histogram: see the chart.") : "");
    return;
  }
  const std::string name = histogramName(layer(), kind());
  const QString qname = QString::fromStdString(name);
  auto it = run_->histograms.find(name);
  if (it == run_->histograms.end() || it->second.empty()) {
    if (!shown_name_.isEmpty() || shown_step_) hist_->setHistograms({});
    shown_name_.clear();
    shown_step_.reset();
    hist_caption_->setText(tr("No %1 recorded yet.").arg(qname));
    return;
  }
  const auto& by_step = it->second;
  {
    const QSignalBlocker block(step_spin_);
    const int lo = static_cast<int>(std::max<int64_t>(by_step.begin()->first, INT_MIN));
    const int hi = static_cast<int>(std::min<int64_t>(by_step.rbegin()->first, INT_MAX));
    const bool was_unset = step_spin_->minimum() == INT_MIN;
    step_spin_->setRange(lo, hi);
    if (was_unset) step_spin_->setValue(hi);
  }
  auto pick = std::prev(by_step.end());
  if (!latest_box_->isChecked()) {
    const int64_t want = step_spin_->value();
    pick = by_step.lower_bound(want);
    if (pick == by_step.end() ||
        (pick != by_step.begin() && want - std::prev(pick)->first < pick->first - want))
      pick = std::prev(pick);
  }
  hist_caption_->setText(tr("%1 at step %2 (%3 histograms recorded)")
                             .arg(qname)
                             .arg(static_cast<qint64>(pick->first))
                             .arg(static_cast<qint64>(by_step.size())));
  if (shown_name_ == qname && shown_step_ == pick->first) return;
  shown_name_ = qname;
  shown_step_ = pick->first;
  hist_->setHistograms({HistogramCurve{QStringLiteral("L%1 %2 @ step %3")
                                           .arg(layer())
                                           .arg(kind())
                                           .arg(static_cast<qint64>(pick->first)),
                                       QColor(0x1f, 0x77, 0xb4), pick->second}});
}

void ScalesTab::updateHeatmap() {
  if (!run_) return;
  const bool kv = kind() == kKv;
  const bool per_linear = !kv && stat_box_->currentData().toString() == kPerLinear;
  const std::string stat = stat_box_->currentData().toString().toStdString();
  std::vector<const std::vector<SeriesPoint>*> rows;
  HeatmapData d;
  for (int l = 0; l < layers_; ++l) {
    if (per_linear) {
      for (const std::string& m : module_short_names()) {
        rows.push_back(&run_->series(metric::fp8_error(l, m)));
        d.row_labels << QStringLiteral("L%1.%2").arg(l).arg(QString::fromStdString(m));
      }
    } else if (kv) {
      rows.push_back(&run_->series(kvKey(l, 'k')));
      rows.push_back(&run_->series(kvKey(l, 'v')));
      d.row_labels << QStringLiteral("L%1 k").arg(l) << QStringLiteral("L%1 v").arg(l);
    } else {
      rows.push_back(&run_->series(fp8Key(l, kind(), stat.c_str())));
      d.row_labels << QStringLiteral("L%1").arg(l);
    }
  }
  d.rows = static_cast<int>(rows.size());
  d.row_lo = 0;
  d.row_hi = std::max(1, d.rows);
  d.log_color = kv || per_linear;
  d.value_label = kv           ? tr("KV scale")
                  : per_linear ? tr("FP8 error (per linear)")
                               : QStringLiteral("%1 %2").arg(kind(), QString::fromStdString(stat));
  // Columns: every step any row has (each series is sorted by step).
  for (const auto* s : rows)
    for (const SeriesPoint& p : *s) d.steps.push_back(p.step);
  std::sort(d.steps.begin(), d.steps.end());
  d.steps.erase(std::unique(d.steps.begin(), d.steps.end()), d.steps.end());
  d.values.assign(d.steps.size() * rows.size(), std::numeric_limits<double>::quiet_NaN());
  for (size_t r = 0; r < rows.size(); ++r) {
    auto col = d.steps.begin();
    for (const SeriesPoint& p : *rows[r]) {
      col = std::lower_bound(col, d.steps.end(), p.step);
      if (col == d.steps.end()) break;
      d.values[static_cast<size_t>(col - d.steps.begin()) * rows.size() + r] = p.value;
    }
  }
  if (rows.empty()) d = HeatmapData{};
  heatmap_->setData(d);
}

void ScalesTab::updateKvTable() {
  if (!run_) return;
  bool any = false;
  kv_table_->setRowCount(layers_);
  QStringList labels;
  for (int l = 0; l < layers_; ++l) {
    labels << QStringLiteral("L%1").arg(l);
    for (int col = 0; col < 2; ++col) {
      const auto& s = run_->series(kvKey(l, col == 0 ? 'k' : 'v'));
      any = any || !s.empty();
      const QString text = s.empty() ? QStringLiteral("—") : valueText(s.back().value);
      QTableWidgetItem* item = kv_table_->item(l, col);
      if (!item) {
        item = new QTableWidgetItem;
        item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        kv_table_->setItem(l, col, item);
      }
      if (item->text() != text) item->setText(text);
    }
  }
  kv_table_->setVerticalHeaderLabels(labels);
  kv_caption_->setText(any ? QString()
                           : tr("No KV scales recorded: the generator's KV cache is not FP8 "
                                "(precision.kv_cache)."));
}

}  // namespace fp8rl::ui
