#!/usr/bin/env bash
# tools/gpu/rehearse-bundle.sh [--no-cublas] [BUNDLE_DIR] [-- RUN_SH_ARGS...]
#
# Rehearses the GPU round without a GPU, meeting the bundle as a GPU machine will: in a
# throwaway Debian 12 root holding only the base system (debootstrap --variant=minbase) and
# python3 — none of this project's dependencies — it copies BUNDLE_DIR (default gpu-bundle/,
# made by tools/gpu/bundle.sh) in and runs `gpu-bundle/run.sh --cpu-smoke` there. A library the
# bundle lacks fails here, not on the GPU machine.
#
# cuBLASLt: this machine's libcublasLt.so.13 (the one the CUDA module was linked against) is
# mounted read-only at /usr/local/cuda/lib64 in the root, as a GPU machine's CUDA toolkit
# provides it: the module then loads beside the bundle's libstdc++ and says that no driver is
# there. NCCL is not provided: the module must load without it. --no-cublas provides no cuBLASLt
# either: the module cannot load, and the round must still run on the CPU.
#
# Checks: run.sh exits 0; `fp8rl --version` and `fp8rl doctor` ran and say why CUDA is not
# usable; the op registry ran on the CPU; every command of the six parts ran and succeeded
# (status.tsv); the output folder holds its five files and round.log the plan with the caps.
#
# Needs root (chroot, mounts) and debootstrap; the network once: the pristine root is made on
# first use (about a minute) and kept in $FP8RL_BUNDLE_ROOT (default /var/tmp/fp8rl-bundle-root);
# each rehearsal works in an overlay on top of it, so nothing persists. Exit: 0 passed, 1 failed,
# 2 usage, 77 cannot rehearse here (not root, no debootstrap, no root could be made: CTest skip).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
t_start=$(date +%s)
cublas=1 bundle="" run_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-cublas) cublas=0 ;;
    --) shift; run_args=("$@"); break ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "rehearse-bundle: unknown option $1" >&2; exit 2 ;;
    *) bundle=$1 ;;
  esac
  shift
done
bundle=$(cd "${bundle:-$src/gpu-bundle}" 2>/dev/null && pwd) ||
  { echo "rehearse-bundle: no bundle folder (make one: tools/gpu/bundle.sh)" >&2; exit 2; }
[ -x "$bundle/run.sh" ] || { echo "rehearse-bundle: $bundle has no run.sh" >&2; exit 2; }
skip() {
  echo "rehearse-bundle: SKIPPED: $*"
  exit 77
}
fail() {
  echo "rehearse-bundle: FAIL: $*"
  exit 1
}
[ "$(id -u)" -eq 0 ] || skip "needs root (a chroot and mounts)"

# --- The pristine root: the base system and python3, made once.
root=${FP8RL_BUNDLE_ROOT:-/var/tmp/fp8rl-bundle-root}
exec 9>"$root.lock"
flock 9 2>/dev/null || true
if [ ! -x "$root/usr/bin/python3" ]; then
  command -v debootstrap >/dev/null || skip "debootstrap is not installed (apt-get install debootstrap)"
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  [ -n "$mirror" ] || mirror=$(awk '/^deb /{ print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$mirror" ] || skip "no Debian mirror in this machine's apt sources"
  echo "rehearse-bundle: making the pristine root in $root (once; log: $root.log)"
  rm -rf "$root.tmp"
  debootstrap --variant=minbase bookworm "$root.tmp" "$mirror" >"$root.log" 2>&1 ||
    skip "debootstrap failed (offline?): see $root.log"
  cp /etc/resolv.conf "$root.tmp/etc/resolv.conf" 2>/dev/null
  chroot "$root.tmp" bash -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3 && apt-get clean' >>"$root.log" 2>&1 ||
    skip "installing python3 in the root failed: see $root.log"
  rm -rf "$root"
  mv "$root.tmp" "$root"
fi
exec 9>&-

# --- A throwaway copy: an overlay on the pristine root (a full copy where overlays fail).
ov=$(mktemp -d /var/tmp/fp8rl-rehearsal.XXXXXX)
m="$ov/m"
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}" 2>/dev/null; done
  rm -rf "$ov"
}
trap cleanup EXIT
mkdir -p "$ov/upper" "$ov/work" "$m"
if mount -t overlay overlay -o "lowerdir=$root,upperdir=$ov/upper,workdir=$ov/work" "$m" 2>/dev/null; then
  mounts+=("$m")
