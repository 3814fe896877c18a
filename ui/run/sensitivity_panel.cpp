#include "ui/run/sensitivity_panel.hpp"

#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>
#include <cmath>

#include "core/error.hpp"
#include "ui/charts/heatmap_view.hpp"
#include "ui/data/engine_cli.hpp"
#include "ui/data/run_data.hpp"
#include "ui/data/sensitivity_runner.hpp"

namespace fp8rl::ui {

namespace {

QString num(double v) {
  return QString::number(v, 'g', 3);
}

}  // namespace

SensitivityPanel::SensitivityPanel(QWidget* parent)
    : QWidget(parent),
      runner_(new SensitivityRunner(EngineCli::besideApplication(), this)),
      heatmap_(new HeatmapView(tr("Layer sensitivity"))),
      value_(new QComboBox),
      measure_(new QPushButton(tr("Measure sensitivity…"))),
      cancel_(new QPushButton(tr("Cancel"))),
      load_(new QPushButton(tr("Load…"))),
      apply_(new QPushButton(tr("Apply recommendation"))),
      progress_(new QProgressBar),
      status_(new QLabel),
      summary_(new QLabel) {
  value_->addItem(tr("only FP8 KL"), static_cast<int>(SensitivityValue::only_fp8_kl));
  value_->addItem(tr("all FP8 but M KL"), static_cast<int>(SensitivityValue::all_fp8_but_kl));
  value_->setToolTip(
      tr("Colour: log10 of the KL to the BF16 policy with only that linear in FP8, or with "
         "every linear in FP8 but that one"));
  measure_->setToolTip(
      tr("Run fp8rl sensitivity on the run's configuration (and its checkpoint, when it has "
         "one): one measurement per linear on one batch"));
  load_->setToolTip(tr("Read a report saved from fp8rl sensitivity --json"));
  progress_->setTextVisible(true);
  progress_->hide();
  cancel_->hide();
  status_->setWordWrap(true);
  summary_->setWordWrap(true);
  summary_->setAlignment(Qt::AlignLeft | Qt::AlignTop);  // under the buttons while no map shows
  heatmap_->setMinimumHeight(240);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(measure_);
  buttons->addWidget(load_);
  buttons->addWidget(apply_);
  buttons->addStretch(1);
  auto* choice = new QHBoxLayout;
  choice->addWidget(new QLabel(tr("Colour:")));
  choice->addWidget(value_);
  choice->addWidget(progress_, 1);
  choice->addWidget(cancel_);
  choice->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(buttons);
  layout->addLayout(choice);
  layout->addWidget(status_);
  layout->addWidget(heatmap_, 1);
  layout->addWidget(summary_);

  confirm_ = [this](const QString& text) {
    return QMessageBox::question(this, tr("Apply recommendation"), text) == QMessageBox::Yes;
  };
  connect(value_, &QComboBox::currentIndexChanged, this, &SensitivityPanel::showReport);
  connect(measure_, &QPushButton::clicked, this, [this] {
    const QString err = measure();
    if (!err.isEmpty()) setStatus(err);
  });
  connect(cancel_, &QPushButton::clicked, runner_, &SensitivityRunner::cancel);
  connect(load_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Load a sensitivity report"), QString(), tr("JSON (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    const QString err = loadFile(path);
    if (!err.isEmpty()) setStatus(err);
  });
  connect(apply_, &QPushButton::clicked, this, &SensitivityPanel::applyRecommendation);
  connect(runner_, &SensitivityRunner::progress, this,
          [this](qint64 done, qint64 planned, const QString& what) {
            progress_->setRange(0, static_cast<int>(planned));
            progress_->setValue(static_cast<int>(done));
            progress_->setFormat(QStringLiteral("%v/%m ") + what);
          });
  connect(runner_, &SensitivityRunner::finished, this,
          [this](qint64, const SensitivityReport& report) {
            reports_[measuring_] = report;
            setStatus(tr("Measured in %1 s.").arg(report.seconds, 0, 'f', 1));
            showReport();
            updateButtons();
          });
  connect(runner_, &SensitivityRunner::failed, this, [this](qint64, const QString& message) {
    setStatus(tr("Sensitivity measurement: %1").arg(message));
    updateButtons();
  });
  setRun(nullptr);
}

SensitivityPanel::~SensitivityPanel() = default;

void SensitivityPanel::setExecutable(const QString& executable) {
  runner_->setExecutable(executable);
}

SensitivityPanel::RunKey SensitivityPanel::key() const {
  return run_ ? RunKey{run_->id, run_->row.created_at} : RunKey{-1, 0};
}

void SensitivityPanel::setRun(const RunData* run) {
  run_ = run;
  setStatus({});
  showReport();
  updateButtons();
}

void SensitivityPanel::refresh() {
  updateButtons();
}

const SensitivityReport* SensitivityPanel::report() const {
  const auto it = reports_.find(key());
  return it == reports_.end() ? nullptr : &it->second;
}

void SensitivityPanel::setReport(const SensitivityReport& report) {
  reports_[key()] = report;
  showReport();
  updateButtons();
}

QString SensitivityPanel::loadFile(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return tr("cannot read %1: %2").arg(path, f.errorString());
  try {
    setReport(SensitivityReport::parse(f.readAll().toStdString()));
  } catch (const Error& e) {
    return tr("%1: %2").arg(path, QString::fromStdString(e.message()));
  }
  setStatus(tr("Loaded %1.").arg(path));
  return {};
}

QString SensitivityPanel::measure() {
  if (!run_) return tr("No run selected.");
  QString err;
  measuring_ = key();
  if (!runner_->start(run_->row, &err)) return err;
  progress_->setRange(0, 0);  // busy until the first progress line
  progress_->setFormat(tr("starting…"));
  setStatus(tr("Measuring the sensitivity of run %1…").arg(run_->id));
  updateButtons();
  return {};
}

void SensitivityPanel::setConfirmation(std::function<bool(const QString&)> confirm) {
  confirm_ = std::move(confirm);
}

void SensitivityPanel::applyRecommendation() {
  const SensitivityReport* r = report();
  if (!r || !run_ || !apply_->isEnabled()) return;
  LiveEdit edit;
  edit.precision = r->recommendation.overrides;
  if (edit.empty()) return;
  const QString text =
      tr("Send these precision overrides to run %1? They take effect at the next step and are "
         "recorded in the precision history.\n\n%2")
          .arg(run_->id)
          .arg(QString::fromStdString(edit.describe()));
  if (!confirm_(text)) return;
  setStatus(tr("Sent the recommendation: %1").arg(QString::fromStdString(edit.describe())));
  emit applyRequested(static_cast<qint64>(run_->id), edit);
}

void SensitivityPanel::showReport() {
  const SensitivityReport* r = report();
  HeatmapData d;
  d.x_label = tr("Linear");
  heatmap_->setVisible(r != nullptr);
  value_->setEnabled(r != nullptr);
  if (!r) {
    heatmap_->setData(d);
    summary_->setText(run_ ? tr("No sensitivity report for this run: Measure sensitivity… runs "
                                "fp8rl sensitivity, Load… reads a saved report.")
                           : QString());
    return;
  }
  const auto which = static_cast<SensitivityValue>(value_->currentData().toInt());
  const SensitivityGrid g = sensitivityGrid(*r, which);
  d.rows = g.rows;
  d.row_lo = 0;
  d.row_hi = g.rows;
  // Layer 0 on top, as in the precision grid, and the lm_head last, at the bottom: the map's
  // rows go up, so grid row r is drawn as row rows - 1 - r.
  d.row_labels << QStringLiteral("lm_head");
  for (int l = g.rows - 2; l >= 0; --l) d.row_labels << QStringLiteral("L%1").arg(l);
  for (int c = 0; c < g.cols; ++c) {
    d.steps.push_back(c);
    d.column_labels << QString::fromUtf8(module_short(g.columns[static_cast<size_t>(c)]));
  }
  const size_t cells = g.values.size();
  d.values.resize(cells);
  d.marked.resize(cells);
  d.cell_tips.resize(static_cast<qsizetype>(cells));
  for (int c = 0; c < g.cols; ++c)
    for (int row = 0; row < g.rows; ++row) {
      const size_t from = static_cast<size_t>(c * g.rows + row);
      const size_t to = static_cast<size_t>(c * g.rows + g.rows - 1 - row);
      d.values[to] = g.values[from];
      d.marked[to] = g.recommended[from];
      const SensitivityEntry* e = g.entries[from];
      d.cell_tips[static_cast<qsizetype>(to)] =
          e ? QString::fromStdString(r->describe(*e)) : tr("not measured");
    }
  // Short: the rotated caption must fit the bar's height at the studio's default size; the
  // Colour box above says which KL it is.
  d.value_label = which == SensitivityValue::only_fp8_kl ? tr("log10 KL, only it FP8")
                                                         : tr("log10 KL, all but it FP8");
  heatmap_->setData(d);

  const auto& rec = r->recommendation;
  QStringList keep;
  for (const auto& k : rec.keep_bf16) keep << QString::fromStdString(k);
  summary_->setText(
      tr("<b>Recommendation</b> (outlined): %1 → KL %2, budget %3%4 (%5). All FP8: KL %6; "
         "lm_head in FP8 adds KL %7: %8. Batch: %9 sequences × %10 tokens, %11 s.")
          .arg(keep.isEmpty() ? tr("every linear in FP8")
                              : tr("keep %1 in BF16").arg(keep.join(", ")))
          .arg(num(rec.kl), num(r->budget), r->budget_is_default ? tr(" (default)") : QString())
          .arg(rec.meets_budget ? tr("met") : tr("<b>not met</b>"))
          .arg(num(r->all_fp8.kl), num(rec.lm_head_fp8_kl))
          .arg(rec.keep_lm_head_bf16 ? tr("keep it in BF16") : tr("FP8 is within budget"))
          .arg(r->batch.sequences)
          .arg(r->batch.response_tokens)
          .arg(r->seconds, 0, 'f', 1));
}

void SensitivityPanel::setStatus(const QString& text) {
  status_->setText(text);
  status_->setVisible(!text.isEmpty());  // no empty line above the map
}

void SensitivityPanel::updateButtons() {
  const bool busy = runner_->running();
  const SensitivityReport* r = report();
  const bool live = run_ && run_status::is_live(run_->row.status);
  measure_->setEnabled(run_ && !busy);
  progress_->setVisible(busy);
  cancel_->setVisible(busy);
  const bool overrides = r && !r->recommendation.overrides.empty();
  // A report of another model (a loaded file) would send overrides the run cannot take.
  const bool fits = r && run_ && (run_->layers() == 0 || run_->layers() == r->layers);
  apply_->setEnabled(live && overrides && fits);
  if (!r)
    apply_->setToolTip(tr("Measure or load a sensitivity report first"));
  else if (!fits)
    apply_->setToolTip(
        tr("The report covers %1 layers, the run has %2").arg(r->layers).arg(run_->layers()));
  else if (!overrides)
    apply_->setToolTip(tr("The recommendation keeps every linear in FP8"));
  else if (!live)
    apply_->setToolTip(tr("The run is %1: it can be changed only while it runs or is paused")
                           .arg(QString::fromStdString(run_->row.status)));
  else
    apply_->setToolTip(
        tr("Send %1 to the run").arg(QString::fromStdString(r->recommendation.override_setting)));
}

}  // namespace fp8rl::ui
