#include "ui/runs/config_form.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QVBoxLayout>
#include <algorithm>

namespace fp8rl::ui {
namespace {

// Sections in the order a user fills them in; others follow alphabetically.
bool sectionBefore(const QString& a, const QString& b) {
  static const QStringList order = {"task", "model",      "precision", "grpo",      "optimizer",
                                    "sft",  "validation", "samples",   "checkpoint"};
  const qsizetype ia = order.indexOf(a), ib = order.indexOf(b);
  if (ia >= 0 && ib >= 0) return ia < ib;
  if (ia >= 0 || ib >= 0) return ia >= 0;
  return a < b;
}

}  // namespace

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

QWidget* withErrorLabel(QWidget* editor, QLabel* error) {
  auto* box = new QWidget(editor->parentWidget());
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(1);
  layout->addWidget(editor);
  layout->addWidget(error);
  return box;
}

ConfigForm::ConfigForm(QWidget* parent) : QTabWidget(parent) {}

void ConfigForm::clearPages() {
  for (QWidget* w : embedded_) {
    w->hide();
    w->setParent(this);
  }
  embedded_.clear();
  while (count() > 0) {
    QWidget* page = widget(0);
    removeTab(0);
    delete page;
  }
  fields_.clear();
  kinds_.clear();
  errors_.clear();
}

void ConfigForm::setConfig(const Json& config, const Choices& choices,
                           const QStringList& elsewhere) {
  const QString current_tab = currentIndex() >= 0 ? tabText(currentIndex()) : QString();
  clearPages();
  base_ = config;
  choices_ = choices;
  if (!config.is_object()) return;

  QStringList general, sections;
  for (const auto& [k, v] : config.as_object()) {
    const QString key = QString::fromStdString(k);
    if (v.is_object())
      sections << key;
    else if (!elsewhere.contains(key))
      general << key;
  }
  std::sort(sections.begin(), sections.end(), sectionBefore);
  if (!general.isEmpty()) {
    QFormLayout* form = addPage(tr("general"));
    for (const QString& key : general) addFields(form, key, config.at(key.toStdString()));
  }
  for (const QString& section : sections) {
    QFormLayout* form = addPage(section);
    for (const auto& [k, v] : config.at(section.toStdString()).as_object()) {
      const QString key = section + "." + QString::fromStdString(k);
      if (!elsewhere.contains(key)) addFields(form, key, v);
    }
  }
  showSection(current_tab);
}

QFormLayout* ConfigForm::addPage(const QString& title) {
  auto* page = new QWidget;
  auto* form_host = new QWidget;
  auto* form = new QFormLayout(form_host);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->setRowWrapPolicy(QFormLayout::DontWrapRows);
  auto* area = new QScrollArea(page);
  area->setWidgetResizable(true);
  area->setFrameShape(QFrame::NoFrame);
  area->setWidget(form_host);
  auto* page_layout = new QVBoxLayout(page);
  page_layout->addWidget(area);
  addTab(page, title);
  return form;
}

void ConfigForm::addFields(QFormLayout* form, const QString& key, const Json& value) {
  if (value.is_object()) {
    for (const auto& [k, v] : value.as_object())
      addFields(form, key + "." + QString::fromStdString(k), v);
    return;
  }
  QWidget* host = form->parentWidget();
  QWidget* editor = makeEditor(host, key, value);
  QLabel* error = makeErrorLabel(host);
  QWidget* box = withErrorLabel(editor, error);

  const qsizetype dot = key.indexOf('.');
  auto* label = new QLabel(dot < 0 ? key : key.mid(dot + 1), host);
  const QString hint = QString::fromStdString(settingHint(key.toStdString()));
  label->setToolTip(hint);
  editor->setToolTip(hint);
  label->setBuddy(editor);
  form->addRow(label, box);

  fields_[key] = editor;
  errors_[key] = error;
  kinds_[key] = fieldKind(value);
}

QWidget* ConfigForm::makeEditor(QWidget* host, const QString& key, const Json& value) {
  QWidget* editor = nullptr;
  if (value.is_bool()) {
    auto* box = new QCheckBox(host);
    box->setChecked(value.as_bool());
    connect(box, &QCheckBox::toggled, this, [this, key] { emit fieldEdited(key); });
    editor = box;
  } else if (value.is_string() && choices_.contains(key)) {
    auto* combo = new QComboBox(host);
    combo->addItems(choices_.value(key));
    const QString current = QString::fromStdString(value.as_string());
    if (combo->findText(current) < 0) combo->addItem(current);  // the validator will say why
    combo->setCurrentText(current);
    connect(combo, &QComboBox::currentTextChanged, this, [this, key] { emit fieldEdited(key); });
    editor = combo;
  } else {
    auto* edit = new QLineEdit(QString::fromStdString(valueText(value)), host);
    if (value.is_array()) edit->setPlaceholderText(tr("comma-separated values"));
    connect(edit, &QLineEdit::textChanged, this, [this, key] { emit fieldEdited(key); });
    editor = edit;
  }
  editor->setObjectName(key);
  return editor;
}

bool ConfigForm::embed(const QString& section, const QString& key, QWidget* extra) {
  for (int i = 0; i < count(); ++i) {
    if (tabText(i) != section) continue;
    QWidget* page = widget(i);
    auto* page_layout = static_cast<QVBoxLayout*>(page->layout());
    extra->setParent(page);
    page_layout->addWidget(extra, 1);  // the fields take what they need, extra the rest
    extra->show();
    QLabel* error = makeErrorLabel(page);
    page_layout->addWidget(error);
    errors_[key] = error;
    embedded_ << extra;
    return true;
  }
  return false;
}

Json ConfigForm::config() const {
  if (!base_.is_object()) return base_;
  Json c = base_;
  for (auto it = fields_.constBegin(); it != fields_.constEnd(); ++it) {
    const std::string key = it.key().toStdString();
    setSetting(c, key,
               fieldValue(kinds_.value(it.key(), FieldKind::kText),
                          fieldText(it.key()).toStdString(), findSetting(base_, key)));
  }
  return c;
}

QStringList ConfigForm::keys() const {
  return errors_.keys();
}

bool ConfigForm::setFieldText(const QString& key, const QString& text) {
  QWidget* w = fields_.value(key);
  if (auto* edit = qobject_cast<QLineEdit*>(w)) {
    edit->setText(text);
  } else if (auto* box = qobject_cast<QCheckBox*>(w)) {
    const QString t = text.trimmed().toLower();
    box->setChecked(t == "true" || t == "1" || t == "yes" || t == "on");
  } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
    if (combo->findText(text) < 0) combo->addItem(text);
    combo->setCurrentText(text);
  } else {
    return false;
  }
  return true;
}

