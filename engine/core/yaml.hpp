// The YAML subset the run presets use, parsed into Json: nested block mappings by indentation
// (spaces), block lists of scalars or mappings ("- x", "- key: v"), flow lists of scalars
// ("[a, b]"), scalars (plain, "double" or 'single' quoted, numbers, true/false, null/~) and
// "#" comments. Anything else (anchors, multi-line strings, tabs) is an error naming the line.
#pragma once

#include <string>

#include "core/json.hpp"

namespace fp8rl {

// Parses YAML text; `source` names the file in error messages.
Json parse_yaml(const std::string& text, const std::string& source = "yaml");

// A scalar as YAML reads it: number, boolean, null or string.
Json yaml_scalar(const std::string& text);

}  // namespace fp8rl
