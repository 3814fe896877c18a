#!/usr/bin/env bash
# The GPU round: the measurements of a visit to a GPU machine in one command, ordered so that the
# most valuable results come first, each part under a time cap derived from one budget. The GPU
# bundle's run.sh is this script (tools/gpu/bundle.sh copies it); tools/gpu/run.sh builds in the
# source tree and then runs it.
#
#   run.sh [--budget SECONDS] [OUT_DIR]   the round on the GPU (default budget 420 s)
#   run.sh --cpu-smoke [OUT_DIR]          the same parts on the CPU backend with tiny sizes:
#                                         rehearses the round on a machine without a GPU and
#                                         shows what each part would be given
#   run.sh --plan [--budget SECONDS]      print the parts and their caps; run nothing
#
# Options: --only PART[,PART...] (those parts only, sharing the budget), --extras (also the extra
#   parts below), --bin DIR (where fp8rl and fp8rl-op-tests are; default bin/ beside this
#   script), --work DIR (the detailed results; default a new folder in ${TMPDIR:-/tmp}).
# Environment: OUT (the output folder when none is given; default gpu-results/<date>),
#   PYTHON (a python3 with PyTorch for the baseline; default python3).
#
# Parts, in order, with their share of the budget:
#   ops       9  the op registry on the GPU against the CPU reference (every case: error, bound)
#   recipe   53  whole GRPO steps at the recipe's workload, BF16 and FP8 + FP8 KV in one run each
#                (one timed step, no warm-up step: a step takes minutes), split by phase, a line
#                per step as it ends (a run cut short keeps them): recipe-8b-long (64 x 256 +
#                4,096 tokens), recipe-8b (Qwen3-8B width, 512 x 256 + 1,024 tokens, with
#                op times: where its training phase, 1.22x BF16 in round 5, goes),
#                recipe-moe (4 Qwen3-30B-A3B-shaped MoE layers, the same workload) — both
#                measured again at half their layers and projected to the whole model's — and
#                recipe-0.6b (the gpu preset's shape, recipe-8b's workload, with op times; the
#                one the cap cuts first)
#   decode    6  a decode step's kernels at Qwen3-8B's shapes, 1 to 512 rows, contexts 1,280 and
#                4,096: the fused FP8 linear and attention over FP8 / BF16 KV caches against the
#                copy bandwidth, BF16 / FP8 ratios, the kernel options swept
#   gemm      8  FP8 vs BF16 GEMMs (fprop, dgrad, wgrad) at 8192^3 and at Qwen3-8B linear shapes
#   experts   5  one MoE layer's expert GEMMs at Qwen3-30B-A3B's shapes (128 experts of 768 on
#                2048, top 8; 4,096 and 16,384 tokens): per expert vs grouped, BF16 and FP8
#   attention 5  causal attention forward and backward TFLOP/s at Qwen3-8B's heads (32/8 of 128),
#                T 512 to 4,096 at 16k tokens: the backward on the FP32 and the tensor-core kernels
#   quant     4  the quantization kernels against the device's copy bandwidth
#   rollout   9  decode tokens/s, Qwen3-0.6B shape, batch 64: BF16, FP8, FP8 + FP8 KV cache, and
#                BF16 / FP8 + FP8 KV with ragged lengths (32-128: finished sequences leave); then
#                the same on the previous default kernels (FP8RL_KERNEL_OPTIONS:
#                attention_kernel=1, the FP32 split decode attention)
#   step      6  whole GRPO steps of the gpu preset (short responses): BF16, FP8, FP8 + FP8 KV
#   torch     5  a PyTorch eager decode loop at the rollout's shape (the BF16 decode baseline)
# Extra parts (--extras; tools/gpu/run.sh asks for them): train 20 (training steps, Qwen3-0.6B
#   and 1.7B shapes), decode-1.7b 15 (Qwen3-1.7B decode at batch 64 and 256, and PyTorch's),
#   ranks 10 (GRPO steps on 1 and 2 ranks, when mpirun and an MPI build are there), learn 30
#   (the demo and llama-demo presets trained to the end, FP8 and BF16, seeds 1-3: each must reach
#   validation 0.9 as on the CPU; final accuracy and wall time per run), decode-mla 10
#   (decode tokens/s of latent attention at Moonlight-16B-A3B's attention shape, batch 64: BF16,
#   FP8, FP8 + the FP8 latent cache).
#
# Time caps: the parts share 95 % of the budget in proportion to their shares (the rest is for
# setting up and summarising). Each part must end by a deadline, the round's start plus the caps
# of the parts up to it, so a part that ends early leaves its time to the next ones and the
# round ends within its budget. Every command runs under timeout(1) until its part's deadline.
#
# Before the parts the round looks for the libraries the CUDA module loads from the machine
# (cuBLASLt, NCCL, the driver's libcuda) in the CUDA toolkit's folders and in the Python wheels
# of the NVIDIA libraries, puts their folders on LD_LIBRARY_PATH and says what it found; then it
# runs `fp8rl --version` and `fp8rl doctor`.
#
# The output folder holds five files, rewritten after each part (so a round cut short keeps
# what it finished): summary.md (the targets, met or missed, the parts with their caps, the other
# measurements, each command), status.tsv (each command: part, exit code, seconds, cap), parts.tsv
# (each part: share, caps planned and given, seconds used, result), round.log (what this script
# printed) and results.tar.gz (the work folder: logs/ with each command's full output, json/ with
# each benchmark's rows, and the files above). The table of targets is printed after each part,
# the whole summary at the end. Exit: 0 when every command succeeded (a missed target is no
# failure), 1 when a command failed or ran out of time, 2 on a usage error.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
names=(ops recipe decode gemm experts attention quant rollout step torch train decode-1.7b ranks
  learn decode-mla)