else
  echo "rehearse-bundle: no overlay here: copying the root"
  cp -a "$root/." "$m/" || fail "cannot copy $root"
fi
mkdir -p "$m/work"
cp -a "$bundle" "$m/work/gpu-bundle" || fail "cannot copy the bundle into the root"
if [ $cublas -eq 1 ]; then
  lt=$(ldd "$bundle/lib/libfp8rl_cuda.so" 2>/dev/null | awk '$1 == "libcublasLt.so.13" && $3 ~ /^\// { print $3 }')
  [ -n "$lt" ] || fail "this machine has no libcublasLt.so.13 for the module (use --no-cublas)"
  lt=$(readlink -f "$lt")
  mkdir -p "$m/usr/local/cuda/lib64"
  : >"$m/usr/local/cuda/lib64/libcublasLt.so.13"
  mount --bind "$lt" "$m/usr/local/cuda/lib64/libcublasLt.so.13" || fail "cannot mount $lt"
  mounts+=("$m/usr/local/cuda/lib64/libcublasLt.so.13")
  mount -o remount,bind,ro "$m/usr/local/cuda/lib64/libcublasLt.so.13" 2>/dev/null
fi
mount -t proc proc "$m/proc" && mounts+=("$m/proc") || fail "cannot mount /proc in the root"
mount --bind /dev "$m/dev" && mounts+=("$m/dev") || fail "cannot mount /dev in the root"

echo "rehearse-bundle: $bundle in a Debian root with only the base system and python3$([ $cublas -eq 1 ] && echo ", and cuBLASLt at /usr/local/cuda/lib64")"
echo "rehearse-bundle: running gpu-bundle/run.sh --cpu-smoke ${run_args[*]}"
log="$ov/rehearsal.log"
chroot "$m" env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c 'cd /work && exec gpu-bundle/run.sh --cpu-smoke --work /work/details "$@" /work/out' \
  run.sh "${run_args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# --- What the rehearsal must show
out="$m/work/out" details="$m/work/details"
problems=()
[ "$rc" -eq 0 ] || problems+=("run.sh --cpu-smoke exited $rc")
for f in summary.md status.tsv parts.tsv round.log results.tar.gz; do
  [ -s "$out/$f" ] || problems+=("the output folder lacks $f")
done
grep -q '^  cuda  not' "$details/logs/version.log" 2>/dev/null ||
  problems+=("fp8rl --version does not say why CUDA is not usable")
grep -q '^  usable: *no: ' "$details/logs/doctor.log" 2>/dev/null ||
  problems+=("fp8rl doctor does not say why CUDA is not usable")
if [ $cublas -eq 1 ]; then
  grep -q '^  module: *not loaded' "$details/logs/doctor.log" 2>/dev/null &&
    problems+=("the CUDA module did not load with cuBLASLt present: $(grep -m1 '^  module:' "$details/logs/doctor.log")")
  grep -q '^  NCCL: *not available' "$details/logs/doctor.log" 2>/dev/null ||
    problems+=("doctor does not report NCCL as not available (it must load without NCCL)")
fi
grep -q '^== backend cpu' "$details/logs/ops.log" 2>/dev/null || problems+=("the op registry did not run on the CPU")
for c in version doctor ops bench-step-recipe-8b bench-step-recipe-0.6b bench-step-recipe-8b-long \
  bench-step-recipe-moe bench-decode \
  bench-gemm bench-gemm-qwen3-8b bench-experts bench-attention bench-quant bench-rollout-0.6b \
  bench-step-gpu; do
  code=$(awk -F'\t' -v c="$c" '$1 == c { print $3 }' "$details/status.tsv" 2>/dev/null)
  [ "$code" = 0 ] || problems+=("$c: ${code:-did not run}")
done
grep -q 'recipe .* 192 ' "$out/round.log" 2>/dev/null || [ ${#run_args[@]} -gt 0 ] ||
  problems+=("round.log does not show the plan with each part's cap")
# (The listing is read whole: a grep -q that stops early would fail tar's write under pipefail.)
tar -tzf "$out/results.tar.gz" 2>/dev/null | grep -c 'logs/ops.log' >/dev/null ||
  problems+=("results.tar.gz lacks the logs")

secs=$(($(date +%s) - t_start))
if [ ${#problems[@]} -gt 0 ]; then
  printf 'rehearse-bundle: problem: %s\n' "${problems[@]}"
  fail "${#problems[@]} problem(s) in the bare root (${secs} s)"
fi
echo "rehearse-bundle: PASS in ${secs} s: the bundle ran in a root with nothing of this project installed"
exit 0
