#include "ui/groups/group_view.hpp"

#include <QComboBox>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <cmath>

#include "core/version.hpp"
#include "groups/group_series.hpp"
#include "groups/report_html.hpp"
#include "ui/charts/chart_style.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/data/compare.hpp"

namespace fp8rl::ui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

QTableWidgetItem* cell(const QString& text, bool number, const QString& tip = QString()) {
  auto* item = new QTableWidgetItem(text);
  if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  if (!tip.isEmpty()) item->setToolTip(tip);
  return item;
}

QString meanSd(double mean, double sd, int decimals = 3) {
  if (!std::isfinite(mean)) return QStringLiteral("—");
  QString s = qs(format_number(mean, decimals));
  if (std::isfinite(sd)) s += QStringLiteral(" ± ") + qs(format_number(sd, decimals));
  return s;
}

// The mean ± sd of a run outcome field over a group.
QString outcomeText(const std::vector<RunOutcome>& outcomes,
                    std::optional<double> RunOutcome::*field, int decimals = 3) {
  std::vector<double> v;
  for (const auto& o : outcomes)
    if (const auto& x = o.*field; x && std::isfinite(*x)) v.push_back(*x);
  if (v.empty()) return QStringLiteral("—");
  QString s = meanSd(stats::mean(v), stats::sample_sd(v), decimals);
  if (v.size() != outcomes.size()) s += QStringLiteral(" (%1 of %2)").arg(v.size()).arg(outcomes.size());
  return s;
}

QString runsText(size_t n) {
  return n == 1 ? QObject::tr("1 run") : QObject::tr("%1 runs").arg(n);
}

void setupTable(QTableWidget* t) {
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->verticalHeader()->setVisible(false);
  t->setWordWrap(false);
  t->horizontalHeader()->setStretchLastSection(true);
}

}  // namespace

