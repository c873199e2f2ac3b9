#!/usr/bin/env bash
# Runs every libFuzzer target for a while; a crash fails the run.
#
# usage: scripts/fuzz.sh [-t SECONDS | -T TOTAL] [-j JOBS] [-n] [-b BUILD_DIR] [TARGET...]
#
#   -t SECONDS   time per target (default 60, or $FUZZ_SECONDS)
#   -T TOTAL     a wall-time budget for all targets together instead: they run JOBS at a
#                time, and each gets TOTAL / rounds seconds (at least 10, at most 60), so
#                that adding targets does not lengthen the run (scripts/test.sh: -T 300)
#   -j JOBS      targets run at once (default: the number of CPUs)
#   -n           print the plan (targets, jobs, seconds each) and stop: build and run nothing
#   -b DIR       build folder (default build-fuzz/ in the repository, git-ignored),
#                configured here with clang, -Dfuzz=true, ASan and UBSan
#   TARGET       one of the targets listed after this help, as tests/fuzz/meson.build
#                names them (default: all)
#
# Each target starts from its committed corpus (tests/fuzz/corpus/TARGET), copied to a
# scratch folder so that the inputs libFuzzer finds on the way do not grow the repository.
# When a target crashes (or leaks, or times out), the input is copied into
# tests/fuzz/corpus/TARGET/ as crash-<sha1> so that every later `meson test` replays it,
# and the run fails. The last lines give, per target, the executions and the corpus size.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

SECONDS_PER=${FUZZ_SECONDS:-60}
TOTAL=
JOBS=
BUILD=build-fuzz
# The targets, from the one list tests/fuzz/meson.build builds.
list_targets() {
    sed -n "/^fuzz_targets = \[/,/^\]/ s/^ *'\([a-z0-9_]*\)',\$/\1/p" tests/fuzz/meson.build
}

for arg in "$@"; do
    case "$arg" in
    --help) set -- -h ;; # getopts knows short options only
    --) break ;;
    esac
done
PLAN=0
while getopts "t:T:j:b:nh" opt; do
    case "$opt" in
    n) PLAN=1 ;;
    t) SECONDS_PER=$OPTARG; TOTAL= ;;
    T) TOTAL=$OPTARG ;;
    j) JOBS=$OPTARG ;;
    b) BUILD=$OPTARG ;;
    h)
        awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
        echo
        echo "targets:"
        list_targets | sed 's/^/  /'
        exit 0
        ;;
    *) echo "fuzz.sh: try --help" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
JOBS=${JOBS:-$(nproc)}

TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    mapfile -t TARGETS < <(list_targets)
fi

for v in "$SECONDS_PER" "$TOTAL" "$JOBS"; do
    if [ -n "$v" ] && ! [[ $v =~ ^[1-9][0-9]*$ ]]; then
        echo "fuzz.sh: -t, -T and -j want a positive whole number, not '$v'" >&2
        exit 2
    fi
done
if [ -n "$TOTAL" ]; then
    # the targets run in rounds of JOBS at a time; the rounds share the budget
    SECONDS_PER=$((TOTAL / ((${#TARGETS[@]} + JOBS - 1) / JOBS)))
    [ "$SECONDS_PER" -lt 10 ] && SECONDS_PER=10
    [ "$SECONDS_PER" -gt 60 ] && SECONDS_PER=60
    echo "fuzz.sh: ${#TARGETS[@]} targets, $JOBS at a time, within ${TOTAL} s: ${SECONDS_PER} s each"
fi
if [ "$PLAN" = 1 ]; then
    echo "plan: ${#TARGETS[@]} targets, $JOBS at a time, $SECONDS_PER s each"
    exit 0
fi

if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return d && n; }' |
    clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
    echo "fuzz.sh: clang cannot link libFuzzer (Debian: install libclang-rt-14-dev)" >&2
    exit 1
fi

if [ -f "$BUILD/build.ninja" ]; then
    meson setup --reconfigure "$BUILD" -Dfuzz=true >/dev/null || exit 1
else
    CC=clang CXX=clang++ meson setup "$BUILD" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args=-fno-sanitize-recover=all >/dev/null || exit 1
fi
ninja_targets=()
for t in "${TARGETS[@]}"; do
    ninja_targets+=("tests/fuzz/fuzz_$t")
done
ninja -C "$BUILD" "${ninja_targets[@]}" >/dev/null || exit 1

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Runs one target; writes its log to $WORK/TARGET.log and its status to $WORK/TARGET.rc.
run_one() {
    local t=$1 corpus=$WORK/$1.corpus artifacts=$WORK/$1.artifacts
    mkdir -p "$corpus" "$artifacts"
    cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
    local rc=0
    "$BUILD/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" \
        >"$WORK/$t.log" 2>&1 || rc=$?
    echo "$rc" >"$WORK/$t.rc"
}

running=0
for t in "${TARGETS[@]}"; do
    if [ ! -d "tests/fuzz/corpus/$t" ]; then
        echo "fuzz.sh: unknown target '$t'" >&2
        exit 2
    fi
    echo "fuzz.sh: $t for ${SECONDS_PER} s"
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

failed=0
printf '\n%-20s %-8s %12s %8s %10s\n' target result executions corpus corpus_kb
for t in "${TARGETS[@]}"; do
    rc=$(cat "$WORK/$t.rc" 2>/dev/null || echo 1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$t.log" | tail -n 1)
    files=$(find "$WORK/$t.corpus" -type f | wc -l)
    kb=$(du -sk "$WORK/$t.corpus" | cut -f1)
    result=ok
    if [ "$rc" != 0 ]; then
        result=CRASH
        failed=1
        for a in "$WORK/$t.artifacts"/*; do
            [ -f "$a" ] || continue
            dest=tests/fuzz/corpus/$t/crash-$(sha1sum "$a" | cut -c1-16)
            cp "$a" "$dest"
            echo "fuzz.sh: $t: $(basename "$a") saved as $dest" >&2
        done
        echo "---- $t log (tail) ----" >&2
        tail -n 60 "$WORK/$t.log" >&2
    fi
    printf '%-20s %-8s %12s %8s %10s\n' "$t" "$result" "${execs:-?}" "$files" "$kb"
done
exit $failed
