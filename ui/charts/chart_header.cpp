#include "ui/charts/chart_header.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QSignalBlocker>
#include <QSlider>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/charts/chart_style.hpp"

namespace fp8rl::ui {
namespace {

// Checks or unchecks a box without reporting it as the user's choice.
void setCheckedQuietly(QCheckBox* box, bool on) {
  const QSignalBlocker block(box);
  box->setChecked(on);
}

}  // namespace

ChartHeader::ChartHeader(const QString& title, QWidget* parent)
    : QWidget(parent), controls_(new QWidget(this)) {
  auto* rows = new QVBoxLayout(this);
  rows->setContentsMargins(0, 0, 0, 0);
  rows->setSpacing(2);
  // The header may be narrower than title + controls (it then moves the controls to a row of
  // their own): the layout must not hold it at its one-row minimum.
  rows->setSizeConstraint(QLayout::SetNoConstraint);
  title_row_ = new QHBoxLayout;
  title_row_->setSpacing(6);
  controls_row_ = new QHBoxLayout;
  rows->addLayout(title_row_);
  rows->addLayout(controls_row_);
  title_ = makeTitleLabel(title, this);
  title_->setToolTip(title);
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  title_row_->addWidget(title_, 1);
  title_row_->addWidget(controls_);

  auto* header = new QHBoxLayout(controls_);
  header->setContentsMargins(0, 0, 0, 0);
  header->setSpacing(6);

  x_combo_ = new QComboBox(controls_);
  x_combo_->setObjectName(QStringLiteral("xAxisCombo"));
  x_combo_->addItem(QStringLiteral("Step"));
  x_combo_->addItem(QStringLiteral("Wall time"));
  x_combo_->addItem(QStringLiteral("Tokens"));
  x_combo_->setToolTip(QStringLiteral("x axis"));
  header->addWidget(x_combo_);

  auto* ema = new QLabel(QStringLiteral("EMA"), controls_);
  ema->setToolTip(QStringLiteral("Smoothing: exponential moving average weight"));
  header->addWidget(ema);
  smooth_slider_ = new QSlider(Qt::Horizontal, controls_);
  smooth_slider_->setObjectName(QStringLiteral("smoothingSlider"));
  smooth_slider_->setRange(0, 999);
  smooth_slider_->setFixedWidth(64);
  smooth_slider_->setToolTip(QStringLiteral("EMA weight (debiased); 0: raw only"));
  header->addWidget(smooth_slider_);
  smooth_value_ = new QLabel(controls_);
  smooth_value_->setMinimumWidth(QFontMetrics(smooth_value_->font()).horizontalAdvance("0.000"));
  header->addWidget(smooth_value_);

  log_check_ = new QCheckBox(QStringLiteral("Log y"), controls_);
  log_check_->setObjectName(QStringLiteral("logYCheck"));
  header->addWidget(log_check_);
  outlier_check_ = new QCheckBox(QStringLiteral("Robust y"), controls_);
  outlier_check_->setObjectName(QStringLiteral("ignoreOutliersCheck"));
  outlier_check_->setToolTip(
      QStringLiteral("Ignore outliers: autoscale y to the 1st–99th percentile"));
  header->addWidget(outlier_check_);

  auto* export_button = new QToolButton(controls_);
  export_button->setObjectName(QStringLiteral("exportButton"));
  export_button->setText(QStringLiteral("Export"));
  export_button->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(export_button);
  QAction* png = menu->addAction(QStringLiteral("PNG…"));
  QAction* csv = menu->addAction(QStringLiteral("CSV…"));
  export_button->setMenu(menu);
  header->addWidget(export_button);

  connect(x_combo_, qOverload<int>(&QComboBox::currentIndexChanged), this,
          [this](int i) { emit xAxisChosen(static_cast<XAxisKind>(std::clamp(i, 0, 2))); });
  connect(smooth_slider_, &QSlider::valueChanged, this,
          [this](int v) { emit smoothingChosen(v / 1000.0); });
  connect(log_check_, &QCheckBox::toggled, this, &ChartHeader::logYChosen);
  connect(outlier_check_, &QCheckBox::toggled, this, &ChartHeader::ignoreOutliersChosen);
  connect(png, &QAction::triggered, this, &ChartHeader::exportPngChosen);
  connect(csv, &QAction::triggered, this, &ChartHeader::exportCsvChosen);
}

QSize ChartHeader::minimumSizeHint() const {
  const QSize c = controls_->minimumSizeHint();
  const int title = title_->sizeHint().height();
  return {c.width(), one_row_ ? std::max(title, c.height()) : title + 2 + c.height()};
}

void ChartHeader::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  placeControls(width());
}

void ChartHeader::placeControls(int w) {
  const int one_row_width =
      title_->sizeHint().width() + title_row_->spacing() + controls_->sizeHint().width();
  const bool one_row = w >= one_row_width;
  if (one_row == one_row_) return;
  one_row_ = one_row;
  if (one_row) {
    title_row_->addWidget(controls_);
  } else {
    controls_row_->addStretch(1);  // controls to the right, as in the one-row header
    controls_row_->addWidget(controls_);
  }
  if (one_row)  // the stretch left behind in the controls row
    while (QLayoutItem* item = controls_row_->takeAt(0)) delete item;
  updateGeometry();
}

void ChartHeader::showXAxis(XAxisKind kind) {
  const QSignalBlocker block(x_combo_);
  x_combo_->setCurrentIndex(static_cast<int>(kind));
}

void ChartHeader::showSmoothing(double weight) {
  const long permille = std::lround(weight * 1000);
  {
    const QSignalBlocker block(smooth_slider_);
    smooth_slider_->setValue(static_cast<int>(permille));
  }
  smooth_value_->setText(QString::number(weight, 'f', permille % 10 == 0 ? 2 : 3));
}

void ChartHeader::showLogY(bool on) {
  setCheckedQuietly(log_check_, on);
}

void ChartHeader::setXAxisChoosable(bool on) {
  x_combo_->setVisible(on);
}

void ChartHeader::showIgnoreOutliers(bool on) {
  setCheckedQuietly(outlier_check_, on);
}

}  // namespace fp8rl::ui