GroupView::GroupView(QWidget* parent)
    : QWidget(parent),
      snap_(std::make_shared<GroupSnapshot>()),
      title_(new QLabel(this)),
      a_(new QComboBox(this)),
      b_(new QComboBox(this)),
      target_(new QDoubleSpinBox(this)),
      report_(new QPushButton(tr("Report…"), this)),
      details_(new QTabWidget(this)),
      verdict_table_(new QTableWidget(0, 9, this)),
      verdict_text_(new QTextBrowser(this)),
      groups_table_(new QTableWidget(0, 8, this)),
      diff_table_(new QTableWidget(0, 0, this)) {
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  // Wrapped: unwrapped, its text set the studio's narrowest central area (over 1,000 px at
  // 1440 × 900), leaving the runs panel too little room.
  title_->setWordWrap(true);
  title_->setText(tr("No sweep chosen: pick one in the runs panel's Sweeps tab."));
  for (QComboBox* box : {a_, b_}) {
    box->setMinimumContentsLength(10);
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  }
  target_->setRange(0, 1);
  target_->setSingleStep(0.05);
  target_->setDecimals(2);
  target_->setValue(0.5);
  target_->setToolTip(tr("Time to target: the wall time until a run's validation accuracy first "
                         "reaches this"));
  report_->setToolTip(tr("Save a self-contained HTML report of these groups (verdict, curves, "
                         "runs) to share with people who do not run the studio"));
  auto* head = new QHBoxLayout;
  head->addWidget(title_, 1);
  head->addWidget(new QLabel(tr("Compare"), this));
  head->addWidget(a_);
  head->addWidget(new QLabel(tr("against"), this));
  head->addWidget(b_);
  head->addSpacing(12);
  head->addWidget(new QLabel(tr("Target val:"), this));
  head->addWidget(target_);
  head->addWidget(report_);

  // Every headline chart of a run, one curve and band per group.
  auto* grid_host = new QWidget;
  auto* grid = new QGridLayout(grid_host);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(6);
  int i = 0;
  for (const auto& [key, chart_title] : group_chart_metrics()) {
    auto* c = new ChartView(qs(chart_title), grid_host);
    c->setObjectName(qs(key));
    c->setSmoothing(0);
    c->setXAxisChoosable(false);
    c->setLegendShown(false);  // the legend row above the charts names the groups
    c->setMinimumHeight(220);
    charts_.push_back(c);
    grid->addWidget(c, i / 2, i % 2);
    ++i;
  }
  auto* charts_page = new QWidget;
  auto* charts_layout = new QVBoxLayout(charts_page);
  charts_layout->setContentsMargins(0, 0, 0, 0);
  legend_ = new QLabel(charts_page);
  legend_->setTextFormat(Qt::RichText);
  legend_->setToolTip(tr("Each group's mean over its runs per step, with a 95 % bootstrap band "
                         "over the runs"));
  charts_layout->addWidget(legend_);
  auto* scroll = new QScrollArea;
  scroll->setWidget(grid_host);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);

  verdict_table_->setHorizontalHeaderLabels({tr("metric"), tr("A\nmean ± sd"), tr("B\nmean ± sd"),
                                             tr("A − B\nor A ÷ B"), tr("95% CI\nbootstrap"),
                                             tr("95% CI\nt"), tr("seeds"), tr("finding"),
                                             tr("seeds to\ndetect")});
  groups_table_->setHorizontalHeaderLabels({tr("group"), tr("runs"), tr("final val"),
                                            tr("best val"), tr("reward"), tr("time to target s"),
                                            tr("step time s"), tr("rollout tok/s")});
  for (QTableWidget* t : {verdict_table_, groups_table_, diff_table_}) setupTable(t);
  // The metric column takes the room the numbers leave, elided in the middle where it is narrow
  // (whole in its tooltip): the verdict fits the view at the default window size.
  verdict_table_->horizontalHeader()->setStretchLastSection(false);
  verdict_table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  verdict_table_->setTextElideMode(Qt::ElideMiddle);
  verdict_text_->setOpenLinks(false);
  auto* verdict_page = new QSplitter(Qt::Vertical);
  verdict_page->addWidget(verdict_table_);
  verdict_page->addWidget(verdict_text_);
  verdict_page->setStretchFactor(0, 1);
  verdict_page->setStretchFactor(1, 1);
  details_->addTab(verdict_page, tr("Verdict"));
  details_->addTab(groups_table_, tr("Groups"));
  details_->addTab(diff_table_, tr("Config differences"));

  charts_layout->addWidget(scroll, 1);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(charts_page);
  split->addWidget(details_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(head);
  layout->addWidget(split, 1);

  connect(a_, &QComboBox::currentIndexChanged, this, [this] { updateVerdict(); });
  connect(b_, &QComboBox::currentIndexChanged, this, [this] { updateVerdict(); });
  connect(target_, &QDoubleSpinBox::valueChanged, this, [this](double v) { emit targetChanged(v); });
  connect(report_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Save report"),
        QStringLiteral("sweep-%1-report.html").arg(snap_ ? snap_->sweep_id : 0),
        tr("HTML (*.html)"));
    if (path.isEmpty()) return;
    QString error;
    if (!exportReport(path, &error)) QMessageBox::warning(this, tr("Report"), error);
  });
}

ChartView* GroupView::chart(const std::string& key) const {
  const auto& metrics = group_chart_metrics();
  for (size_t i = 0; i < metrics.size(); ++i)
    if (metrics[i].first == key) return charts_[i];
  return nullptr;
}

int GroupView::groupIndex(const QString& label) const {
  for (size_t i = 0; i < snap_->groups.size(); ++i)
    if (qs(snap_->groups[i].label) == label) return static_cast<int>(i);
  return -1;
}

