#include "ui/runs/launch_dialog.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ui/widgets/precision_grid.hpp"

namespace fp8rl::ui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

constexpr const char* kOverridesKey = "precision.overrides";
constexpr int kMaxGridLayers = 1024;

// Sections in the order a user fills them in; others follow alphabetically.
const QStringList& sectionOrder() {
  static const QStringList o = {"task", "model",      "precision", "grpo",      "optimizer",
                                "sft",  "validation", "samples",   "checkpoint"};
  return o;
}

// Integral numbers without a decimal point, others in their shortest exact form.
QString numberText(double d) {
  if (std::isfinite(d) && std::floor(d) == d && std::abs(d) < 9007199254740992.0)
    return QString::number(static_cast<qint64>(d));
  // Plain decimals where they read well (0.0005, not 5e-04).
  const double a = std::abs(d);
  return QString::number(d, a >= 1e-5 && a < 1e15 ? 'f' : 'g', QLocale::FloatingPointShortest);
}

QString scalarText(const Json& v) {
  if (v.is_number()) return numberText(v.as_number());
  if (v.is_string()) return qs(v.as_string());
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  if (v.is_null()) return {};
  return qs(v.dump());
}

bool parseNumber(const QString& text, double* out) {
  bool ok = false;
  const double d = QLocale::c().toDouble(text.trimmed(), &ok);
  if (ok && std::isfinite(d)) {
    *out = d;
    return true;
  }
  return false;
}

// The engine's source location suffix ("… (run_config.cpp:180)") means nothing to a user.
QString withoutSourceLocation(QString message) {
  static const QRegularExpression location(R"(\s*\([\w./-]+\.(cpp|hpp|cc|h|cu):\d+\)\s*$)");
  // Nor does the command's prefix when the message comes from fp8rl's stderr.
  static const QRegularExpression prefix(R"(^\s*fp8rl[\w -]*: error:\s*)");
  message.remove(location);
  message.remove(prefix);
  return message.trimmed();
}

// Applies "LAYER.MODULE=PRECISION" overrides (with * wildcards) to rows; false when one of them
// could not be applied (malformed, out of range, or a precision the grid cannot show).
bool applyOverrides(std::vector<QStringList>& rows, const QStringList& overrides) {
  bool all = true;
  const QStringList& modules = PrecisionGrid::modules();
  for (const QString& o : overrides) {
    const qsizetype eq = o.indexOf('='), dot = o.indexOf('.');
    if (eq < 0 || dot < 0 || dot > eq) {
      all = false;
      continue;
    }
    const QString layer = o.left(dot).trimmed(), module = o.mid(dot + 1, eq - dot - 1).trimmed();
    const QString p = o.mid(eq + 1).trimmed().toLower();
    if (p != "fp8" && p != "bf16") {
      all = false;
      continue;
    }
    std::vector<size_t> layers;
    if (layer == "*") {
      for (size_t l = 0; l < rows.size(); ++l) layers.push_back(l);
    } else {
      bool ok = false;
      const int l = layer.toInt(&ok);
      if (!ok || l < 0 || static_cast<size_t>(l) >= rows.size()) {
        all = false;
        continue;
      }
      layers.push_back(static_cast<size_t>(l));
    }
    const qsizetype m = modules.indexOf(module);
    if (module != "*" && m < 0) {
      all = false;
      continue;
    }
    for (size_t l : layers)
      for (qsizetype mi = 0; mi < modules.size(); ++mi)
        if (module == "*" || mi == m) rows[l][mi] = p;
  }
  return all;
}

Json gridJson(const std::vector<QStringList>& rows) {
  Json::Array layers;
  for (const auto& row : rows) {
    Json layer = Json(Json::Object{});
    for (qsizetype m = 0; m < PrecisionGrid::modules().size(); ++m)
      layer[PrecisionGrid::modules()[m].toStdString()] = Json(row[m].toStdString());
    layers.push_back(std::move(layer));
  }
  return Json(std::move(layers));
}

