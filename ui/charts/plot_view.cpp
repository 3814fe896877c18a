#include "ui/charts/plot_view.hpp"

#include <qcustomplot.h>

#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/charts/chart_style.hpp"

namespace fp8rl::ui {

PlotView::PlotView(QSize export_size, QWidget* parent)
    : QWidget(parent), export_size_(export_size) {
  layout_ = new QVBoxLayout(this);
  layout_->setContentsMargins(2, 2, 2, 2);
  layout_->setSpacing(2);
  plot_ = new QCustomPlot(this);
  plot_->setObjectName(QStringLiteral("plot"));
  plot_->setMinimumHeight(120);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  const QFont small = smallFont();
  plot_->xAxis->setTickLabelFont(small);
  plot_->yAxis->setTickLabelFont(small);
  plot_->legend->setFont(small);
  placeLegendBelow(plot_);
  layout_->addWidget(plot_, 1);
}

PlotView::~PlotView() {
  // The plot (a child) outlives the subclass's state: nothing of it may call back into the
  // view while it goes.
  disconnect(plot_, nullptr, this, nullptr);
}

bool PlotView::exportPng(const QString& path, QString* error) {
  const int w = plot_->width() >= 100 ? plot_->width() : export_size_.width();
  const int h = plot_->height() >= 80 ? plot_->height() : export_size_.height();
  prepareExport();
  if (plot_->savePng(path, w, h)) return true;
  if (error) *error = QStringLiteral("cannot write the PNG file %1").arg(path);
  return false;
}

QCustomPlot* PlotView::plot() const {
  return plot_;
}

void PlotView::setHeader(QWidget* header) {
  layout_->insertWidget(0, header);
}

QLabel* PlotView::addCaption() {
  auto* caption = new QLabel(this);
  caption->setObjectName(QStringLiteral("caption"));
  caption->setFont(smallFont());
  layout_->addWidget(caption);
  return caption;
}

QFont PlotView::smallFont() const {
  QFont small = plot_->font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
  return small;
}

}  // namespace fp8rl::ui
