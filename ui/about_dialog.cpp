#include "ui/about_dialog.hpp"

#include <QDialogButtonBox>
#include <QLabel>
#include <QVBoxLayout>

#include "core/version.hpp"
#include "ui/engine_report_view.hpp"

namespace fp8rl::ui {

AboutDialog::AboutDialog(const QString& cli, QWidget* parent)
    : QDialog(parent), engine_(new EngineReportView(cli, {QStringLiteral("--version")}, this)) {
  setWindowTitle(tr("About FP8 RL Studio"));
  auto* text = new QLabel(
      tr("<b>FP8 RL Studio</b> %1 (revision %2)"
         "<p>End-to-end FP8 reinforcement learning (GRPO) of language models: block-wise E4M3 "
         "linear layers in generation and training, FP8 KV cache, truncated importance "
         "sampling — and a place to watch and steer the runs.</p>"
         "<p>Each run is an <code>fp8rl worker</code> process that records itself in the run "
         "database; closing the studio does not stop it.</p>"
         "<p>Free software under the GNU General Public License, version 3 or later.</p>"
         "<p><b>Engine and backends on this machine</b> (<code>fp8rl --version</code>):</p>")
          .arg(QStringLiteral(FP8RL_VERSION), QStringLiteral(FP8RL_GIT_DESCRIBE)),
      this);
  text->setWordWrap(true);
  text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(text);
  layout->addWidget(engine_, 1);
  layout->addWidget(buttons);
  engine_->setWrapped(true);
  resize(760, 420);
  engine_->refresh();
}

}  // namespace fp8rl::ui
