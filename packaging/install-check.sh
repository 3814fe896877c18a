#!/usr/bin/env bash
# packaging/install-check.sh fp8rl_VERSION_ARCH.deb
#
# What a user does with the package, checked on a fresh Debian 12 machine (as root; it changes
# the machine): `dpkg -i` (which stops at the missing dependencies) followed by
# `apt-get -f install`, then the installed programs — `fp8rl --version` and `fp8rl doctor`, a
# two-step demo run recorded in the default run database and listed by `fp8rl runs list`, the
# man pages — and `fp8rl-studio` started under Xvfb (installed for the check) with that run in
# its runs panel, saved as screenshots in $OUT (default /tmp/fp8rl-install-check).
set -euo pipefail
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 fp8rl_VERSION_ARCH.deb" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "install-check: run it as root (it installs the package)" >&2; exit 2; }
deb=$(readlink -f "$1")
out=${OUT:-/tmp/fp8rl-install-check}
export DEBIAN_FRONTEND=noninteractive
step() { echo; echo "== $*"; }

step "dpkg -i $(basename "$deb")"
apt-get update -q >/dev/null
dpkg -i "$deb" || echo "(dpkg stopped at the missing dependencies, as expected on a fresh machine)"
step "apt-get -f install"
apt-get -f install -y -q >/dev/null
dpkg-query -W -f='${Package} ${Version} ${Status}\n' fp8rl
[ "$(dpkg-query -W -f='${Status}' fp8rl)" = "install ok installed" ]

step "fp8rl --version; fp8rl doctor"
command -v fp8rl fp8rl-studio
fp8rl --version
fp8rl doctor

step "a two-step demo run in the default run database"
fp8rl train --preset demo --name installed --set grpo.steps=2 --set sft.steps=2 \
  --set validation.every=2 --set task.validation_size=8 | tail -n 3
fp8rl runs list | tee /tmp/fp8rl-runs
grep -q "installed.*finished" /tmp/fp8rl-runs

step "man pages, desktop entry, metainfo"
ls -l /usr/share/man/man1/fp8rl.1.gz /usr/share/man/man1/fp8rl-studio.1.gz \
  /usr/share/applications/fp8rl-studio.desktop /usr/share/metainfo/org.fp8rl.Studio.metainfo.xml

step "fp8rl-studio under Xvfb"
apt-get install -y -q --no-install-recommends xvfb xauth >/dev/null
rm -rf "$out"
xvfb-run -a -s "-screen 0 1600x1000x24" timeout 180 fp8rl-studio --screenshots "$out"
ls -l "$out"
# A run-overview screenshot exists only when the runs panel listed the run and showed it.
[ -s "$out/studio-run-overview.png" ] && [ -s "$out/studio-about.png" ]
echo
echo "install-check: fp8rl and fp8rl-studio installed from $(basename "$deb") and working"
