#!/usr/bin/env bash
# Re-runs the pool's measurements and writes them into docs/measurements/, one command for all:
#   rent-return.txt             build/bench/lodestar-bench rent-return --json rent-return.json
#   rent-return-allocators.txt  bench/env/pool-cost-allocators.sh rent-return (glibc, mimalloc,
#                               jemalloc, tcmalloc by LD_PRELOAD; mimalloc's heap API and
#                               tc_malloc rows in every process)
#   contention.txt              build/bench/lodestar-bench contention --json contention.json
#   capacity.txt                build/bench/lodestar-bench capacity --json capacity.json
# Each new run goes on top of its file, headed by its exact command, the commit and build
# type, the machine (lscpu model name, cpus) and the load average when it started; the runs
# already in the file stay below it verbatim (decision records quote their lines).
#
# usage: bench/env/pool-measurements.sh [--dry] [--only rent-return,contention,...]
#   --dry   quick settings (every command gets --dry); prints the runs, writes no file
#   --only  a comma list of the four names above (without .txt)
# env:   LODESTAR_BUILD (default build; a release build, -Dbuildtype=release), DEST (default
#        docs/measurements)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${LODESTAR_BUILD:-$top/build}
bench=$build/bench/lodestar-bench
dest=${DEST:-$top/docs/measurements}
dry=0
only=rent-return,rent-return-allocators,contention,capacity

while [[ $# -gt 0 ]]; do
    case $1 in
    --dry) dry=1 ;;
    --only)
        [[ $# -ge 2 ]] || { echo "pool-measurements: --only needs a list" >&2; exit 2; }
        only=$2
        shift
        ;;
    -h | --help)
        sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "pool-measurements: unknown option '$1' (try --help)" >&2
        exit 2
        ;;
    esac
    shift
done
IFS=, read -r -a names <<<"$only"
for n in "${names[@]}"; do
    case $n in
    rent-return | rent-return-allocators | contention | capacity) ;;
    *)
        echo "pool-measurements: --only: unknown measurement '$n'" >&2
        exit 2
        ;;
    esac
done
if [[ ! -x $bench ]]; then
    echo "pool-measurements: $bench not found (build first, or set LODESTAR_BUILD)" >&2
    exit 2
fi
buildtype=$("$bench" rent-return --dry --size 64 --allocator none | sed -n 's/^machine: .*(\(.*\) build)$/\1/p')
if [[ $dry == 0 && $buildtype != release ]]; then
    echo "pool-measurements: $build is a '$buildtype' build; measure a release build" \
        "(meson setup build -Dbuildtype=release, or set LODESTAR_BUILD)" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pool-measurements.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
commit=$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)
compiler=$(sed -n "s/^C compiler for the host machine: [^ ]* (\([a-z]* [0-9.]*\).*/\1/p" "$build/meson-logs/meson-log.txt" 2>/dev/null | tail -1)
model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
extra=()
[[ $dry == 1 ]] && extra=(--dry)

# one NAME COMMAND...: runs COMMAND from the repository top with its header into $tmp/NAME.txt
one() {
    local name=$1
    shift
    local f=$tmp/$name.txt rc=0
    {
        echo "\$ $*${extra[*]:+ ${extra[*]}}"
        echo "# written by bench/env/pool-measurements.sh (which re-runs all four files in one command)"
        echo "# build: ${buildtype:-unknown} build in ${build#"$top"/} (${compiler:-compiler unknown}) of $commit; run $(date -u +%Y-%m-%dT%H:%MZ) from the repository top"
        echo "# machine: lscpu model name: ${model:-unknown}; $(nproc) cpus usable (nproc), $(getconf _NPROCESSORS_ONLN) online"
        echo "# load average at start: $(cat /proc/loadavg)"
        echo "# the machine is shared with other sessions' builds and tests: read the rows as interleaved ratios and min-max, not as absolute times"
        echo
    } >"$f"
    echo "pool-measurements: $name" >&2
    (cd "$top" && "$@" "${extra[@]}") >>"$f" 2>&1 || rc=$?
    echo "# exit status: $rc" >>"$f"
    [[ $rc == 0 ]] || { cat "$f" >&2; echo "pool-measurements: $name failed" >&2; exit 1; }
}

json=$tmp/json
mkdir -p "$json"
for n in "${names[@]}"; do
    case $n in
    rent-return) one "$n" "$bench" rent-return --json "$json/rent-return.json" ;;
    rent-return-allocators) one "$n" env LODESTAR_BUILD="$build" OUT="$json/allocators" \
        bench/env/pool-cost-allocators.sh rent-return ;;
    contention) one "$n" "$bench" contention --json "$json/contention.json" ;;
    capacity) one "$n" "$bench" capacity --json "$json/capacity.json" ;;
    esac
    # The header names the command as a reader re-runs it (build/... from the top, the JSON
    # next to it), not the temporary paths used here.
    sed -i -e "1s|$bench|build/bench/lodestar-bench|" -e "1s|$json/||" \
        -e "1s|env LODESTAR_BUILD=[^ ]* OUT=[^ ]* ||" -e "s|$json/allocators|(a temporary directory)|" \
        "$tmp/$n.txt"
done

marker="# ---- earlier runs, kept verbatim because docs/adr quotes their lines ----"
for n in "${names[@]}"; do
    if [[ $dry == 1 ]]; then
        cat "$tmp/$n.txt"
        echo
        continue
    fi
    f=$dest/$n.txt
    {
        cat "$tmp/$n.txt"
        if [[ -s $f ]]; then
            echo
            echo "$marker"
            # the previous top run joins the earlier ones under one marker
            grep -vxF -- "$marker" "$f"
        fi
    } >"$tmp/$n.new"
    mv "$tmp/$n.new" "$f"
    echo "pool-measurements: wrote ${f#"$top"/}" >&2
done
