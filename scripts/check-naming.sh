#!/usr/bin/env bash
# scripts/check-naming.sh [BUILD_DIR]
#
# The naming rules of .clang-tidy (and ui/.clang-tidy for the studio) checked by clang-tidy's
# readability-identifier-naming over every C++ source of the project in BUILD_DIR's
# compile_commands.json (tests excluded; headers through them). Prints each name that breaks a
# rule and exits 1 if there is any; exits 77 (skipped) without clang-tidy. Only the naming
# check's findings count: clang-tidy's own parse of the code (an older clang than the compiler)
# may complain about things the compiler accepts. The CUDA sources (kernels/*.cu, whose nvcc
# commands clang cannot take) are parsed as CUDA host code with the toolkit's headers
# (__launch_bounds__ left out: clang's own CUDA wrapper predates the toolkit); without a CUDA
# toolkit they are skipped, and the summary says so. CTest runs it where clang-tidy is
# installed (naming, labels lint and slow: about two minutes on two cores).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 2
tidy=$(command -v clang-tidy || ls /usr/bin/clang-tidy-* 2>/dev/null | sort -V | tail -n 1)
if [ -z "$tidy" ]; then
  echo "check-naming: clang-tidy is not installed: skipped"
  exit 77
fi
db=$build/compile_commands.json
[ -f "$db" ] || { echo "check-naming: no $db (configure with CMake first)"; exit 2; }
files=$(grep -o '"file": *"[^"]*\.cpp"' "$db" | sed -E 's/.*"([^"]*)"$/\1/' |
  grep "^$root/" | grep -v -e "^$root/tests/" -e "^$build/" | sort -u)
n=$(echo "$files" | wc -l)
out=$(echo "$files" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet \
  --extra-arg=-Wno-unknown-warning-option 2>/dev/null |
  grep '\[readability-identifier-naming' | sort -u)
cuda=${CUDA_PATH:-/usr/local/cuda}
cu_note="and $(ls "$root"/kernels/*.cu | wc -l) CUDA files"
if [ -f "$cuda/include/cuda_runtime.h" ]; then
  cu_out=$(ls "$root"/kernels/*.cu | xargs -P "$(nproc)" -n 2 -I{} "$tidy" {} --quiet -- -x cuda \
    --cuda-host-only -nocudalib -nocudainc '-D__launch_bounds__(...)=' -I"$cuda/include" \
    -I"$cuda/include/cccl" -I"$root/engine" -I"$build/engine/generated" -I"$root" -std=c++20 \
    2>/dev/null | grep '\[readability-identifier-naming' | sort -u)
  out=$(printf '%s\n%s' "$out" "$cu_out" | sed '/^$/d')
else
  cu_note="(the CUDA files skipped: no CUDA toolkit at $cuda)"
fi
if [ -n "$out" ]; then
  echo "$out"
  echo "check-naming: $(echo "$out" | wc -l) names break the rules of .clang-tidy"
  exit 1
fi
echo "check-naming: $n files $cu_note, every name follows .clang-tidy"
