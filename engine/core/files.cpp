#include "core/files.hpp"

#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace fp8rl {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  check(in.good(), "cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return Json::parse(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.message());
  }
}

}  // namespace fp8rl
