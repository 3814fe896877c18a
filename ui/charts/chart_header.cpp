#include "ui/charts/chart_header.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QSignalBlocker>
#include <QSlider>
#include <QToolButton>
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

ChartHeader::ChartHeader(const QString& title, QWidget* parent) : QWidget(parent) {
  auto* header = new QHBoxLayout(this);
  header->setContentsMargins(0, 0, 0, 0);
  header->setSpacing(6);
  QLabel* title_label = makeTitleLabel(title, this);
  title_label->setToolTip(title);
  title_label->setMinimumWidth(60);
  title_label->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  header->addWidget(title_label, 1);

  x_combo_ = new QComboBox(this);
  x_combo_->setObjectName(QStringLiteral("xAxisCombo"));
  x_combo_->addItem(QStringLiteral("Step"));
  x_combo_->addItem(QStringLiteral("Wall time"));
  x_combo_->addItem(QStringLiteral("Tokens"));
  x_combo_->setToolTip(QStringLiteral("x axis"));
  header->addWidget(x_combo_);

  auto* ema = new QLabel(QStringLiteral("EMA"), this);
  ema->setToolTip(QStringLiteral("Smoothing: exponential moving average weight"));
  header->addWidget(ema);
  smooth_slider_ = new QSlider(Qt::Horizontal, this);
  smooth_slider_->setObjectName(QStringLiteral("smoothingSlider"));
  smooth_slider_->setRange(0, 999);
  smooth_slider_->setFixedWidth(64);
  smooth_slider_->setToolTip(QStringLiteral("EMA weight (debiased); 0: raw only"));
  header->addWidget(smooth_slider_);
  smooth_value_ = new QLabel(this);
  smooth_value_->setMinimumWidth(QFontMetrics(smooth_value_->font()).horizontalAdvance("0.000"));
  header->addWidget(smooth_value_);

  log_check_ = new QCheckBox(QStringLiteral("Log y"), this);
  log_check_->setObjectName(QStringLiteral("logYCheck"));
  header->addWidget(log_check_);
  outlier_check_ = new QCheckBox(QStringLiteral("Robust y"), this);
  outlier_check_->setObjectName(QStringLiteral("ignoreOutliersCheck"));
  outlier_check_->setToolTip(
      QStringLiteral("Ignore outliers: autoscale y to the 1st–99th percentile"));
  header->addWidget(outlier_check_);

  auto* export_button = new QToolButton(this);
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

void ChartHeader::showIgnoreOutliers(bool on) {
  setCheckedQuietly(outlier_check_, on);
}

}  // namespace fp8rl::ui
