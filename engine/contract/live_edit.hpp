// A live edit of a running run — precision overrides and live-setting values together — and
// the live state it changes (the precision map in force and every live setting's value). The
// studio builds one LiveEdit per Apply, the protocol carries it as one "edit" request
// (ipc/protocol.hpp), the run session checks it against the state it will meet and applies it
// at one step boundary, the ranks of a data-parallel run receive it in its JSON form, and a
// checkpoint carries the LiveState so a resumed run continues with it (docs/live-edits.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "contract/live_settings.hpp"
#include "contract/precision.hpp"
#include "core/json.hpp"

namespace fp8rl {

// One live setting's new value (typed as its row: a number, true/false or a choice's name).
struct SettingValue {
  const LiveSetting* setting = nullptr;  // a row of live_settings()
  LiveValue value = 0.0;
  bool operator==(const SettingValue&) const = default;
};

struct LiveEdit {
  std::vector<PrecisionOverride> precision;  // applied in order
  std::vector<SettingValue> settings;        // at most one per setting

  bool empty() const { return precision.empty() && settings.empty(); }
  // Adds a precision override (throws naming the bad part of "LAYER.MODULE=PRECISION"; the
  // layer is checked against the model when the edit is applied).
  void add_precision(const std::string& override_text);
  // Sets a live setting (replacing an earlier value of the same key); throws for an unknown
  // key or a value the setting's row refuses (outside its range, not true/false, not a choice).
  void set(const std::string& key, const LiveValue& value);
  template <class N>
  requires(std::is_arithmetic_v<N> && !std::is_same_v<N, bool>) void set(const std::string& key,
                                                                         N number) {
    set(key, LiveValue(static_cast<double>(number)));
  }
  void set(const std::string& key, const char* choice) { set(key, LiveValue(std::string(choice))); }
  // The number this edit gives key, if any (nullopt also for a boolean or choice).
  std::optional<double> value(const std::string& key) const;
  // The value this edit gives key, whatever its type, if any.
  std::optional<LiveValue> get(const std::string& key) const;
  // `later` after this one: its overrides follow these, its settings replace these.
  void merge(const LiveEdit& later);
  // "0.gate=bf16, lr = 0.0002" (events, status lines).
  std::string describe() const;

  // {"precision": ["0.gate=bf16", …], "settings": {"lr": 0.0002, "autopilot": true, …}} (either
  // may be absent).
  Json to_json() const;
  // The inverse; every override and setting is checked. Throws naming the bad field.
  static LiveEdit from_json(const Json& j);

  bool operator==(const LiveEdit&) const = default;
};

// What live edits act on: the precision map in force and the value of every live setting
// (live_settings() order).
struct LiveState {
  PrecisionMap precision;
  std::vector<LiveValue> values;

  // A setting's value; throws for an unknown key. value() wants a number setting, flag() a
  // boolean one, choice() a choice (each throws naming the key for another kind).
  const LiveValue& get(const std::string& key) const;
  double value(const std::string& key) const;
  bool flag(const std::string& key) const;
  const std::string& choice(const std::string& key) const;
  // Applies an edit: the result is checked whole (each value in its range, is_min < is_max,
  // fp32 not mixed with other precisions, override layers within the map) before anything
  // changes. Throws naming what is wrong, leaving the state as it was.
  void apply(const LiveEdit& e);

  // {"precision": [map], "settings": {"lr": …, …}} (what checkpoints carry).
  Json to_json() const;
  // The inverse; throws naming a bad field. A setting the object lacks (a checkpoint written
  // before the setting existed) takes its schema default.
  static LiveState from_json(const Json& j);
  // The settings of a run configuration document (RunConfig::doc, through each row's
  // config_path) with the given map. Throws when the document lacks a setting.
  static LiveState from_config(const Json& config, PrecisionMap precision);
  // Writes the settings into a configuration document (through their config paths).
  void write_settings(Json& config) const;

  bool operator==(const LiveState&) const = default;
};

}  // namespace fp8rl
