#include "ui/run/run_view.hpp"

#include <QLabel>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QTabWidget>
#include <QVBoxLayout>
#include <initializer_list>

#include "ui/charts/chart_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/run_text.hpp"
#include "ui/run/audit_tab.hpp"
#include "ui/run/experts_tab.hpp"
#include "ui/run/importance_tab.hpp"
#include "ui/run/overview_tab.hpp"
#include "ui/run/precision_tab.hpp"
#include "ui/run/samples_tab.hpp"
#include "ui/run/scales_tab.hpp"
#include "ui/run/throughput_tab.hpp"

namespace fp8rl::ui {

std::vector<ChartMarker> precisionMarkers(const RunData* run) {
  std::vector<ChartMarker> markers;
  if (!run) return markers;
  for (const auto& [step, what] : run->precisionChanges())
    markers.push_back({static_cast<double>(step), QString::fromStdString(what)});
  return markers;
}

bool syncPrecisionMarkers(const RunData* run, const std::vector<ChartView*>& charts,
                          size_t* shown) {
  const size_t n = run ? run->precisionChanges().size() : 0;
  if (n == *shown) return false;
  *shown = n;
  const auto markers = precisionMarkers(run);
  for (ChartView* chart : charts) chart->setMarkers(markers);
  return true;
}

void linkChartOptions(const std::vector<ChartView*>& charts) {
  for (ChartView* source : charts) {
    QObject::connect(source, &ChartView::optionsChanged, source, [source, charts] {
      for (ChartView* other : charts) {
        if (other == source) continue;
        // Setting options programmatically should not signal, but never let a sibling echo.
        const QSignalBlocker block(other);
        if (other->xAxis() != source->xAxis()) other->setXAxis(source->xAxis());
        if (other->smoothing() != source->smoothing()) other->setSmoothing(source->smoothing());
        if (other->logY() != source->logY()) other->setLogY(source->logY());
        if (other->ignoreOutliers() != source->ignoreOutliers())
          other->setIgnoreOutliers(source->ignoreOutliers());
      }
    });
  }
}

void clearCharts(const std::vector<ChartView*>& charts) {
  static const std::vector<SeriesPoint> kEmpty;
  for (ChartView* chart : charts) {
    for (int c = 0; c < chart->curveCount(); ++c) chart->setCurveData(c, kEmpty);
    chart->setMarkers({});
  }
}

RunView::RunView(QWidget* parent)
    : RunTab(parent),
      tabs_(new QTabWidget(this)),
      badge_(new QPushButton),
      overview_(new OverviewTab),
      throughput_(new ThroughputTab),
      importance_(new ImportanceTab),
      scales_(new ScalesTab),
      precision_(new PrecisionTab),
      samples_(new SamplesTab),
      experts_(new ExpertsTab),
      audit_(new AuditTab) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  // With no run: say how to get one instead of showing empty charts.
  empty_ = new QLabel(
      tr("<h3>No run selected</h3><p>Pick a run in the runs panel, or launch one: "
         "<b>Run → Launch run…</b> (Ctrl+N). The <i>demo</i> preset trains a small Qwen3-style "
         "model in FP8 to reverse strings in a few minutes on a laptop CPU.</p>"
         "<p>Select two or more runs and choose <b>Compare selected</b> to compare them.</p>"),
      this);
  empty_->setWordWrap(true);
  empty_->setAlignment(Qt::AlignCenter);
  empty_->setMargin(40);
  layout->addWidget(empty_);
  layout->addWidget(tabs_);
  tabs_->setDocumentMode(true);
  // Each tab scrolls when the view is smaller than the tab's minimum (two charts side by side
  // need ~1400 px), so the view never forces the window wider than the screen.
  auto add = [this](QWidget* tab, const QString& label) {
    auto* scroll = new QScrollArea;
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setWidget(tab);
    tabs_->addTab(scroll, label);
    return scroll;
  };
  add(overview_, tr("Overview"));
  add(throughput_, tr("Throughput"));
  add(importance_, tr("Importance weights"));
  add(scales_, tr("FP8 scales"));
  add(precision_, tr("Precision"));
  add(samples_, tr("Samples && events"));  // "&&": a literal ampersand
  experts_page_ = add(experts_, tr("Experts"));  // shown for runs with experts
  add(audit_, tr("Audit"));
  badge_->setObjectName(QStringLiteral("auditBadge"));
  badge_->setFlat(true);
  badge_->setCursor(Qt::PointingHandCursor);
  tabs_->setCornerWidget(badge_, Qt::TopRightCorner);
  connect(badge_, &QPushButton::clicked, this,
          [this] { tabs_->setCurrentIndex(tabs_->count() - 1); });
  connect(precision_, &PrecisionTab::applyRequested, this, &RunView::liveEditRequested);
  // A tab shown catches up with what it missed while hidden.
  connect(tabs_, &QTabWidget::currentChanged, this, [this] { refreshShown(); });
  setRun(nullptr);
}

