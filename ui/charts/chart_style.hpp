// What the chart widgets share: the series palette, the bold title label above a plot, and the
// CSV cell formats of their exports.
#pragma once

#include <QColor>
#include <QString>
#include <cstddef>

class QLabel;
class QWidget;

namespace fp8rl::ui {

// The i-th colour of the series palette (Tableau 10, repeating): distinct and readable on white.
QColor seriesColor(size_t i);

// The bold title label shown above a plot (object name "title").
QLabel* makeTitleLabel(const QString& title, QWidget* parent);

// Shortest text that reads back to the same double; nan, inf and -inf by name.
QString csvNumber(double v);
// A CSV cell: quoted (with doubled quotes) when it holds a comma, quote or newline.
QString csvField(const QString& s);

}  // namespace fp8rl::ui
