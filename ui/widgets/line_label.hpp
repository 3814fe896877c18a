// A label of one line whose text changes repaint the label alone.
//
// A QLabel asks its parent's layout to run again on every setText (its size hint may have
// changed). In a tab of six charts that re-lays out the tab, milliseconds for a headline that
// changes with every step of a live run. Here the label sits in a holder of fixed height that
// has no layout: the label fills it, and the holder's size never follows the text (a text wider
// than the holder is cut at its right end).
#pragma once

#include <QWidget>

class QLabel;

namespace fp8rl::ui {

class LineLabel : public QWidget {
  Q_OBJECT
 public:
  // `sample`: a text as tall as any the label will show (its rich text sets the height).
  explicit LineLabel(const QString& sample, QWidget* parent = nullptr);

  // The label, for its text and tool tip.
  QLabel* label() const { return label_; }

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  QLabel* label_;
};

}  // namespace fp8rl::ui
