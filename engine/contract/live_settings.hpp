// The settings a running run accepts between steps (a live edit: contract/live_edit.hpp): the
// rows of the settings schema (contract/settings.hpp) that have a live key, each saying that key,
// where it lives in the run configuration, what values are valid and when it takes effect. A
// live edit writes the value into the run's configuration through config_path and the run reads
// it from there, so a new live setting is a schema row with a live key (plus, when a part of the
// run keeps its own copy of the value, one line where the run loop hands live values to such
// parts: GrpoRun::apply). The precision map is edited live too, through the override grammar
// in precision.hpp.
//
// A live value is typed as its row is: a number (integer rows hold whole numbers), true or false
// (boolean rows), or one of the row's choices (choice rows); every value is checked by its row.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "contract/settings.hpp"
#include "core/json.hpp"

namespace fp8rl {

// A live setting's value: a number, true/false, or a choice's name.
using LiveValue = std::variant<double, bool, std::string>;

struct LiveSetting {
  const char* key;          // "lr", "temperature", "is_min", "autopilot", "autopilot_metric", …
  const char* config_path;  // the configuration key it overrides ("grpo.is_max", …)
  const char* meaning;      // one line for help texts and errors, with the valid range
  bool integer;             // validation_every: a whole number of steps
  double lo, hi;            // numbers: lo < v ≤ hi when lo_open, else lo ≤ v ≤ hi
  bool lo_open;
  const char* applies;      // when the run uses a new value ("from the next rollout", …)
  const SettingSpec* spec;  // its row of the settings schema
  SettingKind kind;         // integer, number, boolean or choice (spec->choices)
};

// Every live setting, in display order.
const std::vector<LiveSetting>& live_settings();
// The setting called key, or nullptr.
const LiveSetting* find_live_setting(const std::string& key);
// "lr, temperature, is_min, is_max, validation_every, …".
std::string live_setting_keys();
// Why value is not valid for key (unknown key; a number that is not finite, out of range or not
// whole; not true/false for a boolean; not one of a choice's names), or nullopt. The same rules
// hold for the run configuration (RunConfig checks them through the schema) and for live edits.
std::optional<std::string> live_setting_error(const std::string& key, const LiveValue& value);
// Why [is_min, is_max] is not a valid pair of importance-weight bounds (is_min < is_max, each in
// its own range), or nullopt.
std::optional<std::string> importance_bounds_error(double is_min, double is_max);
// The setting's value in a run configuration document (RunConfig::doc), or nullopt when the
// document lacks it (or holds a value of another type).
std::optional<LiveValue> live_setting_in_config(const Json& config, const std::string& key);
// A value as a user typed it: "0.0003", "1e+300", "2" (not 17 digits of it), "true",
// "gen_kl_error".
std::string live_value_text(const LiveValue& value);
// The JSON form of a value (a number, true/false or a string) and back; live_value_from_json
// throws naming `what` for any other JSON type.
Json live_value_json(const LiveValue& value);
LiveValue live_value_from_json(const Json& j, const std::string& what);
// Writes the setting's value into a run configuration document (through config_path).
void set_live_setting_in_config(Json& config, const std::string& key, const LiveValue& value);
// {"key": key, "value": value}: the data of a "set" event.
Json live_setting_event_data(const std::string& key, const LiveValue& value);

}  // namespace fp8rl
