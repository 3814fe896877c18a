// fp8rl bench tokenize: encode and decode throughput of a Hugging Face tokenizer on one core.
#include <cstdio>

#include "bench.hpp"
#include "core/rng.hpp"
#include "text/bpe_tokenizer.hpp"

namespace fp8rl::cli::bench {
namespace {

// A mixed corpus of about `bytes`: word problems with varying names and numbers (as a math
// dataset has), code, LaTeX, Chinese and emoji; deterministic.
std::string corpus(size_t bytes) {
  const char* names[] = {"Natalia", "Weng", "Betty", "Julie", "James", "Ahmed", "Mei", "Olga"};
  const char* things[] = {"clips", "apples", "pages", "dollars", "marbles", "books", "cookies"};
  Rng rng(1);
  std::string s;
  for (int i = 0; s.size() < bytes; ++i) {
    const auto n = [&](uint64_t m) { return std::to_string(rng.next() % m); };
    s += std::string(names[rng.next() % 8]) + " sold " + n(100) + " " + things[rng.next() % 7] +
         " in April, and then she sold half as many in May. How many did she sell altogether "
         "in April and May? She earns $" +
         n(30) + "." + n(100) + " an hour.\n";
    if (i % 3 == 0) s += "def f(x):\n    return x ** " + n(9) + " + " + n(1000) + "  # note\n";
    if (i % 4 == 0)
      s += "Let $x = \\frac{" + n(50) + "}{" + n(50) + "}$, so \\boxed{" + n(1000) + "}.\n";
    if (i % 7 == 0) s += "机器学习是人工智能的一个分支。答案是 " + n(100) + "。😀\n";
  }
  return s;
}

}  // namespace

Json bench_tokenize(const std::string& dir, double megabytes) {
  const BpeTokenizer tok = BpeTokenizer::load(dir);
  const std::string text = corpus(static_cast<size_t>(megabytes * (1 << 20)));
  const double mb = static_cast<double>(text.size()) / (1 << 20);
  // First pass fills the word cache, as the first steps of a run do; the second is timed too.
  auto t0 = Clock::now();
  std::vector<int32_t> ids = tok.encode(text);
  const double cold = seconds_since(t0);
  t0 = Clock::now();
  ids = tok.encode(text);
  const double warm = seconds_since(t0);
  t0 = Clock::now();
  const std::string back = tok.decode(ids);
  const double dec = seconds_since(t0);
  std::printf("tokenizer %s: %.1f MB of mixed text, %zu tokens (%.2f bytes per token), one core\n",
              dir.c_str(), mb, ids.size(), static_cast<double>(text.size()) / ids.size());
  std::printf("  %-34s %8.1f MB/s %10.0f tokens/s  (target >= 1 MB/s: %s)\n", "encode, first pass",
              mb / cold, static_cast<double>(ids.size()) / cold, mb / cold >= 1 ? "PASS" : "FAIL");
  std::printf("  %-34s %8.1f MB/s %10.0f tokens/s\n", "encode, cache warm", mb / warm,
              static_cast<double>(ids.size()) / warm);
  std::printf("  %-34s %8.1f MB/s\n", "decode", mb / dec);
  std::printf("  round trip: %s\n", back == text ? "identical" : "DIFFERS");
  Json j;
  j["tokenizer"] = dir;
  j["megabytes"] = mb;
  j["tokens"] = static_cast<int64_t>(ids.size());
  j["encode_mb_per_s"] = number(mb / cold);
  j["encode_warm_mb_per_s"] = number(mb / warm);
  j["decode_mb_per_s"] = number(mb / dec);
  j["round_trip"] = back == text;
  return j;
}

}  // namespace fp8rl::cli::bench
