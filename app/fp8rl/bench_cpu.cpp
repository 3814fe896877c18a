// What the CPU benchmarks measure besides the engine: the cores' FP32 peak (a loop of
// independent vector multiply-adds per thread, run in the same process as the measurement it
// is compared with) and the PyTorch baseline of a GRPO step (tools/cpu/torch_grpo_step.py).
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "bench.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fp8rl::cli::bench {
namespace {

// Each loop keeps 12 independent accumulators (more than the latency × ports of any current
// core needs) and returns a value that depends on all of them, so nothing is optimised away.
constexpr int kAcc = 12;

#if defined(__x86_64__)
__attribute__((target("avx512f,fma"))) float loop_avx512_fma(int64_t iters, float seed) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}
__attribute__((target("avx512f"))) float loop_avx512_muladd(int64_t iters, float seed) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_add_ps(_mm512_mul_ps(acc[i], a), b);
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}
__attribute__((target("avx2,fma"))) float loop_avx2_fma(int64_t iters, float seed) {
  __m256 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
__attribute__((target("avx2"))) float loop_avx2_muladd(int64_t iters, float seed) {
  __m256 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_add_ps(_mm256_mul_ps(acc[i], a), b);
  float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
#endif

// SSE2 (every x86-64) or the compiler's generic vectors elsewhere: multiply and add.
float loop_generic_muladd(int64_t iters, float seed) {
  using v4 = float __attribute__((vector_size(16)));
  v4 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = v4{} + (seed + static_cast<float>(i));
  const v4 a = v4{} + 0.999999f, b = v4{} + 1e-7f;
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = acc[i] * a + b;
  v4 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = s + acc[i];
  return s[0] + s[3];
}

struct Loop {
  float (*fn)(int64_t, float);
  int lanes;
  bool fma;
  const char* name;
};

// The widest loops this CPU runs: [0] with FMA where it has it, [1] multiply then add.
std::array<Loop, 2> loops() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
    return {Loop{loop_avx512_fma, 16, true, "AVX-512 FMA"},
            Loop{loop_avx512_muladd, 16, false, "AVX-512 mul+add"}};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {Loop{loop_avx2_fma, 8, true, "AVX2 FMA"},
            Loop{loop_avx2_muladd, 8, false, "AVX2 mul+add"}};
#endif
  return {Loop{loop_generic_muladd, 4, false, "SSE2 mul+add (no FMA)"},
          Loop{loop_generic_muladd, 4, false, "SSE2 mul+add"}};
}

// GFLOP/s of `loop` on `threads` threads at once (the best of a few rounds of ~0.1 s: the
// peak is what the cores can do, other load only lowers a round).
double peak_gflops(const Loop& loop, int threads, double seconds) {
  const double flops_per_iter = kAcc * loop.lanes * 2.0;
  int64_t iters = 1 << 16;
  volatile float sink = 0;
  for (;;) {  // size a round
    const auto t0 = Clock::now();
    sink = sink + loop.fn(iters, 1.0f);
    const double t = seconds_since(t0);
    if (t > 0.02) {
      iters = static_cast<int64_t>(static_cast<double>(iters) * seconds / t) + 1;
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = Clock::now();
    parallel_for(threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) sink = sink + loop.fn(iters, static_cast<float>(t));
    });
    const double t = seconds_since(t0);
    best = std::max(best, flops_per_iter * static_cast<double>(iters) * threads / t / 1e9);
  }
  return best;
}

}  // namespace

CpuPeak measure_cpu_peak() {
  const auto l = loops();
  CpuPeak p;
  p.threads = cpu_threads();
  p.fma_name = l[0].name;
  p.muladd_name = l[1].name;
  p.fma_has_fma = l[0].fma;
  p.fma_core = peak_gflops(l[0], 1, 0.1);
  p.fma_all = peak_gflops(l[0], p.threads, 0.1);
  p.muladd_core = peak_gflops(l[1], 1, 0.1);
  p.muladd_all = peak_gflops(l[1], p.threads, 0.1);
  return p;
}

std::string find_torch_python() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("FP8RL_PYTHON"); env && *env) candidates.push_back(env);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const auto& py : candidates) {
    const std::string cmd = "'" + py + "' -c 'import torch' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

std::string find_tool(const std::string& name) {
  std::vector<std::filesystem::path> dirs;
  if (const char* env = std::getenv("FP8RL_TOOLS"); env && *env) dirs.emplace_back(env);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back(exe.parent_path() / "../share/fp8rl/tools");
  for (const auto& d : dirs)
    if (std::filesystem::exists(d / name, ec)) return (d / name).lexically_normal().string();
  return "";
}

Json run_tool_json(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  check(pipe != nullptr, "could not run: " + command);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  const int status = pclose(pipe.release());
  check(status == 0, "failed (status " + std::to_string(status) + "): " + command);
  // The last line is the JSON object (progress went to stderr).
  const size_t end = out.find_last_not_of("\n");
  check(end != std::string::npos, "no output from: " + command);
  const size_t begin = out.rfind('\n', end);
  return Json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1));
}

}  // namespace fp8rl::cli::bench
