// fp8rl train: a GRPO run in this process, with a progress line (or JSON lines), recorded in
// the run store; Ctrl-C stops at the next step boundary with a checkpoint.
#include <unistd.h>
#include <csignal>
#include <cstdio>

#include <atomic>
#include <cmath>
#include <filesystem>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "commands.hpp"
#include "contract/settings.hpp"
#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "model/checkpoint.hpp"
#include "rl/run_loop.hpp"
#include "run_db.hpp"
#include "session/run_session.hpp"
#if defined(FP8RL_HAVE_STORE)
#include "store/run_store.hpp"
#endif

namespace fp8rl::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

std::string fmt_scalar(const StepRecord& r, const char* key, const char* f) {
  auto it = r.scalars.find(key);
  if (it == r.scalars.end()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, it->second);
  return buf;
}

// The terminal side of a training run: a progress line per step (or JSON lines), the
// validation accuracies for the summary, and Ctrl-C turned into a stop request.
struct TrainPrinter : SessionListener {
  TrainPrinter(bool json_lines, int64_t total_steps) : json(json_lines), total(total_steps) {}

  void on_step(StepRecord& r, int64_t) override {
    if (g_stop && session) session->request_stop("stopped by a signal");
    wall_seconds = r.wall_seconds;
    ++done;
    if (auto it = r.scalars.find(metric::kValAccuracy); it != r.scalars.end()) {
      last_val = it->second;
      if (std::isnan(first_val)) first_val = it->second;
    }
    if (auto it = r.scalars.find(metric::kValAccuracyInitial); it != r.scalars.end())
      first_val = it->second;
    if (json) {
      std::printf("%s\n", r.to_json().dump().c_str());
      std::fflush(stdout);
      return;
    }
    const int width = 24, filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(static_cast<size_t>(width), '.');
    std::fprintf(stderr, "%s[%s] %lld/%lld %s  reward %s  val %s  mult_err %s  %s s/step%s",
                 tty ? "\r" : "", bar.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), r.phase.c_str(),
                 fmt_scalar(r, metric::kReward, "%.3f").c_str(),
                 std::isnan(last_val) ? "-" : (std::to_string(last_val).substr(0, 5)).c_str(),
                 fmt_scalar(r, metric::kTokenMultProbError, "%.4f").c_str(),
                 fmt_scalar(r, metric::kTimeTotal, "%.2f").c_str(), tty ? "   " : "\n");
  }

  void on_event(const EventRecord& e, int64_t step) override {
    if (!json && !db_path.empty() && session &&
        (e.kind == event::kStart || e.kind == event::kResume))
      std::fprintf(stderr, "fp8rl train: run %lld recorded in %s\n",
                   static_cast<long long>(session->status().run_id), db_path.c_str());
    // The autopilot's decisions change the run on their own: say them as they happen.
    if (e.kind == event::kAutopilot) {
      end_line();
      std::fprintf(stderr, "fp8rl train: autopilot after step %lld: %s\n",
                   static_cast<long long>(step), e.message.c_str());
    }
  }

  void end_line() const {
    if (tty && done > 0) std::fputc('\n', stderr);
  }

  const bool json;
  const int64_t total;
  const bool tty = isatty(STDERR_FILENO) && !json;
  RunSession* session = nullptr;
  std::string db_path;  // where the run is recorded (empty: not recorded)
  int64_t done = 0;
  double first_val = NAN, last_val = NAN, wall_seconds = 0;
};

}  // namespace

int follow_rank0(Communicator& comm) {
  std::signal(SIGUSR1, SIG_IGN);  // mpirun forwards it to every rank; rank 0 acts on it
  follow_run(comm, [](const std::string& name) {
    return make_backend(parse_backend_choice(name)).backend;
  });
  return 0;
}

