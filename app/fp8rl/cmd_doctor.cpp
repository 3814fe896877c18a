// fp8rl doctor: what this machine offers the engine, and why a GPU is or is not used.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "backend/backend_registry.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/parallel.hpp"
#include "core/version.hpp"
#include "dist/communicator.hpp"
#include "run_db.hpp"
#ifdef FP8RL_HAVE_IPC
#include "ipc/curve.hpp"
#include "ipc/endpoints.hpp"
#endif

namespace fp8rl::cli {
namespace {

// 13000 → "13.0"; 0 → "not available".
std::string cuda_version(int v) {
  if (v <= 0) return "not available";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string triple(long long v, long long major_div, long long minor_div) {
  if (v <= 0) return "not available";
  return std::to_string(v / major_div) + "." + std::to_string(v % major_div / minor_div) + "." +
         std::to_string(v % minor_div);
}

// The run data beside db that other users may read, write or enter: each path found (at most
// a few per place) and the command that makes it the user's alone.
struct OpenRunData {
  std::vector<std::string> paths;
  std::string fix;
};
OpenRunData open_run_data(const std::string& db) {
  const std::filesystem::path dir = std::filesystem::path(db).parent_path();
  OpenRunData open;
  // The folder itself only, not what else it may hold (a store may sit beside other files).
  if (const int mode = file_mode(dir.string()); mode >= 0 && (mode & 077) != 0) {
    open.paths.push_back(dir.string());
    open.fix = "chmod go-rwx '" + dir.string() + "'";
  }
  std::string recursive;
  for (const std::string& p : {db, db + "-wal", db + "-shm", (dir / "checkpoints").string(),
                               (dir / "logs").string(), (dir / "sweeps").string()}) {
    const std::vector<std::string> found = paths_open_to_others(p, 5);
    if (found.empty()) continue;
    open.paths.insert(open.paths.end(), found.begin(), found.end());
    recursive += " '" + p + "'";
  }
  if (!recursive.empty())
    open.fix += (open.fix.empty() ? "" : " && ") + std::string("chmod -R go-rwx") + recursive;
  return open;
}

// The privacy of this user's run data, sockets and keys (docs/security.md): one line each, and
// the command that mends what others can reach.
void print_privacy(const std::string& db) {
  std::printf("Privacy (run data, sockets and keys are the user's alone)\n");
  const OpenRunData open = open_run_data(db);
  if (!std::filesystem::exists(db)) {
    std::printf("  run data:       %s does not exist yet (made 0600 in a 0700 folder)\n",
                db.c_str());
  } else if (open.paths.empty()) {
    std::printf("  run data:       private: %s\n", db.c_str());
  } else {
    std::printf("  run data:       OPEN TO OTHER USERS:");
    for (const auto& p : open.paths)
      std::printf(" %s (%s)", p.c_str(), mode_string(file_mode(p)).c_str());
    std::printf("\n                  other accounts of this machine can read these runs; fix: %s\n",
                open.fix.c_str());
  }
#ifdef FP8RL_HAVE_IPC
  try {
    std::printf("  sockets:        private: %s (workers' default endpoints)\n",
                ipc::runtime_dir().c_str());
  } catch (const Error& e) {
    std::printf("  sockets:        PROBLEM: %s\n", e.message().c_str());
  }
  const std::string keys = ipc::keys_dir();
  const std::vector<std::string> open_keys = paths_open_to_others(keys, 5);
  if (!std::filesystem::exists(keys))
    std::printf("  keys:           %s not made yet (made 0700 on first use)\n", keys.c_str());
  else if (open_keys.empty())
    std::printf("  keys:           private: %s\n", keys.c_str());
  else
    std::printf(
        "  keys:           OPEN TO OTHER USERS: %s; workers refuse them; fix: chmod -R go-rwx "
        "'%s'\n",
        open_keys.front().c_str(), keys.c_str());
#endif
  std::printf("\n");
}

}  // namespace

namespace {
// Whether runs can spread over ranks (docs/distributed.md).
void print_ranks_line() {
  const std::string mpi = mpi_library();
  if (mpi.empty())
    std::printf(
        "ranks: one process only (built without MPI; install libopenmpi-dev and rebuild)\n");
  else
    std::printf("ranks: data-parallel under mpirun (%s)\n", mpi.c_str());
}
}  // namespace

int print_version() {
  std::printf("fp8rl %s (%s)\nbackends:\n", FP8RL_VERSION, FP8RL_GIT_DESCRIBE);
  std::printf("  cpu   available: %d threads, %s\n", cpu_threads(), cpu_gemm_description().c_str());
  const auto& st = cuda_module_status();
  const auto& i = st.info;
  if (!st.loaded) {
    std::printf("  cuda  not available: %s\n", st.load_error.c_str());
  } else if (!st.usable) {
    std::printf("  cuda  not usable: %s (driver %s, runtime %s; %s)\n", st.why_not().c_str(),
                cuda_version(i.driver_version).c_str(), cuda_version(i.runtime_version).c_str(),
                st.path.c_str());
  } else {
    std::printf(
        "  cuda  available: %s, compute capability %d.%d (driver %s, runtime %s, "
        "cuBLASLt %s; %s)\n",
        i.device_name, i.cc_major, i.cc_minor, cuda_version(i.driver_version).c_str(),
        cuda_version(i.runtime_version).c_str(),
        triple(static_cast<long long>(i.cublaslt_version), 10000, 100).c_str(), st.path.c_str());
  }
  print_ranks_line();
  return 0;
}

int cmd_doctor(const std::vector<std::string>& args) {
  const Args a(args, {"db"}, {"help"});
  if (a.flag("help")) {
    std::puts(
        "usage: fp8rl doctor [--db PATH]\n\nReports CPU threads and GEMM path, the CUDA backend "
        "module, driver and runtime versions,\nthe device, cuBLASLt and NCCL, which backend "
        "`--backend auto` picks (and why), and whether\nthe run database (--db, default as for "
        "train), its checkpoints and logs, the workers' socket\nfolder and the keys are private "
        "to this user (with the command that mends them). Exits 0.");
    return 0;
  }
  a.max_positional(0);
  std::printf("fp8rl %s (%s)\n\n", FP8RL_VERSION, FP8RL_GIT_DESCRIBE);
  std::printf("CPU backend\n  threads:        %d\n  GEMM:           %s\n\n", cpu_threads(),
              cpu_gemm_description().c_str());

  const auto& st = cuda_module_status();
  std::printf("CUDA backend module\n");
  if (!st.loaded) {
    std::printf("  module:         not loaded: %s\n", st.load_error.c_str());
  } else {
    const auto& i = st.info;
    std::printf("  module:         %s\n", st.path.c_str());
    std::printf("  driver:         %s\n", cuda_version(i.driver_version).c_str());
    std::printf("  runtime:        %s\n", cuda_version(i.runtime_version).c_str());
    std::printf("  cuBLASLt:       %s\n",
                triple(static_cast<long long>(i.cublaslt_version), 10000, 100).c_str());
    if (i.nccl_version > 0)
      std::printf("  NCCL:           %s\n", triple(i.nccl_version, 10000, 100).c_str());
    else
      std::printf("  NCCL:           not available: %s\n",
                  i.nccl_problem[0] ? i.nccl_problem : "no reason given");
    std::printf("  devices:        %d\n", i.device_count);
    if (i.device_count > 0) {
      std::printf("  device 0:       %s, compute capability %d.%d, %d SMs\n", i.device_name,
                  i.cc_major, i.cc_minor, i.sm_count);
      std::printf("  memory:         %.1f GiB total, %.1f GiB free\n",
                  static_cast<double>(i.total_memory) / (1u << 30),
                  static_cast<double>(i.free_memory) / (1u << 30));
    }
  }
  std::printf("  usable:         %s\n\n", st.usable ? "yes" : ("no: " + st.why_not()).c_str());

  const auto sel = make_backend(BackendChoice::automatic);
  std::printf("--backend auto selects: %s (%s)\n", sel.backend->name().c_str(),
              sel.backend->device().c_str());
  if (!sel.fallback_reason.empty())
    std::printf("  fell back to the CPU because: %s\n", sel.fallback_reason.c_str());
  std::printf("\n");
  print_privacy(a.get("db", default_db_path()));
  print_ranks_line();
  return 0;
}

}  // namespace fp8rl::cli
