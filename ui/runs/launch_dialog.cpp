#include "ui/runs/launch_dialog.hpp"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>
#include <QVBoxLayout>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "contract/rank_launch.hpp"
#include "contract/settings.hpp"
#include "core/error.hpp"
#include "ui/runs/config_text.hpp"
#include "ui/runs/validation_message.hpp"
#include "ui/widgets/precision_grid.hpp"

namespace fp8rl::ui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

constexpr const char* kName = "name";
constexpr const char* kPrecisionSection = "precision";
constexpr const char* kOverridesKey = setting_key::kPrecisionOverrides;
constexpr const char* kDefaultKey = setting_key::kPrecisionDefault;
constexpr const char* kLayersKey = "model.num_hidden_layers";  // the family's config.json field
constexpr const char* kPromptsKey = setting_key::kPromptsPerStep;
constexpr const char* kMiniBatchesKey = setting_key::kMiniBatches;
constexpr int kMaxGridLayers = 1024;

}  // namespace

LaunchDialog::LaunchDialog(const QStringList& presets, PresetLoader load, Validator validate,
                           Choices choices, QWidget* parent)
    : QDialog(parent),
      load_(std::move(load)),
      validate_(std::move(validate)),
      choices_(std::move(choices)),
      presets_(new QComboBox(this)),
      name_(new QLineEdit(this)),
      name_error_(makeErrorLabel(this)),
      ranks_(new QSpinBox(this)),
      ranks_error_(makeErrorLabel(this)),
      hostfile_(new QLineEdit(this)),
      hostfile_error_(makeErrorLabel(this)),
      form_(new ConfigForm(this)),
      precision_box_(new QWidget(form_)),
      grid_(new PrecisionGrid(precision_box_)),
      general_(makeErrorLabel(this)),
      buttons_(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this)),
      debounce_(new QTimer(this)) {
  setWindowTitle(tr("Launch a run"));
  resize(760, 600);

  auto* top = new QFormLayout;
  presets_->addItems(presets);
  presets_->setToolTip(tr("The preset the configuration starts from"));
  top->addRow(tr("Preset"), presets_);
  name_->setToolTip(tr("The run's name (the config's \"name\")"));
  top->addRow(tr("Run name"), withErrorLabel(name_, name_error_));

  // How the run starts (not configuration): its data-parallel ranks and where they run.
  const QString ranks_tip =
      tr("How many processes (ranks) run this GRPO run. 1: one worker process. More: "
         "data-parallel GRPO over MPI (Open MPI's mpirun): each rank generates its share of every "
         "step's prompts and computes the gradients of its share; the gradients are averaged over "
         "the ranks, so every rank keeps the same weights. %1 must be at least ranks × %2. Rank 0 "
         "records the run and answers the studio.")
          .arg(kPromptsKey, kMiniBatchesKey);
  ranks_->setObjectName(QStringLiteral("ranks"));
  ranks_->setRange(1, kMaxLaunchRanks);
  ranks_->setValue(1);
  ranks_->setToolTip(ranks_tip);
  auto* ranks_row = new QHBoxLayout;
  ranks_row->addWidget(ranks_);
  auto* ranks_hint = new QLabel(tr("1: one process; more: data-parallel over MPI"), this);
  ranks_hint->setEnabled(false);  // drawn as a quiet hint
  ranks_hint->setToolTip(ranks_tip);
  ranks_row->addWidget(ranks_hint, 1);
  auto* ranks_label = new QLabel(tr("Ranks"), this);
  ranks_label->setToolTip(ranks_tip);
  auto* ranks_box = new QWidget(this);
  ranks_box->setLayout(ranks_row);
  ranks_row->setContentsMargins(0, 0, 0, 0);
  top->addRow(ranks_label, withErrorLabel(ranks_box, ranks_error_));

  const QString hostfile_tip =
      tr("Optional: the machines the ranks run on, as an Open MPI hostfile: one line per machine, "
         "\"host slots=N\" (N: how many ranks it takes). Empty: every rank on this machine. Rank "
         "0 goes to the first machine listed and serves the studio through this machine's IPC "
         "endpoints and run database, so list this machine first.");
  hostfile_->setObjectName(QStringLiteral("hostfile"));
  hostfile_->setPlaceholderText(tr("none: every rank on this machine"));
  hostfile_->setClearButtonEnabled(true);
  hostfile_->setToolTip(hostfile_tip);
  auto* browse = new QPushButton(tr("Browse…"), this);
  browse->setObjectName(QStringLiteral("hostfileBrowse"));
  browse->setToolTip(tr("Choose an Open MPI hostfile"));
  auto* hostfile_box = new QWidget(this);
  auto* hostfile_row = new QHBoxLayout(hostfile_box);
  hostfile_row->setContentsMargins(0, 0, 0, 0);
  hostfile_row->addWidget(hostfile_, 1);
  hostfile_row->addWidget(browse);
  auto* hostfile_label = new QLabel(tr("Hostfile"), this);
  hostfile_label->setToolTip(hostfile_tip);
  top->addRow(hostfile_label, withErrorLabel(hostfile_box, hostfile_error_));

  auto* caption = new QLabel(
      tr("Per-layer precision (%1: the cells that differ from %2)").arg(kOverridesKey, kDefaultKey),
      precision_box_);
  caption->setWordWrap(true);
  auto* box_layout = new QVBoxLayout(precision_box_);
  box_layout->setContentsMargins(0, 0, 0, 0);
  box_layout->addWidget(caption);
  box_layout->addWidget(grid_, 1);
  precision_box_->hide();

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(general_);
  layout->addWidget(form_, 1);
  layout->addWidget(buttons_);

  launchButton()->setText(tr("Launch"));
  launchButton()->setEnabled(false);
  sweep_ = buttons_->addButton(tr("Sweep…"), QDialogButtonBox::ActionRole);
  sweep_->setToolTip(
      tr("Run this configuration over seeds and precision variants, queued, "
         "and compare the groups with a verdict"));
  sweep_->setEnabled(false);
  connect(sweep_, &QPushButton::clicked, this, [this] {
    if (validateNow()) emit sweepRequested();
  });

  connect(buttons_, &QDialogButtonBox::accepted, this, [this] {
    if (validateNow()) accept();
  });
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);

  debounce_->setSingleShot(true);
  debounce_->setInterval(300);
  connect(debounce_, &QTimer::timeout, this, [this] { validateNow(); });

  connect(name_, &QLineEdit::textChanged, this, [this] { fieldEdited(kName); });
  connect(hostfile_, &QLineEdit::textChanged, this, [this] {
    if (!building_) debounce_->start();
  });
  connect(ranks_, &QSpinBox::valueChanged, this, [this] {
    if (!building_) debounce_->start();
  });
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open MPI hostfile"), hostfile());
    if (!path.isEmpty()) hostfile_->setText(path);
  });
  connect(form_, &ConfigForm::fieldEdited, this, &LaunchDialog::fieldEdited);
  connect(grid_, &PrecisionGrid::edited, this, [this] { fieldEdited(kOverridesKey); });
  connect(presets_, &QComboBox::currentTextChanged, this, &LaunchDialog::loadPreset);

  if (presets_->count() > 0) loadPreset(presets_->currentText());
}

