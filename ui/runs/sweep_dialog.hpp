// The Sweep… form: from the launch form's configuration, a sweep of seeds × precision variants
// (BF16, FP8, FP8 + FP8 KV cache) × optionally one more setting's values, or a sweep file
// opened as it is. It writes the sweep file (SweepDraft, with the base configuration as JSON
// beside it), has the engine check every point before anything starts (the caller's Checker:
// `fp8rl sweep FILE --check`), and on Start leaves sweepFile() for the caller to run. The form
// runs nothing itself.
#pragma once

#include <QDialog>
#include <functional>

#include "core/json.hpp"
#include "ui/data/sweep_file.hpp"

class QCheckBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace fp8rl::ui {

class SweepDialog : public QDialog {
  Q_OBJECT
 public:
  // "" when every point of the sweep file is valid (*summary: what it makes), else why not.
  using Checker = std::function<QString(const QString& file, QString* summary)>;
  // base: the configuration each point starts from; name: the sweep's default name; dir: where
  // the sweep file and its base configuration are written.
  SweepDialog(Json base, const QString& name, QString dir, Checker check, QWidget* parent = nullptr);

  SweepDraft draft() const;
  // Writes the sweep file (and its base configuration) from the form and checks it; "" and
  // sweepFile() set when valid, else the message (also shown in the form).
  QString writeAndCheck();
  // Uses an existing sweep file as it is; checks it as writeAndCheck() does.
  QString useFile(const QString& file);
  // The sweep file to run once accepted.
  QString sweepFile() const { return file_; }

  QLineEdit* nameEdit() const { return name_; }
  QLineEdit* seedsEdit() const { return seeds_; }
  QCheckBox* variantBox(int i) const { return variants_.at(i); }
  QLineEdit* extraKeyEdit() const { return extra_key_; }
  QLineEdit* extraValuesEdit() const { return extra_values_; }
  QSpinBox* concurrencyBox() const { return concurrency_; }
  QPushButton* startButton() const;
  QString preview() const;
  QString message() const;

 private:
  void updatePreview();

  Json base_;
  QString dir_;
  Checker check_;
  QString file_;         // the file Start runs ("" until checked)
  QString opened_;       // a sweep file opened as it is ("" for the form's)
  QLineEdit* name_;
  QLineEdit* seeds_;
  std::vector<QCheckBox*> variants_;
  QLineEdit* extra_key_;
  QLineEdit* extra_values_;
  QSpinBox* concurrency_;
  QLabel* preview_;
  QLabel* message_;
  QPushButton* open_;
  QDialogButtonBox* buttons_;
};

}  // namespace fp8rl::ui
