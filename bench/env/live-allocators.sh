#!/usr/bin/env bash
# Re-runs `lodestar-bench live` under glibc, jemalloc and mimalloc (Debian's libjemalloc2 and
# libmimalloc2.0, by LD_PRELOAD) and prints one table: per allocator and strategy, reload time,
# faults per reload, query p99 outside and during reloads, peak RSS over the payload, wrong
# results; and what pooling buys (malloc reload time / pooled-adopt reload time).
#
# usage: bench/env/live-allocators.sh [live options, e.g. --dry, --index .cache/glove/glove-100d.ldsi]
# env:   LODESTAR_BUILD (default build), OUT (directory for the raw JSON and text, default a new
#        temporary one)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${LODESTAR_BUILD:-$here/../../build}
bench=$build/bench/lodestar-bench
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/live-allocators.XXXXXX")}
python=${PYTHON:-python3}
mkdir -p "$out"

if [[ ${1:-} == --help || ${1:-} == -h ]]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
if [[ ! -x $bench ]]; then
    echo "live-allocators: $bench not found (build first, or set LODESTAR_BUILD)" >&2
    exit 2
fi

# shellcheck source=bench/env/allocators.sh
. "$here/allocators.sh"

args=("$@")
run_one() { # name, then env assignments
    local name=$1
    shift
    env "$@" "$bench" live --json "$out/$name.json" "${args[@]}" >"$out/$name.txt"
}
allocators_run live-allocators run_one glibc jemalloc mimalloc
runs=("${allocators_ran[@]}")

"$python" - "$out" "${runs[@]}" <<'PY'
import json, os, sys

out, names = sys.argv[1], sys.argv[2:]
docs = [(n, json.load(open(os.path.join(out, n + ".json")))) for n in names]
first = docs[0][1]
print("lodestar-bench live under %d allocators%s" % (len(docs), " (dry run)" if first["dry"] else ""))
print("machine: %s, %d cpus | %s | lodestar %s (%s build)" % (
    first["machine"]["cpu"], first["machine"]["cpus"], first["machine"]["kernel"],
    first["lodestar_version"], first["machine"]["build"]))
for n, d in docs:
    print("  %-10s %s %s" % (n, d["machine"]["allocator"], d["machine"]["allocator_version"]))
print("index: %s" % first["params"].get("index", "?"))
print("load:  %s" % first["params"].get("load", "?"))
print("raw results: %s" % out)
print()
hdr = ("allocator", "strategy", "reload ms", "min", "max", "faults/reload", "% of pages",
       "p50 us", "p99 us", "p99 reload us", "ratio", "peak RSS/payload", "retired", "wrong")
rows = []
for n, d in docs:
    by = {r["strategy"]: r for r in d["rows"] if "strategy" in r}
    for s in ("pooled-adopt", "pooled-copy", "malloc", "mapped", "pooled-adopt-tcache"):
        r = by.get(s)
        if not r:
            continue
        f = lambda v, p=2: ("%%.%df" % p) % v
        rows.append((n, s, f(r["reload_ms"]), f(r["min"]), f(r["max"]), f(r["faults_per_reload"], 0),
                     f(r["faults_pct_of_pages"], 1) + "%", f(r["p50_us"], 1), f(r["p99_us"], 1),
                     f(r["p99_during_reload_us"], 1), f(r["p99_ratio"]) + "x",
                     f(r["peak_rss_over_payload"]) + "x", "%d" % r["max_retired_pinned"],
                     "%d" % r["wrong_results"]))
    a, m = by.get("pooled-adopt"), by.get("malloc")
    if a and m and a["reload_ms"] > 0:
        rows.append((n, "pool buys", "%.2fx" % (m["reload_ms"] / a["reload_ms"]), "", "",
                     "%.0f -> %.0f" % (m["faults_per_reload"], a["faults_per_reload"]),
                     "", "", "", "", "", "", "", ""))
    rows.append(None)
w = [max(len(h), *(len(r[i]) for r in rows if r)) for i, h in enumerate(hdr)]
line = lambda r: "  ".join(c.rjust(w[i]) if i > 1 else c.ljust(w[i]) for i, c in enumerate(r))
print(line(hdr))
for r in rows:
    print(line(r) if r else "")
print("reload ms = median (min, max) over every reload; faults = minor faults of the reloader "
      "thread per reload (median); ratio = p99 during reloads / p99 outside; pool buys = malloc "
      "reload median / pooled-adopt reload median, and their faults per reload")
PY