void RunView::refreshShown() {
  if (!run_) return;
  const QWidget* shown = tabs_->currentWidget();
  for (RunTab* tab : std::initializer_list<RunTab*>{overview_, throughput_, importance_, scales_,
                                                    samples_, audit_})
    if (shown && shown->isAncestorOf(tab)) tab->refresh();
  // The Precision tab always: it holds the map a live edit starts from and its buttons' state.
  precision_->refresh();
  if (run_->version != badge_version_) {
    badge_version_ = run_->version;
    updateBadge();
  }
}

void RunView::clearRun() {
  badge_version_ = -1;
  empty_->setVisible(run_ == nullptr);
  tabs_->setVisible(run_ != nullptr);
  for (RunTab* tab : std::initializer_list<RunTab*>{overview_, throughput_, importance_, scales_,
                                                    samples_, experts_, audit_})
    tab->setRun(run_);
  precision_->setRun(run_);
  updateBadge();
  showExpertsTab();
}

void RunView::poll() {
  // Each tab compares run->version with the last version it showed, so this is cheap when
  // nothing changed (the Precision tab still re-reads the run's status for its buttons).
  for (RunTab* tab : std::initializer_list<RunTab*>{overview_, throughput_, importance_, scales_,
                                                    samples_, experts_, audit_})
    tab->refresh();
  precision_->refresh();
}

void RunView::showNew() {
  updateBadge();
  showExpertsTab();
}

void RunView::showExpertsTab() {
  // Only on a change: setTabVisible lays the tab widget out again and repaints all of it.
  const int i = tabs_->indexOf(experts_page_);
  if (tabs_->isTabVisible(i) != experts_->runHasExperts())
    tabs_->setTabVisible(i, experts_->runHasExperts());
}

void RunView::updateBadge() {
  const std::string text = run_ ? auditBadgeText(*run_) : std::string();
  badge_->setVisible(!text.empty());
  if (text.empty()) return;
  badge_->setText(QString::fromStdString(text));
  // The badge's text changes with every audited step. At a fixed size a new text repaints the
  // badge alone; a size that follows the text would re-lay out the tab widgets above it and
  // repaint the whole window on every step. Resized only when the text's width changes (a
  // step with one more digit). The size is the size hint: the tab widget places its corner
  // widget by the hint.
  if (badge_->sizeHint() != badge_->size()) badge_->setFixedSize(badge_->sizeHint());
  const bool bad = auditMismatches(*run_) > 0;
  badge_->setToolTip(
      bad ? tr("The generator and the trainer disagree on these linears:\n%1\n\nClick for the "
               "audit table.")
                .arg(QString::fromStdString(auditMismatchList(*run_)))
          : tr("Every linear's precision and weights agree between the generator and the "
               "trainer. Click for the audit table."));
  // A style sheet set again re-polishes the button: only when the look changes.
  if (badge_state_ == static_cast<int>(bad)) return;
  badge_state_ = static_cast<int>(bad);
  badge_->setStyleSheet(bad ? QStringLiteral("QPushButton { background: #d62728; color: white; "
                                             "font-weight: bold; border-radius: 9px; "
                                             "padding: 2px 10px; margin: 2px; }")
                            : QStringLiteral("QPushButton { color: #5a7d5a; border: none; "
                                             "padding: 2px 10px; margin: 2px; }"));
  badge_->setFixedSize(badge_->sizeHint());  // the new style's padding and font
}

}  // namespace fp8rl::ui
