#!/usr/bin/env bash
# ./run.sh             install what is missing, build, start the studio (FP8 RL Studio)
# ./run.sh --headless  the same, then train the demo preset in the terminal instead
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
fp8rl_install_packages
fp8rl_build

headless=0
[ "${1:-}" = "--headless" ] && headless=1
if [ $headless -eq 0 ] && [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "fp8rl: no display found: running headless (fp8rl train --preset demo)"
  headless=1
fi
if [ $headless -eq 1 ]; then
  exec build/bin/fp8rl train --preset demo
fi
exec build/bin/fp8rl-studio
