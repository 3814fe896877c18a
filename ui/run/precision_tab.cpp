#include "ui/run/precision_tab.hpp"

#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "contract/autopilot.hpp"
#include "contract/live_edit.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "ui/data/autopilot_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/run/autopilot_panel.hpp"
#include "ui/run/live_settings_panel.hpp"
#include "ui/run/sensitivity_panel.hpp"
#include "ui/widgets/precision_grid.hpp"

namespace fp8rl::ui {

namespace {

// "initial map: 10 of 14 linears in FP8" for a map (array of layers of module → format).
QString describeMap(const Json& map) {
  PrecisionMap pm;
  try {
    pm = PrecisionMap::from_json(map);
  } catch (const Error&) {
    return QObject::tr("initial map");
  }
  int64_t linears = 0, fp8 = 0, routers = 0;
  for (const LinearSlot& s : pm.linears()) {
    if (s.router) {
      ++routers;
      continue;
    }
    ++linears;
    fp8 += pm.get(s) == Precision::fp8;
  }
  QString text = QObject::tr("initial map: %1 of %2 linears in FP8")
                     .arg(static_cast<qint64>(fp8))
                     .arg(static_cast<qint64>(linears));
  if (routers > 0)
    text += routers == 1 ? QObject::tr(" (and a router)")
                         : QObject::tr(" (and %1 routers)").arg(static_cast<qint64>(routers));
  return text;
}

// The metric of a layer's FP8 weight quantization error.
std::string weightErrorMetric(int64_t layer) {
  return metric::fp8(layer, "weight", "rel_error");
}

bool sameValues(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

}  // namespace

PrecisionTab::PrecisionTab(QWidget* parent)
    : RunTab(parent),
      grid_(new PrecisionGrid),
      settings_(new LiveSettingsPanel(
          [](const LiveSetting& l) { return !autopilot::is_autopilot_setting(l.config_path); })),
      caption_(new QLabel),
      status_(new QLabel),
      apply_(new QPushButton(tr("Apply"))),
      revert_(new QPushButton(tr("Revert"))),
      history_(new QTableWidget(0, 2)),
      sensitivity_(new SensitivityPanel),
      autopilot_(new AutopilotPanel) {
  caption_->setWordWrap(true);
  caption_->setText(
      tr("Click a cell to switch that linear between BF16 and FP8, or type a new value for a "
         "live setting; Apply sends the edits to the running worker, which applies them together "
         "at the next step. Row headers: each layer's FP8 <b>weight</b> quantization error at the "
         "latest step (%1 for layer 0, %2 for layer 1, and so on).")
          .arg(QString::fromStdString(weightErrorMetric(0)),
               QString::fromStdString(weightErrorMetric(1))));
  status_->setWordWrap(true);
  apply_->setToolTip(tr("Send the edited cells to the run"));
  revert_->setToolTip(tr("Drop the edits: show the map in effect"));
  history_->setHorizontalHeaderLabels({tr("step"), tr("change")});
  history_->verticalHeader()->setVisible(false);
  history_->horizontalHeader()->setStretchLastSection(true);
  history_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  history_->setSelectionBehavior(QAbstractItemView::SelectRows);
  history_->setMaximumHeight(200);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(apply_);
  buttons->addWidget(revert_);
  buttons->addWidget(status_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(caption_);
  layout->addLayout(buttons);
  auto* settings_box = new QGroupBox(tr("Live settings"));
  auto* settings_layout = new QVBoxLayout(settings_box);
  settings_layout->addWidget(settings_);
  auto* edits = new QHBoxLayout;
  edits->addWidget(grid_, 3);
  auto* side = new QVBoxLayout;  // the settings are few: the heatmap takes the height below
  side->addWidget(settings_box);
  side->addWidget(sensitivity_, 1);
  edits->addLayout(side, 2);
  layout->addLayout(edits, 1);
  layout->addWidget(autopilot_);  // under the grid it acts on, the tab's whole width
  layout->addWidget(new QLabel(tr("Precision history")));
  layout->addWidget(history_);

  // The grid brings a Revert of its own (for the launch dialog); this tab's sits next to Apply.
  for (QPushButton* b : grid_->findChildren<QPushButton*>())
    if (b->text().remove(QLatin1Char('&')) == QLatin1String("Revert")) b->hide();
  connect(grid_, &PrecisionGrid::edited, this, &PrecisionTab::updateButtons);
  connect(settings_, &LiveSettingsPanel::edited, this, &PrecisionTab::updateButtons);
  connect(autopilot_->settings(), &LiveSettingsPanel::edited, this, &PrecisionTab::updateButtons);
  connect(apply_, &QPushButton::clicked, this, &PrecisionTab::apply);
  connect(sensitivity_, &SensitivityPanel::applyRequested, this, &PrecisionTab::applyRequested);
  connect(revert_, &QPushButton::clicked, this, [this] {
    grid_->revert();
    settings_->clear();
    autopilot_->settings()->clear();
  });
  setRun(nullptr);
}

bool PrecisionTab::runIsLive() const {
  return run_ && run_status::is_live(run_->row.status);
}

void PrecisionTab::clearRun() {
  maps_ = 0;
  last_map_step_ = 0;
  errors_.clear();
  grid_->setUnavailable(run_ ? tr("No precision map recorded yet.") : tr("No run selected."));
  history_->setRowCount(0);
  status_->clear();
  settings_->clear();
  settings_->setRun(run_);
  autopilot_->settings()->clear();
  linear_errors_.clear();
  grid_->setLinearErrors({});
  grid_->setMarks({}, {});
  autopilot_->setRun(run_);
  sensitivity_->setRun(run_);
  updateButtons();
}

void PrecisionTab::poll() {
  updateButtons();  // the status may change without new data
  sensitivity_->refresh();
}

void PrecisionTab::showNew() {
  settings_->setRun(run_);  // a `set` event may have changed a value in force
  const auto& maps = run_->precision;
  if (!maps.empty() && (maps.size() != maps_ || maps.back().first != last_map_step_)) {
    // A new map is in effect (after an Apply, or first seen): show it, edits dropped.
    grid_->setMap(run_->currentPrecision());
    errors_.clear();
    status_->setText(tr("Map of step %1 in effect.").arg(static_cast<qint64>(maps.back().first)));
    maps_ = maps.size();
    last_map_step_ = maps.back().first;
    updateHistory();
  }
  updateErrors();
  updateAutopilot();
  updateButtons();
}

void PrecisionTab::updateAutopilot() {
  if (!run_) return;
  autopilot_->setRun(run_);
  const int layers = std::max(0, grid_->layers());
  std::vector<double> errors(static_cast<size_t>(layers) * kModules,
                             std::numeric_limits<double>::quiet_NaN());
  // The latest step that measured the signal; a linear not measured then (in BF16 since, or
  // not observed) has no value: an older one would no longer say what FP8 costs it.
  double latest = -std::numeric_limits<double>::infinity();
  for (int l = 0; l < layers; ++l)
    for (int m = 0; m < kModules; ++m)
      if (const auto& s = run_->series(metric::fp8_error(l, module_short(Module(m)))); !s.empty())
        latest = std::max(latest, s.back().step);
  for (int l = 0; l < layers; ++l)
    for (int m = 0; m < kModules; ++m) {
      const auto& s = run_->series(metric::fp8_error(l, module_short(Module(m))));
      if (!s.empty() && s.back().step == latest)
        errors[static_cast<size_t>(l) * kModules + static_cast<size_t>(m)] = s.back().value;
    }
  if (!sameValues(errors, linear_errors_)) {
    linear_errors_ = errors;
    grid_->setLinearErrors(linear_errors_);
  }
  const AutopilotView v = autopilotView(*run_);
  grid_->setMarks(v.held, v.pinned);
}

LiveEdit PrecisionTab::settingEdits() const {
  LiveEdit edit = settings_->edits();
  edit.merge(autopilot_->settings()->edits());
  return edit;
}

void PrecisionTab::updateErrors() {
  if (!run_) return;
  std::vector<double> errors(static_cast<size_t>(std::max(0, grid_->layers())),
                             std::numeric_limits<double>::quiet_NaN());
  for (size_t l = 0; l < errors.size(); ++l) {
    const auto& s = run_->series(weightErrorMetric(static_cast<int64_t>(l)));
    if (!s.empty()) errors[l] = s.back().value;
  }
  if (sameValues(errors, errors_)) return;
  errors_ = errors;
  grid_->setLayerErrors(errors_);
}

void PrecisionTab::updateHistory() {
  const auto changes = run_->precisionChanges();
  history_->setRowCount(0);
  auto add = [this](int64_t step, const QString& what) {
    const int row = history_->rowCount();
    history_->insertRow(row);
    auto* s = new QTableWidgetItem;
    s->setData(Qt::DisplayRole, static_cast<qlonglong>(step));
    history_->setItem(row, 0, s);
    auto* w = new QTableWidgetItem(what);
    w->setToolTip(what);
    history_->setItem(row, 1, w);
  };
  add(run_->precision.front().first, describeMap(run_->precision.front().second));
  for (const auto& [step, what] : changes) add(step, QString::fromStdString(what));
  history_->resizeColumnToContents(0);
  history_->scrollToBottom();
}

void PrecisionTab::updateButtons() {
  const bool edited = !grid_->edits().isEmpty() || !settingEdits().empty();
  const bool errors = settings_->hasErrors() || autopilot_->settings()->hasErrors();
  const bool live = runIsLive();
  apply_->setEnabled(edited && live && !errors);
  revert_->setEnabled(edited || errors);
  if (run_ && !live)
    apply_->setToolTip(tr("The run is %1: it can be changed only while it runs or is paused")
                           .arg(QString::fromStdString(run_->row.status)));
  else if (errors)
    apply_->setToolTip(tr("A live setting holds an invalid value (see the message under it)"));
  else
    apply_->setToolTip(tr("Send the edited cells and settings to the run"));
}

void PrecisionTab::apply() {
  if (!run_ || !runIsLive() || settings_->hasErrors() || autopilot_->settings()->hasErrors())
    return;
  LiveEdit edit = settingEdits();
  edit.precision = grid_->changes();
  if (edit.empty()) return;
  const int n = static_cast<int>(edit.precision.size() + edit.settings.size());
  status_->setText(tr("Sent %n change(s); waiting for the run to apply them…", nullptr, n));
  settings_->clear();
  autopilot_->settings()->clear();
  emit applyRequested(static_cast<qint64>(run_->id), edit);
}

}  // namespace fp8rl::ui
