#!/usr/bin/env bash
# packaging/test-package.sh [BUILD_DIR]
#
# Builds the packages of a finished build (cpack: DEB and TGZ), checks the Debian package's
# metadata (dependencies computed from the executables, none of them build-only or CUDA) and
# contents, unpacks it into a temporary root (dpkg -x, no installation) and runs the programs
# from there: `fp8rl --version` finds its own CUDA module, `fp8rl doctor`, a two-step
# `fp8rl train --preset demo` with the preset shipped in the package, `fp8rl runs list`, and the
# studio (offscreen) showing that run with the fp8rl installed beside it. CTest runs it
# (package). packaging/install-check.sh is the same check after a real installation.
set -uo pipefail
build=$(cd "${1:-build}" && pwd) || exit 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset FP8RL_PRESETS FP8RL_CUDA_MODULE FP8RL_DB
fail() {
  echo "test-package: FAIL: $*" >&2
  exit 1
}

(cd "$build" && cpack -G "DEB;TGZ" -B "$work/out") >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack failed"; }
deb=$(ls "$work"/out/fp8rl_*.deb 2>/dev/null | head -n 1)
tgz=$(ls "$work"/out/fp8rl-*.tar.gz 2>/dev/null | head -n 1)
[ -f "$deb" ] && [ -f "$tgz" ] || fail "cpack made no .deb or .tar.gz: $(ls "$work/out")"
echo "test-package: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB), $(basename "$tgz")"

# --- metadata: computed dependencies, none build-only, no CUDA library
depends=$(dpkg-deb -f "$deb" Depends)
echo "test-package: Depends: $depends"
names=$(tr ',|' '\n\n' <<<"$depends" | sed 's/^ *//; s/ .*//')
need=(libc6 libstdc++6 libzmq5 libsqlite3-0)
[ -x "$build/bin/fp8rl-studio" ] && need+=(libqt6widgets6 libqcustomplot2.1-qt6)
for p in "${need[@]}"; do grep -qxF "$p" <<<"$names" || fail "Depends does not name $p"; done
bad=$(grep -E -- '-dev$|^(cmake|ninja-build|g\+\+|gcc|make|pkg-config|dpkg-dev)$|cuda|cublas|nccl' \
  <<<"$names" || true)
[ -z "$bad" ] || fail "Depends names build-only or CUDA packages: $bad"
[ "$(dpkg-deb -f "$deb" Package)" = fp8rl ] || fail "package name is not fp8rl"

# --- contents
dpkg-deb -c "$deb" | awk '{print $6}' >"$work/files"
want=(./usr/bin/fp8rl ./usr/share/fp8rl/presets/demo.yaml ./usr/share/man/man1/fp8rl.1.gz
      ./usr/share/doc/fp8rl/copyright)
if [ -x "$build/bin/fp8rl-studio" ]; then
  want+=(./usr/bin/fp8rl-studio ./usr/share/applications/fp8rl-studio.desktop
         ./usr/share/icons/hicolor/scalable/apps/fp8rl-studio.svg
         ./usr/share/metainfo/org.fp8rl.Studio.metainfo.xml ./usr/share/man/man1/fp8rl-studio.1.gz)
fi
[ -f "$build/lib/libfp8rl_cuda.so" ] && want+=(./usr/lib/fp8rl/libfp8rl_cuda.so)
for f in "${want[@]}"; do grep -qxF "$f" "$work/files" || fail "the package lacks $f"; done
grep -q '/bin/fp8rl$' <<<"$(tar -tzf "$tgz")" || fail "the TGZ lacks bin/fp8rl"

# --- unpacked into a temporary root: run from there
root="$work/root"
dpkg-deb -x "$deb" "$root" || fail "dpkg -x failed"
bin="$root/usr/bin"
"$bin/fp8rl" --version >"$work/version" 2>&1 || { cat "$work/version"; fail "fp8rl --version"; }
cat "$work/version"
grep -q "^fp8rl $(dpkg-deb -f "$deb" Version) (" "$work/version" || fail "--version names another version"
grep -q "^  cpu   available" "$work/version" || fail "--version lists no CPU backend"
if [ -f "$build/lib/libfp8rl_cuda.so" ] && ! grep -q "^  cuda  not available" "$work/version"; then
  grep -qF "$root/usr/lib/fp8rl/libfp8rl_cuda.so" "$work/version" ||
    fail "fp8rl did not load the CUDA module of its package"
fi
"$bin/fp8rl" doctor >"$work/doctor" 2>&1 || { cat "$work/doctor"; fail "fp8rl doctor"; }
db="$work/runs.sqlite"
"$bin/fp8rl" train --preset demo --db "$db" --name packaged --set grpo.steps=2 --set sft.steps=2 \
  --set validation.every=2 --set task.validation_size=8 --output "$work/ckpt" >"$work/train" 2>&1 ||
  { tail -n 20 "$work/train"; fail "fp8rl train --preset demo from the package"; }
"$bin/fp8rl" runs list --db "$db" >"$work/runs" 2>&1 || { cat "$work/runs"; fail "fp8rl runs list"; }
grep -q "packaged.*finished" "$work/runs" || { cat "$work/runs"; fail "the packaged run is not recorded as finished"; }
grep -qx '\.SS train' <<<"$(zcat "$root/usr/share/man/man1/fp8rl.1.gz")" ||
  fail "fp8rl(1) has no train section"

if [ -x "$bin/fp8rl-studio" ]; then
  python3 -c 'import sys, xml.etree.ElementTree as e; e.parse(sys.argv[1])' \
    "$root/usr/share/metainfo/org.fp8rl.Studio.metainfo.xml" || fail "metainfo is not XML"
  if command -v desktop-file-validate >/dev/null; then
    desktop-file-validate "$root/usr/share/applications/fp8rl-studio.desktop" || fail "desktop entry"
  else
    echo "test-package: desktop entry not validated (desktop-file-validate is not installed)"
  fi
  # --version needs no display.
  grep -qF "$(dpkg-deb -f "$deb" Version)" <<<"$(env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM "$bin/fp8rl-studio" --version 2>/dev/null)" ||
    fail "fp8rl-studio --version"
  # The studio runs fp8rl doctor (System tab) and fp8rl --version (About) from beside itself.
  QT_QPA_PLATFORM=offscreen timeout 120 "$bin/fp8rl-studio" --db "$db" --screenshots "$work/shots" \
    >"$work/studio" 2>&1 || { tail -n 20 "$work/studio"; fail "fp8rl-studio --screenshots"; }
  for png in studio-run-overview studio-system studio-about; do
    [ -s "$work/shots/$png.png" ] || fail "the packaged studio saved no $png.png"
  done
fi
echo "test-package: the package installs its files, names its dependencies and runs from an unpacked root"
