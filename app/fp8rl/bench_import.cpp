// fp8rl bench import: importing TensorBoard logs (docs/tensorboard.md) at scale, and what the
// imported rows cost the run list.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench.hpp"
#include "contract/metrics.hpp"
#include "core/error.hpp"
#include "store/run_store.hpp"
#include "tblog/importer.hpp"
#include "tblog/tb_event.hpp"
#include "tblog/tfrecord.hpp"

namespace fp8rl::cli::bench {
namespace {

namespace fs = std::filesystem;

// NeMo RL's names, ten a step, as its TensorBoard logger writes them (one simple_value event
// per scalar, as PyTorch's add_scalar does).
constexpr const char* kTags[] = {"train/loss",
                                 "train/reward",
                                 "train/token_mult_prob_error",
                                 "train/gen_kl_error",
                                 "train/grad_norm",
                                 "train/lr",
                                 "train/approx_entropy",
                                 "timing/train/total_step_time",
                                 "timing/train/generation",
                                 "timing/train/policy_training"};
constexpr int kTagCount = sizeof kTags / sizeof kTags[0];

// CPU seconds of the calling thread so far.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Median of a few list_runs() calls, seconds.
double list_seconds(const std::string& db) {
  RunStore store(db, /*read_only=*/true);
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = Clock::now();
    const auto rows = store.list_runs();
    t.push_back(seconds_since(t0));
    check(!rows.empty(), "bench import: the run list is empty");
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

Json bench_import(int64_t runs, int64_t scalars, const std::string& dir_option) {
  const fs::path dir = dir_option.empty() ? fs::temp_directory_path() /
                                                ("fp8rl-bench-import-" + std::to_string(getpid()))
                                          : fs::path(dir_option);
  fs::create_directories(dir / "logs");
  const int64_t steps = (scalars + kTagCount - 1) / kTagCount;
  std::printf("bench import: %lld runs × %lld scalars (%lld steps × %d names), under %s\n",
              static_cast<long long>(runs), static_cast<long long>(steps * kTagCount),
              static_cast<long long>(steps), kTagCount, dir.c_str());

  // The logs: one folder per run, NeMo RL's layout (<run>/tensorboard/events.out.tfevents.*).
  auto t0 = Clock::now();
  uint64_t bytes = 0;
  for (int64_t r = 0; r < runs; ++r) {
    const fs::path run = dir / "logs" / ("exp_" + std::to_string(r)) / "tensorboard";
    fs::create_directories(run);
    std::string out;
    const double start = 1.7e9 + static_cast<double>(r);
    tblog::append_record(out, tblog::encode_file_version(start));
    for (int64_t s = 1; s <= steps; ++s)
      for (int k = 0; k < kTagCount; ++k)
        tblog::append_record(out,
                             tblog::encode_simple_value(
                                 start + static_cast<double>(s), s, kTags[k],
                                 static_cast<float>(0.001 * static_cast<double>(s * (k + 1)))));
    std::ofstream f(
        run / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(start)) + ".bench.1.0"),
        std::ios::binary);
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    bytes += out.size();
  }
  const double write_s = seconds_since(t0);
  std::printf("  event files written: %.1f MB in %.2f s\n", static_cast<double>(bytes) / 1e6,
              write_s);

  // The import, into a fresh database (what `fp8rl runs import` does, names mapped).
  const std::string db = (dir / "import.sqlite").string();
  for (const char* ext : {"", "-wal", "-shm"}) fs::remove(db + ext);
  tblog::MetricNames names;
  names.add(
      "train/loss loss\ntrain/reward reward/mean\ntrain/token_mult_prob_error "
      "token_mult_prob_error\ntrain/gen_kl_error gen_kl_error\ntrain/grad_norm grad_norm\n"
      "train/lr lr\ntiming/train/total_step_time time/total_step\ntiming/train/generation "
      "time/generation\ntiming/train/policy_training time/policy_training\n",
      "bench");
  t0 = Clock::now();
  const double cpu0 = process_cpu_seconds(), writer0 = thread_cpu_seconds();
  int64_t stored = 0;
  {
    RunStore store(db);
    tblog::Importer importer(store, (dir / "logs").string(), names, {});
    const tblog::ImportReport rep = importer.pass();
    for (const auto& r : rep.runs) stored += r.scalars;
    check(rep.warnings.empty(),
          "bench import: warnings: " + (rep.warnings.empty() ? "" : rep.warnings.front()));
  }
  const double import_s = seconds_since(t0);
  const double import_cpu = process_cpu_seconds() - cpu0;
  // This thread writes (SQLite); the next folder is parsed on another meanwhile: on a machine
  // with a core for each and nothing else running, the import takes about this long.
  const double writer_cpu = thread_cpu_seconds() - writer0;
  const double db_mb = static_cast<double>(fs::file_size(db)) / 1e6;
  std::printf(
      "  import: %lld scalars in %.2f s (%.2f M scalars/s; target: %lld in < 10 s), database "
      "%.0f MB\n"
      "  CPU: %.2f s in all, %.2f s of it on the writing thread (the critical path), %.2f s "
      "parsing beside it\n",
      static_cast<long long>(stored), import_s, static_cast<double>(stored) / import_s / 1e6,
      static_cast<long long>(runs * steps * kTagCount), db_mb, import_cpu, writer_cpu,
      import_cpu - writer_cpu);

  // The run list: these imported runs against as many recorded ones (rows as fp8rl train
  // writes them), each read whole as `fp8rl runs list` and the studio's first read do.
  const std::string plain = (dir / "recorded.sqlite").string();
  for (const char* ext : {"", "-wal", "-shm"}) fs::remove(plain + ext);
  {
    RunStore store(plain);
    Json config = Json::Object{};
    config["task"] = Json(Json::Object{{"name", Json("reverse")}});
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t id = store.create_run("run-" + std::to_string(r), "demo", config, "fp8");
      store.set_status(id, run_status::kFinished);
    }
  }
  const double list_imported = list_seconds(db), list_recorded = list_seconds(plain);
  std::printf("  run list (%lld runs, median of 7): imported %.2f ms, recorded %.2f ms\n",
              static_cast<long long>(runs), list_imported * 1e3, list_recorded * 1e3);
  if (dir_option.empty()) fs::remove_all(dir);

  Json::Object j;
  j["runs"] = static_cast<double>(runs);
  j["scalars"] = static_cast<double>(stored);
  j["event_mb"] = static_cast<double>(bytes) / 1e6;
  j["import_seconds"] = import_s;
  j["import_cpu_seconds"] = import_cpu;
  j["writer_cpu_seconds"] = writer_cpu;
  j["database_mb"] = db_mb;
  j["list_imported_ms"] = list_imported * 1e3;
  j["list_recorded_ms"] = list_recorded * 1e3;
  return Json(std::move(j));
}

}  // namespace fp8rl::cli::bench
