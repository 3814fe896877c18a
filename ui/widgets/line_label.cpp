#include "ui/widgets/line_label.hpp"

#include <QLabel>

namespace fp8rl::ui {

LineLabel::LineLabel(const QString& sample, QWidget* parent)
    : QWidget(parent), label_(new QLabel(sample, this)) {
  // The holder's height is the sample's, fixed: a fixed size is what keeps a child's
  // updateGeometry() from reaching the layouts above.
  const int h = label_->sizeHint().height();
  setFixedHeight(h);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  label_->clear();
  label_->setGeometry(0, 0, width(), h);
}

QSize LineLabel::sizeHint() const {
  return {label_->fontMetrics().averageCharWidth() * 40, height()};
}

QSize LineLabel::minimumSizeHint() const {
  return {0, height()};
}

void LineLabel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  label_->setGeometry(rect());
}

}  // namespace fp8rl::ui
