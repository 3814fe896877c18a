// Which names logged by other trainers mean what one of ours means (docs/tensorboard.md): read
// from names files, one mapping a line,
//   THEIR_NAME   OUR_NAME      # a comment
// where THEIR_NAME may hold '*' (any text, '/' included). An exact name wins over a pattern;
// among exact names, and among patterns, the first line wins: files given first (the user's)
// before later ones (the shipped resources/tensorboard/metric-names.txt), and within a file,
// lines in order. A name no line matches is kept as it is.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fp8rl::tblog {

class MetricNames {
 public:
  // No mappings: every name kept.
  MetricNames() = default;
  // Reads the files in order; throws fp8rl::Error naming the file and line of a malformed one
  // (or a file that cannot be read).
  static MetricNames load(const std::vector<std::string>& files);
  // Adds the mappings of a names file's text (source names it in errors).
  void add(const std::string& text, const std::string& source);

  // Our name for a logged one, or the logged one itself.
  std::string map(const std::string& name) const;
  size_t size() const { return exact_.size() + globs_.size(); }

 private:
  std::unordered_map<std::string, std::string> exact_;
  std::vector<std::pair<std::string, std::string>> globs_;  // in order
};

// Whether text matches pattern, '*' matching any run of characters.
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace fp8rl::tblog