QLabel* makeErrorLabel(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setWordWrap(true);
  label->setStyleSheet("color: #c62828;");
  QFont font = label->font();
  if (font.pointSizeF() > 0) font.setPointSizeF(font.pointSizeF() * 0.9);
  label->setFont(font);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->hide();
  return label;
}

void setPath(Json& root, const QString& key, Json value) {
  const QStringList parts = key.split('.');
  Json* cur = &root;
  for (qsizetype i = 0; i + 1 < parts.size(); ++i) cur = &(*cur)[parts[i].toStdString()];
  (*cur)[parts.back().toStdString()] = std::move(value);
}

const Json* findPath(const Json& root, const QString& key) {
  const Json* cur = &root;
  for (const QString& part : key.split('.')) {
    if (!cur->contains(part.toStdString())) return nullptr;
    cur = &cur->at(part.toStdString());
  }
  return cur;
}

}  // namespace

LaunchDialog::LaunchDialog(const QStringList& presets, PresetLoader load, Validator validate,
                           Choices choices, QWidget* parent)
    : QDialog(parent),
      load_(std::move(load)),
      validate_(std::move(validate)),
      choices_(std::move(choices)),
      presets_(new QComboBox(this)),
      name_(new QLineEdit(this)),
      sections_(new QTabWidget(this)),
      grid_(new PrecisionGrid(this)),
      general_(makeErrorLabel(this)),
      buttons_(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this)),
      debounce_(new QTimer(this)),
      name_error_(makeErrorLabel(this)) {
  setWindowTitle(tr("Launch a run"));
  resize(720, 560);

  auto* layout = new QVBoxLayout(this);
  auto* top = new QFormLayout;
  presets_->addItems(presets);
  presets_->setToolTip(tr("The preset the configuration starts from"));
  top->addRow(tr("Preset"), presets_);
  name_->setToolTip(tr("The run's name (the config's \"name\")"));
  auto* name_box = new QWidget(this);
  auto* name_layout = new QVBoxLayout(name_box);
  name_layout->setContentsMargins(0, 0, 0, 0);
  name_layout->setSpacing(1);
  name_layout->addWidget(name_);
  name_layout->addWidget(name_error_);
  top->addRow(tr("Run name"), name_box);
  layout->addLayout(top);
  layout->addWidget(general_);
  layout->addWidget(sections_, 1);
  layout->addWidget(buttons_);
  grid_->hide();

  launchButton()->setText(tr("Launch"));
  launchButton()->setEnabled(false);
  connect(buttons_, &QDialogButtonBox::accepted, this, [this] {
    if (validateNow()) accept();
  });
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);

  debounce_->setSingleShot(true);
  debounce_->setInterval(300);
  connect(debounce_, &QTimer::timeout, this, [this] { validateNow(); });

  connect(name_, &QLineEdit::textChanged, this, [this] { fieldEdited("name"); });
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
  return base_.contains("name") && base_.at("name").is_string() ? qs(base_.at("name").as_string())
                                                                : QString();
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
  rebuildForm(config);
}

