// What the chart widgets share: the series palette, the bold title label above a plot, where a
// legend goes, switching an axis to log scale, labelled dashed lines across a plot, the CSV cell
// formats of their exports and the writing of an export file.
#pragma once

#include <QColor>
#include <QString>
#include <cstddef>
#include <functional>

class QCPAxis;
class QCPItemStraightLine;
class QCPItemText;
class QCustomPlot;
class QIODevice;
class QLabel;
class QWidget;

namespace fp8rl::ui {

// The i-th colour of the series palette (Tableau 10, repeating): distinct and readable on white.
QColor seriesColor(size_t i);

// The bold title label shown above a plot (object name "title").
QLabel* makeTitleLabel(const QString& title, QWidget* parent);

// Every chart's legend sits in a row of its own under the axis rect, where it hides no data: its
// entries side by side in columns as wide as the widest, as many as the plot's width holds
// (re-counted at each replot, so it wraps as the plot narrows or entries come). PlotView places
// its plot's legend so; a plot built elsewhere calls placeLegendBelow once.
void placeLegendBelow(QCustomPlot* plot);
// Shows or hides a legend placed by placeLegendBelow. Hiding also removes its entries, so that
// its row takes no height; add them again after showing it (plottables are not added to it by
// themselves: addToLegend()).
void showLegend(QCustomPlot* plot, bool on);

// Puts axis on a log or a linear scale, with the matching ticker.
void setLogScale(QCPAxis* axis, bool log);

// A dashed line across a plot's axis rect with a label: vertical at an x (the label right of
// its top) or horizontal at a y (the label above its right end). The items belong to the plot.
struct RuleLine {
  QCPItemStraightLine* line = nullptr;
  QCPItemText* label = nullptr;
  Qt::Orientation orientation = Qt::Vertical;

  // Moves the line and its label to x (vertical) or y (horizontal), in axis coordinates.
  void moveTo(double at) const;
  void setVisible(bool on) const;
  // Removes (deletes) both items from the plot.
  void remove() const;
};

// Adds a rule line at `at` (see RuleLine) drawn and labelled in color.
RuleLine addRuleLine(QCustomPlot* plot, Qt::Orientation orientation, double at, const QString& text,
                     const QColor& color);

// Shortest text that reads back to the same double; nan, inf and -inf by name.
QString csvNumber(double v);
// A CSV cell: quoted (with doubled quotes) when it holds a comma, quote or newline.
QString csvField(const QString& s);

// Writes the file at path all or nothing (QSaveFile): write() fills it. False with "cannot
// write <path>: <reason>" in error when it cannot be opened or committed.
bool writeExportFile(const QString& path, const std::function<void(QIODevice&)>& write,
                     QString* error);

}  // namespace fp8rl::ui
