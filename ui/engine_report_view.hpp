// Shows what an fp8rl command prints about this machine — `fp8rl doctor` in the System tab,
// `fp8rl --version` in the About dialog — run as a separate process: the studio never loads
// CUDA itself.
#pragma once

#include <QStringList>
#include <QWidget>

class QPlainTextEdit;
class QProcess;
class QPushButton;
class QLabel;

namespace fp8rl::ui {

class EngineReportView : public QWidget {
  Q_OBJECT
 public:
  // cli: path of the fp8rl executable; args: the command whose output is shown.
  explicit EngineReportView(QString cli, QStringList args = {QStringLiteral("doctor")},
                            QWidget* parent = nullptr);
  ~EngineReportView() override;

  QString text() const;
  // Long lines wrap (the About dialog) instead of scrolling sideways (the doctor's tables).
  void setWrapped(bool on);

 public slots:
  // Runs the command again (one run at a time); finished() follows.
  void refresh();

 signals:
  // The command ended: its exit code, -1 when it could not run or crashed.
  void finished(int exit_code);

 private:
  QString command() const;  // "fp8rl doctor"

  QString cli_;
  QStringList args_;
  QLabel* status_;
  QPlainTextEdit* output_;
  QPushButton* refresh_button_;
  QProcess* process_ = nullptr;
};

}  // namespace fp8rl::ui