void LaunchDialog::rebuildForm(const Json& config) {
  building_ = true;
  debounce_->stop();
  const QString current_tab =
      sections_->currentIndex() >= 0 ? sections_->tabText(sections_->currentIndex()) : QString();

  base_ = config;
  fields_.clear();
  errors_.clear();
  kinds_.clear();
  overrides_.clear();
  grid_default_.clear();
  grid_->hide();
  grid_->setParent(this);
  while (sections_->count() > 0) {
    QWidget* page = sections_->widget(0);
    sections_->removeTab(0);
    delete page;
  }

  const bool has_name = config.contains("name") && config.at("name").is_string();
  name_->setText(has_name ? qs(config.at("name").as_string()) : QString());
  name_->setEnabled(has_name);
  if (has_name) {
    fields_["name"] = name_;
    errors_["name"] = name_error_;
    kinds_["name"] = Kind::kString;
  }

  if (config.is_object()) {
    // One page per top-level section, plus "general" for the top-level scalars.
    auto make_page = [this](const QString& title, bool scroll) {
      auto* page = new QWidget;
      auto* form_host = new QWidget;
      auto* form = new QFormLayout(form_host);
      form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
      form->setRowWrapPolicy(QFormLayout::DontWrapRows);
      auto* page_layout = new QVBoxLayout(page);
      if (scroll) {
        auto* area = new QScrollArea(page);
        area->setWidgetResizable(true);
        area->setFrameShape(QFrame::NoFrame);
        area->setWidget(form_host);
        page_layout->addWidget(area);
      } else {
        page_layout->addWidget(form_host);
      }
      sections_->addTab(page, title);
      return std::pair{page, form};
    };

    QStringList general_keys, sections;
    for (const auto& [k, v] : config.as_object()) {
      const QString key = qs(k);
      if (v.is_object())
        sections << key;
      else if (key != "name")
        general_keys << key;
    }
    std::sort(sections.begin(), sections.end(), [](const QString& a, const QString& b) {
      const qsizetype ia = sectionOrder().indexOf(a), ib = sectionOrder().indexOf(b);
      if (ia >= 0 && ib >= 0) return ia < ib;
      if (ia >= 0 || ib >= 0) return ia >= 0;
      return a < b;
    });
    if (!general_keys.isEmpty()) {
      auto [page, form] = make_page(tr("general"), true);
      for (const QString& key : general_keys) addFields(form, key, config.at(key.toStdString()));
    }
    for (const QString& section : sections) {
      const Json& value = config.at(section.toStdString());
      const bool precision = section == "precision";
      auto [page, form] = make_page(section, !precision);
      for (const auto& [k, v] : value.as_object()) {
        const QString key = section + "." + qs(k);
        if (precision && key == kOverridesKey) continue;
        addFields(form, key, v);
      }
      if (precision) {
        auto* page_layout = static_cast<QVBoxLayout*>(page->layout());
        auto* caption =
            new QLabel(tr("Per-layer precision (precision.overrides: the cells that differ from "
                          "precision.default)"),
                       page);
        caption->setWordWrap(true);
        page_layout->addWidget(caption);
        grid_->setParent(page);
        page_layout->addWidget(grid_, 1);
        grid_->show();
        QLabel* error = makeErrorLabel(page);
        page_layout->addWidget(error);
        errors_[kOverridesKey] = error;
        if (const Json* o = findPath(config, kOverridesKey); o && o->is_array()) {
          for (const Json& x : o->as_array()) overrides_ << scalarText(x);
        }
      }
    }
  }

  for (int i = 0; i < sections_->count(); ++i)
    if (sections_->tabText(i) == current_tab) sections_->setCurrentIndex(i);

  rebuildGrid();
  building_ = false;
  validateNow();
}

