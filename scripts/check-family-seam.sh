#!/usr/bin/env bash
# scripts/check-family-seam.sh [SOURCE_DIR]
#
# A model family is one file plus its registration (docs/model-families.md, "Adding a family"):
# for every family file in engine/model/families/ this checks that its ModelFamily is named only
# there and in model_families() (engine/model/family.cpp), that engine/CMakeLists.txt builds it,
# and that no other code branches on a family's name (`== "qwen3_moe"`: ask the model's facts
# instead). It counts the files adding a family touches and checks that the page lists each.
# Exits 1 on any finding. CTest runs it (family_seam).
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
bad=0
families=(engine/model/families/*.cpp)
touched=("engine/model/families/" "engine/model/family.cpp" "engine/CMakeLists.txt")
names=()
for f in "${families[@]}"; do
  symbol=$(grep -oE 'extern const ModelFamily k[A-Za-z0-9]+' "$f" | awk '{print $4}')
  if [ -z "$symbol" ]; then
    echo "$f: defines no 'extern const ModelFamily k…Family'"
    bad=1
    continue
  fi
  users=$(grep -rlw "$symbol" engine app ui kernels --include='*.cpp' --include='*.hpp' --include='*.cu' | sort)
  want=$(printf '%s\n' "$f" engine/model/family.cpp | sort)
  if [ "$users" != "$want" ]; then
    echo "$symbol is named outside its file and model_families(): $(echo "$users" | tr '\n' ' ')"
    bad=1
  fi
  grep -q "families/$(basename "$f")" engine/CMakeLists.txt ||
    { echo "engine/CMakeLists.txt does not build $f"; bad=1; }
  # The family's name: the first string of its definition.
  names+=("$(grep -oE '^ *"[a-z0-9_]+",' "$f" | head -n 1 | tr -d ' ",')")
done
# Code that asks a family's name instead of the model's facts (chat template names aside).
pattern=$(IFS='|'; echo "${names[*]}")
hits=$(grep -rnE "(==|!=) *\"($pattern)\"|\"($pattern)\" *(==|!=)" engine app ui kernels \
         --include='*.cpp' --include='*.hpp' --include='*.cu' | grep -v '^engine/model/families/' |
       grep -v 'template')
if [ -n "$hits" ]; then
  echo "code branches on a family's name (ask the model's facts: experts per layer, …):"
  echo "$hits"
  bad=1
fi
section=$(awk '/^## Adding a family/ { on = 1; next } /^## / { on = 0 } on' docs/model-families.md)
for t in "${touched[@]}"; do
  grep -qF "$t" <<< "$section" || { echo "docs/model-families.md's 'Adding a family' does not list $t"; bad=1; }
done
if [ $bad = 0 ]; then
  echo "check-family-seam: ${#families[@]} families (${names[*]}); adding one touches ${#touched[@]} files: a file in ${touched[0]}, ${touched[1]}, ${touched[2]}"
fi
exit $bad
