#include "ui/run/autopilot_panel.hpp"

#include <QComboBox>
#include <QLabel>
#include <QVBoxLayout>

#include "contract/autopilot.hpp"
#include "contract/live_settings.hpp"
#include "ui/data/autopilot_view.hpp"
#include "ui/data/run_data.hpp"
#include "ui/run/live_settings_panel.hpp"

namespace fp8rl::ui {
namespace {

// The badge colour of a state.
QString stateColour(const std::string& state) {
  if (state == "acting") return QStringLiteral("#8e24aa");
  if (state == "blocked") return QStringLiteral("#c62828");
  if (state == "cooling down") return QStringLiteral("#1565c0");
  if (state == "watching") return QStringLiteral("#2e7d32");
  return QStringLiteral("#757575");
}

}  // namespace

AutopilotPanel::AutopilotPanel(QWidget* parent)
    : QGroupBox(tr("Precision autopilot"), parent),
      state_(new QLabel),
      budget_(new QLabel),
      settings_(new LiveSettingsPanel(
          [](const LiveSetting& s) { return autopilot::is_autopilot_setting(s.config_path); }, 2)) {
  setToolTip(
      tr("Moves FP8 linears to BF16 by itself when the watched metric stays above its "
         "threshold, the worst first by their FP8 error; never a linear a person set. "
         "Change its settings here and Apply."));
  state_->setWordWrap(true);
  state_->setTextFormat(Qt::RichText);
  budget_->setWordWrap(true);
  // Two columns of settings fit the run view beside the runs panel at the default window size.
  for (QComboBox* c : settings_->findChildren<QComboBox*>()) c->setMaximumWidth(150);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(state_);
  layout->addWidget(budget_);
  layout->addWidget(settings_);
  setRun(nullptr);
}

void AutopilotPanel::setRun(const RunData* run) {
  settings_->setRun(run);
  if (!run) {
    state_->setText(tr("No run selected."));
    budget_->clear();
    return;
  }
  const AutopilotView v = autopilotView(*run);
  state_->setText(
      QStringLiteral("<span style=\"background:%1; color:white\">&nbsp;%2&nbsp;</span> %3")
          .arg(stateColour(v.state), QString::fromStdString(v.state).toUpper(),
               QString::fromStdString(v.headline).toHtmlEscaped()));
  budget_->setText(QString::fromStdString(v.budget));
}

}  // namespace fp8rl::ui
