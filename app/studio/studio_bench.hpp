// fp8rl-studio --bench: the GUI's performance targets measured on this machine, with a real
// database (N finished runs), real workers streaming, and the real main window:
//   - opening the database (every run listed in the runs panel) < 1 s
//   - event-loop latency while live runs stream into the open views < 50 ms
//   - replot of a chart holding 1,000,000 points per curve < 30 ms
// The load round of docs/benchmarks.md: --runs 10000 --steps 1000 --live 8 --seconds 600; with
// --replay DB:RUN --live 100, a hundred live runs replayed (event-loop stall ≤ 16 ms) and the
// memory each live run's data takes.
#pragma once

#include <QString>

namespace fp8rl::studio {

struct BenchOptions {
  QString db;        // the database to open; made (in a temporary folder when "") if absent
  int runs = 1000;   // finished runs in a database the benchmark makes
  int steps = 40;    // steps of each of those runs
  int live = 4;      // workers streaming while the latency is measured
  int seconds = 10;  // how long the latency is measured
  // "DB:RUN": instead of training workers, `fp8rl replay` plays that recorded run's telemetry as
  // `live` live runs (more than the cores could train) at its recorded pace, or `rate` steps a
  // second each.
  QString replay;
  double rate = 0;
  // Every live run's data held by the studio (as if each were open), not only the shown ones.
  bool all_data = false;
  // Time the GUI thread's event dispatches while the live runs stream; print the slowest.
  bool profile = false;
};

// Runs the benchmark and prints its table; returns 0, or 1 when it could not be set up.
int runBench(const QString& cli, const BenchOptions& opt);

}  // namespace fp8rl::studio