QString LaunchDialog::preset() const {
  return presets_->currentText();
}

void LaunchDialog::setPreset(const QString& name) {
  const int i = presets_->findText(name);
  if (i < 0) return;
  if (i == presets_->currentIndex())
    loadPreset(name);
  else
    presets_->setCurrentIndex(i);
}

QString LaunchDialog::runName() const {
  const QString typed = name_->text().trimmed();
  if (!typed.isEmpty()) return typed;
  const Json* name = findSetting(base_, kName);
  return name && name->is_string() ? qs(name->as_string()) : QString();
}

QPushButton* LaunchDialog::launchButton() const {
  return buttons_->button(QDialogButtonBox::Ok);
}

void LaunchDialog::loadPreset(const QString& name) {
  QString error;
  Json config;
  if (load_) config = load_(name, &error);
  if (config.is_object()) {
    load_error_.clear();
  } else {
    load_error_ =
        tr("Cannot load preset %1: %2").arg(name, error.isEmpty() ? tr("no configuration") : error);
    config = Json();
  }

  building_ = true;
  debounce_->stop();
  base_ = config;
  form_->setConfig(config, choices_, {kName, kOverridesKey});
  const Json* run_name = findSetting(config, kName);
  const bool has_name = run_name && run_name->is_string();
  name_->setText(has_name ? qs(run_name->as_string()) : QString());
  name_->setEnabled(has_name);
  overrides_.clear();
  grid_base_.reset();
  has_grid_ = form_->embed(kPrecisionSection, kOverridesKey, precision_box_);
  if (const Json* o = findSetting(config, kOverridesKey); has_grid_ && o && o->is_array())
    for (const Json& x : o->as_array()) overrides_ << qs(valueText(x));
  rebuildGrid();
  building_ = false;
  validateNow();
}