void GroupView::setSnapshot(std::shared_ptr<const GroupSnapshot> snapshot) {
  if (!snapshot) snapshot = std::make_shared<GroupSnapshot>();
  snap_ = std::move(snapshot);
  const GroupSnapshot& s = *snap_;
  if (s.sweep_id < 0) {
    title_->setText(tr("No sweep chosen: pick one in the runs panel's Sweeps tab."));
  } else {
    size_t runs = 0;
    for (const auto& g : s.groups) runs += g.runs.size();
    title_->setText(tr("Sweep %1 · %2 · %n group(s)", "", static_cast<int>(s.groups.size()))
                        .arg(s.sweep_id)
                        .arg(qs(s.sweep.name)) +
                    tr(" · %1 runs").arg(runs) +
                    (s.error.empty() ? QString() : tr(" · cannot read: %1").arg(qs(s.error))));
  }
  {
    const QSignalBlocker block(target_);
    target_->setValue(s.target);
  }
  QStringList labels;
  for (const auto& g : s.groups) labels << qs(g.label);
  if (labels != labels_) {
    // New groups: the choice of A and B starts again — B the BF16 group when there is one
    // (the reference), A the first other group.
    const QString keep_a = a_->currentText(), keep_b = b_->currentText();
    const QSignalBlocker ba(a_), bb(b_);
    a_->clear();
    b_->clear();
    a_->addItems(labels);
    b_->addItems(labels);
    int b = labels.indexOf(keep_b);
    if (b < 0) b = labels.indexOf(QStringLiteral("bf16"));
    if (b < 0) b = 0;
    int a = labels.indexOf(keep_a);
    if (a < 0 || a == b) a = b == 0 ? 1 : 0;
    b_->setCurrentIndex(labels.isEmpty() ? -1 : b);
    a_->setCurrentIndex(labels.size() < 2 ? -1 : a);
  }
  if (!pending_a_.isEmpty() || !pending_b_.isEmpty()) {
    const QString pa = pending_a_, pb = pending_b_;
    if (groupIndex(pa) >= 0 || groupIndex(pb) >= 0) setPair(pa, pb);
  }
  updateCharts();
  updateVerdict();
  updateGroupsTable();
  updateDiff();
}

void GroupView::setPair(const QString& a, const QString& b) {
  const int ia = groupIndex(a), ib = groupIndex(b);
  // Groups not read yet: chosen when they come.
  pending_a_ = ia < 0 ? a : QString();
  pending_b_ = ib < 0 ? b : QString();
  const QSignalBlocker ba(a_), bb(b_);
  if (ia >= 0) a_->setCurrentIndex(ia);
  if (ib >= 0) b_->setCurrentIndex(ib);
  if (a_->count() >= 2 && a_->currentIndex() == b_->currentIndex()) {
    // One group chosen, the same as B: B becomes the reference (BF16) or the first other.
    int other = b_->findText(QStringLiteral("bf16"));
    if (other < 0 || other == a_->currentIndex()) other = a_->currentIndex() == 0 ? 1 : 0;
    if (ib >= 0 && ia < 0) a_->setCurrentIndex(other);
    else b_->setCurrentIndex(other);
  }
  updateVerdict();
}

void GroupView::updateCharts() {
  const GroupSnapshot& s = *snap_;
  QStringList labels;
  for (const auto& g : s.groups) labels << qs(g.label);
  QString legend;
  for (int g = 0; g < labels.size(); ++g)
    legend += QStringLiteral("<span style=\"color:%1\">&#9644;</span> %2 (%3)&nbsp;&nbsp;&nbsp;")
                  .arg(seriesColor(static_cast<size_t>(g)).name(), labels[g].toHtmlEscaped())
                  .arg(runsText(s.groups[static_cast<size_t>(g)].runs.size()));
  legend_->setText(legend.isEmpty() ? QString()
                                    : legend + tr("<span style=\"color:#666\">mean and 95 % "
                                                  "bootstrap band over the runs</span>"));
  const bool rebuild = labels != labels_;
  labels_ = labels;
  const auto& metrics = group_chart_metrics();
  for (size_t m = 0; m < metrics.size(); ++m) {
    ChartView* c = charts_[m];
    if (rebuild) {
      c->clearCurves();
      for (int g = 0; g < labels.size(); ++g) c->addCurve(labels[g], seriesColor(static_cast<size_t>(g)));
    }
    auto it = s.curves.find(metrics[m].first);
    for (int g = 0; g < labels.size(); ++g) {
      std::vector<SeriesPoint> mean, lo, hi;
      if (it != s.curves.end() && static_cast<size_t>(g) < it->second.size())
        for (const BandPoint& p : it->second[static_cast<size_t>(g)]) {
          mean.push_back({p.step, 0, 0, p.mean});
          lo.push_back({p.step, 0, 0, p.lo});
          hi.push_back({p.step, 0, 0, p.hi});
        }
      c->setCurveData(g, mean);
      c->setCurveBand(g, lo, hi);
    }
    const bool empty = it == s.curves.end() ||
                       std::all_of(it->second.begin(), it->second.end(),
                                   [](const auto& b) { return b.empty(); });
    c->setMessage(empty && s.sweep_id >= 0 ? tr("not recorded yet") : QString());
  }
}

