// What the engine's validation message of a run configuration is about, in plain C++ (no Qt):
// the launch form shows the message under the field it names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fp8rl::ui {

// The message without what means nothing to a user: the command's "fp8rl …: error:" prefix
// and the source location suffix ("… (run_config.cpp:180)").
std::string cleanEngineMessage(std::string message);

// The setting, among keys (dotted), that message is about; "" when none. In order: a key in
// quotes ("setting 'grpo.steps' must be ≥ 0"); overrides_key for the per-layer precision map's
// messages ("precision override: …", "precision map: …") when it is among keys; else the
// longest key named as a whole word ("optimizer.lr must be positive"), the first named on a tie.
std::string settingNamedIn(std::string_view message, const std::vector<std::string>& keys,
                           std::string_view overrides_key);

// The section of the first quoted dotted key ("unknown setting 'grpo.foo'" → "grpo"), "" when
// none.
std::string sectionNamedIn(std::string_view message);

}  // namespace fp8rl::ui