int cmd_train(const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  std::vector<std::string> sets = take_repeated(rest, "set");
  const Args a(rest, {"preset", "config", "backend", "output", "db", "name", "resume", "model"},
               {"json", "help", "print-config", "no-db", "list-presets", "list-choices",
                "list-settings", "markdown"});
  if (a.flag("list-presets")) {
    for (const auto& n : RunConfig::preset_names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (a.flag("list-choices")) {  // {"key": ["allowed", ...], ...}
    Json::Object out;
    for (const auto& [key, allowed] : RunConfig::choices())
      out[key] = Json::Array(allowed.begin(), allowed.end());
    std::printf("%s\n", Json(out).dump(2).c_str());
    return 0;
  }
  if (a.flag("list-settings")) {  // the settings schema (contract/settings.hpp)
    std::printf("%s\n", a.flag("markdown") ? settings_markdown().c_str()
                                           : settings_to_json().dump(2).c_str());
    return 0;
  }
  const bool resuming = !a.get("resume", "").empty();
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl train (--preset NAME | --config FILE | --resume RUN_ID) [--set key=value "
        "...]\n"
        "                   [--json] [--db PATH] [--name NAME] [--backend auto|cpu|cuda]\n"
        "                   [--output DIR] [--print-config] [--no-db] [--model DIR]\n"
        "       fp8rl train --list-presets | --list-choices | --list-settings [--markdown]\n\n"
        "Runs GRPO (with optional supervised warm-up), recording every step in the run database\n"
        "(default: $FP8RL_DB or ~/.local/share/fp8rl/runs.sqlite). Prints a progress line per\n"
        "step, or with --json one JSON object per step and a final summary. Ctrl-C stops at\n"
        "the next step boundary and writes a checkpoint; --resume RUN_ID continues from the\n"
        "run's last checkpoint. Presets: resources/presets/*.yaml; --config takes a YAML file\n"
        "or a JSON object (as --print-config prints it). --model DIR starts from a Hugging Face\n"
        "model folder (model.checkpoint: config.json, safetensors, BF16 or block-FP8; a JSONL\n"
        "task then uses its tokenizer.json and chat template).\n"
        "Started by `mpirun -np N`, the run is data-parallel over N ranks (rank 0 records and\n"
        "prints; SIGUSR1 to mpirun stops at a step boundary): see docs/distributed.md.\n");
  need(a.positional().empty(), "unexpected argument '" +
                                   (a.positional().empty() ? "" : a.positional()[0]) +
                                   "' (a preset or a config goes after --preset or --config)");
  need(!a.get("preset", "").empty() || !a.get("config", "").empty() || resuming,
       "needs a preset or a config (e.g. --preset math), or --resume RUN_ID");
  // Under mpirun (docs/distributed.md): the other ranks follow rank 0's run.
  Communicator& comm = world();
  if (comm.rank() > 0) return follow_rank0(comm);
  // --model is model.checkpoint, before the --set overrides (which may still change it).
  if (a.has("model")) sets.insert(sets.begin(), "model.checkpoint=" + a.get("model", ""));
  const bool use_db = !a.flag("no-db");
  const std::string db_path = a.get("db", default_db_path());
#if defined(FP8RL_HAVE_STORE)
  std::unique_ptr<RunStore> store;
  int64_t run_id = -1;
  RunConfig cfg;
  std::string resume_dir;
  if (resuming) {
    check(use_db, "--resume needs the run database");
    store = std::make_unique<RunStore>(db_path);
    run_id = parse_run_id(a.get("resume", ""), "--resume");
    const auto row = store->find_run(run_id);
    check(row.has_value(), "no run " + a.get("resume", "") + " in " + db_path);
    check(!row->checkpoint_dir.empty() && row->checkpoint_step.has_value(),
          "run " + std::to_string(run_id) + " has no checkpoint to resume from");
    check(row->status != "finished", "run " + std::to_string(run_id) + " has finished");
    // The checkpoint's configuration: the launch one with the live edits made before it.
    resume_dir = row->checkpoint_dir;
    cfg = resume_config(resume_dir, sets);
  } else {
    cfg = RunConfig::load(a.get("preset", ""), a.get("config", ""), sets);
  }
#else
  check(!resuming, "--resume needs the run database; this build has no SQLite (run store)");
  RunConfig cfg = RunConfig::load(a.get("preset", ""), a.get("config", ""), sets);
#endif
  for (const auto& note : cfg.notes) std::fprintf(stderr, "fp8rl train: note: %s\n", note.c_str());
  if (!cfg.init_checkpoint.empty())  // what of the model folder is not used
    for (const auto& note : checkpoint_notes(read_checkpoint_config(cfg.init_checkpoint)))
      std::fprintf(stderr, "fp8rl train: note: %s\n", note.c_str());
  if (a.flag("print-config")) {
    std::printf("%s\n", cfg.doc.dump(2).c_str());
    return 0;
  }
  auto sel = make_backend(parse_backend_choice(a.get("backend", cfg.backend)));
  const bool json = a.flag("json");
  if (!sel.fallback_reason.empty() && !json)
    std::fprintf(stderr, "fp8rl train: using the CPU (%s)\n", sel.fallback_reason.c_str());

  RunRecorder* recorder = nullptr;
  SessionOptions opt;
  opt.comm = &comm;
  opt.name = a.get("name", cfg.name);
  opt.preset = a.get("preset", a.get("config", ""));
  const std::string output = a.get("output", "");
  opt.checkpoint_at_end = !output.empty();
#if defined(FP8RL_HAVE_STORE)
  if (use_db) {
    if (!store) store = std::make_unique<RunStore>(db_path);
    recorder = store.get();
    if (resuming) {
      opt.resume_run = run_id;
      opt.resume_dir = resume_dir;
    }
  }
#else
  if (use_db && !json)
    std::fprintf(stderr, "fp8rl train: built without SQLite: the run is not recorded\n");
#endif
  // Checkpoints: --output, else beside the database (run-ID), else ./fp8rl-checkpoint.
  opt.checkpoint_dir = [&](int64_t id) {
    if (!output.empty()) return output;
    if (id >= 0)
      return (std::filesystem::path(db_path).parent_path() / "checkpoints" /
              ("run-" + std::to_string(id)))
          .string();
    return std::string("fp8rl-checkpoint");
  };

  TrainPrinter printer(json, cfg.sft_steps + cfg.steps);
  RunSession session(cfg, *sel.backend, recorder, opt, &printer);
  printer.session = &session;
  if (recorder) printer.db_path = db_path;
  // Under mpirun, SIGTERM means the job is ending (the communicator handles it) and Ctrl-C
  // reaches mpirun, which ends the job: SIGUSR1, which mpirun forwards, stops at a boundary.
  std::signal(SIGINT, on_signal);
  std::signal(SIGUSR1, on_signal);
  if (comm.size() == 1) std::signal(SIGTERM, on_signal);
  send_run(comm, &cfg, sel.backend->name(), opt.resume_dir);
  const std::string final_state = session.run();
  printer.end_line();
  const bool stopped = final_state == "stopped";
  const auto st = session.status();
  if (!json && (stopped || !output.empty()))
    std::fprintf(stderr, "checkpoint written to %s\n", opt.checkpoint_dir(st.run_id).c_str());

  Json summary;
  summary["summary"] = true;
  summary["stopped_early"] = stopped;
  if (recorder) summary["run_id"] = st.run_id;
  summary["sft_steps"] = session.loop()->sft_done();
  summary["rl_steps"] = session.loop()->rl_done();
  summary["validation_accuracy_initial"] =
      std::isnan(printer.first_val) ? Json() : Json(printer.first_val);
  summary["validation_accuracy_final"] =
      std::isnan(printer.last_val) ? Json() : Json(printer.last_val);
  summary["wall_seconds"] = printer.wall_seconds;
  if (json)
    std::printf("%s\n", summary.dump().c_str());
  else
    std::fprintf(stderr, "%s\n", summary.dump().c_str());
  return stopped ? 130 : 0;
}

}  // namespace fp8rl::cli
