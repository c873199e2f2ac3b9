#!/usr/bin/env bash
# heap-warmth as whole processes, under hyperfine: what are warm pages worth?
#
# First `lodestar-bench heap-warmth` (each child process times its own last load),
# then hyperfine over processes that load the same file 0, 1 and 11 times:
#   first load in a fresh process = t(1 load)  - t(0 loads)
#   a load in a warmed process    = (t(11 loads) - t(1 load)) / 10
# The file is read before timing (hyperfine --warmup), so the page cache is warm for all.
#
# usage: bench/env/heap-warmth.sh [--dry] [--index FILE]
# env:   LODESTAR_BUILD (default build), TMPDIR (where the reference index is written)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${LODESTAR_BUILD:-$here/../../build}
bench=$build/bench/lodestar-bench
python=${PYTHON:-python3}
dry=
index=
while [[ $# -gt 0 ]]; do
    case $1 in
    --dry) dry=--dry ;;
    --index) index=$2; shift ;;
    *) echo "usage: bench/env/heap-warmth.sh [--dry] [--index FILE]" >&2; exit 2 ;;
    esac
    shift
done
if ! command -v hyperfine >/dev/null; then
    echo "heap-warmth.sh: hyperfine not found (apt-get install hyperfine)" >&2
    exit 1
fi
dir=${TMPDIR:-/tmp}
if [[ -z $index ]]; then
    if [[ -n $dry ]]; then index=$dir/lodestar-bench-ref-200x16.ldsi; else index=$dir/lodestar-bench-ref-10000x512.ldsi; fi
    "$bench" heap-warmth $dry --dir "$dir"
else
    "$bench" heap-warmth $dry --index "$index"
fi

runs=30
warmup=3
if [[ -n $dry ]]; then runs=3; warmup=1; fi
json=$(mktemp "$dir/heap-warmth.XXXXXX.json")
trap 'rm -f "$json"' EXIT
echo
hyperfine -N --style basic --warmup "$warmup" --runs "$runs" --export-json "$json" \
    -n "0 loads" "$bench heap-warmth --mode child --loads 0 --index $index" \
    -n "1 load" "$bench heap-warmth --mode child --loads 1 --index $index" \
    -n "11 loads" "$bench heap-warmth --mode child --loads 11 --index $index"
echo
"$python" - "$json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
t0, t1, t11 = (r[k]["median"] * 1e3 for k in ("0 loads", "1 load", "11 loads"))
first, warm = t1 - t0, (t11 - t1) / 10
print("whole processes (hyperfine medians): 0 loads %.2f ms, 1 load %.2f ms, 11 loads %.2f ms" % (t0, t1, t11))
print("first load in a fresh process: %.2f ms; a load in a warmed process: %.2f ms; ratio %.2fx"
      % (first, warm, first / warm if warm > 0 else float("nan")))
PY
