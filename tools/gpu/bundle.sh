#!/usr/bin/env bash
# tools/gpu/bundle.sh: builds the GPU bundle here, on a machine without a GPU, so that a GPU
# machine (the NVIDIA driver, the CUDA 13 toolkit, CMake, a python3 with PyTorch; none of this
# project's dependencies) runs the whole GPU round in one command: gpu-bundle/run.sh.
#
#   tools/gpu/bundle.sh                      configure and build build-gpu-bundle/ (CUDA sm_90a,
#                                            Release, no studio, no MPI, no ICU, no SQLite), then
#                                            write gpu-bundle/
#   tools/gpu/bundle.sh --from-build DIR     bundle the programs of an existing build folder
#                                            instead (nothing is built; the CTest gpu_bundle)
#
# Options: --out DIR (default gpu-bundle/ in the source tree), --max-mib N (fail above N MiB;
#   default 48, 0 for no limit), --jobs N (build jobs; default nproc).
#
# The bundle: run.sh (tools/gpu/round.sh), bin/fp8rl and bin/fp8rl-op-tests (RPATH
# $ORIGIN/../lib), lib/libfp8rl_cuda.so, lib/ with every shared library those load except
# glibc's own, the NVIDIA driver's and the CUDA toolkit's (found with ldd: libstdc++ and
# libgcc_s for the bundle build), share/fp8rl/presets/, tools/ (summarize.py, torch_decode.py),
# README.md and MANIFEST.txt (how it was built, what it leaves out, each file). cuBLASLt and the
# CUDA runtime come from the GPU machine (the runtime is linked into the module), NCCL too when
# a run asks for more than one rank. Checked before it is written (bundle_elf.py check): every
# library an ELF file needs is in lib/ or provided by the GPU machine. Prints the size; fails
# above the limit (a command on the GPU machine takes 64 MiB along, the source tree included).
# Rehearse it without a GPU in a root holding only Debian's base system and python3:
# tools/gpu/rehearse-bundle.sh (docs/benchmarks.md).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
t_start=$(date +%s)

from_build="" out="$src/gpu-bundle" max_mib=48 jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --from-build) from_build=${2:?--from-build needs a build folder}; shift ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    --max-mib) max_mib=${2:?--max-mib needs a number}; shift ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bundle.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
die() {
  echo "bundle.sh: $*" >&2
  exit 1
}