void LaunchDialog::addFields(QFormLayout* form, const QString& key, const Json& value) {
  if (value.is_object()) {
    for (const auto& [k, v] : value.as_object()) addFields(form, key + "." + qs(k), v);
    return;
  }
  QWidget* host = form->parentWidget();
  QWidget* editor = nullptr;
  Kind kind = Kind::kString;
  if (value.is_bool()) {
    auto* box = new QCheckBox(host);
    box->setChecked(value.as_bool());
    connect(box, &QCheckBox::toggled, this, [this, key] { fieldEdited(key); });
    editor = box;
    kind = Kind::kBool;
  } else if (value.is_string() && choices_.contains(key)) {
    auto* combo = new QComboBox(host);
    combo->addItems(choices_.value(key));
    const QString current = qs(value.as_string());
    if (combo->findText(current) < 0) combo->addItem(current);  // the validator will say why
    combo->setCurrentText(current);
    connect(combo, &QComboBox::currentTextChanged, this, [this, key] { fieldEdited(key); });
    editor = combo;
    kind = Kind::kChoice;
  } else {
    auto* edit = new QLineEdit(host);
    if (value.is_array()) {
      QStringList items;
      for (const Json& x : value.as_array()) items << scalarText(x);
      edit->setText(items.join(", "));
      edit->setPlaceholderText(tr("comma-separated values"));
      kind = Kind::kList;
    } else {
      edit->setText(scalarText(value));
      kind = value.is_number() ? Kind::kNumber : value.is_null() ? Kind::kNull : Kind::kString;
    }
    connect(edit, &QLineEdit::textChanged, this, [this, key] { fieldEdited(key); });
    editor = edit;
  }
  editor->setObjectName(key);
  editor->setToolTip(key);

  auto* box = new QWidget(host);
  auto* box_layout = new QVBoxLayout(box);
  box_layout->setContentsMargins(0, 0, 0, 0);
  box_layout->setSpacing(1);
  box_layout->addWidget(editor);
  QLabel* error = makeErrorLabel(box);
  box_layout->addWidget(error);

  const qsizetype dot = key.indexOf('.');
  auto* label = new QLabel(dot < 0 ? key : key.mid(dot + 1), host);
  label->setToolTip(key);
  label->setBuddy(editor);
  form->addRow(label, box);

  fields_[key] = editor;
  errors_[key] = error;
  kinds_[key] = kind;
}

void LaunchDialog::fieldEdited(const QString& key) {
  if (building_) return;
  if (key == "model.num_hidden_layers" || key == "precision.default") rebuildGrid();
  debounce_->start();
}

QString LaunchDialog::formDefaultPrecision() const {
  const QString text = fieldText("precision.default");
  if (!text.isEmpty()) return text.trimmed().toLower();
  const Json* d = findPath(base_, "precision.default");
  return d && d->is_string() ? qs(d->as_string()).toLower() : QString("fp8");
}

void LaunchDialog::rebuildGrid() {
  if (!errors_.contains(kOverridesKey)) return;  // no precision section
  // Edits made so far become the overrides the new grid starts from.
  if (!grid_->edits().isEmpty() && !grid_default_.isEmpty())
    overrides_ = grid_->overridesFrom(grid_default_);

  const QString precision = formDefaultPrecision();
  if (precision != "fp8" && precision != "bf16") {
    grid_default_.clear();
    grid_->setUnavailable(
        precision == "fp32"
            ? tr("precision.default is fp32: the whole model runs in FP32 (the CPU reference); "
                 "there is no per-layer FP8/BF16 map.")
            : tr("precision.default '%1' is not fp8 or bf16.").arg(precision));
    return;
  }
  QString layers_text = fieldText("model.num_hidden_layers");
  if (layers_text.isEmpty()) {
    const Json* l = findPath(base_, "model.num_hidden_layers");
    layers_text = l ? scalarText(*l) : QString();
  }
  bool ok = false;
  const int layers = layers_text.trimmed().toInt(&ok);
  if (!ok || layers <= 0 || layers > kMaxGridLayers) {
    grid_default_.clear();
    grid_->setUnavailable(
        tr("Set model.num_hidden_layers to a whole number from 1 to %1 to edit the per-layer "
           "precision.")
            .arg(kMaxGridLayers));
    return;
  }
  std::vector<QStringList> rows(static_cast<size_t>(layers));
  for (auto& row : rows)
    for (qsizetype m = 0; m < PrecisionGrid::modules().size(); ++m) row << precision;
  const bool all_applied = applyOverrides(rows, overrides_);
  grid_->setMap(gridJson(rows));
  grid_default_ = precision;
  // Overrides the grid cannot show (e.g. a layer that no longer exists) are dropped.
  if (!all_applied) overrides_ = grid_->overridesFrom(precision);
}

