#include "ui/run/overview_tab.hpp"

#include <QGridLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <cmath>

#include "contract/metrics.hpp"
#include "contract/settings.hpp"
#include "contract/step_record.hpp"
#include "ui/charts/chart_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/run_text.hpp"
#include "ui/run/run_view.hpp"
#include "ui/widgets/line_label.hpp"

namespace fp8rl::ui {

namespace {

constexpr double kMultProbAlert = 1.05;

QString number(double v) {
  if (std::isnan(v)) return QStringLiteral("NaN");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("+inf") : QStringLiteral("−inf");
  return QString::number(v, 'g', 4);
}

// "<b>name</b> value" of the last point of key, or "name —".
QString latest(const RunData& run, const char* key, const QString& name, bool* alert = nullptr) {
  const auto& s = run.series(key);
  if (s.empty()) return QStringLiteral("%1 —").arg(name);
  const SeriesPoint& p = s.back();
  QString value = number(p.value);
  if (alert) *alert = !(p.value <= kMultProbAlert);  // NaN and +inf alert too
  if (alert && *alert) value = QStringLiteral("<span style=\"color:#d62728\">%1</span>").arg(value);
  return QStringLiteral("%1 <b>%2</b> <small>(step %3)</small>")
      .arg(name, value)
      .arg(static_cast<qint64>(p.step));
}

}  // namespace

OverviewTab::OverviewTab(QWidget* parent)
    : RunTab(parent),
      headline_line_(
          new LineLabel(QStringLiteral("Step <b>0</b> · reward <b>0</b> <small>(step 0)</small>"))),
      headline_(headline_line_->label()),
      reward_(new ChartView(tr("Reward"))),
      accuracy_(new ChartView(tr("Accuracy"))),
      loss_(new ChartView(tr("Loss"))),
      kl_(new ChartView(tr("KL to reference"))),
      mult_prob_(new ChartView(QStringLiteral("token_mult_prob_error"))),
      gen_kl_(new ChartView(QStringLiteral("gen_kl_error"))) {
  headline_->setTextFormat(Qt::RichText);
  headline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(headline_line_);
  auto* grid = new QGridLayout;
  grid->addWidget(reward_, 0, 0);
  grid->addWidget(accuracy_, 0, 1);
  grid->addWidget(loss_, 1, 0);
  grid->addWidget(kl_, 1, 1);
  grid->addWidget(mult_prob_, 2, 0);
  grid->addWidget(gen_kl_, 2, 1);
  layout->addLayout(grid, 1);

  auto bind = [this](ChartView* chart, const char* key, const QString& label, QColor color) {
    bindings_.push_back({chart, chart->addCurve(label, color), key});
  };
  bind(reward_, metric::kReward, QStringLiteral("reward/mean"), QColor(0x1f, 0x77, 0xb4));
  bind(accuracy_, metric::kTrainAccuracy, tr("train"), QColor(0x1f, 0x77, 0xb4));
  bind(accuracy_, metric::kValAccuracy, tr("validation"), QColor(0xff, 0x7f, 0x0e));
  bind(loss_, metric::kLoss, QStringLiteral("loss"), QColor(0x2c, 0xa0, 0x2c));
  bind(kl_, metric::kKl, QStringLiteral("kl_ref"), QColor(0x94, 0x67, 0xbd));
  bind(mult_prob_, metric::kTokenMultProbError, QStringLiteral("token_mult_prob_error"),
       QColor(0xd6, 0x27, 0x28));
  bind(gen_kl_, metric::kGenKlError, QStringLiteral("gen_kl_error"), QColor(0x8c, 0x56, 0x4b));
  mult_prob_->addThreshold(kMultProbAlert, tr("1.05 alert"));
  linkChartOptions(charts());
  setRun(nullptr);
}

std::vector<ChartView*> OverviewTab::charts() const {
  return {reward_, accuracy_, loss_, kl_, mult_prob_, gen_kl_};
}

void OverviewTab::clearRun() {
  clearCharts(charts());
  kl_->setMessage(QString());
  if (!run_) headline_->setText(tr("No run selected."));
}

void OverviewTab::showNew() {
  for (const Binding& b : bindings_) b.chart->setCurveData(b.curve, run_->series(b.key));
  syncPrecisionMarkers(run_, charts(), &markers_);
  updateKlMessage();
}

void OverviewTab::updateKlMessage() {
  // With no KL penalty the engine never computes the KL to a reference: say so rather than
  // leave an empty chart.
  // An imported run's configuration is its trainer's, not ours: only the absence can be said.
  const bool empty = run_->series(metric::kKl).empty();
  if (!run_->row.source.empty())
    kl_->setMessage(empty ? tr("not in the imported logs") : QString());
  else
    kl_->setMessage(
        empty && klToReferenceOff(run_->row.config)
            ? tr("not computed: %1 is 0 — no reference policy").arg(setting_key::kKlBeta)
            : QString());
}

void OverviewTab::updateHeadline() {
  const RunData& r = *run_;
  bool alert = false;
  const QString mult = latest(r, metric::kTokenMultProbError, tr("mult-prob error"), &alert);
  QStringList parts;
  parts << tr("Step <b>%1</b>").arg(static_cast<qint64>(r.last_step))
        << latest(r, metric::kReward, tr("reward"))
        << latest(r, metric::kValAccuracy, tr("val acc")) << mult;
  // A data-parallel run: how many ranks share it (a launch choice, not in the configuration).
  if (const auto& ranks = r.series(metric::kRanks);
      !ranks.empty() && std::isfinite(ranks.back().value) && ranks.back().value >= 2)
    parts << tr("%1 ranks").arg(static_cast<qint64>(ranks.back().value));
  if (!r.row.status.empty()) parts << QString::fromStdString(r.row.status);
  headline_->setText(parts.join(QStringLiteral(" &nbsp;·&nbsp; ")));
  headline_->setToolTip(alert ? tr("token_mult_prob_error is above 1.05: the generator and the "
                                   "trainer disagree (check FP8 scales and importance weights)")
                              : QString());
}

}  // namespace fp8rl::ui
