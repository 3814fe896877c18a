// Reading whole files, with errors that name the file.
#pragma once

#include <string>

#include "core/json.hpp"

namespace fp8rl {

// The file's bytes; throws Error("cannot open PATH") when it cannot be opened.
std::string read_text_file(const std::string& path);
// The file parsed as JSON; a parse error is prefixed with "PATH: ".
Json read_json_file(const std::string& path);

}  // namespace fp8rl
