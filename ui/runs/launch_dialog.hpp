// The launch dialog: pick a preset, then edit its configuration in a form generated from the
// preset's full config (ConfigForm: one field per setting, a tab per section) and the
// per-layer precision grid, validated as you type with the engine's own message shown next to
// the field it names, and how the run starts: its number of data-parallel ranks and an optional
// Open MPI hostfile (a launch choice, not configuration). The dialog does not run anything: the
// caller supplies how to load a preset's config and how to validate one (the studio asks the
// fp8rl executable), and reads ranks() and hostfile() to start the worker.
#pragma once

#include <QDialog>
#include <QStringList>
#include <functional>
#include <optional>

#include "contract/precision.hpp"
#include "core/json.hpp"
#include "ui/runs/config_form.hpp"

class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTimer;

namespace fp8rl::ui {

class PrecisionGrid;

class LaunchDialog : public QDialog {
  Q_OBJECT
 public:
  // The full config of a preset (as `fp8rl train --preset P --print-config` prints it), or
  // null with *error set.
  using PresetLoader = std::function<Json(const QString& preset, QString* error)>;
  // "" when config is valid, else the engine's message (which names the setting).
  using Validator = std::function<QString(const Json& config)>;
  // The engine's allowed values of its string settings (EngineCli::settingChoices): those
  // fields get a combo box; without an entry a field is free text (the validator still checks).
  using Choices = ConfigForm::Choices;

  LaunchDialog(const QStringList& presets, PresetLoader load, Validator validate,
               Choices choices = {}, QWidget* parent = nullptr);

  QString preset() const;
  void setPreset(const QString& name);
  // The run's name (defaults to the config's "name").
  QString runName() const;
  // The edited configuration (precision.overrides from the grid included).
  Json config() const;

  // How many data-parallel ranks the run starts as (1 … fp8rl::kMaxLaunchRanks; default 1).
  // Why the configuration cannot be shared by the chosen ranks, as shown ("" when it can).
  QString ranksError() const;
  int ranks() const;
  void setRanks(int ranks);
  // The Open MPI hostfile the ranks are placed by, trimmed ("" : every rank on this machine).
  QString hostfile() const;
  void setHostfile(const QString& path);
  // Why the hostfile cannot be used ("" when it can, or when there is none).
  QString hostfileError() const;

  // Sets a field by dotted key as if typed (tests); false when there is no such field.
  bool setFieldText(const QString& key, const QString& text);
  QString fieldText(const QString& key) const;
  // The validation message shown next to a field ("" when none).
  QString fieldError(const QString& key) const;
  // A message not tied to one field ("" when none).
  QString generalError() const;
  // Validates now (normally debounced after edits); true when valid.
  bool validateNow();
  PrecisionGrid* precisionGrid() const { return grid_; }
  QPushButton* launchButton() const;
  // Sweep…: the form's configuration over seeds and precision variants (sweepRequested()).
  QPushButton* sweepButton() const { return sweep_; }

 signals:
  // Sweep… was pressed with a valid configuration (config()).
  void sweepRequested();

 private:
  void loadPreset(const QString& name);
  void fieldEdited(const QString& key);
  // precision.default as the form has it; nullopt (and *why) when it is no precision.
  std::optional<Precision> defaultPrecision(QString* why = nullptr) const;
  // Rebuilds the grid from model.num_hidden_layers, precision.default and the overrides.
  void rebuildGrid();
  // precision.overrides as the config carries them.
  QStringList overrides() const;
  // Shows message under the field it names, else above the form.
  void showMessage(const QString& message);
  void clearErrors();
  // Shows why the hostfile cannot be used under its field; false then.
  bool checkHostfile();
  // Shows under Ranks why the configuration cannot be shared by that many ranks (the run
  // contract's rule); false then.
  bool checkRanks();

  PresetLoader load_;
  Validator validate_;
  Choices choices_;
  QComboBox* presets_;
  QLineEdit* name_;
  QLabel* name_error_;
  QSpinBox* ranks_;
  QLabel* ranks_error_;  // the batch cannot be shared by that many ranks
  QLineEdit* hostfile_;
  QLabel* hostfile_error_;
  ConfigForm* form_;
  QWidget* precision_box_;  // the grid and its caption, on the form's precision tab
  PrecisionGrid* grid_;
  QLabel* general_;
  QDialogButtonBox* buttons_;
  QPushButton* sweep_;
  QTimer* debounce_;
  Json base_;                           // the preset's config
  QStringList overrides_;               // precision.overrides behind the grid's applied state
  std::optional<Precision> grid_base_;  // the precision.default the grid was built with
  bool has_grid_ = false;               // the config has a precision section
  QString load_error_;                  // why the preset could not be loaded
  bool building_ = false;
};

}  // namespace fp8rl::ui
