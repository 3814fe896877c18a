#!/usr/bin/env bash
# scripts/test-cpu-matrix.sh [BUILD_DIR]
#
# The CPU numerics under every kernel choice this one machine can be made to take, as machines
# of other CPU models would take them: OpenBLAS core types (Prescott, Sandybridge, Haswell,
# Zen, SkylakeX — the engine links no BLAS, so these must change nothing), each instruction-set
# path of the CPU backend's GEMM (FP8RL_CPU_GEMM), glibc's libm without its FMA/AVX2 variants
# (GLIBC_TUNABLES), and one thread instead of all. Under each it runs the fast numerics tests
# (GEMM, quantization, rollout unit tests; the GEMM and quantization op tests) and a short FP8
# training run (FP8 linears and FP8 KV cache), and checks that every run ends with
# bit-identical weights and optimizer state. A few seconds per variant; CTest runs it
# (cpu_matrix).
set -uo pipefail
build=${1:-build}
bin=$build/bin
[ -x "$bin/fp8rl" ] || { echo "test-cpu-matrix: no $bin/fp8rl (build first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ldd "$bin/fp8rl" | grep -Eq 'libopenblas|libblas'; then
  echo "test-cpu-matrix: note: fp8rl links a BLAS library; the OPENBLAS_CORETYPE rows test it"
fi

# The GEMM paths this CPU offers, from the same function the backend uses to choose.
paths=$("$bin/fp8rl" doctor | sed -n 's/.*GEMM: .*(this CPU: \([^;]*\);.*/\1/p' | head -n 1 | tr -d ' ' | tr ',' ' ')
[ -n "$paths" ] || { echo "test-cpu-matrix: fp8rl doctor names no GEMM paths" >&2; exit 1; }

variants=("")
for t in Prescott Sandybridge Haswell Zen SkylakeX; do variants+=("OPENBLAS_CORETYPE=$t"); done
for p in $paths; do variants+=("FP8RL_CPU_GEMM=$p"); done
variants+=("GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F" "FP8RL_THREADS=1")

train=(--preset demo --backend cpu --no-db --json --set grpo.steps=3 --set sft.steps=2
       --set validation.every=3 --set task.validation_size=16 --set precision.kv_cache=fp8)
unit_tests=()
for t in test_gemm_cpu test_quantize test_rollout; do
  [ -x "$bin/$t" ] && unit_tests+=("$t")
done

failed=0
reference=""
printf '%-48s %-6s %s\n' "variant" "tests" "weights + optimizer state (sha256)"
for i in "${!variants[@]}"; do
  v=${variants[$i]}
  label=${v:-default}
  envs=()
  [ -n "$v" ] && envs=("$v")
  log="$work/$i.log"
  ok=1
  for t in "${unit_tests[@]}"; do
    env "${envs[@]}" "$bin/$t" >>"$log" 2>&1 || ok=0
  done
  env "${envs[@]}" "$bin/fp8rl-op-tests" --backend cpu --seed 20261125 --filter gemm >>"$log" 2>&1 || ok=0
  env "${envs[@]}" "$bin/fp8rl-op-tests" --backend cpu --seed 20261125 --filter quantize >>"$log" 2>&1 || ok=0
  digest="(run failed)"
  if env "${envs[@]}" "$bin/fp8rl" train "${train[@]}" --output "$work/ckpt-$i" >>"$log" 2>&1; then
    digest=$(cat "$work/ckpt-$i/model.safetensors" "$work/ckpt-$i/optimizer.safetensors" \
               "$work/ckpt-$i/sft_optimizer.safetensors" | sha256sum | cut -c1-16)
  else
    ok=0
  fi
  [ -z "$reference" ] && reference=$digest
  same=""
  [ "$digest" != "$reference" ] && { same="  DIFFERS from default"; ok=0; }
  printf '%-48s %-6s %s%s\n' "$label" "$([ $ok = 1 ] && echo ok || echo FAIL)" "$digest" "$same"
  if [ $ok = 0 ]; then
    failed=1
    echo "---- log of $label (last lines; FAIL lines first):"; grep -E "^FAIL|FAIL " "$log" | head -n 10; tail -n 8 "$log" | cut -c1-300; echo "----"
  fi
done
if [ $failed = 0 ]; then
  echo "test-cpu-matrix: ${#variants[@]} variants, every test passed, every run bit-identical"
fi
exit $failed
