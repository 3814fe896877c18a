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
// Parses the whole of text as a decimal number (as std::stod reads one); false for empty text,
// trailing characters or out of range.
bool parse_number(const std::string& text, double* out);
// A run id given on the command line (what, e.g. "--resume", names it in the error).
int64_t parse_run_id(const std::string& text, const std::string& what);
// Removes every `--name VALUE` and `--name=VALUE` from args and returns the values in order: for
// an option that may repeat (e.g. --set), taken out before Args sees the rest.
std::vector<std::string> take_repeated(std::vector<std::string>& args, const std::string& name);

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
  // The option's value as a number (fallback when absent); an error names the option.
  double get_number(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Prints the command's usage text: to stdout when --help was asked for (returns 0), else to
  // stderr for a call that lacks what it needs (returns 2). The command returns what it returns.
  int usage(const char* text) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

}  // namespace fp8rl::cli
