// A small command-line parser: `--name value`, `--name=value` and `--flag`. Unknown options
// and missing values are usage errors naming the option and the allowed ones.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <source_location>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace fp8rl::cli {

// A command line the command cannot run as given: something it needs is missing, or a word is
// none of its options or arguments. main() prints "fp8rl COMMAND: MESSAGE" and one line
// pointing to `fp8rl COMMAND --help`, and exits with 2. (A value the command cannot use, such
// as a malformed number or an unknown preset, is an Error: exit 1.)
class UsageError : public Error {
 public:
  using Error::Error;
};

// Throws UsageError(message) when cond is false. The message names what is wrong or missing,
// e.g. need(a.has("run"), "needs --run ID (a run id, as `fp8rl runs list` shows)").
void need(bool cond, const std::string& message,
          std::source_location where = std::source_location::current());

// Prints a command's help text (asked for with --help) on stdout; returns 0, the exit code.
int print_help(const char* text);

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
  // A usage error unless the command line has at most max positional arguments (the first
  // extra one named).
  void max_positional(size_t max) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

}  // namespace fp8rl::cli
