// A run configuration as text, in plain C++ (no Qt): how its values read in a form field and in
// the runs filter's "key=value" lines, how a field's text turns back into JSON, and dotted keys
// ("grpo.steps") into the document.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.hpp"

namespace fp8rl::ui {

// A number as text: integral values without a decimal point ("400"), others in their shortest
// exact form, in plain decimals where they read well ("0.0005", not "5e-04").
std::string numberText(double d);
// A finite number in the C locale (spaces around allowed); nullopt for anything else.
std::optional<double> parseNumber(std::string_view text);

// A value as a form field shows it: numbers as numberText, strings as they are, true / false,
// null as "", a list as its items joined by list_separator, an object as JSON.
std::string valueText(const Json& value, std::string_view list_separator = ", ");

// The configuration as "dotted.key=value" lines, each ending in '\n' (lists as comma-separated
// items, null as "null"): what the runs filter's key=value terms search.
std::string flattenConfig(const Json& config);

// The parts of text between separators ("a,,b" → "a", "", "b"; "" → one empty part).
std::vector<std::string_view> split(std::string_view text, char separator);

// A launch-form field's hint from the settings schema (contract/settings.hpp): the key, what it
// means, the values allowed, the default, and whether and when it changes live; the model
// section's fields are the family's config.json.
std::string settingHint(std::string_view key);

// The value at a dotted key, nullptr when there is none.
const Json* findSetting(const Json& config, std::string_view key);
// Sets the value at a dotted key, making the objects on the way.
void setSetting(Json& config, std::string_view key, Json value);

// How a form field's text becomes the setting's JSON value again.
enum class FieldKind {
  kText,     // a string, as typed
  kNumber,   // a number; text that is none stays text, so the engine's validation names it
  kBool,     // "true" or anything else (false)
  kList,     // comma-separated items, numbers where the original list held numbers
  kNullable  // null when empty, else a number or text
};
// The kind of field that edits value (an object has none: its settings get fields).
FieldKind fieldKind(const Json& value);
// The JSON value of a field's text; original is the setting's value before the edit (a list's
// items are numbers when the original's were, or when it was empty or absent and they read as
// numbers).
Json fieldValue(FieldKind kind, std::string_view text, const Json* original);

}  // namespace fp8rl::ui