shares=(9 53 6 8 5 5 4 9 6 5 20 15 10 30 10)
whats=("op registry vs the CPU reference"
  "GRPO step at the recipe's workload, by phase"
  "decode kernels vs copy bandwidth, Qwen3-8B"
  "FP8 vs BF16 GEMM, 8192^3 and Qwen3-8B linears"
  "MoE expert GEMMs, grouped vs per expert"
  "attention fwd/bwd TFLOP/s, FP32 vs tensor cores"
  "quantization vs copy bandwidth"
  "decode BF16 / FP8 / FP8 + FP8 KV"
  "GRPO step BF16 / FP8 / FP8 + FP8 KV"
  "PyTorch eager decode baseline"
  "training steps, 0.6B and 1.7B"
  "Qwen3-1.7B decode vs PyTorch"
  "GRPO steps on 1 and 2 ranks"
  "demo presets learn on the GPU, seeds 1-3"
  "latent-attention decode, Moonlight shape")
core_parts=10

budget=420 smoke=0 plan_only=0 extras=0 only="" bin="" work="" out="${OUT:-}"
usage_error() {
  echo "run.sh: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --budget)
      [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 30 ] ||
        usage_error "--budget needs a number of seconds (at least 30)"
      budget=$2
      shift ;;
    --cpu-smoke) smoke=1 ;;
    --plan) plan_only=1 ;;
    --extras) extras=1 ;;
    --only)
      [ $# -ge 2 ] || usage_error "--only needs a list of parts"
      only=$2
      shift ;;
    --bin)
      [ $# -ge 2 ] || usage_error "--bin needs a folder"
      bin=$2
      shift ;;
    --work)
      [ $# -ge 2 ] || usage_error "--work needs a folder"
      work=$2
      shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) usage_error "unknown option $1 (see --help)" ;;
    *) out=$1 ;;
  esac
  shift
done

# --- The plan: the selected parts and their caps.
selected=()
for i in "${!names[@]}"; do
  if [ -n "$only" ]; then
    [[ ",$only," == *",${names[$i]},"* ]] && selected+=("$i")
  elif [ "$i" -lt $core_parts ] || [ $extras -eq 1 ]; then
    selected+=("$i")
  fi
