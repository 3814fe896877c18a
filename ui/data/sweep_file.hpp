// A sweep file written from the studio's Sweep… form (docs/sweeps.md): the base configuration
// (the launch form's, saved as JSON beside it), seeds, the precision variants chosen and one
// more axis of any setting. Plain C++: the form holds no file format.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fp8rl::ui {

struct SweepVariant {
  std::string label;                                        // "fp8+kv"
  std::string title;                                        // "FP8 + FP8 KV cache"
  std::vector<std::pair<std::string, std::string>> settings;  // key → value
};

// BF16, FP8 (BF16 KV cache), FP8 + FP8 KV cache.
const std::vector<SweepVariant>& precisionVariants();

struct SweepDraft {
  std::string name;
  std::string config;  // the base configuration file (path as the sweep file names it)
  std::vector<std::string> seeds;
  std::vector<SweepVariant> variants;  // none: the base's precision
  std::string extra_key;               // "" for none
  std::vector<std::string> extra_values;
  int concurrency = 0;  // 0: the runner's default

  // The number of runs and the shape, "15 runs: seed (5) × precision (3)".
  size_t runs() const;
  std::string shape() const;
  // The YAML text of the sweep file.
  std::string yaml() const;
};

// "1-5", "1, 2, 3", "1-3 7": the seeds, or empty with *error saying what is wrong.
std::vector<std::string> parseSeedList(const std::string& text, std::string* error);
// "0.001, 5e-4" or "a b": the values of an axis (comma- or space-separated).
std::vector<std::string> parseValueList(const std::string& text);
// A name usable as a file name: letters, digits, '-', '_', '.' kept, the rest '-'.
std::string fileStemOf(const std::string& name);

}  // namespace fp8rl::ui
