#include "ui/runs/validation_message.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

namespace fp8rl::ui {
namespace {

bool wordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool has(const std::vector<std::string>& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

bool containsNoCase(std::string_view hay, std::string_view lower_needle) {
  return std::search(hay.begin(), hay.end(), lower_needle.begin(), lower_needle.end(),
                     [](char h, char n) {
                       return std::tolower(static_cast<unsigned char>(h)) == n;
                     }) != hay.end();
}

// Whether key stands at pos as a whole dotted word: not inside a longer key on either side.
bool wholeWordAt(std::string_view m, size_t pos, size_t size) {
  const size_t end = pos + size;
  const bool before_ok = pos == 0 || (!wordChar(m[pos - 1]) && m[pos - 1] != '.');
  const bool after_ok =
      end >= m.size() ||
      (!wordChar(m[end]) && !(m[end] == '.' && end + 1 < m.size() && wordChar(m[end + 1])));
  return before_ok && after_ok;
}

}  // namespace

std::string cleanEngineMessage(std::string message) {
  static const std::regex location(R"(\s*\([\w./-]+\.(cpp|hpp|cc|h|cu):\d+\)\s*$)");
  static const std::regex prefix(R"(^\s*fp8rl[\w -]*: error:\s*)");
  message = std::regex_replace(message, location, "");
  message = std::regex_replace(message, prefix, "", std::regex_constants::format_first_only);
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  message.erase(message.begin(), std::find_if_not(message.begin(), message.end(), space));
  message.erase(std::find_if_not(message.rbegin(), message.rend(), space).base(), message.end());
  return message;
}

std::string settingNamedIn(std::string_view message, const std::vector<std::string>& keys,
                           std::string_view overrides_key) {
  // 1. A quoted setting.
  static const std::regex quoted(R"('([A-Za-z0-9_.]+)')");
  const std::string text(message);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), quoted);
       it != std::sregex_iterator(); ++it) {
    if (has(keys, (*it)[1].str())) return (*it)[1].str();
  }
  // 2. The per-layer map (the precision contract's messages start so).
  if (containsNoCase(message, "precision override") || containsNoCase(message, "precision map"))
    return has(keys, overrides_key) ? std::string(overrides_key) : std::string();
  // 3. The longest key named as a whole word.
  std::string best;
  size_t best_pos = 0;
  for (const std::string& key : keys) {
    if (key.empty()) continue;
    for (size_t pos = message.find(key); pos != std::string_view::npos;
         pos = message.find(key, pos + 1)) {
      if (!wholeWordAt(message, pos, key.size())) continue;
      if (key.size() > best.size() || (key.size() == best.size() && pos < best_pos)) {
        best = key;
        best_pos = pos;
      }
      break;
    }
  }
  return best;
}

std::string sectionNamedIn(std::string_view message) {
  static const std::regex quoted(R"('([A-Za-z0-9_]+)\.[A-Za-z0-9_.]+')");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(message.begin(), message.end(), m, quoted)) return {};
  return m[1].str();
}

}  // namespace fp8rl::ui