done
if [ -n "$only" ]; then
  for p in ${only//,/ }; do
    [[ " ${names[*]} " == *" $p "* ]] || usage_error "--only: unknown part '$p' (parts: ${names[*]})"
  done
fi
weight=0
for i in "${selected[@]}"; do weight=$((weight + shares[i])); done
declare -A planned=() ends=()
offset=0
for i in "${selected[@]}"; do
  planned[$i]=$((budget * 95 * shares[i] / (100 * weight)))
  offset=$((offset + planned[$i]))
  ends[$i]=$offset
done

print_plan() {
  printf '%-12s %-48s %6s %12s %14s\n' part measures share "cap (s)" "deadline (s)"
  for i in "${selected[@]}"; do
    printf '%-12s %-48s %5s%% %12s %14s\n' "${names[$i]}" "${whats[$i]}" \
      "$(((200 * planned[$i] / budget + 1) / 2))" "${planned[$i]}" "+${ends[$i]}"
  done
  printf '%-12s %-48s %6s %12s %14s\n' "(reserve)" "setup, summary" "" "$((budget - offset))" "+$budget"
}
if [ $plan_only -eq 1 ]; then
  echo "the round's plan for a budget of $budget s$([ $smoke -eq 1 ] && echo " (cpu smoke)"):"
  print_plan
  exit 0
fi

# --- Folders and programs
[ -n "$out" ] || out="gpu-results/$(date +%Y-%m-%d-%H%M%S)"
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/fp8rl-round.XXXXXX") || exit 1
mkdir -p "$work/logs" "$work/json" || exit 1
work=$(cd "$work" && pwd)
[ "$work" != "$out" ] || usage_error "--work must differ from the output folder"
[ -n "$bin" ] || bin="$here/bin"
bin=$(cd "$bin" 2>/dev/null && pwd) || usage_error "no folder $bin (give --bin DIR)"
fp8rl="$bin/fp8rl"
optests="$bin/fp8rl-op-tests"
# Helper scripts: tools/ beside this script in the bundle, this script's own folder in the source.
tools="$here"
[ -f "$here/tools/summarize.py" ] && tools="$here/tools"
py=${PYTHON:-python3}
command -v python3 >/dev/null && have_python=1 || have_python=0
export PYTHONUNBUFFERED=1

status="$work/status.tsv"
[ -f "$status" ] || printf 'command\tpart\texit_code\tseconds\tcap\tlog\n' >"$status"
: >"$out/round.log"
# say TEXT...: prints and keeps it in round.log.
say() { printf '%s\n' "$*" | tee -a "$out/round.log"; }
any_failed=0
round_start=$(date +%s)
part="setup"
part_deadline=$((round_start + 60))
child="" child_name="" child_t0=0 cur=""
declare -A given=() used=() result=()
for i in "${selected[@]}"; do given[$i]="–"; used[$i]="–"; result[$i]="pending"; done

# publish: rewrites parts.tsv and the summary, and copies the small set of files into the output
# folder (each written beside its final name, then renamed: a reader never sees half a file).
publish() {
  {
    printf 'part\twhat\tshare\tplanned_s\tgiven_s\tused_s\tresult\n'
    for i in "${selected[@]}"; do
      printf '%s\t%s\t%s%%\t%s\t%s\t%s\t%s\n' "${names[$i]}" "${whats[$i]}" \
        "$(((200 * planned[$i] / budget + 1) / 2))" "${planned[$i]}" "${given[$i]}" "${used[$i]}" \
        "${result[$i]}"
    done
  } >"$work/parts.tsv"
  if [ $have_python -eq 1 ]; then
    python3 "$tools/summarize.py" "$work" >"$work/summary.md.tmp" 2>>"$work/logs/summarize.log" &&
      mv -f "$work/summary.md.tmp" "$work/summary.md"
  fi
  local f
  for f in status.tsv parts.tsv summary.md; do
    [ -f "$work/$f" ] && cp "$work/$f" "$out/.$f.tmp" && mv -f "$out/.$f.tmp" "$out/$f"
  done
  tar -czf "$out/.results.tar.gz.tmp" -C "$work" . 2>/dev/null &&
    mv -f "$out/.results.tar.gz.tmp" "$out/results.tar.gz"
}

# A round stopped from outside (timeout, Ctrl-C) ends its running command and keeps its results.
on_signal() {
  say "round: stopped by a signal during part $part; results so far are in $out"
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null
  wait 2>/dev/null
  if [ -n "$child_name" ]; then
    printf '%s\t%s\tinterrupted\t%s\t0\tlogs/%s.log\n' "$child_name" "$part" \
      "$(($(date +%s) - child_t0))" "$child_name" >>"$status"
  fi
  [ -n "$cur" ] && result[$cur]="stopped by a signal"
  publish
  exit 1
}
trap on_signal TERM INT HUP

# cmd NAME PROGRAM ARGS...: runs one command of the current part until the part's deadline, its
# output in logs/NAME.log; records it in status.tsv.
cmd() {
  local name=$1 t0 left rc secs
  shift
  t0=$(date +%s)
  left=$((part_deadline - t0))
  if [ $left -lt 3 ]; then
    printf '%s\t%s\tskipped\t0\t0\t%s\n' "$name" "$part" "no time left in part $part" >>"$status"
    say "   $name: skipped (no time left in the part)"
    return 1
  fi
  echo "\$ $*" >"$work/logs/$name.log"
  timeout -k 5 "$left" "$@" >>"$work/logs/$name.log" 2>&1 </dev/null &
  child=$! child_name=$name child_t0=$t0
  wait "$child"
  rc=$?
  child="" child_name=""
  secs=$(($(date +%s) - t0))
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$part" "$rc" "$secs" "$left" "logs/$name.log" >>"$status"
  if [ $rc -eq 0 ]; then
    say "   $name: ok ($secs s)"
  else
    any_failed=1
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      say "   $name: TIMED OUT after $secs s (cap $left s); see logs/$name.log"
    else
      say "   $name: FAILED (exit $rc, $secs s); see logs/$name.log"
    fi
    tail -n 4 "$work/logs/$name.log" | cut -c1-200 | sed 's/^/   | /' | tee -a "$out/round.log"
  fi
  return $rc
}

# skip NAME WHY: records a command that was not run.
skip() {
  printf '%s\t%s\tskipped\t0\t0\t%s\n' "$1" "$part" "$2" >>"$status"
  say "   $1: skipped ($2)"
}

# --- Setup: the machine, the libraries from the machine, the programs' own report.
# lib_dirs: the folders that may hold the CUDA toolkit's and the driver's libraries.
lib_dirs() {
  local d sub
  for d in ${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda /usr/local/cuda-13* /opt/cuda; do
    for sub in lib64 lib targets/x86_64-linux/lib; do [ -d "$d/$sub" ] && echo "$d/$sub"; done
  done
  # The Python wheels of the NVIDIA libraries (PyTorch's: nvidia/cu13/lib, nvidia/nccl/lib, ...).
  command -v "$py" >/dev/null && "$py" - <<'EOF' 2>/dev/null
import os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
for base in nvidia.__path__:
    for name in sorted(os.listdir(base)):
        lib = os.path.join(base, name, "lib")
        if os.path.isdir(lib):
            print(lib)
EOF
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [ -d "$d" ] && echo "$d"
  done
}

find_libraries() {
  local -a dirs
  mapfile -t dirs < <(lib_dirs)
  local lib d found where
  for lib in libcublasLt.so.13 libnccl.so.2 libcuda.so.1; do
    found=""
    for d in "${dirs[@]}"; do
      if [ -e "$d/$lib" ]; then
        found="$d"
        break
      fi
    done
    case "$found" in
      "") where="not found" ;;
      */nvidia/*) where="$found/$lib (Python wheel)" ;;
      /usr/lib/x86_64-linux-gnu | /usr/lib64) where="$found/$lib (system)" ;;
      *) where="$found/$lib" ;;
    esac
    case "$lib" in
      libcublasLt.so.13) say "   cuBLASLt: $where$([ -z "$found" ] && echo ": the CUDA module cannot load")" ;;
      libnccl.so.2) say "   NCCL: $where$([ -z "$found" ] && echo " (needed only for more than one rank)")" ;;
      libcuda.so.1) say "   driver (libcuda.so.1): $where$([ -z "$found" ] && echo ": no NVIDIA driver")" ;;
    esac
    # Folders the loader does not search by itself go first on LD_LIBRARY_PATH.
    if [ -n "$found" ] && [ "$found" != /usr/lib/x86_64-linux-gnu ] && [ "$found" != /usr/lib64 ] &&
      [[ ":${LD_LIBRARY_PATH:-}:" != *":$found:"* ]]; then
      export LD_LIBRARY_PATH="$found${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
  done
  say "   LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
}

say "== GPU round$([ $smoke -eq 1 ] && echo " (cpu smoke: the CPU backend, tiny sizes)"): budget $budget s, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "   programs: $bin; results: $out (details: $work)"
say "   the plan (each part ends by its deadline; time a part leaves passes to the next):"
print_plan | sed 's/^/   /' | tee -a "$out/round.log"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "round: budget $budget, smoke $smoke, parts: $(for i in "${selected[@]}"; do printf '%s ' "${names[$i]}"; done)"
  uname -a
  [ -f "$here/MANIFEST.txt" ] && cat "$here/MANIFEST.txt"
  command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi
  command -v nvcc >/dev/null && nvcc --version
  command -v "$py" >/dev/null && "$py" --version
  echo "nproc: $(nproc)"
  free -g 2>/dev/null
} >"$work/logs/environment.log" 2>&1
say "== setup: the libraries this machine provides"
need=$(sed -n 's/^needs: glibc >= \([0-9.]*\).*/\1/p' "$here/MANIFEST.txt" 2>/dev/null)
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
say "   glibc: ${have:-unknown}${need:+ (the bundle needs $need or newer)}"
if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
  say "   WARNING: this glibc is older than the bundle needs: its programs will not start"
fi
find_libraries
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >>"$work/logs/environment.log"
if cmd version "$fp8rl" --version; then
  grep -E '^  (cpu|cuda) ' "$work/logs/version.log" | cut -c1-220 | sed 's/^/   /' | tee -a "$out/round.log"
fi
cmd doctor "$fp8rl" doctor
if [ $smoke -eq 0 ] && ! grep -q '^  usable: *yes' "$work/logs/doctor.log" 2>/dev/null; then
  say "   WARNING: the CUDA backend is not usable here ($(grep -m1 '^  usable:' "$work/logs/doctor.log" 2>/dev/null | sed 's/^ *usable: *\(no: \)\{0,1\}//')); the GPU parts will fail, the PyTorch baseline still runs"
fi
publish

# --- The parts. j: where the benchmarks write their rows.
j="$work/json"
if [ $smoke -eq 1 ]; then
  be=cpu
  # The gpu preset shrunk to a size a CPU runs in seconds: the pipeline, not the numbers.
  tiny_step=(--set model.num_hidden_layers=1 --set model.hidden_size=128
    --set model.num_attention_heads=2 --set model.num_key_value_heads=1 --set model.head_dim=64
    --set model.intermediate_size=256 --set grpo.prompts_per_step=2 --set grpo.group_size=4
    --set task.validation_size=8)
else
  be=cuda
fi

# torch_decode NAME MODEL BATCHES: the PyTorch baseline at the shape of bench-rollout-<tag>.
py_torch="" # the python that imports torch; looked for when first needed (importing takes seconds)
torch_decode() {
  if [ -z "$py_torch" ] && command -v "$py" >/dev/null && "$py" -c "import torch" >/dev/null 2>&1; then
    py_torch=$py
  fi
  if [ -z "$py_torch" ]; then
    skip "$1" "no python3 that imports torch (set PYTHON)"
    [ $smoke -eq 0 ] && any_failed=1
    return
  fi
  if [ $smoke -eq 1 ]; then
    cmd "$1" "$py_torch" "$tools/torch_decode.py" --device cpu --model small --batch "$3" \
      --prompt-len 8 --new-tokens 8 --json "$j/$1.json"
  else
    cmd "$1" "$py_torch" "$tools/torch_decode.py" --device cuda --model "$2" --batch "$3" \
      --prompt-len 128 --new-tokens 128 --json "$j/$1.json"
  fi
}

part_ops() {
  if [ $smoke -eq 1 ]; then
    # Both backends: says why CUDA is skipped, then checks the CPU against FP64 references.
    cmd ops "$optests" --backend all --verbose
  else
    cmd ops "$optests" --backend cuda --verbose
  fi
}
part_gemm() {
  if [ $smoke -eq 1 ]; then
    cmd bench-gemm "$fp8rl" bench gemm --backend cpu --shapes "256,256,256" --seconds 0 \
      --json "$j/bench-gemm.json"
    cmd bench-gemm-qwen3-8b "$fp8rl" bench gemm --backend cpu --shapes "128,384,256;128,256,384" \
      --seconds 0 --json "$j/bench-gemm-qwen3-8b.json"
  else
    cmd bench-gemm "$fp8rl" bench gemm --backend cuda --shapes "8192,8192,8192" --seconds 0.5 \
      --json "$j/bench-gemm.json"
    # Qwen3-8B: q/o, k/v, gate/up, down at 8192 tokens; then the 0.6B step's linears at its
    # micro-batch of 10,240 tokens (q, k/v, o, gate/up, down), where round 5's FP8 GEMMs were no
    # faster than BF16: both with the best of cuBLASLt's first 8 algorithms beside its first.
    cmd bench-gemm-qwen3-8b "$fp8rl" bench gemm --backend cuda \
      --shapes "8192,4096,4096;8192,1024,4096;8192,12288,4096;8192,4096,12288" --seconds 0.2 \
      --algos 8 --json "$j/bench-gemm-qwen3-8b.json"
    cmd bench-gemm-qwen3-0.6b "$fp8rl" bench gemm --backend cuda \
      --shapes "10240,2048,1024;10240,1024,1024;10240,1024,2048;10240,3072,1024;10240,1024,3072" \
      --seconds 0.05 --algos 8 --json "$j/bench-gemm-qwen3-0.6b.json"
  fi
}
part_experts() {
  if [ $smoke -eq 1 ]; then
    cmd bench-experts "$fp8rl" bench experts --backend cpu --json "$j/bench-experts.json"
  else
    # Qwen3-30B-A3B's experts (the defaults on a GPU), 4,096 and 16,384 tokens.
    cmd bench-experts "$fp8rl" bench experts --backend cuda --tokens 4096,16384 --seconds 0.05 \
      --json "$j/bench-experts.json"
  fi
}
part_attention() {
  if [ $smoke -eq 1 ]; then
    cmd bench-attention "$fp8rl" bench attention --backend cpu --seq-lens 16,33 --tokens 66 \
      --json "$j/bench-attention.json"
  else
    cmd bench-attention "$fp8rl" bench attention --backend cuda --seconds 0.1 \
      --json "$j/bench-attention.json"
  fi
}
part_quant() {
  local seconds=0.2
  [ $smoke -eq 1 ] && seconds=0
  cmd bench-quant "$fp8rl" bench quant --backend $be --seconds $seconds --json "$j/bench-quant.json"
}
# The kernel options that were the defaults before the last change of them: the rollout part also
# measures the decode on them, end to end (what the change gave, or lost).
previous_kernels=attention_kernel=1
part_rollout() {
  if [ $smoke -eq 1 ]; then
    cmd bench-rollout-0.6b "$fp8rl" bench rollout --backend cpu --model small --batch 4 \
      --prompt-len 8 --new-tokens 8 --ragged 2 --json "$j/bench-rollout-0.6b.json"
    cmd bench-rollout-0.6b-previous env "FP8RL_KERNEL_OPTIONS=$previous_kernels" "$fp8rl" \
      bench rollout --backend cpu --model small --batch 4 --prompt-len 8 --new-tokens 8 \
      --json "$j/bench-rollout-0.6b-previous.json"
  else
    cmd bench-rollout-0.6b "$fp8rl" bench rollout --backend cuda --model qwen3-0.6b --batch 64 \
      --prompt-len 128 --new-tokens 128 --ragged 32 --json "$j/bench-rollout-0.6b.json"
    # The same decode on the previous defaults (the FP32 split decode attention, the default
    # until 2026-11-28): what the tensor-core decode attention gives end to end.
    cmd bench-rollout-0.6b-previous env "FP8RL_KERNEL_OPTIONS=$previous_kernels" "$fp8rl" \
      bench rollout --backend cuda --model qwen3-0.6b --batch 64 --prompt-len 128 \
      --new-tokens 128 --json "$j/bench-rollout-0.6b-previous.json"
  fi
}
# One decode step's kernels (bench decode): what the generation phase is made of.
part_decode() {
  if [ $smoke -eq 1 ]; then
    cmd bench-decode "$fp8rl" bench decode --backend cpu --model small --batch 1,3 --contexts 40 \
      --seconds 0 --json "$j/bench-decode.json"
  else
    cmd bench-decode "$fp8rl" bench decode --backend cuda --model qwen3-8b \
      --batch 1,8,64,256,512 --contexts 1280,4096 --seconds 0.03 --json "$j/bench-decode.json"
  fi
}
part_step() {
  if [ $smoke -eq 1 ]; then
    cmd bench-step-gpu "$fp8rl" bench step --backend cpu --preset gpu --steps 1 "${tiny_step[@]}" \
      --json "$j/bench-step-gpu.json"
  else
    cmd bench-step-gpu "$fp8rl" bench step --backend cuda --preset gpu --steps 2 --warmup 1 --op-times \
      --json "$j/bench-step-gpu.json"
  fi
}
# The recipe's workload (resources/presets/recipe-*.yaml): forced response lengths, so a step
# spends its time where a real RL step does. On the CPU the same presets shrunk to seconds.
part_recipe() {
  local p
  if [ $smoke -eq 1 ]; then
    local tiny=(--set model.hidden_size=64 --set model.num_hidden_layers=1
      --set model.num_attention_heads=2 --set model.num_key_value_heads=1 --set model.head_dim=32
      --set model.intermediate_size=128 --set task.vocab_size=512 --set grpo.prompts_per_step=2
      --set grpo.group_size=2 --set task.min_len=15 --set task.max_len=15
      --set task.max_response_tokens=16 --set model.max_position_embeddings=48
      --set task.validation_size=2)
    for p in recipe-8b recipe-8b-long recipe-moe recipe-0.6b; do
      local extra=()
      [ "$p" = recipe-moe ] && extra=(--set model.num_experts=8 --set model.moe_intermediate_size=32)
      [ "$p" = recipe-8b ] && extra=(--set model.num_hidden_layers=2 --project-layers 36)
      cmd "bench-step-$p" "$fp8rl" bench step --backend cpu --preset "$p" --steps 1 --warmup 0 \
        --no-pytorch "${tiny[@]}" "${extra[@]}" --json "$j/bench-step-$p.json"
    done
  else
    # A step here takes minutes (round 4: recipe-8b's first BF16 step did not end within 255 s),
    # so no warm-up step (its one-time work is a small part of such a step; the first step's
    # validation is not counted) and the two modes the targets compare. The long-context point
    # first: the cheapest (64 samples), it carries the 64 x 4,096 target. Then Qwen3-8B's width,
    # then Qwen3-30B-A3B's MoE layers. The 0.6B shape last (the step part measures it too, with
    # short responses), with op times.
    local modes=(--steps 1 --warmup 0 --modes bf16,fp8kv)
    # With FP8 linears on a BF16 KV cache too: round 5's FP8 + FP8 KV generator-trainer mismatch
    # at Qwen3-8B's width (token_mult_prob_error 1.24-1.28, BF16 1.02; on the CPU the FP8
    # generator and trainer agree bit for bit and the FP8 cache adds ~1.02) split in two.
    cmd bench-step-recipe-8b-long "$fp8rl" bench step --backend cuda --preset recipe-8b-long \
      --steps 1 --warmup 0 --modes bf16,fp8,fp8kv --json "$j/bench-step-recipe-8b-long.json"
    # Each also at half its layers, projected to the whole model's (Qwen3-8B 36, Qwen3-30B-A3B
    # 48): cut to one GPU, the BF16 lm_head is 22 % of recipe-8b's parameters against 8 %.
    cmd bench-step-recipe-8b "$fp8rl" bench step --backend cuda --preset recipe-8b "${modes[@]}" \
      --op-times --project-layers 36 --json "$j/bench-step-recipe-8b.json"
    cmd bench-step-recipe-moe "$fp8rl" bench step --backend cuda --preset recipe-moe \
      "${modes[@]}" --project-layers 48 --json "$j/bench-step-recipe-moe.json"
    cmd bench-step-recipe-0.6b "$fp8rl" bench step --backend cuda --preset recipe-0.6b \
      "${modes[@]}" --op-times --json "$j/bench-step-recipe-0.6b.json"
  fi
}
part_torch() { torch_decode torch-decode-0.6b qwen3-0.6b 64; }
part_train() {
  if [ $smoke -eq 1 ]; then
    cmd bench-train-0.6b "$fp8rl" bench train --backend cpu --model small --batch 2 --seq-len 32 \
      --steps 1 --json "$j/bench-train-0.6b.json"
    cmd bench-train-1.7b "$fp8rl" bench train --backend cpu --model small --batch 2 --seq-len 16 \
      --steps 1 --json "$j/bench-train-1.7b.json"
  else
    cmd bench-train-0.6b "$fp8rl" bench train --backend cuda --model qwen3-0.6b \
      --json "$j/bench-train-0.6b.json"
    cmd bench-train-1.7b "$fp8rl" bench train --backend cuda --model qwen3-1.7b \
      --json "$j/bench-train-1.7b.json"
  fi
}
part_decode_mla() {
  if [ $smoke -eq 1 ]; then
    cmd bench-rollout-mla "$fp8rl" bench rollout --backend cpu --model small-mla --batch 2 \
      --prompt-len 8 --new-tokens 8 --json "$j/bench-rollout-mla.json"
  else
    cmd bench-rollout-mla "$fp8rl" bench rollout --backend cuda --model moonlight-mla --batch 64 \
      --prompt-len 128 --new-tokens 128 --json "$j/bench-rollout-mla.json"
  fi
}
part_decode_1_7b() {
  if [ $smoke -eq 1 ]; then
    cmd bench-rollout-1.7b "$fp8rl" bench rollout --backend cpu --model small --batch 2,4 \
      --prompt-len 8 --new-tokens 8 --json "$j/bench-rollout-1.7b.json"
    torch_decode torch-decode-1.7b small 2,4
  else
    cmd bench-rollout-1.7b "$fp8rl" bench rollout --backend cuda --model qwen3-1.7b \
      --batch 64,256 --prompt-len 128 --new-tokens 128 --json "$j/bench-rollout-1.7b.json"
    torch_decode torch-decode-1.7b qwen3-1.7b 64,256
  fi
}
# Data parallelism (docs/distributed.md): needs Open MPI's mpirun and a build that found MPI. On
# one GPU the two ranks share it (NCCL refuses that, so they reduce through host memory).
part_ranks() {
  if ! command -v mpirun >/dev/null || ! grep -q "data-parallel under mpirun" "$work/logs/version.log"; then
    skip bench-ranks "no mpirun here, or a build without MPI"
  elif [ $smoke -eq 1 ]; then
    cmd bench-ranks "$fp8rl" bench ranks --backend cpu --ranks 1,2 --steps 1 \
      --set grpo.prompts_per_step=4 --json "$j/bench-ranks.json"
  else
    cmd bench-ranks "$fp8rl" bench ranks --backend cuda --preset gpu --ranks 1,2 --steps 3 \
      --json "$j/bench-ranks.json"
  fi
}
# The GPU learns what the CPU learns: whole demo runs, FP8 and BF16 (bench train --seeds).
part_learn() {
  local p
  for p in demo llama-demo; do
    if [ $smoke -eq 1 ]; then
      cmd "bench-seeds-$p" "$fp8rl" bench train --backend cpu --seeds 1 --preset "$p" \
        --set grpo.steps=2 --set sft.steps=2 --set validation.every=1 \
        --set task.validation_size=8 --json "$j/bench-seeds-$p.json"
    else
      cmd "bench-seeds-$p" "$fp8rl" bench train --backend cuda --seeds 3 --preset "$p" \
        --json "$j/bench-seeds-$p.json"
    fi
  done
}

n=0
for i in "${selected[@]}"; do
  n=$((n + 1))
  part=${names[$i]} cur=$i
  t0=$(date +%s)
  part_deadline=$((round_start + ends[$i]))
  given[$i]=$((part_deadline - t0))
  say "== part $n/${#selected[@]} $part: ${whats[$i]} (cap ${given[$i]} s; planned ${planned[$i]} s)"
  failed_before=$any_failed
  any_failed=0
  if [ "${given[$i]}" -lt 3 ]; then
    result[$i]="skipped: no time left"
    say "   skipped: no time left"
    any_failed=1
  else
    "part_${part//[-.]/_}"
    used[$i]=$(($(date +%s) - t0))
    # The part's result from its commands' exit codes.
    result[$i]=$(awk -F'\t' -v p="$part" '$2 == p {
        n++; if ($3 == "skipped") s++; else if ($3 == 124 || $3 == 137) t++; else if ($3 != 0) f++ }
      END { print t ? "timed out" : f ? "failed" : (n && s == n) ? "skipped" : "ok" }' "$status")
  fi
  any_failed=$((any_failed | failed_before))
  publish
  [ $have_python -eq 1 ] && python3 "$tools/summarize.py" --brief "$work" | tee -a "$out/round.log"
done

part="summary"
publish
echo
if [ $have_python -eq 1 ] && [ -f "$out/summary.md" ]; then
  tee -a "$out/round.log" <"$out/summary.md"
else
  say "no python3 here: no summary (status.tsv and the logs are in results.tar.gz)"
fi
say ""
say "round: $(($(date +%s) - round_start)) s of a budget of $budget s; results: $out"
exit $any_failed
