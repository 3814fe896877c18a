// The form of a run configuration: one tab per top-level section ("general" first, for the
// top-level settings), one editor per setting — a check box for a boolean, a combo box where
// the engine lists the allowed values, else a line edit — each with an error label under it.
// The form edits text only; config_text.hpp turns JSON into text and back.
#pragma once

#include <QMap>
#include <QStringList>
#include <QTabWidget>

#include "core/json.hpp"
#include "ui/runs/config_text.hpp"

class QLabel;
class QFormLayout;

namespace fp8rl::ui {

class ConfigForm : public QTabWidget {
  Q_OBJECT
 public:
  // Setting (dotted key) → the values the engine allows.
  using Choices = QMap<QString, QStringList>;

  explicit ConfigForm(QWidget* parent = nullptr);

  // Rebuilds the form from config (an object; anything else leaves it empty), without fields
  // for the keys in `elsewhere` (shown by the caller). The tab shown stays when it still exists.
  void setConfig(const Json& config, const Choices& choices, const QStringList& elsewhere);
  // The configuration given to setConfig with the fields' values.
  Json config() const;
  // The keys with a field or an embedded widget (what a validation message may name).
  QStringList keys() const;

  // Sets a field as if typed; false when there is no such field.
  bool setFieldText(const QString& key, const QString& text);
  QString fieldText(const QString& key) const;
  // The message shown under a key's field ("" when none).
  QString fieldError(const QString& key) const;
  // Shows message under key's field and turns to its tab; false when the form has no such key.
  bool showError(const QString& key, const QString& message);
  void clearErrors();
  // Says so under each number field whose text is no number; returns the first such key ("" when
  // none) and turns to its tab.
  QString showNumberErrors();
  // Turns to the tab of a section, when there is one.
  void showSection(const QString& section);

  // Puts extra under the fields of section, taking the room left, with an error label for key;
  // false when there is no such section. extra returns to the form, hidden, when the form is
  // rebuilt (embed it again).
  bool embed(const QString& section, const QString& key, QWidget* extra);

 signals:
  void fieldEdited(const QString& key);

 private:
  QFormLayout* addPage(const QString& title);
  // Adds the editors for value (recursing into objects) to form.
  void addFields(QFormLayout* form, const QString& key, const Json& value);
  QWidget* makeEditor(QWidget* host, const QString& key, const Json& value);
  void clearPages();

  Json base_;
  QMap<QString, QWidget*> fields_;  // dotted key → editor
  QMap<QString, FieldKind> kinds_;  // dotted key → how its text becomes JSON
  QMap<QString, QLabel*> errors_;   // dotted key → message label
  QList<QWidget*> embedded_;
  Choices choices_;
};

// A label for validation messages (red, wrapping, selectable; hidden until it has one).
QLabel* makeErrorLabel(QWidget* parent);
// A box of editor with its error label under it, in editor's parent.
QWidget* withErrorLabel(QWidget* editor, QLabel* error);

}  // namespace fp8rl::ui
