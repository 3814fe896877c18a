// One run's log folder as TensorBoard sees it (a folder holding events.out.tfevents.* files),
// read incrementally: each read takes what the files gained since the last one, so the same
// code imports a finished run and follows a growing one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "store/run_store.hpp"
#include "tblog/metric_names.hpp"

namespace fp8rl::tblog {

// How far a folder has been read; kept with the run (RunStore::ImportBatch::state) as JSON.
struct FolderState {
  std::map<std::string, uint64_t> offsets;     // event file name → bytes read
  std::set<std::string> damaged;               // files whose framing broke: not read again
  std::map<std::string, std::string> plugins;  // tag → plugin (TensorFlow 2 writes it once)
  std::map<std::string, std::string> names;    // logged name → stored name, decided once
  std::optional<double> start;                 // unix wall time of the run's first event
  std::optional<double> end;                   // … and of its latest
  std::optional<int64_t> last_step;

  Json to_json() const;
  // The inverse; an empty or malformed text gives a fresh state.
  static FolderState from_text(const std::string& text);
};

struct FolderRead {
  RunStore::ImportBatch batch;        // state left empty (the caller serializes FolderState)
  Json hparams;                       // the last hyperparameters found (object), or null
  std::vector<std::string> warnings;  // at most one per file
  int64_t records = 0;                // records read
  int64_t skipped = 0;                // values of kinds not kept (images, audio, graphs, …)
  // Whether the folder held hyperparameters and nothing else (PyTorch's add_hparams writes
  // them into a folder of their own, which belongs to the run above it).
  bool only_hparams() const { return batch.empty() && hparams.is_object(); }
};

// The event files directly in folder, in the order they were written (by name: their names
// start with the creation time).
std::vector<std::string> event_files(const std::string& folder);

// Reads what folder's event files gained since state, which it updates. Every record is
// checked (length and data CRC-32C): a record with a bad CRC or a malformed message is skipped,
// a header whose CRC fails ends the file (the rest cannot be framed), and a file ending in an
// incomplete record is read up to it — each file with a problem gets one warning (an incomplete
// end only when !live: a followed file's last record may be half-written). Names are mapped by
// `names`; when two logged names map to one of ours, the second keeps its own name (a warning
// says so).
FolderRead read_folder(const std::string& folder, FolderState& state, const MetricNames& names,
                       bool live);

}  // namespace fp8rl::tblog
