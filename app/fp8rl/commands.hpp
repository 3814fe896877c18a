// The fp8rl sub-commands. Each takes the words after its name and returns the exit code;
// errors are thrown as fp8rl::Error and reported by main().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp8rl {
class Communicator;
}

namespace fp8rl::cli {

// This machine and measurements: doctor, --version, bench, sensitivity.
int cmd_doctor(const std::vector<std::string>& args);
// `fp8rl --version`: the version, the git revision and each backend (CPU; CUDA with its
// driver and runtime versions, or why it is not usable).
int print_version();
int cmd_bench(const std::vector<std::string>& args);
int cmd_sensitivity(const std::vector<std::string>& args);

// Runs: train, the run store, workers and their keys.
int cmd_train(const std::vector<std::string>& args);
int cmd_runs(const std::vector<std::string>& args);
// `fp8rl runs import LOGDIR …` and `fp8rl runs export ID --tensorboard DIR`
// (cmd_runs_tensorboard.cpp, docs/tensorboard.md).
int cmd_runs_import(const std::vector<std::string>& args);
int cmd_runs_export_tensorboard(const std::string& db_path, int64_t run, const std::string& dir);
int cmd_audit(const std::vector<std::string>& args);
// Sweeps and run groups (docs/sweeps.md): the queue runner, the verdict between groups, the
// HTML report.
int cmd_sweep(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
// Follows a live run's telemetry in the terminal.
int cmd_attach(int64_t run_id, const std::string& db_path);
int cmd_worker(const std::vector<std::string>& args);
// Plays a recorded run's telemetry as live workers (the studio's load benchmark).
int cmd_replay(const std::vector<std::string>& args);
int cmd_keys(const std::vector<std::string>& args);
// Ranks other than 0 of `mpirun … fp8rl train|worker`: follow rank 0's run (docs/distributed.md)
// and return the exit code.
int follow_rank0(Communicator& comm);

// Models and text: checkpoints, generation, scoring, tokenizers.
int cmd_init(const std::vector<std::string>& args);
int cmd_convert(const std::vector<std::string>& args);
int cmd_generate(const std::vector<std::string>& args);
int cmd_score(const std::vector<std::string>& args);
int cmd_tokenize(const std::vector<std::string>& args);

// Parses "1,2,3" into token ids; errors name the option and the bad item.
std::vector<int32_t> parse_token_ids(const std::string& s,
                                     const std::string& option = "--token-ids");

}  // namespace fp8rl::cli
