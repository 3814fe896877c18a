#!/usr/bin/env bash
# The GPU measurement round in one command, on a machine with an NVIDIA Hopper GPU, the CUDA
# toolkit, CMake and PyTorch (Qt, ZeroMQ and SQLite are not needed):
#
#   tools/gpu/run.sh [OUT_DIR]                 configure + build with CUDA (build-gpu/), run the
#                                              cpu and gpu tests (not slow), the benchmarks and
#                                              the PyTorch baseline, then print a summary
#   tools/gpu/run.sh --cpu-smoke [OUT_DIR]     the same pipeline on the CPU backend with tiny
#                                              sizes (no CUDA build; build-cpu-smoke/): tests
#                                              the script on a machine without a GPU
#
# Options: --build-dir DIR (default build-gpu, or build-cpu-smoke with --cpu-smoke),
#          --no-build (use DIR as it is: no configure, no build), --no-tests (skip ctest).
# Environment: OUT (the output folder when none is given; default gpu-results/<date>),
#              PYTHON (a python3 with torch for the baseline), FP8RL_BENCH_TIMEOUT (seconds per
#              command, default 1800), CUDACXX / CMAKE_CUDA_ARCHITECTURES as for CMake.
#
# OUT_DIR receives logs/<command>.log (each command's full output), json/<command>.json (the
# measured rows of each benchmark), status.tsv (command, exit code, seconds) and summary.md
# (the table printed at the end: ratios against the targets). A command that fails is recorded
# and the others still run; the exit code is 1 when any command failed (missed benchmark
# targets are reported in the summary, they do not fail the script).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)

smoke=0 build=1 tests=1 build_dir="" out="${OUT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-smoke) smoke=1 ;;
    --no-build) build=0 ;;
    --no-tests) tests=0 ;;
    --build-dir)
      [ $# -ge 2 ] || { echo "run.sh: --build-dir needs a folder" >&2; exit 2; }
      build_dir=$2
      shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
[ -n "$build_dir" ] || build_dir=$([ $smoke -eq 1 ] && echo build-cpu-smoke || echo build-gpu)
[ -n "$out" ] || out="gpu-results/$(date +%Y-%m-%d-%H%M%S)"
mkdir -p "$out/logs" "$out/json" || exit 1
out=$(cd "$out" && pwd)
build_dir=$(mkdir -p "$build_dir" && cd "$build_dir" && pwd)
status="$out/status.tsv"
printf 'command\texit_code\tseconds\tlog\n' >"$status"
timeout_s=${FP8RL_BENCH_TIMEOUT:-1800}
any_failed=0

# step NAME COMMAND...: runs one command with its output in logs/NAME.log, records its status.
step() {
  local name=$1
  shift
  local log="$out/logs/$name.log" t0 rc
  echo "== $name: $*"
  t0=$(date +%s)
  {
    echo "\$ $*"
    if command -v timeout >/dev/null; then timeout "$timeout_s" "$@"; else "$@"; fi
  } >"$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "logs/$name.log" >>"$status"
  if [ $rc -eq 0 ]; then
    echo "   ok ($(($(date +%s) - t0)) s)"
  else
    echo "   FAILED (exit $rc, $(($(date +%s) - t0)) s): see $log"
    tail -n 5 "$log" | sed 's/^/   | /'
    any_failed=1
  fi
  return $rc
}

# skip NAME WHY: records a command that was not run.
skip() {
  printf '%s\tskipped\t0\t%s\n' "$1" "$2" >>"$status"
  echo "== $1: skipped ($2)"
}

# The machine, for the record.
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  uname -a
  command -v nvidia-smi >/dev/null && nvidia-smi
  command -v nvcc >/dev/null && nvcc --version
  cmake --version | head -1
} >"$out/logs/environment.log" 2>&1

# --- Build
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
if [ $build -eq 0 ]; then
  skip configure "--no-build"
  skip build "--no-build"
elif step configure cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}"
then
  step build cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
else
  skip build "configure failed"
fi
bin="$build_dir/bin"
fp8rl="$bin/fp8rl"

# --- Tests: the cpu and gpu labels without the slow ones (gpu tests skip without a GPU).
if [ $tests -eq 1 ]; then
  if [ $smoke -eq 1 ]; then
    step ctest ctest --test-dir "$build_dir" --output-on-failure -R '^ops_(cpu|cuda)$'
  else
    step ctest ctest --test-dir "$build_dir" --output-on-failure -L 'cpu|gpu' -LE slow
  fi
else
  skip ctest "--no-tests"
fi

# --- Benchmarks
py_torch=""
for py in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c "import torch" >/dev/null 2>&1; then
    py_torch=$py
    break
  fi
