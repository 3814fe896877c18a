#!/usr/bin/env bash
# Screenshots of every studio tab in a real X window (Xvfb), saved into docs/screenshots/.
# Needs a build (./run.sh or ./test.sh first); installs xvfb and xauth when missing (root).
set -euo pipefail
cd "$(dirname "$0")/.."
for p in xvfb xauth fonts-dejavu-core; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p" >/dev/null
done
out=${1:-docs/screenshots}
mkdir -p "$out"
xvfb-run -a -s "-screen 0 1400x900x24" build/bin/fp8rl-studio --screenshots "$out"
ls -1 "$out"
