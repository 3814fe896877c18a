// fp8rl: the command-line entry point.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "dist/communicator.hpp"

namespace {

constexpr const char* kUsage = R"(usage: fp8rl [--debug] <command> [options]

commands:
  doctor                 report CPU, GEMM path, CUDA module, driver, device and library versions
  bench gemm|quant|rollout   BF16 vs FP8 GEMMs, quantization, decode tokens/s per backend
  bench train|step       training-step and whole-GRPO-step speed, BF16 vs FP8 (--json FILE)
  bench telemetry        what a worker's telemetry costs per step of the demo preset
  score                  per-token log-probabilities of token ids under a checkpoint (JSON)
  init                   write a randomly initialised checkpoint from a config.json
  generate               sample from a checkpoint; tokens and log-probs as JSON
  convert                a checkpoint to Hugging Face block FP8 (vLLM, SGLang) or to BF16
  tokenize               token ids of text (or text of ids) with a model folder's tokenizer
  train                  a GRPO run (presets, --set overrides, --json, --resume), recorded
  audit                  a run's layer audit: generator and trainer weights, linear by linear
  sensitivity            which linear modules need BF16: per-module KL, loss and gradient change
  runs                   list, show, attach to, check, import (TensorBoard logs), export runs
  sweep                  run a sweep file's points (seeds × variants), queued, resumable
  compare                FP8 as good as BF16? group A against group B with 95% intervals
  report                 the same as a self-contained HTML report with the groups' curves
  worker                 serve one run over ZeroMQ (the studio launches these)
  replay                 play a recorded run's telemetry as N live workers (studio load tests)
  keys                   CURVE keys of workers served beyond this machine (show, authorize)
  --version              print the version, the git revision and the backends available
  --help                 this text
  --debug                errors also say where in the source they were raised

Run `fp8rl <command> --help` for a command's options.
)";

// An error as the user reads it: what failed (the setting, file and value), and with --debug
// also where in our source it was raised.
std::string describe(const std::exception& e, bool debug) {
  return debug ? e.what() : fp8rl::error_text(e);
}

int dispatch(const std::string& cmd, const std::vector<std::string>& rest, bool debug) {
  try {
    if (cmd == "doctor") return fp8rl::cli::cmd_doctor(rest);
    if (cmd == "bench") return fp8rl::cli::cmd_bench(rest);
    if (cmd == "train") return fp8rl::cli::cmd_train(rest);
    if (cmd == "sensitivity") return fp8rl::cli::cmd_sensitivity(rest);
    if (cmd == "score") return fp8rl::cli::cmd_score(rest);
    if (cmd == "init") return fp8rl::cli::cmd_init(rest);
    if (cmd == "generate") return fp8rl::cli::cmd_generate(rest);
    if (cmd == "convert") return fp8rl::cli::cmd_convert(rest);
    if (cmd == "tokenize") return fp8rl::cli::cmd_tokenize(rest);
#if defined(FP8RL_HAVE_IPC)
    if (cmd == "worker") return fp8rl::cli::cmd_worker(rest);
    if (cmd == "keys") return fp8rl::cli::cmd_keys(rest);
    if (cmd == "replay") return fp8rl::cli::cmd_replay(rest);
#else
    if (cmd == "replay") throw fp8rl::Error("this build has no ZeroMQ: replay is not available");
    if (cmd == "keys") throw fp8rl::Error("this build has no ZeroMQ: workers are not available");
    if (cmd == "worker") throw fp8rl::Error("this build has no ZeroMQ: workers are not available");
#endif
#if defined(FP8RL_HAVE_STORE)
    if (cmd == "runs") return fp8rl::cli::cmd_runs(rest);
    if (cmd == "audit") return fp8rl::cli::cmd_audit(rest);
    if (cmd == "sweep") return fp8rl::cli::cmd_sweep(rest);
    if (cmd == "compare") return fp8rl::cli::cmd_compare(rest);
    if (cmd == "report") return fp8rl::cli::cmd_report(rest);
#else
    if (cmd == "sweep" || cmd == "compare" || cmd == "report")
      throw fp8rl::Error("this build has no SQLite: the run store is not available");
    if (cmd == "audit")
      throw fp8rl::Error("this build has no SQLite: the run store is not available");
    if (cmd == "runs")
      throw fp8rl::Error("this build has no SQLite: the run store is not available");
#endif
    std::fprintf(stderr, "fp8rl: unknown command '%s' (`fp8rl --help` lists the commands)\n",
                 cmd.c_str());
    return 2;
  } catch (const fp8rl::cli::UsageError& e) {
    std::fprintf(stderr, "fp8rl %s: %s\n(`fp8rl %s --help` lists its options)\n", cmd.c_str(),
                 describe(e, debug).c_str(), cmd.c_str());
    fp8rl::end_world(false);
    return 2;
  } catch (const fp8rl::Error& e) {
    std::fprintf(stderr, "fp8rl %s: error: %s\n", cmd.c_str(), describe(e, debug).c_str());
    fp8rl::end_world(false);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp8rl %s: unexpected error: %s\n", cmd.c_str(), e.what());
    fp8rl::end_world(false);
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // --debug is global: before the command or among its options.
  const auto debug_at = std::remove(args.begin(), args.end(), std::string("--debug"));
  const bool debug = debug_at != args.end();
  args.erase(debug_at, args.end());
  if (args.empty()) {
    std::fputs(
        "fp8rl: needs a command, e.g. `fp8rl train --preset demo` (`fp8rl --help` lists "
        "them)\n",
        stderr);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args[0] == "--version") return fp8rl::cli::print_version();
  const std::string cmd = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  const int rc = dispatch(cmd, rest, debug);
  // A data-parallel rank leaves its MPI job: finalised after success, aborted after a failure
  // (so that mpirun ends the other ranks rather than leave them waiting).
  fp8rl::end_world(rc == 0 || rc == 130);  // 130: stopped on request, on every rank
  return rc;
}
