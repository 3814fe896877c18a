#include "tblog/metric_names.hpp"

#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"

namespace fp8rl::tblog {

bool glob_match(const std::string& pattern, const std::string& text) {
  // Greedy with backtracking to the last '*': linear for the patterns names files hold.
  size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p, ++t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

MetricNames MetricNames::load(const std::vector<std::string>& files) {
  MetricNames m;
  for (const auto& f : files) m.add(read_text_file(f), f);
  return m;
}

void MetricNames::add(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string theirs, ours, extra;
    if (!(words >> theirs)) continue;
    const std::string where = source + ":" + std::to_string(n);
    check(static_cast<bool>(words >> ours),
          where + ": '" + theirs + "' has no name of ours after it (THEIR_NAME OUR_NAME)");
    check(!(words >> extra), where + ": more than two names ('" + extra + "')");
    check(ours.find('*') == std::string::npos, where + ": our name '" + ours + "' holds a '*'");
    if (theirs.find('*') != std::string::npos)
      globs_.emplace_back(theirs, ours);
    else
      exact_.emplace(theirs, ours);  // an earlier line keeps its mapping
  }
}

std::string MetricNames::map(const std::string& name) const {
  if (auto it = exact_.find(name); it != exact_.end()) return it->second;
  for (const auto& [pattern, ours] : globs_)
    if (glob_match(pattern, name)) return ours;
  return name;
}

}  // namespace fp8rl::tblog
