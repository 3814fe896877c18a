#!/usr/bin/env bash
# ./test.sh            install what is missing, build, run the whole CTest suite
# ./test.sh --quick    skip tests labelled slow
# ./test.sh ARGS...    extra arguments go to ctest (e.g. -L cpu, -R ops)
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
fp8rl_install_packages
fp8rl_build
fp8rl_fetch_test_data

args=()
for a in "$@"; do
  if [ "$a" = "--quick" ]; then args+=(-LE slow); else args+=("$a"); fi
done
export QT_QPA_PLATFORM=offscreen
ctest --test-dir build --output-on-failure -j "$(nproc)" "${args[@]}"
