// Errors: every failure is an fp8rl::Error carrying what failed and where.
// Library code throws; only main() functions turn errors into exit codes.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>

namespace fp8rl {

class Error : public std::runtime_error {
 public:
  // what: the failure in words; status: the failing library's status name ("" when none).
  Error(std::string what, std::string status = {},
        std::source_location where = std::source_location::current());

  const std::string& message() const { return message_; }
  const std::string& status() const { return status_; }
  const char* file() const { return file_; }
  unsigned line() const { return line_; }

 private:
  std::string message_;
  std::string status_;
  const char* file_;
  unsigned line_;
};

// What a user reads of an exception: an Error's message and status name without the source
// location (what() ends with it: for logs and `fp8rl --debug`), any other exception's what().
std::string error_text(const std::exception& e);

// Throws Error(message) when cond is false. Usage: check(n > 0, "n must be positive");
inline void check(bool cond, const std::string& message,
                  std::source_location where = std::source_location::current()) {
  if (!cond) throw Error(message, {}, where);
}

}  // namespace fp8rl
