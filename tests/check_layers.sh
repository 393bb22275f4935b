#!/bin/bash
# check_layers.sh: the layers of docs/design.md point down only. A file of a layer includes
# fplab headers of its own layer and of the layers below it, never of one above:
#   util/ < formats/ < kernels/ < autocast/ < trainer/ < experiments/ < cli/
# util/ is the bottom: it includes nothing of fplab's but itself. An include without a folder
# ("round_internal.h") is the including file's own folder. tests/, bench/, tools/ and python/
# stand outside the order and may include any layer. Run by `make check-layers` (part of make test).
# Exit status: 0 all good, 1 an include that points up (listed).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 2
layers=(util formats kernels autocast trainer experiments cli)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0 n=0
for d in "${layers[@]}"; do
    r=$(rank "$d")
    while IFS=: read -r file line inc; do
        n=$((n + 1))
        [[ $inc == */* ]] || continue
        top=${inc%%/*}
        t=$(rank "$top")
        [ "$t" -lt 0 ] && { echo "check_layers: $file:$line includes \"$inc\": not a layer of fplab"; bad=1; continue; }
        if [ "$t" -gt "$r" ]; then
            echo "check_layers: $file:$line includes \"$inc\": $d/ may include only ${layers[*]:0:$((r + 1))}"
            bad=1
        fi
    done < <(grep -Hn -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' $d/*.c $d/*.h $d/*.cu $d/*.cuh $d/*/*.c $d/*/*.h $d/*/*.cu $d/*/*.cuh 2>/dev/null |
             sed 's/:[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)"$/:\1/')
done
[ $bad = 0 ] && echo "check_layers: $n includes in ${layers[*]}, all pointing down"
exit $bad
