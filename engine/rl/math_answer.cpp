#include "rl/math_answer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace fp8rl {
namespace {

bool starts_with(std::string_view s, size_t at, std::string_view prefix) {
  return s.substr(at, prefix.size()) == prefix;
}

// The content of the brace group opening at s[open] ('{'), or nullopt when unbalanced.
std::optional<std::string> brace_group(std::string_view s, size_t open, size_t* end = nullptr) {
  if (open >= s.size() || s[open] != '{') return std::nullopt;
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {  // \{ and \} do not count
      ++i;
      continue;
    }
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) {
      if (end) *end = i + 1;
      return std::string(s.substr(open + 1, i - open - 1));
    }
  }
  return std::nullopt;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// \text{…}, \textbf{…}, \mathrm{…}, \mbox{…} → their content.
std::string unwrap_text(std::string s) {
  for (std::string_view cmd : {"\\text", "\\textbf", "\\mathrm", "\\mbox"}) {
    for (size_t at = s.find(cmd); at != std::string::npos; at = s.find(cmd, at)) {
      size_t end = 0;
      const auto inner = brace_group(s, at + cmd.size(), &end);
      if (!inner) {
        at += cmd.size();
        continue;
      }
      s.replace(at, end - at, *inner);
    }
  }
  return s;
}

std::optional<double> plain_number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string t(s);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  // strtod also reads "inf", "nan", hex: only plain decimal numbers count.
  for (char c : t)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
          c == 'e' || c == 'E'))
      return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::string> final_answer(std::string_view text) {
  std::optional<std::string> boxed;
  for (std::string_view cmd : {"\\boxed", "\\fbox"}) {
    for (size_t at = text.find(cmd); at != std::string_view::npos; at = text.find(cmd, at + 1)) {
      size_t open = at + cmd.size();
      while (open < text.size() && text[open] == ' ') ++open;
      if (auto g = brace_group(text, open)) boxed = std::move(g);  // the last one wins
    }
    if (boxed) return boxed;
  }
  const size_t hashes = text.rfind("####");
  if (hashes == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(hashes + 4);
  rest = rest.substr(0, rest.find('\n'));
  const size_t b = rest.find_first_not_of(" \t"), e = rest.find_last_not_of(" \t\r");
  if (b == std::string_view::npos) return std::nullopt;
  return std::string(rest.substr(b, e - b + 1));
}

std::string normalize_answer(std::string_view answer) {
  std::string s = unwrap_text(std::string(answer));
  for (std::string_view drop : {"\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\ ", "$",
                                "^\\circ", "^{\\circ}", "\\circ", "\\%", "%", "\\displaystyle"})
    replace_all(s, drop, "");
  replace_all(s, "\\dfrac", "\\frac");
  replace_all(s, "\\tfrac", "\\frac");
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  while (!out.empty() && out.back() == '.') out.pop_back();
  // "x=5", "k = 3": the value.
  if (out.size() > 2 && std::isalpha(static_cast<unsigned char>(out[0])) && out[1] == '=')
    out.erase(0, 2);
  // Thousands separators: "1,234,567" → "1234567" (only a comma between digit groups of 3).
  std::string no_commas;
  auto digit = [&](size_t k) {
    return k < out.size() && std::isdigit(static_cast<unsigned char>(out[k]));
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const bool separator = out[i] == ',' && i > 0 && digit(i - 1) && digit(i + 1) && digit(i + 2) &&
                           digit(i + 3) && !digit(i + 4);
    if (!separator) no_commas += out[i];
  }
  return no_commas;
}

std::optional<double> answer_value(std::string_view answer) {
  std::string s = normalize_answer(answer);
  double sign = 1;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    if (s[0] == '-') sign = -1;
    s.erase(0, 1);
  }
  if (starts_with(s, 0, "\\frac")) {
    size_t end = 0;
    const auto num = brace_group(s, 5, &end);
    size_t end2 = 0;
    const auto den = num ? brace_group(s, end, &end2) : std::nullopt;
    if (!num || !den || end2 != s.size()) return std::nullopt;
    const auto a = answer_value(*num), b = answer_value(*den);
    if (!a || !b || *b == 0) return std::nullopt;
    return sign * *a / *b;
  }
  if (const size_t slash = s.find('/'); slash != std::string::npos) {
    const auto a = plain_number(s.substr(0, slash)), b = plain_number(s.substr(slash + 1));
    if (!a || !b || *b == 0) return std::nullopt;
    return sign * *a / *b;
  }
  if (const auto v = plain_number(s)) return sign * *v;
  return std::nullopt;
}

bool answers_match(std::string_view given, std::string_view reference) {
  const std::string g = normalize_answer(given), r = normalize_answer(reference);
  if (g.empty() || r.empty()) return false;
  if (g == r) return true;
  const auto a = answer_value(g), b = answer_value(r);
  if (!a || !b) return false;
  return std::abs(*a - *b) <= 1e-9 * std::max({1.0, std::abs(*a), std::abs(*b)});
}

}  // namespace fp8rl
