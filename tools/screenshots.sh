#!/usr/bin/env bash
# Screenshots of every studio view in a real X window (Xvfb) at the studio's default size
# (1440x900), saved into docs/screenshots/. The studio launches short demo runs itself (FP8 and
# BF16, with a live precision edit on the FP8 run, and an FP8 run with a damaged linear and the
# precision autopilot on) into a throwaway database, waits for them, then saves each run-view
# tab, the autopilot run's Precision tab (studio-autopilot.png), the compare view, the Sweep… form, the system report and the
# launch form; then a moe-demo run trained with `fp8rl train` gives the Experts tab; with
# FP8RL_SWEEP_DB also the Groups view (below). Needs a build (./run.sh or ./test.sh first);
# installs xvfb, xauth and fonts when missing (root). Takes a few minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
for p in xvfb xauth fonts-dejavu-core; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p" >/dev/null
done
out=${1:-docs/screenshots}
bin=${FP8RL_BIN:-build/bin}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Settings of this session stay in the throwaway directory.
XDG_CONFIG_HOME="$tmp/config" xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$bin/fp8rl-studio" --db "$tmp/runs.sqlite" --screenshots "$out" --scenario --size 1440x900
# The Experts tab needs a mixture-of-experts run: the moe-demo preset, trained headless.
"$bin/fp8rl" train --preset moe-demo --db "$tmp/moe.sqlite" --name moe-demo-fp8 \
  >/dev/null 2>"$tmp/moe.log" || { tail -n 20 "$tmp/moe.log"; exit 1; }
mkdir -p "$tmp/moe-shots"
XDG_CONFIG_HOME="$tmp/config-moe" xvfb-run -a -s "-screen 0 1600x1000x24" \
  "$bin/fp8rl-studio" --db "$tmp/moe.sqlite" --screenshots "$tmp/moe-shots" --size 1440x900
cp "$tmp/moe-shots/studio-run-experts.png" "$out"/
# The Groups view and the Sweeps tab need a sweep: with FP8RL_SWEEP_DB naming a database that
# holds one (the demo's: `fp8rl sweep resources/sweeps/demo-precision.yaml`), they are taken from a
# copy of it, at the studio's default window size (FP8RL_SWEEP_ID: which sweep; else the newest).
if [ -n "${FP8RL_SWEEP_DB:-}" ]; then
  cp "$FP8RL_SWEEP_DB" "$tmp/sweep.sqlite"
  for ext in -wal -shm; do [ ! -e "$FP8RL_SWEEP_DB$ext" ] || cp "$FP8RL_SWEEP_DB$ext" "$tmp/sweep.sqlite$ext"; done
  mkdir -p "$tmp/sweep-shots"
  XDG_CONFIG_HOME="$tmp/config-sweep" xvfb-run -a -s "-screen 0 1600x1000x24" \
    "$bin/fp8rl-studio" --db "$tmp/sweep.sqlite" --screenshots "$tmp/sweep-shots" --size 1440x900 \
    ${FP8RL_SWEEP_ID:+--groups "$FP8RL_SWEEP_ID"}
  cp "$tmp"/sweep-shots/studio-groups*.png "$out"/
fi
ls -1 "$out"
