// Writing one of our runs as TensorBoard event files (docs/tensorboard.md), so that a team on
// TensorBoard or W&B (`wandb sync` of the folder) sees it: every scalar as a DT_DOUBLE tensor
// with the "scalars" plugin (no float rounding), every histogram as a HistogramProto, in one
// event file, and the run's description (kRunDescriptionFile: name, configuration, tags, …)
// beside it, so that importing the folder back gives the run as it was.
#pragma once

#include <cstdint>
#include <string>

#include "store/run_store.hpp"

namespace fp8rl::tblog {

struct ExportReport {
  std::string file;  // the event file written
  int64_t steps = 0, scalars = 0, histograms = 0;
};

// Writes run `run` of store into folder (created when missing). Throws fp8rl::Error when there
// is no such run, the folder holds event files already, or a file cannot be written.
ExportReport export_run(RunStore& store, int64_t run, const std::string& folder);

}  // namespace fp8rl::tblog
