// The settings of a run: one row per setting of the run configuration (RunConfig, rl/run_config):
// its dotted key, its kind, its default, the values it takes (a range or a set of choices),
// what it means, and — for the settings a running run accepts — its live key and when a new
// value takes effect. Everything that knows a setting reads its row: the defaults document,
// `fp8rl train --list-choices` and `--list-settings`, the checks of a configuration
// (RunConfig::from_json reads each value through read_setting, which enforces the row), the
// live-edit validation (contract/live_settings, derived from the rows with a live key), the
// studio's launch-form hints and the table in docs/settings.md.
//
// Adding a setting: its row in setting_specs() (settings.cpp) and the line of RunConfig::from_json
// that binds it to the typed configuration (its use). The model section is not here: it is the
// model family's config.json (model/family.hpp), but for `model.checkpoint`.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/json.hpp"

namespace fp8rl {

// The keys that other layers name (the studio's launch form and views), each a row of the schema
// below: spelled here once.
namespace setting_key {
inline constexpr const char* kKlBeta = "grpo.kl_beta";
inline constexpr const char* kPromptsPerStep = "grpo.prompts_per_step";
inline constexpr const char* kMiniBatches = "grpo.mini_batches";
inline constexpr const char* kPrecisionDefault = "precision.default";
inline constexpr const char* kPrecisionOverrides = "precision.overrides";
}  // namespace setting_key

enum class SettingKind {
  integer,  // a whole number (in its range)
  number,   // a finite number (in its range)
  boolean,  // true or false
  text,     // any string
  choice,   // one of the row's choices
  list,     // a list of strings
};

struct SettingSpec {
  std::string key;  // "grpo.is_max"
  SettingKind kind;
  std::string default_yaml;  // the default as YAML: "2.0", "tis", "[]", "\"\""
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;  // lo < v (else lo ≤ v); v < hi (else v ≤ hi)
  std::vector<std::string> choices;       // kind choice: the values allowed
  std::string meaning;                    // one line: what it does (help, hints, docs)
  std::string live;     // the key of a live edit ("is_max"), "" when fixed for the run
  std::string applies;  // live: when a new value takes effect ("from the next rollout")

  // "positive", "≥ 0", "in (0, 1]", "one of tis, icepop, off", "true or false", … (empty for
  // free text).
  std::string allowed() const;
  // Why value is not valid for this setting (wrong type, out of range, not whole, not a
  // choice), or nullopt. Says the value and what is allowed, not the key.
  std::optional<std::string> problem(const Json& value) const;
  Json default_value() const;
};

// Every setting, in the order of the configuration document (sections as they appear).
const std::vector<SettingSpec>& setting_specs();
// The row of a dotted key, or nullptr.
const SettingSpec* find_setting(const std::string& key);
// The value at a dotted key of a configuration document as it is (nullptr when absent): for
// readers of recorded configurations, which may come from older versions or other tools.
const Json* find_setting_value(const Json& doc, const std::string& key);
// The value of key in a configuration document, checked against its row: throws
// "setting 'KEY' …" naming the value and what is allowed. key must have a row.
const Json& read_setting(const Json& doc, const std::string& key);
// The settings' defaults as one configuration document ({"grpo": {"steps": 400, …}, …}).
Json setting_defaults();
// The rows as JSON (key, kind, default, allowed, choices, range, meaning, live, applies): what
// `fp8rl train --list-settings` prints and the studio's launch form shows as hints.
Json settings_to_json();
// The rows as a Markdown table (docs/settings.md).
std::string settings_markdown();

}  // namespace fp8rl