done
j="$out/json"
step doctor "$fp8rl" doctor
if [ $smoke -eq 1 ]; then
  # Tiny sizes: the pipeline, not the numbers.
  tiny_step=(--set model.num_hidden_layers=1 --set model.hidden_size=128
    --set model.num_attention_heads=2 --set model.num_key_value_heads=1 --set model.head_dim=64
    --set model.intermediate_size=256 --set grpo.prompts_per_step=2 --set grpo.group_size=4
    --set task.validation_size=8)
  step bench-gemm "$fp8rl" bench gemm --backend cpu --shapes "256,256,256;128,384,256" \
    --seconds 0 --json "$j/bench-gemm.json"
  step bench-quant "$fp8rl" bench quant --backend cpu --seconds 0 --json "$j/bench-quant.json"
  step bench-rollout-0.6b "$fp8rl" bench rollout --backend cpu --model small --batch 4 \
    --prompt-len 8 --new-tokens 8 --json "$j/bench-rollout-0.6b.json"
  step bench-rollout-1.7b "$fp8rl" bench rollout --backend cpu --model small --batch 2,4 \
    --prompt-len 8 --new-tokens 8 --json "$j/bench-rollout-1.7b.json"
  if [ -n "$py_torch" ]; then
    step torch-decode-0.6b "$py_torch" tools/gpu/torch_decode.py --device cpu --model small \
      --batch 4 --prompt-len 8 --new-tokens 8 --json "$j/torch-decode-0.6b.json"
    step torch-decode-1.7b "$py_torch" tools/gpu/torch_decode.py --device cpu --model small \
      --batch 2,4 --prompt-len 8 --new-tokens 8 --json "$j/torch-decode-1.7b.json"
  else
    skip torch-decode-0.6b "no python3 with torch"
    skip torch-decode-1.7b "no python3 with torch"
  fi
  step bench-train-0.6b "$fp8rl" bench train --backend cpu --model small --batch 2 --seq-len 32 \
    --steps 1 --json "$j/bench-train-0.6b.json"
  step bench-train-1.7b "$fp8rl" bench train --backend cpu --model small --batch 2 --seq-len 16 \
    --steps 1 --json "$j/bench-train-1.7b.json"
  step bench-step-gpu "$fp8rl" bench step --backend cpu --preset gpu --steps 1 "${tiny_step[@]}" \
    --json "$j/bench-step-gpu.json"
else
  step bench-gemm "$fp8rl" bench gemm --backend cuda --json "$j/bench-gemm.json"
  step bench-quant "$fp8rl" bench quant --backend cuda --json "$j/bench-quant.json"
  # Decode: Qwen3-0.6B at batch 64 (the FP8 target), Qwen3-1.7B at 64 and 256 (against PyTorch).
  step bench-rollout-0.6b "$fp8rl" bench rollout --backend cuda --model qwen3-0.6b --batch 64 \
    --prompt-len 128 --new-tokens 128 --json "$j/bench-rollout-0.6b.json"
  step bench-rollout-1.7b "$fp8rl" bench rollout --backend cuda --model qwen3-1.7b \
    --batch 64,256 --prompt-len 128 --new-tokens 128 --json "$j/bench-rollout-1.7b.json"
  if [ -n "$py_torch" ]; then
    step torch-decode-0.6b "$py_torch" tools/gpu/torch_decode.py --device cuda \
      --model qwen3-0.6b --batch 64 --prompt-len 128 --new-tokens 128 \
      --json "$j/torch-decode-0.6b.json"
    step torch-decode-1.7b "$py_torch" tools/gpu/torch_decode.py --device cuda \
      --model qwen3-1.7b --batch 64,256 --prompt-len 128 --new-tokens 128 \
      --json "$j/torch-decode-1.7b.json"
  else
    for n in torch-decode-0.6b torch-decode-1.7b; do
      printf '%s\t%s\t0\t%s\n' "$n" "no-torch" "no python3 with torch found" >>"$status"
      echo "== $n: FAILED (no python3 that imports torch; set PYTHON)"
    done
    any_failed=1
  fi
  step bench-train-0.6b "$fp8rl" bench train --backend cuda --model qwen3-0.6b \
    --json "$j/bench-train-0.6b.json"
  step bench-train-1.7b "$fp8rl" bench train --backend cuda --model qwen3-1.7b \
    --json "$j/bench-train-1.7b.json"
  step bench-step-gpu "$fp8rl" bench step --backend cuda --preset gpu \
    --json "$j/bench-step-gpu.json"
fi

# --- Data parallelism: whole GRPO steps on 1 and 2 ranks (docs/distributed.md). Needs Open
# MPI's mpirun and a build that found MPI; on one GPU the two ranks share it (NCCL refuses that,
# so they reduce through host memory: a correctness and plumbing check, not a scaling figure).
if command -v mpirun >/dev/null && "$fp8rl" --version | grep -q "data-parallel under mpirun"; then
  if [ $smoke -eq 1 ]; then
    step bench-ranks "$fp8rl" bench ranks --backend cpu --ranks 1,2 --steps 1 \
      --set grpo.prompts_per_step=4 --json "$j/bench-ranks.json"
  else
    step bench-ranks "$fp8rl" bench ranks --backend cuda --preset gpu --ranks 1,2 --steps 3 \
      --json "$j/bench-ranks.json"
  fi
else
  skip bench-ranks "no mpirun here, or a build without MPI (apt install openmpi-bin libopenmpi-dev, rebuild)"
fi

# --- Summary
python3 tools/gpu/summarize.py "$out" | tee "$out/summary.md"
[ "${PIPESTATUS[0]}" -eq 0 ] || any_failed=1
echo
echo "results: $out"
exit $any_failed
