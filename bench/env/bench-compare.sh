#!/bin/sh
# bench-compare.sh: the benchmark rows of two commits, side by side, interleaved.
#
# Builds BASE and CANDIDATE (release builds, each in a temporary tree from `git archive`, so
# the working tree is never touched), then runs each chosen bench-map row's command for
# both, A B A B ..., in this one session, and prints per row the median of each commit's
# medians over the rounds, their ranges, and the ratio CANDIDATE / BASE (for times, below 1
# the candidate is faster; for a throughput such as Mpairs/s, above 1), with the machine
# line. The workflow of seed 003 for a performance change.
#
# usage: bench/env/bench-compare.sh [--rounds N] [--opts "OPTIONS"] [--keep DIR]
#                                 BASE CANDIDATE [SUBCOMMAND...]
#   BASE, CANDIDATE  commits (anything git rev-parse takes: a38f270, main, HEAD~1)
#   SUBCOMMAND       bench-map.json row names of lodestar-bench commands (default: every
#                    nightly row: load, rent-return, contention, capacity)
#   --rounds N       how many A B pairs (default 3)
#   --opts OPTIONS   added to every command (e.g. "--iterations 9" or "--dry")
#   --keep DIR       keep the trees, builds and JSON outputs in DIR (default: a temporary
#                    directory, removed at the end)
# Exit status: 0 when every run succeeded, 1 when a build or run failed, 2 on a usage error.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)

usage() {
    sed -n 's/^# \{0,1\}//; /^usage:/,/^Exit status/p' "$0"
}

rounds=3
opts=
keep=
while [ $# -gt 0 ]; do
    case "$1" in
    --help | -h)
        usage
        exit 0
        ;;
    --rounds)
        [ $# -ge 2 ] && [ "$2" -ge 1 ] 2>/dev/null || {
            echo "bench-compare.sh: --rounds needs a count >= 1" >&2
            usage >&2
            exit 2
        }
        rounds=$2
        shift 2
        ;;
    --opts)
        [ $# -ge 2 ] || { echo "bench-compare.sh: --opts needs a value" >&2; usage >&2; exit 2; }
        opts=$2
        shift 2
        ;;
    --keep)
        [ $# -ge 2 ] || { echo "bench-compare.sh: --keep needs a directory" >&2; usage >&2; exit 2; }
        keep=$2
        shift 2
        ;;
    --)
        shift
        break
        ;;
    -*)
        echo "bench-compare.sh: unknown option '$1'" >&2
        usage >&2
        exit 2
        ;;
    *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "bench-compare.sh: BASE and CANDIDATE are required" >&2
    usage >&2
    exit 2
fi
base=$1
cand=$2
shift 2
a=$(git -C "$top" rev-parse --verify --quiet "$base^{commit}") || {
    echo "bench-compare.sh: '$base' is not a commit" >&2
    exit 2
}
b=$(git -C "$top" rev-parse --verify --quiet "$cand^{commit}") || {
    echo "bench-compare.sh: '$cand' is not a commit" >&2
    exit 2
}

rows=$(python3 - "$top/bench-map.json" "$@" <<'EOF'
import json, shlex, sys
m = json.load(open(sys.argv[1]))
entries = {e["name"]: e for e in m["nightly"] + m["diagnostics"]}
want = sys.argv[2:] or [e["name"] for e in m["nightly"]]
for w in want:
    e = entries.get(w)
    if e is None or not e["command"].startswith("build/bench/lodestar-bench "):
        sys.stderr.write("bench-compare.sh: '%s' is not a bench-map row of lodestar-bench\n" % w)
        sys.exit(2)
    print(w)
EOF
) || exit 2

if [ -n "$keep" ]; then
    work=$keep
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/lodestar-bench-compare-XXXXXX")
    trap 'rm -rf "$work"' EXIT
fi

build_one() { # $1 label, $2 commit
    tree=$work/$1
    if [ ! -x "$tree/build/bench/lodestar-bench" ]; then
        rm -rf "$tree"
        mkdir -p "$tree"
        git -C "$top" archive "$2" | tar -x -C "$tree"
        echo "bench-compare.sh: building $1 = $2 (release) in $tree/build" >&2
        (cd "$tree" && meson setup build -Dbuildtype=release >build.log 2>&1 &&
            ninja -C build >>build.log 2>&1) || {
            echo "bench-compare.sh: building $2 failed (see $tree/build.log)" >&2
            exit 1
        }
    fi
}
build_one base "$a"
build_one candidate "$b"

mkdir -p "$work/out"
fail=0
r=1
while [ "$r" -le "$rounds" ]; do
    for row in $rows; do
        for side in base candidate; do
            cmd=$(python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))
print([e for e in m["nightly"] + m["diagnostics"] if e["name"] == sys.argv[2]][0]["command"])' \
                "$top/bench-map.json" "$row")
            out=$work/out/$row-$side-$r.json
            # The map's own --json FILE is replaced by ours; build/ is that commit's build.
            # shellcheck disable=SC2086 # $cmd and $opts are word lists
            set -- $(echo "$cmd" | sed 's/ --json [^ ]*//') $opts --json "$out"
            (cd "$work/$side" && "$@" >"$out.txt" 2>&1) || {
                echo "bench-compare.sh: $side round $r: '$*' failed (see $out.txt)" >&2
                fail=1
            }
        done
    done
    r=$((r + 1))
done

python3 - "$work/out" "$rounds" "$a" "$b" $rows <<'EOF'
import json, os, statistics, sys
out, rounds, a, b, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
machine = None
print("bench-compare: base %s vs candidate %s, %d rounds interleaved (A B A B), medians of "
      "each run's median" % (a[:12], b[:12], rounds))
print("load average: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
for row in rows:
    med = {}
    for side in ("base", "candidate"):
        for r in range(1, rounds + 1):
            p = os.path.join(out, "%s-%s-%d.json" % (row, side, r))
            if not os.path.exists(p):
                continue
            d = json.load(open(p))
            if machine is None:
                m = d["machine"]
                machine = "%s, %s cpus | %s | %s %s | %s build" % (
                    m["cpu"], m["cpus"], m["kernel"], m["allocator"], m["allocator_version"],
                    m["build"])
            for x in d["rows"]:
                if x.get("median") is None or not x.get("samples"):
                    continue
                key = (x["table"], x["name"], x["unit"])
                med.setdefault(key, {"base": [], "candidate": []})[side].append(x["median"])
    print()
    print("== %s" % row)
    print("%-58s %-9s %10s %19s %10s %19s %8s" % ("row", "unit", "base", "range", "candidate",
                                                  "range", "cand/base"))
    table = None
    for (t, name, unit), v in med.items():
        if not v["base"] or not v["candidate"]:
            continue
        if t != table:
            print("  %s" % t)
            table = t
        mb, mc = statistics.median(v["base"]), statistics.median(v["candidate"])
        rb = "%.4g-%.4g" % (min(v["base"]), max(v["base"]))
        rc = "%.4g-%.4g" % (min(v["candidate"]), max(v["candidate"]))
        print("  %-56s %-9s %10.4g %19s %10.4g %19s %7.2fx" % (
            name[:56], unit, mb, rb, mc, rc, mc / mb if mb else float("nan")))
print()
print("machine: %s" % (machine or "unknown"))
EOF
exit $fail