void GroupView::updateVerdict() {
  const GroupSnapshot& s = *snap_;
  const int a = a_->currentIndex(), b = b_->currentIndex();
  verdict_.reset();
  verdict_table_->setRowCount(0);
  if (a < 0 || b < 0 || a == b || static_cast<size_t>(std::max(a, b)) >= s.outcomes.size()) {
    verdict_text_->setPlainText(s.groups.size() < 2
                                    ? tr("A verdict needs two groups: a sweep with another axis "
                                         "than the seeds (precision variants, say).")
                                    : tr("Choose two different groups."));
    return;
  }
  VerdictOptions opt;
  opt.target = s.target;
  verdict_ = compare_groups(s.groups[static_cast<size_t>(a)], s.outcomes[static_cast<size_t>(a)],
                            s.groups[static_cast<size_t>(b)], s.outcomes[static_cast<size_t>(b)],
                            opt);
  verdict_table_->setRowCount(static_cast<int>(verdict_->metrics.size()));
  int row = 0;
  for (const auto& m : verdict_->metrics) {
    const bool has = m.bootstrap.resamples > 0;
    const auto ci = [&](const stats::Estimate& e) {
      return has ? QStringLiteral("[%1, %2]").arg(qs(format_number(e.ci.lo, 3, !m.ratio)),
                                                  qs(format_number(e.ci.hi, 3, !m.ratio)))
                 : QStringLiteral("—");
    };
    const QString tip = qs(m.sentence);
    verdict_table_->setItem(row, 0, cell(qs(m.title) + (m.ratio ? tr(" (ratio)") : QString()), false, tip));
    verdict_table_->setItem(row, 1, cell(meanSd(m.mean_a, m.sd_a), true, tip));
    verdict_table_->setItem(row, 2, cell(meanSd(m.mean_b, m.sd_b), true, tip));
    verdict_table_->setItem(
        row, 3, cell(has ? qs(format_number(m.bootstrap.value, 3, !m.ratio)) : QStringLiteral("—"), true, tip));
    verdict_table_->setItem(row, 4, cell(ci(m.bootstrap), true, qs(m.bootstrap.method)));
    verdict_table_->setItem(row, 5, cell(ci(m.t_based), true, qs(m.t_based.method)));
    verdict_table_->setItem(
        row, 6, cell(m.paired ? tr("%1 pairs").arg(m.a.size()) : QStringLiteral("%1 / %2").arg(m.a.size()).arg(m.b.size()), true, tip));
    auto* finding = cell(qs(m.finding), false, tip);
    QFont f = finding->font();
    f.setBold(true);
    finding->setFont(f);
    verdict_table_->setItem(row, 7, finding);
    verdict_table_->setItem(row, 8, cell(m.seeds_needed > 0 ? QString::number(m.seeds_needed) : QStringLiteral("—"), true,
                                         tr("seeds per group to detect %1 (α 0.05, power 0.8)")
                                             .arg(m.ratio ? QStringLiteral("a %1 % difference").arg(100 * m.detect)
                                                          : qs(format_number(m.detect, 3)))));
    ++row;
  }
  // The metric column (0) stretches over what the others leave.
  for (int c = 1; c < verdict_table_->columnCount(); ++c) verdict_table_->resizeColumnToContents(c);
  QString html = QStringLiteral("<p><b>%1 against %2</b></p><ul>")
                     .arg(qs(html_escape(verdict_->a_label)), qs(html_escape(verdict_->b_label)));
  for (const auto& m : verdict_->metrics) html += QStringLiteral("<li>%1</li>").arg(qs(html_escape(m.sentence)));
  html += QStringLiteral("</ul>");
  verdict_text_->setHtml(html);
}

