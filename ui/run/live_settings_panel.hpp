// The live settings of a run (learning rate, temperature, importance-weight bounds, validation
// interval, the precision autopilot's — the contract's list, or the part of it a filter keeps):
// each with the value in force (the latest `set` event, else the configuration) and a field for
// a new value — typed for a number, checked as it is typed by the contract's rules; a list of
// "unchanged" and the allowed values for a boolean (on, off) or a choice. It holds the edits;
// the Precision tab sends them with its precision edits as one live edit.
#pragma once

#include <QWidget>
#include <functional>
#include <map>
#include <string>

#include "contract/live_edit.hpp"

class QComboBox;
class QLabel;
class QLineEdit;

namespace fp8rl::ui {

struct RunData;

class LiveSettingsPanel : public QWidget {
  Q_OBJECT
 public:
  // Shows the live settings `include` keeps (every one when it is empty), in the contract's
  // order, in `columns` columns side by side (filled top to bottom).
  explicit LiveSettingsPanel(std::function<bool(const LiveSetting&)> include = {}, int columns = 1,
                             QWidget* parent = nullptr);

  // Shows the values in force of this run (nullptr: none); keeps the fields' text.
  void setRun(const RunData* run);
  // The valid edits as a live edit's settings, in display order; fields with errors are left
  // out.
  LiveEdit edits() const;
  // Whether any field holds text that is not a valid value (the message is shown beside it).
  bool hasErrors() const;
  // Empties every field (choices go back to "unchanged").
  void clear();
  // The field of a number setting (null for others or keys not shown).
  QLineEdit* field(const std::string& key) const;
  // The list of a boolean or choice setting: item 0 "unchanged", then the values (null for
  // others or keys not shown).
  QComboBox* choiceField(const std::string& key) const;
  QLabel* current(const std::string& key) const;
  // How a value in force reads: numbers as typed, booleans "on"/"off", choices by name.
  static QString valueText(const LiveValue& value);

 signals:
  void edited();

 private:
  void check(const std::string& key);
  // The new value a row holds (nullopt: unchanged or invalid).
  std::optional<LiveValue> wanted(const LiveSetting& s) const;

  struct Row {
    QLabel* current;
    QLineEdit* field;  // number settings
    QComboBox* combo;  // boolean and choice settings
    QLabel* error;
  };
  std::map<std::string, Row> rows_;
  std::vector<const LiveSetting*> shown_;
};

}  // namespace fp8rl::ui
