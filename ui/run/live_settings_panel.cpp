#include "ui/run/live_settings_panel.hpp"

#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>

#include "contract/live_settings.hpp"
#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

LiveSettingsPanel::LiveSettingsPanel(QWidget* parent) : QWidget(parent) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(new QLabel(tr("<b>setting</b>")), 0, 0);
  grid->addWidget(new QLabel(tr("<b>in force</b>")), 0, 1);
  grid->addWidget(new QLabel(tr("<b>new value</b>")), 0, 2);
  int r = 1;
  for (const LiveSetting& s : live_settings()) {
    Row row{new QLabel(QStringLiteral("–")), new QLineEdit, new QLabel};
    auto* name = new QLabel(QString::fromLatin1(s.key));
    name->setToolTip(QString::fromUtf8(s.meaning));
    row.field->setObjectName(QString::fromLatin1(s.key));
    row.field->setPlaceholderText(tr("unchanged"));
    row.field->setToolTip(QString::fromUtf8(s.meaning));
    row.field->setMaximumWidth(110);
    row.error->setStyleSheet(QStringLiteral("color: #c0392b"));
    row.error->setWordWrap(true);
    grid->addWidget(name, r, 0);
    grid->addWidget(row.current, r, 1);
    grid->addWidget(row.field, r, 2);
    grid->addWidget(row.error, r + 1, 0, 1, 3);
    row.error->hide();
    const std::string key = s.key;
    connect(row.field, &QLineEdit::textChanged, this, [this, key] {
      check(key);
      emit edited();
    });
    rows_.emplace(key, row);
    r += 2;
  }
  grid->setColumnStretch(3, 1);
  grid->setRowStretch(r, 1);
}

void LiveSettingsPanel::setRun(const RunData* run) {
  for (auto& [key, row] : rows_) {
    const auto v = run ? run->liveSetting(key) : std::nullopt;
    row.current->setText(v ? QString::number(*v, 'g', 6) : QStringLiteral("–"));
  }
}

void LiveSettingsPanel::check(const std::string& key) {
  Row& row = rows_.at(key);
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

LiveEdit LiveSettingsPanel::edits() const {
  LiveEdit out;
  for (const LiveSetting& s : live_settings()) {
    const Row& row = rows_.at(s.key);
    const QString text = row.field->text().trimmed();
    bool ok = false;
    const double v = text.toDouble(&ok);
    if (!text.isEmpty() && ok && !live_setting_error(s.key, v)) out.set(s.key, v);
  }
  return out;
}

bool LiveSettingsPanel::hasErrors() const {
  for (const auto& [key, row] : rows_)
    if (!row.error->text().isEmpty()) return true;
  return false;
}

void LiveSettingsPanel::clear() {
  for (auto& [key, row] : rows_) row.field->clear();
}

QLineEdit* LiveSettingsPanel::field(const std::string& key) const {
  auto it = rows_.find(key);
  return it == rows_.end() ? nullptr : it->second.field;
}

QLabel* LiveSettingsPanel::current(const std::string& key) const {
  auto it = rows_.find(key);
  return it == rows_.end() ? nullptr : it->second.current;
}

}  // namespace fp8rl::ui
