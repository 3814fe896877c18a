#!/usr/bin/env bash
# scripts/check-settings-doc.sh FP8RL [DOC]
#
# The table of settings in docs/settings.md is `fp8rl train --list-settings --markdown`, the
# settings schema's own rows: prints the difference and exits 1 when the page has fallen behind
# (regenerate the part between the markers with that command). CTest runs it (settings_doc).
set -uo pipefail
fp8rl=$1
doc=${2:-$(cd "$(dirname "$0")/.." && pwd)/docs/settings.md}
start='<!-- fp8rl train --list-settings --markdown -->'
end='<!-- end of the generated table -->'
in_doc=$(awk -v s="$start" -v e="$end" '$0 == e { on = 0 } on { print } $0 == s { on = 1 }' "$doc")
generated=$("$fp8rl" train --list-settings --markdown) || exit 2
if [ "$in_doc" != "$generated" ]; then
  echo "check-settings-doc: $doc differs from '$fp8rl train --list-settings --markdown':"
  diff <(printf '%s\n' "$in_doc") <(printf '%s\n' "$generated")
  exit 1
fi
echo "check-settings-doc: $doc lists the $(grep -c '^| `' <<< "$generated") settings of the schema"
