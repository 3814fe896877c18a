// The live settings of a run (learning rate, temperature, importance-weight bounds, validation
// interval — the contract's list): each with the value in force (the latest `set` event, else the
// configuration) and a field for a new value, checked as it is typed by the contract's rules.
// It holds the edits; the Precision tab sends them with its precision edits as one live edit.
#pragma once

#include <QWidget>
#include <map>
#include <string>

#include "contract/live_edit.hpp"

class QLabel;
class QLineEdit;

namespace fp8rl::ui {

struct RunData;

class LiveSettingsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit LiveSettingsPanel(QWidget* parent = nullptr);

  // Shows the values in force of this run (nullptr: none); keeps the fields' text.
  void setRun(const RunData* run);
  // The valid edits as a live edit's settings, in display order; fields with errors are left
  // out.
  LiveEdit edits() const;
  // Whether any field holds text that is not a valid value (the message is shown beside it).
  bool hasErrors() const;
  // Empties every field.
  void clear();
  QLineEdit* field(const std::string& key) const;
  QLabel* current(const std::string& key) const;

 signals:
  void edited();

 private:
  void check(const std::string& key);

  struct Row {
    QLabel* current;
    QLineEdit* field;
    QLabel* error;
  };
  std::map<std::string, Row> rows_;
};

}  // namespace fp8rl::ui
