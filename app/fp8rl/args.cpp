#include "args.hpp"

#include <cstdio>
#include <limits>
#include <utility>

namespace fp8rl::cli {
namespace {
std::string allowed(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::string s;
  for (const auto* set : {&a, &b})
    for (const auto& n : *set) s += (s.empty() ? "--" : ", --") + n;
  return s.empty() ? "none" : s;
}
}  // namespace

Args::Args(const std::vector<std::string>& args, const std::set<std::string>& valued,
           const std::set<std::string>& flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags.count(name)) {
      need(!inline_value, "option --" + name + " takes no value");
      flags_.insert(name);
    } else if (valued.count(name)) {
      if (!inline_value) {
        need(i + 1 < args.size(), "option --" + name + " needs a value");
        value = args[++i];
      }
      values_[name] = value;
    } else {
      throw UsageError("unknown option --" + name + " (allowed: " + allowed(valued, flags) + ")");
    }
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

bool parse_integer(const std::string& text, long long* out) {
  size_t used = 0;
  try {
    *out = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return !text.empty() && used == text.size();
}

bool parse_number(const std::string& text, double* out) {
  size_t used = 0;
  try {
    *out = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return !text.empty() && used == text.size();
}

int64_t parse_run_id(const std::string& text, const std::string& what) {
  long long v = 0;
  check(parse_integer(text, &v) && v > 0,
        what + " needs a run id (a positive whole number, as `fp8rl runs list` shows), got '" +
            text + "'");
  return v;
}

int Args::get_int(const std::string& name, int fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  long long v = 0;
  check(parse_integer(it->second, &v) && v >= std::numeric_limits<int>::min() &&
            v <= std::numeric_limits<int>::max(),
        "option --" + name + " needs an integer, got '" + it->second + "'");
  return static_cast<int>(v);
}

double Args::get_number(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  double v = 0;
  check(parse_number(it->second, &v),
        "option --" + name + " needs a number, got '" + it->second + "'");
  return v;
}

void Args::max_positional(size_t max) const {
  need(positional_.size() <= max,
       "unexpected argument '" + (positional_.size() > max ? positional_[max] : "") + "'");
}

void need(bool cond, const std::string& message, std::source_location where) {
  if (!cond) throw UsageError(message, {}, where);
}

int print_help(const char* text) {
  std::fputs(text, stdout);
  return 0;
}

std::vector<std::string> take_repeated(std::vector<std::string>& args, const std::string& name) {
  const std::string option = "--" + name, prefix = option + "=";
  std::vector<std::string> values, rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == option) {
      need(i + 1 < args.size(), "option " + option + " needs a value");
      values.push_back(args[++i]);
    } else if (args[i].rfind(prefix, 0) == 0) {
      values.push_back(args[i].substr(prefix.size()));
    } else {
      rest.push_back(args[i]);
    }
  }
  args = std::move(rest);
  return values;
}

}  // namespace fp8rl::cli
