#!/usr/bin/env bash
# Re-runs a pool benchmark under several allocators, one process each, and prints one table.
#
# Default: `lodestar-bench pool-cost --acquire` (acquisition only) under glibc (default; its
#   mmap threshold adapts), glibc with a fixed MALLOC_MMAP_THRESHOLD_ (which turns the
#   adaptation off), jemalloc, mimalloc and tcmalloc (Debian's libjemalloc2, libmimalloc2.0 and
#   libtcmalloc-minimal4, by LD_PRELOAD). Per size and allocator: malloc against rent, time and
#   page faults, and what the pool buys (malloc time / rent time).
# `rent-return` as the first argument: `lodestar-bench rent-return` under glibc, mimalloc,
#   jemalloc and tcmalloc (LD_PRELOAD). Per size and allocator: the warm rent+return pair, the
#   preloaded malloc+free, and the other pools the program dlopen()s itself (mimalloc's heap
#   API, tc_malloc/tc_free), each median with min-max, and the pool's ratio to each.
# Every allocator's version is printed in the header.
#
# usage: bench/env/pool-cost-allocators.sh [rent-return] [options of that subcommand, e.g. --dry,
#        --size 64,1K,4K,1M, --iterations 9]
# env:   LODESTAR_BUILD (default build), MMAP_THRESHOLD (default 131072, glibc's static
#        default), OUT (directory for the raw JSON and text, default a new temporary one)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${LODESTAR_BUILD:-$here/../../build}
bench=$build/bench/lodestar-bench
threshold=${MMAP_THRESHOLD:-131072}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/pool-cost-allocators.XXXXXX")}
python=${PYTHON:-python3}
mkdir -p "$out"

if [[ ${1:-} == --help || ${1:-} == -h ]]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
if [[ ! -x $bench ]]; then
    echo "pool-cost-allocators: $bench not found (build first, or set LODESTAR_BUILD)" >&2
    exit 2
fi
# shellcheck source=bench/env/allocators.sh
. "$here/allocators.sh"

mode=pool-cost
if [[ ${1:-} == rent-return ]]; then
    mode=rent-return
    shift
fi
args=("$@")
run_one() { # name, then env assignments
    local name=$1
    shift
    if [[ $mode == rent-return ]]; then
        env "$@" "$bench" rent-return --json "$out/$name.json" "${args[@]}" >"$out/$name.txt"
    else
        env "$@" "$bench" pool-cost --acquire --json "$out/$name.json" "${args[@]}" >"$out/$name.txt"
    fi
}
if [[ $mode == rent-return ]]; then
    allocators_run pool-cost-allocators run_one glibc mimalloc jemalloc tcmalloc
    "$python" - "$out" "${allocators_ran[@]}" <<'PY'
import json, os, sys

out, names = sys.argv[1], sys.argv[2:]
docs = [(n, json.load(open(os.path.join(out, n + ".json")))) for n in names]
first = docs[0][1]
print("lodestar-bench rent-return under %d allocators%s" % (len(docs), " (dry run)" if first["dry"] else ""))
print("machine: %s, %d cpus | %s | lodestar %s (%s build)" % (
    first["machine"]["cpu"], first["machine"]["cpus"], first["machine"]["kernel"],
    first["lodestar_version"], first["machine"]["build"]))
for n, d in docs:
    print("  %-10s malloc is %s %s" % (n, d["machine"]["allocator"], d["machine"]["allocator_version"]))
others = []
for key in ("mi-heap", "tcmalloc"):
    v = first["params"].get(key)
    if v:
        print("  %-10s %s" % (key, v))
        if not v.startswith("skipped"):
            others.append(key)
print("raw results: %s" % out)
print()
table = "warm rent+return per size class"
label = {"mi-heap": "mi_heap_malloc+mi_free", "tcmalloc": "tc_malloc+tc_free"}
hdr = ["size", "malloc", "rent+return", "min-max", "malloc+free", "min-max", "pool/malloc",
       "inline", "inline/malloc", "scoped rent"]
for k in others:
    hdr += [label[k], "min-max", "pool/" + k]
sizes = [r["name"][len("rent+return "):] for r in first["rows"]
         if r["table"].startswith(table) and r["name"].startswith("rent+return ")]
num = lambda v: "%.0f" % v if v >= 1000 else "%.1f" % v if v >= 10 else "%.2f" % v


def per_round(a, b):
    """The median of the per-round ratios a/b (the rows alternate within the process)."""
    r = sorted(x / y for x, y in zip(a["samples"], b["samples"]) if y > 0)
    n = len(r)
    return "%.2fx" % ((r[n // 2] if n % 2 else (r[n // 2 - 1] + r[n // 2]) / 2) if n else 0)


rng = lambda r: "%s-%s" % (num(r["min"]), num(r["max"]))
rows = []
for size in sizes:
    for n, d in docs:
        by = {r["name"]: r for r in d["rows"] if r["table"].startswith(table)}
        p, m = by["rent+return " + size], by["malloc+free " + size]
        s = by.get("scoped rent " + size)
        i = by.get("inline rent+return " + size)
        row = [size, n, num(p["median"]), rng(p), num(m["median"]), rng(m), per_round(p, m),
               num(i["median"]) if i else "-", per_round(i, m) if i else "-",
               num(s["median"]) if s else "-"]
        for k in others:
            o = by.get(label[k] + " " + size)
            row += [num(o["median"]), rng(o), per_round(p, o)] if o else ["-"] * 3
        rows.append(row)
    rows.append(None)
w = [max(len(h), *(len(r[i]) for r in rows if r)) for i, h in enumerate(hdr)]
line = lambda r: "  ".join(c.rjust(w[i]) if i > 1 else c.ljust(w[i]) for i, c in enumerate(r))
print(line(hdr))
for r in rows:
    print(line(r) if r else "")
print("ns per warm pair, median and min-max over the rounds of one process; malloc = the "
      "allocator malloc+free resolves to (LD_PRELOAD); pool/X = the median of the per-round "
      "ratios rent+return / X (below 1: the pool is faster; each process interleaves its rows "
      "A B A B, so round i of each shared the machine's state); inline = the same pair through "
      "bench/pool_inline.h")
PY
    exit 0
fi
allocators_run pool-cost-allocators run_one glibc "glibc-mmap-threshold-$threshold" jemalloc mimalloc tcmalloc
runs=("${allocators_ran[@]}")

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
