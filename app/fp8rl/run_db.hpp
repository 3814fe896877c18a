// Where the run database lives: --db, else $FP8RL_DB, else $XDG_DATA_HOME/fp8rl/runs.sqlite,
// else ~/.local/share/fp8rl/runs.sqlite.
#pragma once

#include <cstdlib>
#include <string>

namespace fp8rl::cli {

inline std::string default_db_path() {
  if (const char* e = std::getenv("FP8RL_DB"); e && *e) return e;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x)
    return std::string(x) + "/fp8rl/runs.sqlite";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/fp8rl/runs.sqlite";
}

}  // namespace fp8rl::cli
