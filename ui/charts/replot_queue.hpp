// Replots asked of the charts, run one plot per event-loop pass.
//
// A step of a live run changes a dozen charts at once. Replotted in one pass (QCustomPlot's own
// queued replot), they and the repaint after them hold the event loop for 10–20 ms on a busy
// 2-core machine; one per pass, the loop handles input and timers between two plots.
#pragma once

class QCustomPlot;

namespace fp8rl::ui {

// Replots `plot` in a later event-loop pass (once however often asked before it runs), then
// repaints it. Safe to ask for a plot that is deleted before its turn.
void queueReplot(QCustomPlot* plot);

// Replots every plot still waiting, now (an export or a test that needs them drawn).
void flushReplots();

}  // namespace fp8rl::ui
