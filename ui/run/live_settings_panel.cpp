#include "ui/run/live_settings_panel.hpp"

#include <QComboBox>
#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>
#include <algorithm>

#include "contract/live_settings.hpp"
#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

namespace {

bool isChoice(const LiveSetting& s) {
  return s.kind == SettingKind::boolean || s.kind == SettingKind::choice;
}

}  // namespace

QString LiveSettingsPanel::valueText(const LiveValue& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? tr("on") : tr("off");
  if (const double* d = std::get_if<double>(&value)) return QString::number(*d, 'g', 6);
  return QString::fromStdString(std::get<std::string>(value));
}

LiveSettingsPanel::LiveSettingsPanel(std::function<bool(const LiveSetting&)> include, int columns,
                                     QWidget* parent)
    : QWidget(parent) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  columns = std::max(columns, 1);
  for (const LiveSetting& s : live_settings())
    if (!include || include(s)) shown_.push_back(&s);
  const int per_column = (static_cast<int>(shown_.size()) + columns - 1) / columns;
  for (int c = 0; c < columns; ++c) {
    grid->addWidget(new QLabel(tr("<b>setting</b>")), 0, 4 * c);
    grid->addWidget(new QLabel(tr("<b>in force</b>")), 0, 4 * c + 1);
    grid->addWidget(new QLabel(tr("<b>new value</b>")), 0, 4 * c + 2);
    if (c > 0) grid->setColumnMinimumWidth(4 * c - 1, 16);  // a gap between the columns
  }
  int last_row = 1;
  for (size_t i = 0; i < shown_.size(); ++i) {
    const LiveSetting& s = *shown_[i];
    const int col = 4 * (static_cast<int>(i) / std::max(per_column, 1));
    const int r = 1 + 2 * (static_cast<int>(i) % std::max(per_column, 1));
    Row row{new QLabel(QStringLiteral("–")), nullptr, nullptr, new QLabel};
    auto* name = new QLabel(QString::fromLatin1(s.key));
    name->setToolTip(QString::fromUtf8(s.meaning));
    QWidget* input = nullptr;
    const std::string key = s.key;
    if (isChoice(s)) {
      row.combo = new QComboBox;
      row.combo->addItem(tr("unchanged"));
      if (s.kind == SettingKind::boolean) {
        row.combo->addItem(tr("on"), true);
        row.combo->addItem(tr("off"), false);
      } else {
        for (const auto& c : s.spec->choices)
          row.combo->addItem(QString::fromStdString(c), QString::fromStdString(c));
      }
      connect(row.combo, &QComboBox::currentIndexChanged, this, [this] { emit edited(); });
      input = row.combo;
    } else {
      row.field = new QLineEdit;
      row.field->setPlaceholderText(tr("unchanged"));
      connect(row.field, &QLineEdit::textChanged, this, [this, key] {
        check(key);
        emit edited();
      });
      input = row.field;
    }
    input->setObjectName(QString::fromLatin1(s.key));
    input->setToolTip(QString::fromUtf8(s.meaning));
    input->setMaximumWidth(isChoice(s) ? 190 : 110);
    row.error->setStyleSheet(QStringLiteral("color: #c0392b"));
    row.error->setWordWrap(true);
    grid->addWidget(name, r, col);
    grid->addWidget(row.current, r, col + 1);
    grid->addWidget(input, r, col + 2);
    grid->addWidget(row.error, r + 1, col, 1, 3);
    row.error->hide();
    rows_.emplace(key, row);
    last_row = std::max(last_row, r + 2);
  }
  grid->setColumnStretch(4 * columns - 1, 1);
  grid->setRowStretch(last_row, 1);
}

void LiveSettingsPanel::setRun(const RunData* run) {
  for (auto& [key, row] : rows_) {
    const auto v = run ? run->liveValue(key) : std::nullopt;
    row.current->setText(v ? valueText(*v) : QStringLiteral("–"));
  }
}

void LiveSettingsPanel::check(const std::string& key) {
  Row& row = rows_.at(key);
  if (!row.field) return;  // a list holds valid values only
  const QString text = row.field->text().trimmed();
  QString message;
  if (!text.isEmpty()) {
    bool ok = false;
    const double v = text.toDouble(&ok);
    if (!ok)
      message = tr("%1: '%2' is not a number").arg(QString::fromStdString(key), text);
    else if (auto e = live_setting_error(key, v))
      message = QString::fromStdString(*e);
  }
  row.error->setText(message);
  row.error->setVisible(!message.isEmpty());
}

std::optional<LiveValue> LiveSettingsPanel::wanted(const LiveSetting& s) const {
  const Row& row = rows_.at(s.key);
  if (row.combo) {
    const QVariant d = row.combo->currentData();
    if (row.combo->currentIndex() <= 0 || !d.isValid()) return std::nullopt;
    if (s.kind == SettingKind::boolean) return LiveValue(d.toBool());
    return LiveValue(d.toString().toStdString());
  }
  const QString text = row.field->text().trimmed();
  bool ok = false;
  const double v = text.toDouble(&ok);
  if (text.isEmpty() || !ok || live_setting_error(s.key, v)) return std::nullopt;
  return LiveValue(v);
}

LiveEdit LiveSettingsPanel::edits() const {
  LiveEdit out;
  for (const LiveSetting* s : shown_)
    if (auto v = wanted(*s)) out.set(s->key, *v);
  return out;
}

bool LiveSettingsPanel::hasErrors() const {
  for (const auto& [key, row] : rows_)
    if (!row.error->text().isEmpty()) return true;
  return false;
}

void LiveSettingsPanel::clear() {
  for (auto& [key, row] : rows_) {
    if (row.field) row.field->clear();
    if (row.combo) row.combo->setCurrentIndex(0);
  }
}

QLineEdit* LiveSettingsPanel::field(const std::string& key) const {
  auto it = rows_.find(key);
  return it == rows_.end() ? nullptr : it->second.field;
}

QComboBox* LiveSettingsPanel::choiceField(const std::string& key) const {
  auto it = rows_.find(key);
  return it == rows_.end() ? nullptr : it->second.combo;
}

QLabel* LiveSettingsPanel::current(const std::string& key) const {
  auto it = rows_.find(key);
  return it == rows_.end() ? nullptr : it->second.current;
}

}  // namespace fp8rl::ui