QString ConfigForm::fieldText(const QString& key) const {
  QWidget* w = fields_.value(key);
  if (auto* edit = qobject_cast<QLineEdit*>(w)) return edit->text();
  if (auto* box = qobject_cast<QCheckBox*>(w)) return box->isChecked() ? "true" : "false";
  if (auto* combo = qobject_cast<QComboBox*>(w)) return combo->currentText();
  return {};
}

QString ConfigForm::fieldError(const QString& key) const {
  QLabel* label = errors_.value(key);
  return label ? label->text() : QString();
}

bool ConfigForm::showError(const QString& key, const QString& message) {
  QLabel* label = errors_.value(key);
  if (!label) return false;
  label->setText(message);
  label->show();
  for (int i = 0; i < count(); ++i) {
    if (widget(i)->isAncestorOf(label)) {
      setCurrentIndex(i);
      break;
    }
  }
  return true;
}

void ConfigForm::clearErrors() {
  for (QLabel* label : errors_) {
    label->clear();
    label->hide();
  }
}

QString ConfigForm::showNumberErrors() {
  QString first;
  for (auto it = kinds_.constBegin(); it != kinds_.constEnd(); ++it) {
    const QString text = fieldText(it.key()).trimmed();
    if (it.value() != FieldKind::kNumber || parseNumber(text.toStdString())) continue;
    showError(it.key(), text.isEmpty() ? tr("%1 needs a number").arg(it.key())
                                       : tr("%1 must be a number, got \"%2\"").arg(it.key(), text));
    if (first.isEmpty()) first = it.key();
  }
  if (!first.isEmpty()) showError(first, fieldError(first));  // its tab
  return first;
}

void ConfigForm::showSection(const QString& section) {
  for (int i = 0; i < count(); ++i)
    if (tabText(i) == section) setCurrentIndex(i);
}

}  // namespace fp8rl::ui
