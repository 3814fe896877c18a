#!/usr/bin/env bash
# scripts/check-layering.sh [SOURCE_DIR]
#
# The layers of docs/DESIGN.md, checked on the includes: every project header a file includes
# ("layer/…") must belong to its own layer or to one below it. Prints each include that reaches
# up or sideways (file, line, header, the layers allowed) and exits 1 if there is any. CTest runs
# it (layering).
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

# Each layer's folder and the include prefixes its files may use (extended regular expression),
# lower layers first; none lists a layer above it.
layers='
engine/core      core/
engine/dist      (core|dist)/
engine/contract  (core|contract)/
engine/stats     (core|stats)/
engine/fp8       (core|fp8)/
engine/text      (core|text)/
engine/backend   (core|fp8|backend)/|dist/communicator\.hpp
kernels          ((core|fp8)/|backend/(backend|cuda_module_api|sampling_rules|rope_rules)\.hpp|dist/communicator\.hpp)
engine/model     ((core|fp8|contract|model)/|backend/(backend|sampling_rules|rope_rules)\.hpp)
engine/rollout   ((core|fp8|contract|model|rollout)/|backend/(backend|sampling_rules)\.hpp)
engine/rl        ((core|fp8|contract|model|rollout|text|rl|dist)/|backend/backend\.hpp)
engine/session   ((core|contract|rl|session|dist)/|backend/backend\.hpp)
engine/store     (core|contract|store)/
engine/groups    (core|contract|store|stats|groups)/
engine/tblog     (core|contract|store|tblog)/
engine/ipc       (core|contract|ipc)/
engine/worker    ((core|contract|store|ipc|session|rl|worker|dist)/|backend/backend_registry\.hpp)
ui               (core|contract|stats|store|groups|ipc|ui)/
app/studio       (core|contract|stats|store|groups|ipc|ui)/
app/fp8rl        (core|contract|stats|fp8|backend|model|rollout|text|rl|session|store|groups|tblog|ipc|worker|dist)/
'

bad=0
checked=0
while read -r dir allowed; do
  [ -n "$dir" ] && [ -d "$dir" ] || continue
  while IFS= read -r -d '' file; do
    checked=$((checked + 1))
    while IFS=: read -r line header; do
      # Only project headers (a layer folder); same-folder includes ("op_case.hpp") are local.
      [[ "$header" == */* ]] || continue
      top=${header%%/*}
      case "$top" in
        core|contract|stats|fp8|text|backend|model|rollout|rl|session|store|groups|tblog|ipc|worker|ui|kernels|dist) ;;
        *) continue ;;
      esac
      if ! [[ "$header" =~ ^$allowed ]]; then
        echo "$file:$line: includes \"$header\" — $dir may include only $allowed"
        bad=1
      fi
    done < <(grep -nE '^#include "[^"]+"' "$file" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
  done < <(find "$dir" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \
             -o -name '*.in' \) -print0)
done <<< "$layers"
if [ $bad = 0 ]; then
  echo "check-layering: $checked files, every include within its layer or below"
fi
exit $bad
