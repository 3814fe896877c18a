// A small command-line parser: `--name value`, `--name=value` and `--flag`. Unknown options
// and missing values are errors naming the option and the allowed ones.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fp8rl::cli {

// Parses the whole of text as a decimal integer; false for empty text, trailing characters or
// out of range.
bool parse_integer(const std::string& text, long long* out);
// A run id given on the command line (what, e.g. "--resume", names it in the error).
int64_t parse_run_id(const std::string& text, const std::string& what);

// Takes every `--set key=value` and `--set=key=value` out of args into *sets (the option may
// repeat, which Args does not allow) and returns the other words in order; a --set without a
// value is an error.
std::vector<std::string> take_sets(const std::vector<std::string>& args,
                                   std::vector<std::string>* sets);

class Args {
 public:
  // args: the words after the command; valued/flags: the options this command accepts
  // (without the leading dashes).
  Args(const std::vector<std::string>& args, const std::set<std::string>& valued,
       const std::set<std::string>& flags);

  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  // Whether the valued option was given (even with an empty value).
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback) const;
  int get_int(const std::string& name, int fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

}  // namespace fp8rl::cli