void GroupView::updateGroupsTable() {
  const GroupSnapshot& s = *snap_;
  groups_table_->setRowCount(static_cast<int>(s.groups.size()));
  for (size_t g = 0; g < s.groups.size() && g < s.outcomes.size(); ++g) {
    const int r = static_cast<int>(g);
    const auto& o = s.outcomes[g];
    auto* name = cell(qs(s.groups[g].label), false);
    name->setForeground(seriesColor(g));
    groups_table_->setItem(r, 0, name);
    groups_table_->setItem(r, 1, cell(QString::number(s.groups[g].runs.size()) +
                                          (s.groups[g].queued ? tr(" + %1 queued").arg(s.groups[g].queued) : QString()),
                                      true));
    groups_table_->setItem(r, 2, cell(outcomeText(o, &RunOutcome::final_validation), true));
    groups_table_->setItem(r, 3, cell(outcomeText(o, &RunOutcome::best_validation), true));
    groups_table_->setItem(r, 4, cell(outcomeText(o, &RunOutcome::final_reward), true));
    groups_table_->setItem(r, 5, cell(outcomeText(o, &RunOutcome::time_to_target, 1), true));
    groups_table_->setItem(r, 6, cell(outcomeText(o, &RunOutcome::step_time), true));
    groups_table_->setItem(r, 7, cell(outcomeText(o, &RunOutcome::rollout_tps, 0), true));
  }
  groups_table_->resizeColumnsToContents();
}

void GroupView::updateDiff() {
  const GroupSnapshot& s = *snap_;
  std::vector<std::vector<const Json*>> configs;
  QStringList headers;
  for (const auto& g : s.groups) {
    std::vector<const Json*> c;
    for (const auto& r : g.runs) c.push_back(&r.config);
    configs.push_back(std::move(c));
    headers << qs(g.label);
  }
  const auto rows = groupConfigDiff(configs);
  diff_table_->clear();
  diff_table_->setColumnCount(static_cast<int>(headers.size()) + 1);
  diff_table_->setHorizontalHeaderLabels(QStringList{tr("setting")} + headers);
  diff_table_->setRowCount(static_cast<int>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    diff_table_->setItem(static_cast<int>(i), 0, cell(qs(rows[i].key), false));
    for (size_t c = 0; c < rows[i].values.size(); ++c)
      diff_table_->setItem(static_cast<int>(i), static_cast<int>(c) + 1,
                           cell(qs(rows[i].values[c]), false, qs(rows[i].values[c])));
  }
  diff_table_->resizeColumnsToContents();
}

bool GroupView::exportReport(const QString& path, QString* error) const {
  const GroupSnapshot& s = *snap_;
  ReportInput in;
  in.title = "Sweep " + std::to_string(s.sweep_id) + " " + s.sweep.name;
  in.generated = "Generated " +
                 QDateTime::currentDateTime().toString(QStringLiteral("yyyy-MM-dd HH:mm")).toStdString() +
                 " by FP8 RL Studio " + FP8RL_VERSION + " (" + FP8RL_GIT_DESCRIBE + ")";
  in.groups = s.groups;
  in.outcomes = s.outcomes;
  if (verdict_) in.verdicts.push_back(*verdict_);
  for (const auto& [key, chart_title] : group_chart_metrics()) {
    auto it = s.curves.find(key);
    if (it == s.curves.end()) continue;
    in.charts.push_back({key, chart_title, it->second});
  }
  QFile f(path);
  const QByteArray html = QByteArray::fromStdString(report_html(in));
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(html) != html.size()) {
    if (error) *error = tr("cannot write %1: %2").arg(path, f.errorString());
    return false;
  }
  return true;
}

}  // namespace fp8rl::ui
