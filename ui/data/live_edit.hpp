// One live edit of a running run, as the studio sends it: precision overrides
// ("LAYER.MODULE=PRECISION", contract/precision.hpp) and live settings
// (contract/live_settings.hpp), applied together at the run's next step boundary. Plain data.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fp8rl::ui {

struct LiveEdit {
  std::vector<std::string> overrides;
  std::vector<std::pair<std::string, double>> settings;  // key, value

  bool empty() const { return overrides.empty() && settings.empty(); }
  // "0.gate=bf16, lr = 0.0002" (for status messages).
  std::string describe() const;
};

}  // namespace fp8rl::ui
