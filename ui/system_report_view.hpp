// Shows `fp8rl doctor` (run as a separate process: the studio never loads CUDA itself).
#pragma once

#include <QWidget>

class QPlainTextEdit;
class QProcess;
class QPushButton;
class QLabel;

namespace fp8rl::ui {

class SystemReportView : public QWidget {
  Q_OBJECT
 public:
  // cli: path of the fp8rl executable.
  explicit SystemReportView(QString cli, QWidget* parent = nullptr);
  ~SystemReportView() override;

  QString text() const;

 public slots:
  void refresh();

 signals:
  void finished(int exit_code);

 private:
  QString cli_;
  QLabel* status_;
  QPlainTextEdit* output_;
  QPushButton* refresh_button_;
  QProcess* process_ = nullptr;
};

}  // namespace fp8rl::ui
