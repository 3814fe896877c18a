// Help › About: what the studio is, its version and git revision, its licence, and the engine
// beside it as `fp8rl --version` reports it (its version and the backends this machine offers:
// the CPU, and CUDA with its driver and runtime versions or why it cannot be used).
#pragma once

#include <QDialog>

namespace fp8rl::ui {

class EngineReportView;

class AboutDialog : public QDialog {
  Q_OBJECT
 public:
  // cli: path of the fp8rl executable whose --version is shown.
  explicit AboutDialog(const QString& cli, QWidget* parent = nullptr);

  EngineReportView* engine() const { return engine_; }

 private:
  EngineReportView* engine_;
};

}  // namespace fp8rl::ui