void LaunchDialog::fieldEdited(const QString& key) {
  if (building_) return;
  if (key == kLayersKey || key == kDefaultKey) rebuildGrid();
  debounce_->start();
}

std::optional<Precision> LaunchDialog::defaultPrecision(QString* why) const {
  QString text = form_->fieldText(kDefaultKey);
  if (text.isEmpty()) {
    const Json* d = findSetting(base_, kDefaultKey);
    if (!d || !d->is_string()) return Precision::fp8;  // what a run without one gets
    text = qs(d->as_string());
  }
  try {
    return parse_precision(text.toStdString());
  } catch (const Error& e) {
    if (why) *why = qs(e.message());
    return std::nullopt;
  }
}

void LaunchDialog::rebuildGrid() {
  if (!has_grid_) return;
  // Edits made so far become the overrides the new grid starts from.
  if (grid_base_ && !grid_->edits().isEmpty()) overrides_ = grid_->overridesFrom(*grid_base_);
  grid_base_.reset();

  QString why;
  const std::optional<Precision> base = defaultPrecision(&why);
  if (!base) {
    grid_->setUnavailable(tr("%1: %2").arg(kDefaultKey, why));
    return;
  }
  if (*base == Precision::fp32) {
    grid_->setUnavailable(tr("%1 is %2: the whole model runs in %2 (the CPU reference); there is "
                             "no per-layer map.")
                              .arg(kDefaultKey, precision_name(Precision::fp32)));
    return;
  }
  QString layers_text = form_->fieldText(kLayersKey);
  if (layers_text.isEmpty()) {
    const Json* l = findSetting(base_, kLayersKey);
    layers_text = l ? qs(valueText(*l)) : QString();
  }
  const std::optional<double> layers = parseNumber(layers_text.toStdString());
  if (!layers || std::floor(*layers) != *layers || *layers < 1 || *layers > kMaxGridLayers) {
    grid_->setUnavailable(
        tr("Set %1 to a whole number from 1 to %2 to edit the per-layer precision.")
            .arg(kLayersKey)
            .arg(kMaxGridLayers));
    return;
  }

  PrecisionMap map(static_cast<int64_t>(*layers), *base);
  bool all_applied = true;
  for (const QString& o : overrides_) {
    try {
      const PrecisionOverride parsed = PrecisionOverride::parse(o.toStdString(), map.layers());
      // The grid shows FP8 and BF16 only (fp32 cannot be mixed with them anyway).
      if (parsed.precision == Precision::fp32)
        all_applied = false;
      else
        parsed.apply(map);
    } catch (const Error&) {
      all_applied = false;
    }
  }
  grid_->setMap(map);
  grid_base_ = base;
  // Overrides the grid cannot show (e.g. of a layer that no longer exists) are dropped.
  if (!all_applied) overrides_ = grid_->overridesFrom(*base);
}

QStringList LaunchDialog::overrides() const {
  if (grid_base_) return grid_->edits().isEmpty() ? overrides_ : grid_->overridesFrom(*grid_base_);
  // No grid to show: keep what there was, unless the run is all fp32 (nothing to override).
  return defaultPrecision() == Precision::fp32 ? QStringList() : overrides_;
}

Json LaunchDialog::config() const {
  Json c = form_->config();
  if (!c.is_object()) return c;
  if (name_->isEnabled()) setSetting(c, kName, Json(name_->text().toStdString()));
  if (has_grid_) {
    Json::Array items;
    for (const QString& o : overrides()) items.push_back(Json(o.toStdString()));
    setSetting(c, kOverridesKey, Json(std::move(items)));
  }
  return c;
}

