#!/usr/bin/env bash
# The GPU round from the source tree, on a machine with an NVIDIA Hopper GPU, the CUDA toolkit,
# CMake and PyTorch (Qt, ZeroMQ and SQLite are not needed): builds, runs the tests, then the
# round itself, tools/gpu/round.sh (the script the GPU bundle runs as gpu-bundle/run.sh), with
# its extra parts. A GPU machine that cannot build the project runs the bundle instead
# (tools/gpu/bundle.sh, docs/benchmarks.md).
#
#   tools/gpu/run.sh [OUT_DIR]                 configure + build with CUDA (build-gpu/), run the
#                                              cpu and gpu tests (not slow), then the round
#   tools/gpu/run.sh --cpu-smoke [OUT_DIR]     the same on the CPU backend with tiny sizes (no
#                                              CUDA build; build-cpu-smoke/): tests the scripts
#                                              on a machine without a GPU
#
# Options: --build-dir DIR (default build-gpu, or build-cpu-smoke with --cpu-smoke),
#          --no-build (use DIR as it is: no configure, no build), --no-tests (skip ctest),
#          --budget SECONDS (the round's time budget, default 2400: all parts and the extras).
# Environment: OUT (the output folder when none is given; default gpu-results/<date>),
#              PYTHON (a python3 with torch for the baseline), CUDACXX / CMAKE_CUDA_ARCHITECTURES
#              as for CMake.
#
# OUT_DIR receives the round's files (tools/gpu/round.sh --help: summary.md with the targets met
# or missed, status.tsv, parts.tsv, round.log, results.tar.gz) and OUT_DIR/work, the round's work
# folder unpacked: logs/<command>.log (configure, build and ctest included) and json/<command>.json.
# The exit code is 1 when the build, a test or a command of the round failed (missed targets are
# reported in the summary, they do not fail the script).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)

smoke=0 build=1 tests=1 build_dir="" budget=2400 out="${OUT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-smoke) smoke=1 ;;
    --no-build) build=0 ;;
    --no-tests) tests=0 ;;
    --build-dir | --budget)
      [ $# -ge 2 ] || { echo "run.sh: $1 needs a value" >&2; exit 2; }
      if [ "$1" = --budget ]; then budget=$2; else build_dir=$2; fi
      shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
[ -n "$build_dir" ] || build_dir=$([ $smoke -eq 1 ] && echo build-cpu-smoke || echo build-gpu)
[ -n "$out" ] || out="gpu-results/$(date +%Y-%m-%d-%H%M%S)"
mkdir -p "$out/work/logs" || exit 1
out=$(cd "$out" && pwd)
work="$out/work"
build_dir=$(mkdir -p "$build_dir" && cd "$build_dir" && pwd)
status="$work/status.tsv"
printf 'command\tpart\texit_code\tseconds\tcap\tlog\n' >"$status"
failed=0

# run_logged NAME COMMAND...: runs a build step with its output in logs/NAME.log, recorded in
# status.tsv as part "build" (the round appends its own commands).
run_logged() {
  local name=$1 t0 rc
  shift
  echo "== $name: $*"
  t0=$(date +%s)
  "$@" >"$work/logs/$name.log" 2>&1
  rc=$?
  printf '%s\tbuild\t%s\t%s\t0\tlogs/%s.log\n' "$name" "$rc" "$(($(date +%s) - t0))" "$name" >>"$status"
  if [ $rc -ne 0 ]; then
    echo "   FAILED (exit $rc): see $work/logs/$name.log"
    tail -n 5 "$work/logs/$name.log" | sed 's/^/   | /'
    failed=1
  fi
  return $rc
}

if [ $smoke -eq 1 ]; then
  cmake_args=(-DFP8RL_CUDA=OFF -DFP8RL_GUI=OFF -DFP8RL_TESTS=ON)
  targets=(--target fp8rl fp8rl-op-tests)
else
  cmake_args=(-DFP8RL_CUDA=ON -DFP8RL_GUI=OFF -DFP8RL_TESTS=ON)
  targets=()
fi
command -v ccache >/dev/null && cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# A new build folder uses Ninja when present; an existing one keeps its generator.
[ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null && cmake_args+=(-G Ninja)
if [ $build -eq 1 ]; then
  run_logged configure cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}" &&
    run_logged build cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}" ||
    { echo "run.sh: no programs to measure"; exit 1; }
fi

# The cpu and gpu labels without the slow ones (gpu tests skip without a GPU).
if [ $tests -eq 1 ]; then
  if [ $smoke -eq 1 ]; then
    run_logged ctest ctest --test-dir "$build_dir" --output-on-failure -R '^ops_(cpu|cuda)$'
  else
    run_logged ctest ctest --test-dir "$build_dir" --output-on-failure -L 'cpu|gpu' -LE slow
  fi
fi

round=(--bin "$build_dir/bin" --work "$work" --budget "$budget" --extras)
[ $smoke -eq 1 ] && round+=(--cpu-smoke)
"$root/tools/gpu/round.sh" "${round[@]}" "$out" || failed=1
exit $failed
