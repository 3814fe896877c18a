// fp8rl-studio --bench: the GUI's performance targets measured on this machine, with a real
// database (N finished runs), real workers streaming, and the real main window:
//   - opening the database (runs panel filled) < 2 s
//   - event-loop latency while live runs stream into the open views < 50 ms
//   - replot of a chart holding 1,000,000 points per curve < 30 ms
#pragma once

#include <QString>

namespace fp8rl::studio {

// Runs the benchmark and prints its table; returns 0, or 1 when it could not be set up.
int run_bench(const QString& cli, int finished_runs, int live_runs);

}  // namespace fp8rl::studio