Json LaunchDialog::config() const {
  if (!base_.is_object()) return base_;
  Json c = base_;
  for (auto it = fields_.constBegin(); it != fields_.constEnd(); ++it) {
    const QString& key = it.key();
    const Kind kind = kinds_.value(key, Kind::kString);
    const QString text = fieldText(key);
    Json value;
    switch (kind) {
      case Kind::kBool:
        value = Json(text == "true");
        break;
      case Kind::kChoice:
      case Kind::kString:
        value = Json(text.toStdString());
        break;
      case Kind::kNumber: {
        double d = 0;
        // Not a number: passed on as text, so the engine's validator names the setting.
        value = parseNumber(text, &d) ? Json(d) : Json(text.toStdString());
        break;
      }
      case Kind::kNull: {
        double d = 0;
        value = text.trimmed().isEmpty() ? Json()
                : parseNumber(text, &d)  ? Json(d)
                                         : Json(text.toStdString());
        break;
      }
      case Kind::kList: {
        const Json* old = findPath(base_, key);
        bool numbers = old && old->is_array() && !old->as_array().empty();
        if (numbers)
          for (const Json& x : old->as_array()) numbers = numbers && x.is_number();
        const bool guess = !old || !old->is_array() || old->as_array().empty();
        Json::Array items;
        for (const QString& part : text.split(',', Qt::SkipEmptyParts)) {
          const QString item = part.trimmed();
          if (item.isEmpty()) continue;
          double d = 0;
          if ((numbers || guess) && parseNumber(item, &d))
            items.push_back(Json(d));
          else
            items.push_back(Json(item.toStdString()));
        }
        value = Json(std::move(items));
        break;
      }
    }
    setPath(c, key, std::move(value));
  }
  if (errors_.contains(kOverridesKey)) {
    QStringList overrides;
    if (!grid_default_.isEmpty())
      overrides = grid_->edits().isEmpty() ? overrides_ : grid_->overridesFrom(grid_default_);
    else if (formDefaultPrecision() != "fp32")
      overrides = overrides_;  // the grid cannot be shown; keep what there was
    Json::Array items;
    for (const QString& o : overrides) items.push_back(Json(o.toStdString()));
    setPath(c, kOverridesKey, Json(std::move(items)));
  }
  return c;
}

bool LaunchDialog::setFieldText(const QString& key, const QString& text) {
  QWidget* w = fields_.value(key);
  if (!w) return false;
  if (auto* edit = qobject_cast<QLineEdit*>(w)) {
    edit->setText(text);
  } else if (auto* box = qobject_cast<QCheckBox*>(w)) {
    const QString t = text.trimmed().toLower();
    box->setChecked(t == "true" || t == "1" || t == "yes" || t == "on");
  } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
    int i = combo->findText(text);
    if (i < 0) {
      combo->addItem(text);
      i = combo->count() - 1;
    }
    combo->setCurrentIndex(i);
  } else {
    return false;
  }
  return true;
}

QString LaunchDialog::fieldText(const QString& key) const {
  QWidget* w = fields_.value(key);
  if (auto* edit = qobject_cast<QLineEdit*>(w)) return edit->text();
  if (auto* box = qobject_cast<QCheckBox*>(w)) return box->isChecked() ? "true" : "false";
  if (auto* combo = qobject_cast<QComboBox*>(w)) return combo->currentText();
  return {};
}

QString LaunchDialog::fieldError(const QString& key) const {
  QLabel* label = errors_.value(key);
  return label ? label->text() : QString();
}

QString LaunchDialog::generalError() const {
  return general_->text();
}

void LaunchDialog::clearErrors() {
  for (QLabel* label : errors_) {
    label->clear();
    label->hide();
  }
  name_error_->clear();
  name_error_->hide();
  general_->clear();
  general_->hide();
}

void LaunchDialog::showFieldError(const QString& key, const QString& message) {
  QLabel* label = errors_.value(key);
  if (!label) {
    general_->setText(message);
    general_->show();
    return;
  }
  label->setText(message);
  label->show();
  for (int i = 0; i < sections_->count(); ++i) {
    if (sections_->widget(i)->isAncestorOf(label)) {
      sections_->setCurrentIndex(i);
      break;
    }
  }
}