int LaunchDialog::ranks() const {
  return ranks_->value();
}

void LaunchDialog::setRanks(int ranks) {
  ranks_->setValue(ranks);
}

QString LaunchDialog::hostfile() const {
  return hostfile_->text().trimmed();
}

void LaunchDialog::setHostfile(const QString& path) {
  hostfile_->setText(path);
}

QString LaunchDialog::ranksError() const {
  return ranks_error_->text();
}

QString LaunchDialog::hostfileError() const {
  return hostfile_error_->text();
}

bool LaunchDialog::checkHostfile() {
  const QString path = hostfile();
  if (path.isEmpty() || QFileInfo(path).isFile()) return true;
  hostfile_error_->setText(QFileInfo::exists(path) ? tr("%1 is not a file").arg(path)
                                                   : tr("no such file: %1").arg(path));
  hostfile_error_->show();
  return false;
}

bool LaunchDialog::checkRanks() {
  const Json c = config();
  auto setting = [&](const char* key) -> int64_t {
    const Json* v = findSetting(c, key);
    return v && v->is_number() ? static_cast<int64_t>(v->as_number()) : 0;
  };
  const auto error =
      data_parallel_error(ranks(), setting("grpo.prompts_per_step"), setting("grpo.mini_batches"),
                          setting("sft.steps"), setting("sft.batch_size"));
  if (!error) return true;
  ranks_error_->setText(qs(*error));
  ranks_error_->show();
  return false;
}

bool LaunchDialog::setFieldText(const QString& key, const QString& text) {
  if (key != kName) return form_->setFieldText(key, text);
  if (!name_->isEnabled()) return false;
  name_->setText(text);
  return true;
}

QString LaunchDialog::fieldText(const QString& key) const {
  if (key != kName) return form_->fieldText(key);
  return name_->isEnabled() ? name_->text() : QString();
}

QString LaunchDialog::fieldError(const QString& key) const {
  return key == kName ? name_error_->text() : form_->fieldError(key);
}

QString LaunchDialog::generalError() const {
  return general_->text();
}

void LaunchDialog::clearErrors() {
  form_->clearErrors();
  for (QLabel* label : {name_error_, ranks_error_, hostfile_error_, general_}) {
    label->clear();
    label->hide();
  }
}

void LaunchDialog::showMessage(const QString& message) {
  std::vector<std::string> keys;
  for (const QString& k : form_->keys()) keys.push_back(k.toStdString());
  if (name_->isEnabled()) keys.push_back(kName);
  const QString key = qs(settingNamedIn(message.toStdString(), keys, kOverridesKey));
  if (key == kName) {
    name_error_->setText(message);
    name_error_->show();
    return;
  }
  if (!key.isEmpty() && form_->showError(key, message)) return;
  general_->setText(message);
  general_->show();
  // "unknown setting 'grpo.foo'": at least show the section it is about.
  form_->showSection(qs(sectionNamedIn(message.toStdString())));
}

bool LaunchDialog::validateNow() {
  debounce_->stop();
  clearErrors();
  auto invalid = [this] {
    launchButton()->setEnabled(false);
    sweep_->setEnabled(launchButton()->isEnabled());
    return false;
  };
  if (!load_error_.isEmpty() || !base_.is_object()) {
    general_->setText(load_error_.isEmpty() ? tr("No configuration") : load_error_);
    general_->show();
    return invalid();
  }
  const bool hostfile_ok = checkHostfile();  // shown beside whatever else is wrong
  if (name_->isEnabled() && name_->text().trimmed().isEmpty()) {
    name_error_->setText(tr("The run needs a name"));
    name_error_->show();
    return invalid();
  }
  // Number fields that hold no number: said here, next to the field.
  if (!form_->showNumberErrors().isEmpty()) return invalid();
  if (!hostfile_ok) return invalid();

  const QString raw = validate_ ? validate_(config()) : QString();
  if (raw.trimmed().isEmpty()) {
    if (!checkRanks()) return invalid();
    launchButton()->setEnabled(true);
    sweep_->setEnabled(launchButton()->isEnabled());
    return true;
  }
  showMessage(qs(cleanEngineMessage(raw.toStdString())));
  return invalid();
}

}  // namespace fp8rl::ui
