// Importing other trainers' TensorBoard logs into the run store (docs/tensorboard.md): every
// folder under a log folder that holds event files is a run (as TensorBoard sees it), stored
// with its configuration when one lies beside it, its scalars under our names where they mean
// the same thing (MetricNames), its histograms and text. A pass reads only what the files
// gained since the last one — whether that was this process's pass or an earlier import's (the
// store keeps how far each folder was read) — so importing again continues, and following a
// growing folder is passes in a loop.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "store/run_store.hpp"
#include "tblog/metric_names.hpp"
#include "tblog/run_folder.hpp"

namespace fp8rl::tblog {

// The description of one of our runs that `fp8rl runs export --tensorboard` writes beside its
// event files (name, preset, precision summary, configuration, tags, notes), so that importing
// the folder back gives the run as it was.
inline constexpr const char* kRunDescriptionFile = "fp8rl-run.json";

struct ImportOptions {
  std::string name;               // the run's name; with several runs, "NAME/<folder>"
  std::vector<std::string> tags;  // stored as "a, b"
  bool follow = false;            // runs stay running (live) until finish()
};

struct ImportReport {
  struct Run {
    int64_t id = 0;
    std::string name, folder;
    bool created = false;
    int64_t scalars = 0, histograms = 0, texts = 0;
  };
  std::vector<Run> runs;  // the runs created or added to by the pass
  std::vector<std::string> warnings;
  int64_t records = 0;
};

class Importer {
 public:
  // logdir must be a folder; throws fp8rl::Error otherwise. Settles store for bulk writes
  // (RunStore::prepare_bulk_writes) and checkpoints it from the thread that reads the logs.
  Importer(RunStore& store, const std::string& logdir, MetricNames names, ImportOptions options);

  // One pass over the log folder: finds run folders (new ones too), reads what each gained and
  // writes it (one transaction per run). A run followed by another live process is left alone
  // (a warning says so).
  ImportReport pass();
  // Ends following: the runs this importer kept running become finished, ended at their last
  // event.
  void finish();

  const std::string& logdir() const { return logdir_; }

 private:
  struct Tracked {
    int64_t id = 0;
    std::string name;
    FolderState state;
    bool ours = false;        // an export of ours: names kept as they are
    bool live = false;        // set running by this importer (following)
    bool unfinished = false;  // found running or crashed in the store (a follow gone)
  };
  struct Pending;
  // Reads what p's folder gained since p.run.state (on the reading thread).
  Pending read(Pending p) const;
  std::string run_name(const std::string& folder, size_t folders) const;
  Json find_config(const std::string& folder, Json* description) const;

  RunStore& store_;
  // A second connection that checkpoints the log on the reading thread while store_ writes
  // (RunStore::prepare_bulk_writes).
  std::unique_ptr<RunStore> checkpointer_;
  std::string logdir_;
  MetricNames names_;
  MetricNames identity_;
  ImportOptions options_;
  std::map<std::string, Tracked> runs_;    // by folder (absolute)
  std::set<std::string> hparams_folders_;  // folders holding only hyperparameters
  std::map<std::string, Json> hparams_;    // run folder → its hyperparameters
  std::set<std::string> busy_;             // folders another process follows
};

// A flattened configuration ("policy.lr": 1e-6, as add_hparams logs it) nested again
// ({"policy": {"lr": 1e-6}}) where no key is both a value and a prefix of others; else as is.
Json unflatten(const Json& flat);

// What an imported run's precision column shows: the string settings named `precision` or
// `dtype` in its configuration, each as "<the key above it>=<value>", joined by ", "
// (NeMo RL: "policy=bfloat16, vllm_cfg=fp8"); "" when there are none.
std::string precision_summary_of(const Json& config);

// The event-file folders under logdir (logdir itself included), sorted.
std::vector<std::string> run_folders(const std::string& logdir);

}  // namespace fp8rl::tblog