QString LaunchDialog::fieldForMessage(const QString& message) const {
  // 1. A quoted setting naming a field: "setting 'grpo.steps' must be ≥ 0".
  static const QRegularExpression quoted(R"('([A-Za-z0-9_.]+)')");
  for (auto it = quoted.globalMatch(message); it.hasNext();) {
    const QString key = it.next().captured(1);
    if (errors_.contains(key)) return key;
  }
  // 2. The per-layer map: "precision override: …", "precision map: …".
  if (message.contains("precision override", Qt::CaseInsensitive) ||
      message.contains("precision map", Qt::CaseInsensitive))
    return errors_.contains(kOverridesKey) ? QString(kOverridesKey) : QString();
  // 3. The longest key named as a whole word ("optimizer.lr must be positive"); ties go to the
  //    one named first.
  auto word = [](QChar c) { return c.isLetterOrNumber() || c == u'_'; };
  QString best;
  qsizetype best_pos = -1;
  for (auto it = errors_.constBegin(); it != errors_.constEnd(); ++it) {
    const QString& key = it.key();
    for (qsizetype pos = message.indexOf(key); pos >= 0; pos = message.indexOf(key, pos + 1)) {
      const qsizetype end = pos + key.size();
      const bool before_ok = pos == 0 || (!word(message[pos - 1]) && message[pos - 1] != u'.');
      const bool after_ok =
          end >= message.size() ||
          (!word(message[end]) &&
           !(message[end] == u'.' && end + 1 < message.size() && word(message[end + 1])));
      if (!before_ok || !after_ok) continue;
      if (key.size() > best.size() || (key.size() == best.size() && pos < best_pos)) {
        best = key;
        best_pos = pos;
      }
      break;
    }
  }
  return best;
}

bool LaunchDialog::validateNow() {
  debounce_->stop();
  clearErrors();
  auto invalid = [this] {
    launchButton()->setEnabled(false);
    return false;
  };
  if (!load_error_.isEmpty() || !base_.is_object()) {
    general_->setText(load_error_.isEmpty() ? tr("No configuration") : load_error_);
    general_->show();
    return invalid();
  }
  if (name_->text().trimmed().isEmpty() && fields_.contains("name")) {
    showFieldError("name", tr("The run needs a name"));
    return invalid();
  }
  // Number fields that hold no number: said here, next to the field.
  QString first_bad;
  for (auto it = kinds_.constBegin(); it != kinds_.constEnd(); ++it) {
    if (it.value() != Kind::kNumber) continue;
    double d = 0;
    const QString text = fieldText(it.key());
    if (parseNumber(text, &d)) continue;
    QLabel* label = errors_.value(it.key());
    if (!label) continue;
    label->setText(text.trimmed().isEmpty()
                       ? tr("%1 needs a number").arg(it.key())
                       : tr("%1 must be a number, got \"%2\"").arg(it.key(), text.trimmed()));
    label->show();
    if (first_bad.isEmpty()) first_bad = it.key();
  }
  if (!first_bad.isEmpty()) {
    showFieldError(first_bad, fieldError(first_bad));
    return invalid();
  }

  const QString raw = validate_ ? validate_(config()) : QString();
  if (raw.trimmed().isEmpty()) {
    launchButton()->setEnabled(true);
    return true;
  }
  const QString message = withoutSourceLocation(raw);
  const QString key = fieldForMessage(message);
  if (!key.isEmpty()) {
    showFieldError(key, message);
  } else {
    general_->setText(message);
    general_->show();
    // "unknown setting 'grpo.foo'": at least show the section it is about.
    static const QRegularExpression quoted(R"('([A-Za-z0-9_]+)\.[A-Za-z0-9_.]+')");
    const QRegularExpressionMatch m = quoted.match(message);
    if (m.hasMatch()) {
      for (int i = 0; i < sections_->count(); ++i)
        if (sections_->tabText(i) == m.captured(1)) sections_->setCurrentIndex(i);
    }
  }
  return invalid();
}

}  // namespace fp8rl::ui
