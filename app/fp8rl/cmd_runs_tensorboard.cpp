// fp8rl runs import LOGDIR [--follow] and fp8rl runs export ID --tensorboard DIR: other
// trainers' TensorBoard logs into the run database, and our runs out as event files
// (docs/tensorboard.md).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "args.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "run_db.hpp"
#include "store/run_store.hpp"
#include "tblog/exporter.hpp"
#include "tblog/importer.hpp"

namespace fp8rl::cli {
namespace {

namespace fs = std::filesystem;

volatile std::sig_atomic_t g_stop = 0;

void on_stop_signal(int) {
  g_stop = 1;
}

// The names files: --names FILE (each, in order), the user's (~/.config/fp8rl/metric-names.txt),
// then the one installed beside the program (share/fp8rl/tensorboard/metric-names.txt).
std::vector<std::string> names_files(const std::vector<std::string>& given) {
  std::vector<std::string> files = given;
  for (const auto& f : given) check(fs::is_regular_file(f), "--names " + f + ": no such file");
  std::string config;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x)
    config = x;
  else if (const char* h = std::getenv("HOME"); h && *h)
    config = std::string(h) + "/.config";
  if (!config.empty() && fs::is_regular_file(config + "/fp8rl/metric-names.txt"))
    files.push_back(config + "/fp8rl/metric-names.txt");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path shipped =
        (exe.parent_path() / "../share/fp8rl/tensorboard/metric-names.txt").lexically_normal();
    if (fs::is_regular_file(shipped)) files.push_back(shipped.string());
  }
  return files;
}

void print_pass(const tblog::ImportReport& rep) {
  for (const auto& w : rep.warnings)
    std::fprintf(stderr, "fp8rl runs import: warning: %s\n", w.c_str());
  for (const auto& r : rep.runs)
    std::printf("run %lld %s: %s%lld scalars, %lld histograms, %lld texts (%s)\n",
                static_cast<long long>(r.id), r.name.c_str(), r.created ? "imported, " : "+",
                static_cast<long long>(r.scalars), static_cast<long long>(r.histograms),
                static_cast<long long>(r.texts), r.folder.c_str());
  std::fflush(stdout);
}

}  // namespace

int cmd_runs_import(const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  const std::vector<std::string> tags = take_repeated(rest, "tag");
  const std::vector<std::string> names = take_repeated(rest, "names");
  const Args a(rest, {"db", "name", "interval"}, {"help", "follow", "keep-names"});
  if (a.flag("help"))
    return print_help(
        "usage: fp8rl runs import LOGDIR [--name NAME] [--tag TAG]... [--follow] [--db PATH]\n"
        "                        [--names FILE]... [--keep-names] [--interval SECONDS]\n\n"
        "Imports TensorBoard logs (NeMo RL, verl, TRL, anything that writes event files): every\n"
        "folder under LOGDIR holding events.out.tfevents.* files becomes a run, with the\n"
        "configuration saved beside it (config.yaml / .json, .hydra/config.yaml, or the logged\n"
        "hyperparameters). Names that mean one of ours are stored under ours (the names files:\n"
        "--names FILE first, then ~/.config/fp8rl/metric-names.txt, then the shipped one;\n"
        "--keep-names stores every name as logged). Importing a folder again adds only what it\n"
        "gained. --follow keeps reading every --interval seconds (default 1): the runs show as\n"
        "live (read-only) until it is stopped (Ctrl-C), then as finished.\n");
  need(!a.positional().empty(), "import needs a log folder: fp8rl runs import LOGDIR");
  a.max_positional(1);
  const std::string logdir = a.positional()[0];
  const double interval = a.get_number("interval", 1.0);
  check(interval > 0, "--interval must be positive");
  tblog::MetricNames map;
  if (!a.flag("keep-names")) map = tblog::MetricNames::load(names_files(names));
  const std::string path = a.get("db", default_db_path());
  RunStore db(path);
  tblog::ImportOptions options;
  options.name = a.get("name", "");
  options.tags = tags;
  options.follow = a.flag("follow");
  tblog::Importer importer(db, logdir, std::move(map), options);
  if (!options.follow) {
    const tblog::ImportReport rep = importer.pass();
    print_pass(rep);
    if (rep.runs.empty())
      std::printf(
          "no new records under %s (no event files, or nothing new since the last import)\n",
          importer.logdir().c_str());
    return 0;
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::printf("following %s into %s (Ctrl-C to stop)\n", importer.logdir().c_str(), path.c_str());
  std::fflush(stdout);
  try {
    while (!g_stop) {
      print_pass(importer.pass());
      for (double waited = 0; waited < interval && !g_stop; waited += 0.05)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (...) {
    importer.finish();
    throw;
  }
  importer.finish();
  std::printf("stopped following %s\n", importer.logdir().c_str());
  return 0;
}

int cmd_runs_export_tensorboard(const std::string& db_path, int64_t run, const std::string& dir) {
  RunStore db(db_path, /*read_only=*/true);
  const tblog::ExportReport rep = tblog::export_run(db, run, dir);
  std::printf("run %lld: %lld steps, %lld scalars, %lld histograms → %s\n",
              static_cast<long long>(run), static_cast<long long>(rep.steps),
              static_cast<long long>(rep.scalars), static_cast<long long>(rep.histograms),
              rep.file.c_str());
  return 0;
}

}  // namespace fp8rl::cli