# --- Build (or take an existing build)
# What the bundle build leaves out, and why (also written into MANIFEST.txt and README.md).
left_out="the studio (Qt); the run store and workers (SQLite, ZeroMQ): benchmarks and
\`fp8rl train --no-db\` need neither; runs over several ranks (Open MPI: the GPU machine has no
mpirun); Hugging Face tokenizers (ICU: the round uses none)"
if [ -n "$from_build" ]; then
  build=$(cd "$from_build" && pwd) || die "no build folder $from_build"
  build_how="the existing build folder $build"
  left_out="whatever that build left out"
else
  build="$src/build-gpu-bundle"
  if ! command -v nvcc >/dev/null && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
  options=(-DCMAKE_BUILD_TYPE=Release -DFP8RL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a
    -DFP8RL_GUI=OFF -DFP8RL_TESTS=ON -DFP8RL_MPI=OFF -DCMAKE_DISABLE_FIND_PACKAGE_ICU=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON -DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON)
  build_how="cmake ${options[*]}"
  launcher=()
  command -v ccache >/dev/null &&
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  gen=()
  [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
  echo "bundle.sh: configuring $build"
  mkdir -p "$build"
  cmake -S "$src" -B "$build" "${gen[@]}" "${options[@]}" "${launcher[@]}" >"$build/configure.log" 2>&1 ||
    { tail -n 20 "$build/configure.log"; die "configure failed (log: $build/configure.log)"; }
  echo "bundle.sh: building fp8rl, fp8rl-op-tests and the CUDA module ($jobs jobs)"
  cmake --build "$build" -j "$jobs" --target fp8rl fp8rl-op-tests fp8rl_cuda
fi
for f in bin/fp8rl bin/fp8rl-op-tests lib/libfp8rl_cuda.so; do
  [ -f "$build/$f" ] || die "$build/$f is missing (a build with CUDA and the tests?)"
done
t_built=$(date +%s)

# --- Assemble in a new folder beside the bundle, then put it in place.
new="$out.new"
rm -rf "$new"
mkdir -p "$new/bin" "$new/lib" "$new/share/fp8rl/presets" "$new/tools"
cp "$build/bin/fp8rl" "$build/bin/fp8rl-op-tests" "$new/bin/"
cp "$build/lib/libfp8rl_cuda.so" "$new/lib/"
if command -v strip >/dev/null; then
  strip --strip-unneeded "$new/bin/fp8rl" "$new/bin/fp8rl-op-tests" "$new/lib/libfp8rl_cuda.so"
fi
python3 "$src/tools/gpu/bundle_elf.py" trim-rpath "$new/bin/fp8rl" "$new/bin/fp8rl-op-tests" \
  "$new/lib/libfp8rl_cuda.so"

# The libraries the programs load, as ldd resolves them here, except those the GPU machine
# provides: glibc's, the driver's and the toolkit's (the same list as bundle_elf.py's).
provided='^(ld-linux-x86-64\.so\.2|linux-vdso\.so\.1|lib(c|m|dl|pthread|rt|resolv|util|anl|mvec|BrokenLocale|nsl|thread_db)\.so\.[0-9]+|libcuda\.so\.1|libnvidia-.*|libcublasLt\.so\.13|libcublas\.so\.13|libcudart\.so\.13|libnccl\.so\.2)$'
for elf in "$new/bin/fp8rl" "$new/bin/fp8rl-op-tests" "$new/lib/libfp8rl_cuda.so"; do
  while read -r name arrow path _; do
    [[ $name =~ $provided ]] && continue
    [ "$arrow" = "=>" ] || continue
    [ "$path" != "not" ] || die "$(basename "$elf") needs $name, which ldd does not find here"
    [ -e "$new/lib/$name" ] || cp -L "$path" "$new/lib/$name"
  done < <(ldd "$elf")
done
chmod 644 "$new"/lib/*.so*
chmod 755 "$new/lib/libfp8rl_cuda.so"
# A copied library with a RUNPATH (Open MPI's) would look for its own dependencies there only,
# not in lib/: make it an RPATH, which lets the loader fall back on the executable's.
copied=()
for f in "$new"/lib/*.so*; do [ "$f" != "$new/lib/libfp8rl_cuda.so" ] && copied+=("$f"); done
[ ${#copied[@]} -eq 0 ] || python3 "$src/tools/gpu/bundle_elf.py" runpath-to-rpath "${copied[@]}"

cp "$src"/resources/presets/*.yaml "$new/share/fp8rl/presets/"
cp "$src/tools/gpu/round.sh" "$new/run.sh"
cp "$src/tools/gpu/summarize.py" "$src/tools/gpu/torch_decode.py" "$new/tools/"
cp "$src/tools/gpu/bundle-README.md" "$new/README.md"
chmod 755 "$new/run.sh"

python3 "$src/tools/gpu/bundle_elf.py" check "$new" || die "the bundle is not self-contained (above)"

# --- The manifest: how it was built, what it leaves out, each file.
{
  echo "FP8 RL Studio GPU bundle"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
  echo "source: $(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "build: $build_how"
  echo "compiler: $(c++ --version | head -n 1); CUDA: $("${CUDACXX:-nvcc}" --version 2>/dev/null | tail -n 1)"
  "$new/bin/fp8rl" --version | sed -n 1p
  echo "left out: $left_out" | tr '\n' ' '
  echo
  glibc=$(for f in "$new"/bin/* "$new"/lib/*; do objdump -T "$f" 2>/dev/null; done |
    grep -o 'GLIBC_2\.[0-9]*' | sort -V | tail -n 1)
  echo "needs: glibc >= ${glibc#GLIBC_} (the newest symbol version its files ask for)"
  echo "from the GPU machine: glibc, the NVIDIA driver (libcuda.so.1), cuBLASLt (libcublasLt.so.13);"
  echo "  NCCL (libnccl.so.2) only for runs of more than one rank; run.sh finds them and says where"
  echo "files:"
  (cd "$new" && find . -type f ! -name MANIFEST.txt -printf '%s %P\n' | sort -k2 |
    awk '{ printf "  %10d  %s\n", $1, $2 }')
} >"$new/MANIFEST.txt"

rm -rf "$out"
mv "$new" "$out"

# --- Size
bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "bundle.sh: $out: $mib MiB ($bytes bytes) in $(find "$out" -type f | wc -l) files; largest:"
find "$out" -type f -printf '%s %P\n' | sort -rn |
  awk 'NR <= 5 { printf "  %8.1f MiB  %s\n", $1 / 1048576, $2 }'
echo "bundle.sh: built in $((t_built - t_start)) s, assembled in $(($(date +%s) - t_built)) s"
if [ "$max_mib" -gt 0 ] && [ "$bytes" -gt $((max_mib * 1048576)) ]; then
  die "the bundle is $mib MiB, above the limit of $max_mib MiB"
fi
if [ "$max_mib" -gt 0 ]; then echo "bundle.sh: under the limit of $max_mib MiB"; fi
echo "bundle.sh: rehearse it without a GPU: tools/gpu/rehearse-bundle.sh $out"
