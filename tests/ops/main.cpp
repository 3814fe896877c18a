// fp8rl-op-tests: runs every op case on the chosen backends against the CPU reference.
//   fp8rl-op-tests [--backend cpu|cuda|all] [--filter TEXT] [--seed N] [--list] [--verbose]
// Exit: 0 all passed; 1 a case failed; 77 nothing ran because the backend is not available
// (CTest's SKIP_RETURN_CODE). Unsupported cases print SKIP and never count as passed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/backend_registry.hpp"
#include "core/error.hpp"
#include "op_case.hpp"

using namespace fp8rl;
using namespace fp8rl::optest;

int main(int argc, char** argv) {
  std::string which = "all", filter;
  uint64_t seed =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  bool list = false, verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend")
      which = value();
    else if (a == "--filter")
      filter = value();
    else if (a == "--seed")
      seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--list")
      list = true;
    else if (a == "--verbose")
      verbose = true;
    else {
      std::fprintf(stderr,
                   "unknown option %s (allowed: --backend cpu|cuda|all, --filter, --seed, --list, "
                   "--verbose)\n",
                   a.c_str());
      return 2;
    }
  }
  Registry reg;
  add_quantize_cases(reg);
  add_gemm_cases(reg);
  add_model_cases(reg);
  add_kv_cases(reg);
  add_sampling_cases(reg);
  add_generation_cases(reg);
  add_moe_cases(reg);
  add_mla_cases(reg);
  add_fused_cases(reg);
  if (list) {
    for (const auto& c : reg) std::printf("%s\n", c.name.c_str());
    return 0;
  }

  auto ref = make_cpu_backend();
  std::vector<std::unique_ptr<Backend>> owned;
  std::vector<Backend*> targets;
  if (which == "cpu" || which == "all") targets.push_back(ref.get());
  if (which == "cuda" || which == "all") {
    const auto& st = cuda_module_status();
    if (st.usable) {
      owned.push_back(make_backend(BackendChoice::cuda).backend);
      targets.push_back(owned.back().get());
    } else {
      std::printf("SKIP all cuda cases: %s\n", st.why_not().c_str());
      if (which == "cuda") {
        std::printf("0 passed, 0 failed, %zu skipped\n", reg.size());
        return 77;
      }
    }
  }
  if (which != "cpu" && which != "cuda" && which != "all") {
    std::fprintf(stderr, "unknown backend '%s' (allowed: cpu, cuda, all)\n", which.c_str());
    return 2;
  }

  std::printf("seed %llu (rerun with --seed to reproduce)\n",
              static_cast<unsigned long long>(seed));
  int passed = 0, failed = 0, skipped = 0;
  for (Backend* be : targets) {
    std::printf(
        "== backend %s (%s) against %s\n", be->name().c_str(), be->device().c_str(),
        be == ref.get() ? "independent FP64 / brute-force references" : "the CPU reference");
    int case_index = 0;
    for (const auto& c : reg) {
      ++case_index;
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      Rng rng(seed * 1000003u + static_cast<uint64_t>(case_index));
      Result r;
      try {
        r = c.run(*ref, *be, rng);
      } catch (const std::exception& e) {
        r = fail(std::string("threw: ") + e.what());
      }
      const char* tag = r.outcome == Outcome::pass   ? "PASS"
                        : r.outcome == Outcome::fail ? "FAIL"
                                                     : "SKIP";
      (r.outcome == Outcome::pass ? passed : r.outcome == Outcome::fail ? failed : skipped)++;
      if (r.outcome != Outcome::pass || verbose)
        std::printf("%s %-6s %s%s%s\n", tag, be->name().c_str(), c.name.c_str(),
                    r.detail.empty() ? "" : ": ", r.detail.c_str());
    }
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
