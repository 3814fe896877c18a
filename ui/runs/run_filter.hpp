// The runs panel's filter, as plain C++ (no Qt): its grammar, parsing and matching.
//
// A filter is whitespace-separated terms, all of which must match; double quotes group words
// ("my run", name="my run"). A term is
//   text               found, in any case, in the run's name, preset, precision, tags, notes or
//                      status;
//   key=value, key:value
//                      a setting of the run's configuration: the key matches a dotted key equal
//                      to it or ending in ".key" (default=bf16 finds precision.default); values
//                      compare as numbers when both are numbers, else as text in any case; a list
//                      matches when one of its items does; an empty value matches an empty one;
//   key<n, key<=n, key>n, key>=n
//                      a numeric comparison with such a setting (lr<1e-3, grpo.steps>=100).
// Where the configuration has no such key, status, preset, id and step compare with the run's
// own columns, and tags (or tag) and notes look for the value in them.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fp8rl::ui {

// What the filter looks at in one run.
struct RunFilterSubject {
  int64_t id = 0;
  std::string_view name, status, preset, precision, tags, notes;
  std::optional<int64_t> step;  // the last step recorded, if any
  std::string_view config;      // the configuration as flatten_config() writes it
};

// Why a filter text is not one (the message names the term and what is wrong with it).
class RunFilterError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class RunFilter {
 public:
  enum class Op { kText, kEqual, kLess, kLessEqual, kGreater, kGreaterEqual };
  struct Term {
    Op op = Op::kText;
    std::string key;               // lower case; empty for a text term
    std::string value;             // the text, or what follows the operator
    std::optional<double> number;  // value as a number, when it is one
  };

  // The filter that lets every run through.
  RunFilter() = default;
  // Parses filter text; throws RunFilterError saying which term is wrong and why.
  static RunFilter parse(std::string_view text);

  // Only runs with this status pass ("" for any).
  void setStatus(std::string status) { status_ = std::move(status); }
  const std::string& status() const { return status_; }
  const std::vector<Term>& terms() const { return terms_; }

  // Whether the run passes every term and the status.
  bool matches(const RunFilterSubject& run) const;

  // The keys a term may name besides the configuration's ("status", "preset", …).
  static const std::vector<std::string>& runKeys();

 private:
  std::vector<Term> terms_;
  std::string status_;
};

}  // namespace fp8rl::ui
