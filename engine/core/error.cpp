#include "core/error.hpp"

#include <cstring>

namespace fp8rl {
namespace {

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

std::string format(const std::string& what, const std::string& status,
                   const std::source_location& where) {
  std::string s = what;
  if (!status.empty()) s += " [" + status + "]";
  s += " (" + std::string(base_name(where.file_name())) + ":" + std::to_string(where.line()) + ")";
  return s;
}

}  // namespace

Error::Error(std::string what, std::string status, std::source_location where)
    : std::runtime_error(format(what, status, where)),
      message_(std::move(what)),
      status_(std::move(status)),
      file_(where.file_name()),
      line_(where.line()) {}

std::string error_text(const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  if (!error) return e.what();
  return error->status().empty() ? error->message()
                                 : error->message() + " [" + error->status() + "]";
}

}  // namespace fp8rl
