#!/usr/bin/env bash
# Re-runs `lodestar-bench pool-cost --acquire` (acquisition only) under four allocators and prints one table:
#   glibc (default; its mmap threshold adapts), glibc with a fixed MALLOC_MMAP_THRESHOLD_
#   (which turns the adaptation off), jemalloc and mimalloc (Debian's libjemalloc2 and
#   libmimalloc2.0, by LD_PRELOAD). Per size and allocator: malloc against rent, time and
#   page faults, and what the pool buys (malloc time / rent time).
#
# usage: bench/pool-cost-allocators.sh [pool-cost options, e.g. --dry, --full, --size 20589008]
# env:   LODESTAR_BUILD (default build), MMAP_THRESHOLD (default 131072, glibc's static
#        default), OUT (directory for the raw JSON and text, default a new temporary one)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${LODESTAR_BUILD:-$here/../build}
bench=$build/bench/lodestar-bench
threshold=${MMAP_THRESHOLD:-131072}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/pool-cost-allocators.XXXXXX")}
python=${PYTHON:-python3}

if [[ ! -x $bench ]]; then
    echo "pool-cost-allocators: $bench not found (build first, or set LODESTAR_BUILD)" >&2
    exit 2
fi

find_lib() { # prints the path of a shared object known to the dynamic linker
    # awk reads all of its input (no early exit): under pipefail an early exit would let
    # ldconfig die of SIGPIPE and fail the script now and then.
    ldconfig -p | awk -v n="$1" '$1 == n && /x86-64|x86_64|64bit/ && !found { print $NF; found = 1 }'
}
jemalloc=$(find_lib libjemalloc.so.2)
mimalloc=$(find_lib libmimalloc.so.2)

runs=()
run() { # name, then env assignments
    local name=$1
    shift
    echo "pool-cost-allocators: running under $name" >&2
    env "$@" "$bench" pool-cost --acquire --json "$out/$name.json" "${args[@]}" >"$out/$name.txt"
    runs+=("$name")
}
args=("$@")
run glibc
run "glibc-mmap-threshold-$threshold" MALLOC_MMAP_THRESHOLD_="$threshold"
if [[ -n $jemalloc ]]; then
    run jemalloc LD_PRELOAD="$jemalloc"
else
    echo "pool-cost-allocators: libjemalloc.so.2 not found (apt-get install libjemalloc2): skipped" >&2
fi
if [[ -n $mimalloc ]]; then
    run mimalloc LD_PRELOAD="$mimalloc"
else
    echo "pool-cost-allocators: libmimalloc.so.2 not found (apt-get install libmimalloc2.0): skipped" >&2
fi

"$python" - "$out" "${runs[@]}" <<'PY'
import json, os, sys

out, names = sys.argv[1], sys.argv[2:]
docs = [(n, json.load(open(os.path.join(out, n + ".json")))) for n in names]
first = docs[0][1]
print("lodestar-bench pool-cost under %d allocators%s" % (len(docs), " (dry run)" if first["dry"] else ""))
print("machine: %s, %d cpus | %s | lodestar %s (%s build)" % (
    first["machine"]["cpu"], first["machine"]["cpus"], first["machine"]["kernel"],
    first["lodestar_version"], first["machine"]["build"]))
for n, d in docs:
    m = d["machine"]
    extra = " MALLOC_MMAP_THRESHOLD_=%s" % m["malloc_mmap_threshold"] if m.get("malloc_mmap_threshold") else ""
    print("  %-28s %s %s%s" % (n, m["allocator"], m["allocator_version"], extra))
print("raw results: %s" % out)
print()
hdr = ("size", "allocator", "unit", "malloc", "flt/op", "rent", "flt/op", "rent+clear",
       "mmap/call", "flt/op", "stack", "pool buys")
rows = []
tables = []
for t in (r["table"] for r in first["rows"]):
    if t not in tables and "rounding" not in t:
        tables.append(t)
for t in tables:
    for n, d in docs:
        by = {r["name"]: r for r in d["rows"] if r["table"] == t}
        if "rent" not in by:
            continue
        def num(v):
            return "%.0f" % v if v >= 1000 else "%.1f" % v if v >= 10 else "%.3g" % v
        def med(k):
            return num(by[k]["median"]) if k in by else "-"
        def flt(k):
            return num(by[k]["page_faults"]) if k in by else "-"
        m, r = by.get("malloc"), by["rent"]
        buys = "%.2fx" % (m["median"] / r["median"]) if m and r["median"] > 0 else "-"
        rows.append((t.split(" (")[0], n, r["unit"], med("malloc"), flt("malloc"), med("rent"),
                     flt("rent"), med("rent + clear on return"), med("mmap per call"),
                     flt("mmap per call"), med("stack"), buys))
    rows.append(None)
w = [max(len(h), *(len(r[i]) for r in rows if r)) for i, h in enumerate(hdr)]
line = lambda r: "  ".join(c.rjust(w[i]) if i > 1 else c.ljust(w[i]) for i, c in enumerate(r))
print(line(hdr))
for r in rows:
    print(line(r) if r else "")
print("pool buys = malloc median / rent median (above 1: renting is faster); flt/op = minor page "
      "faults per operation (every page touched once per operation)")
PY
