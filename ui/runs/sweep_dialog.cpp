#include "ui/runs/sweep_dialog.hpp"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include "core/error.hpp"
#include "core/files.hpp"

namespace fp8rl::ui {
namespace {

bool writeFile(const QString& path, const QByteArray& bytes, QString* error) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size()) {
    *error = QObject::tr("cannot write %1: %2").arg(path, f.errorString());
    return false;
  }
  return true;
}

}  // namespace

SweepDialog::SweepDialog(Json base, const QString& name, QString dir, Checker check,
                         QWidget* parent)
    : QDialog(parent),
      base_(std::move(base)),
      dir_(std::move(dir)),
      check_(std::move(check)),
      name_(new QLineEdit(name, this)),
      seeds_(new QLineEdit(QStringLiteral("1-5"), this)),
      extra_key_(new QLineEdit(this)),
      extra_values_(new QLineEdit(this)),
      concurrency_(new QSpinBox(this)),
      preview_(new QLabel(this)),
      message_(new QLabel(this)),
      open_(new QPushButton(tr("Open sweep file…"), this)),
      buttons_(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this)) {
  setWindowTitle(tr("Sweep"));
  auto* intro = new QLabel(
      tr("Runs the launch form's configuration over seeds and precision variants (and one more "
         "setting if you like), queued in the background by <tt>fp8rl sweep</tt>: it goes on "
         "when the studio closes, and continues where it stood if it is stopped. The Sweeps tab "
         "of the runs panel follows it; its groups compare with a verdict."),
      this);
  intro->setWordWrap(true);
  auto* form = new QFormLayout;
  form->addRow(tr("Sweep name:"), name_);
  seeds_->setToolTip(tr("Seeds: a list or ranges, as 1-5 or 1, 2, 7"));
  form->addRow(tr("Seeds:"), seeds_);
  auto* precision = new QGroupBox(tr("Precision variants"), this);
  auto* pl = new QVBoxLayout(precision);
  for (const auto& v : precisionVariants()) {
    auto* box = new QCheckBox(QString::fromStdString(v.title), precision);
    box->setChecked(true);
    pl->addWidget(box);
    variants_.push_back(box);
    connect(box, &QCheckBox::toggled, this, &SweepDialog::updatePreview);
  }
  auto* none = new QLabel(tr("None checked: every run in the form's precision."), precision);
  none->setEnabled(false);
  pl->addWidget(none);
  extra_key_->setPlaceholderText(tr("a setting, e.g. optimizer.lr (optional)"));
  extra_values_->setPlaceholderText(tr("its values, e.g. 0.001, 0.0005"));
  form->addRow(tr("Also vary:"), extra_key_);
  form->addRow(tr("Values:"), extra_values_);
  concurrency_->setRange(0, 64);
  concurrency_->setSpecialValueText(tr("as the cores allow"));
  concurrency_->setToolTip(tr("Runs at once (default: one per core on the CPU, one on a GPU)"));
  form->addRow(tr("Runs at once:"), concurrency_);
  message_->setWordWrap(true);
  message_->setStyleSheet(QStringLiteral("color: #c62828;"));
  message_->hide();
  preview_->setWordWrap(true);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(intro);
  layout->addLayout(form);
  layout->addWidget(precision);
  layout->addWidget(preview_);
  layout->addWidget(message_);
  layout->addStretch(1);
  buttons_->addButton(open_, QDialogButtonBox::ActionRole);
  layout->addWidget(buttons_);
  startButton()->setText(tr("Start"));
  startButton()->setToolTip(tr("Check every point of the sweep with the engine, then start it"));

  for (QLineEdit* e : {name_, seeds_, extra_key_, extra_values_})
    connect(e, &QLineEdit::textChanged, this, &SweepDialog::updatePreview);
  connect(concurrency_, &QSpinBox::valueChanged, this, &SweepDialog::updatePreview);
  connect(open_, &QPushButton::clicked, this, [this] {
    const QString file = QFileDialog::getOpenFileName(
        this, tr("Open sweep file"), dir_, tr("Sweep files (*.yaml *.yml);;All files (*)"));
    if (!file.isEmpty()) useFile(file);
  });
  connect(buttons_, &QDialogButtonBox::accepted, this, [this] {
    const QString error = opened_.isEmpty() ? writeAndCheck() : useFile(opened_);
    if (error.isEmpty()) accept();
  });
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
  updatePreview();
  resize(560, sizeHint().height());
}

QPushButton* SweepDialog::startButton() const {
  return buttons_->button(QDialogButtonBox::Ok);
}

QString SweepDialog::preview() const {
  return preview_->text();
}

QString SweepDialog::message() const {
  return message_->isVisible() || !message_->text().isEmpty() ? message_->text() : QString();
}

SweepDraft SweepDialog::draft() const {
  SweepDraft d;
  d.name = name_->text().trimmed().toStdString();
  std::string error;
  d.seeds = parseSeedList(seeds_->text().toStdString(), &error);
  for (size_t i = 0; i < variants_.size(); ++i)
    if (variants_[i]->isChecked()) d.variants.push_back(precisionVariants()[i]);
  d.extra_key = extra_key_->text().trimmed().toStdString();
  d.extra_values = parseValueList(extra_values_->text().toStdString());
  d.concurrency = concurrency_->value();
  d.config = fileStemOf(d.name) + ".base.json";
  return d;
}

void SweepDialog::updatePreview() {
  opened_.clear();
  std::string error;
  (void)parseSeedList(seeds_->text().toStdString(), &error);
  const SweepDraft d = draft();
  QString problem;
  if (d.name.empty())
    problem = tr("Give the sweep a name.");
  else if (!error.empty())
    problem = tr("Seeds: %1").arg(QString::fromStdString(error));
  else if (!d.extra_key.empty() && d.extra_values.empty())
    problem = tr("Give the values of %1.").arg(QString::fromStdString(d.extra_key));
  preview_->setText(problem.isEmpty() ? tr("%1, each a whole run of the form's configuration.")
                                            .arg(QString::fromStdString(d.shape()))
                                      : QString());
  message_->setText(problem);
  message_->setVisible(!problem.isEmpty());
  startButton()->setEnabled(problem.isEmpty());
}

QString SweepDialog::writeAndCheck() {
  const SweepDraft d = draft();
  QString error;
  const QDir dir(dir_);
  try {
    create_private_directories(dir_.toStdString());  // beside the run data: the user's alone
  } catch (const Error& e) {
    error = QString::fromStdString(e.message());
  }
  const QString stem = QString::fromStdString(fileStemOf(d.name));
  const QString file = dir.filePath(stem + QStringLiteral(".yaml"));
  if (error.isEmpty() &&
      writeFile(dir.filePath(QString::fromStdString(d.config)),
                QByteArray::fromStdString(base_.dump(2) + "\n"), &error) &&
      writeFile(file, QByteArray::fromStdString(d.yaml()), &error)) {
    QString summary;
    error = check_(file, &summary);
    if (error.isEmpty()) {
      file_ = file;
      preview_->setText(summary);
    }
  }
  message_->setText(error);
  message_->setVisible(!error.isEmpty());
  return error;
}

QString SweepDialog::useFile(const QString& file) {
  QString summary;
  const QString error = check_(file, &summary);
  if (error.isEmpty()) {
    file_ = file;
    opened_ = file;
    preview_->setText(tr("%1\n(from %2)").arg(summary, file));
    startButton()->setEnabled(true);
  }
  message_->setText(error);
  message_->setVisible(!error.isEmpty());
  return error;
}

}  // namespace fp8rl::ui
