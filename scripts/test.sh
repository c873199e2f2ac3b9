#!/usr/bin/env bash
# shellcheck disable=SC2317 # the stage_* functions are called through "stage_$name"
# The whole test suite, in stages. `.ci/run` runs exactly this.
#
# usage: scripts/test.sh [--slow] [--no-slow] [--fuzz] [--only STAGE[,STAGE...]] [--dry-run]
#        scripts/test.sh --timeout-multiplier   (print the one it would use now, and stop)
#
#   --only S,...  run just these stages; a stage named here always runs (--only slow runs
#                 the slow stage without --slow, configuring build-ci if needed)
#   --dry-run     print which stages would run or be skipped, run nothing
#
# Stages, in order (each one a function stage_NAME below; to add one, write the
# function and put its name in STAGES):
#   deps    scripts/deps.sh: the core set; plus the lab set (--lab) and npm when the slow
#           stage will run, then scripts/lab-npm.sh (usearch from npm into .cache/npm)
#   werror  gcc, `meson setup build-ci --werror`, build everything, `meson test`
#           (the default 'quick' setup: suites unit and fuzz, i.e. corpus replay); then a
#           release build with --werror (build-release/, compiled, not tested: gcc -O3 warns
#           where -O0 does not; the slow stage's adr-check reuses it)
#   asan    clang with AddressSanitizer + UndefinedBehaviorSanitizer, -Werror, the same
#           suites (build-asan/)
#   tsan    clang with ThreadSanitizer, the suite 'tsan' (the pool's and loader's
#           concurrency tests) if any test is in it (build-tsan/)
#   slow    the suite 'slow' in build-ci (the full GloVe set, downloaded with npm on
#           first use), then scripts/adr-check.sh's verdicts printed (not gating); runs
#           when CI=true or with --slow
#   fuzz    scripts/fuzz.sh under ASan+UBSan (build-fuzz/): the targets share a budget of
#           FUZZ_BUDGET seconds of wall time (default 300; run CPUs at a time, each target
#           gets its share of the budget, between 10 and 60 s), or each runs FUZZ_SECONDS
#           when that is set; runs when CI=true or with --fuzz
#
# Timeouts: every `meson test` run gets --timeout-multiplier M, where M is
# LDS_TIMEOUT_MULTIPLIER when set (0 turns timeouts off), else the one-minute load average
# divided by the CPUs, rounded up, between 1 and 10: each test's timeout in tests/meson.build
# is sized for a machine running only this suite, and a test on a machine with load L and
# N CPUs runs about L/N times slower. The multiplier used is printed with each run. Run by
# hand on a busy machine: meson test -C build --timeout-multiplier 4.
# The heavy checks (every bench-map.json command and every ADR condition in --dry mode, the
# Dask cluster) are in suite 'slow'; the unit suite keeps their quick structural part.
#
# The sanitizer stages export LDS_SANITIZE (address,undefined or thread) to the tests,
# so that a test which cannot run under a sanitizer (one that loads the library into an
# uninstrumented python with ctypes, one that measures resident memory) can skip itself
# (exit 77) instead of failing.
# Every stage runs even if an earlier one failed (except those that need its build);
# the exit status is 0 only if all passed. The summary gives each stage's status (ok,
# FAILED, or skipped with no time when it did not run) and the last line totals the tests
# of every meson run: "tests: N passed, N failed, N skipped".
# Build folders live in the repository (build-ci/, build-asan/, build-tsan/; git-ignored)
# and are reused on the next run.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1

STAGES=(deps werror asan tsan slow)
SLOW=0
[ "${CI:-}" = true ] && SLOW=1
ONLY=""
DRY=0
PRINT_MULT=0
FUZZ=${FUZZ:-0}
[ "${CI:-}" = true ] && FUZZ=1
while [ $# -gt 0 ]; do
    case "$1" in
    --slow) SLOW=1; shift ;;
    --fuzz) FUZZ=1; shift ;;
    --no-slow) SLOW=0; shift ;;
    --dry-run) DRY=1; shift ;;
    --timeout-multiplier) PRINT_MULT=1; shift ;;
    --only)
        if [ $# -lt 2 ] || [ -z "$2" ]; then
            echo "test.sh: --only wants STAGE[,STAGE...] (try --help)" >&2
            exit 2
        fi
        ONLY=",$2,"; shift 2 ;;
    -h | --help) awk 'NR == 1 || /^# shellcheck/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

# The timeout multiplier for the next `meson test` (see Timeouts above).
timeout_multiplier() {
    if [ -n "${LDS_TIMEOUT_MULTIPLIER:-}" ]; then
        echo "$LDS_TIMEOUT_MULTIPLIER"
        return
    fi
    awk -v n="$(nproc)" '{ m = int($1 / n); if (m < $1 / n) m++; if (m < 1) m = 1; if (m > 10) m = 10; print m }' \
        "${LDS_LOADAVG_FILE:-/proc/loadavg}"
}
if [ "$PRINT_MULT" = 1 ]; then
    timeout_multiplier
    exit 0
fi

RESULTS=$(mktemp -d)
trap 'rm -rf "$RESULTS"' EXIT
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export MESON_TESTTHREADS=${MESON_TESTTHREADS:-$(nproc)}

# Configures build dir $1 with the remaining meson arguments (again if it exists).
setup() {
    local dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson setup --reconfigure "$dir" "$@"
    else
        meson setup "$dir" "$@"
    fi
}

# Keeps the newest meson test log of build dir $1 for the totals.
keep_log() {
    local log
    log=$(find "$1/meson-logs" -name 'testlog*.json' -printf '%T@ %p\n' 2>/dev/null |
        sort -n | tail -n 1 | cut -d' ' -f2-)
    [ -n "$log" ] && cp "$log" "$RESULTS/$(date +%s%N).json"
}

# Runs `meson test` in build dir $1 with the remaining arguments; keeps its log.
mtest() {
    local dir=$1
    shift
    local rc=0 mult
    mult=$(timeout_multiplier)
    echo "meson test: timeout multiplier $mult (load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs)"
    meson test -C "$dir" --print-errorlogs --timeout-multiplier "$mult" "$@" || rc=$?
    keep_log "$dir"
    return "$rc"
}

stage_deps() {
    # The lab set (benchmark peers, allocators, spin...) only for the slow stage that uses it.
    if [ "$SLOW" = 1 ]; then
        scripts/deps.sh --lab npm
        # usearch for compare_usearch.py and its test (they skip without it): not fatal, the
        # npm registry may be out of reach
        scripts/lab-npm.sh || echo "deps: scripts/lab-npm.sh failed (exit $?): compare-usearch and its test will skip"
    else
        scripts/deps.sh
    fi
}

stage_werror() {
    local rc=0
    setup build-ci --werror && meson compile -C build-ci && mtest build-ci || rc=1
    # gcc 12 at -O3 finds maybe-uninitialized and format-truncation cases a debug build does
    # not (two reached main that way); compile the release build with --werror too.
    setup build-release -Dbuildtype=release --werror && meson compile -C build-release || rc=1
    return "$rc"
}

stage_asan() {
    CC=clang CXX=clang++ setup build-asan --werror -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args=-fno-sanitize-recover=all &&
        meson compile -C build-asan && LDS_SANITIZE=address,undefined mtest build-asan
}

stage_tsan() {
    CC=clang CXX=clang++ setup build-tsan -Db_sanitize=thread -Db_lundef=false || return 1
    meson compile -C build-tsan || return 1
    # Capture the list first: `meson test --list | grep -q` under pipefail fails with SIGPIPE
    # when grep stops reading early, which once skipped this stage silently.
    local listed
    listed=$(meson test -C build-tsan --list --suite tsan --no-rebuild 2>/dev/null) || return 1
    if ! grep -q ' / ' <<<"$listed"; then
        echo "no test in suite 'tsan': the concurrency tests are missing" >&2
        return 1
    fi
    # ThreadSanitizer's fixed memory layout clashes with high-entropy address
    # randomisation on recent kernels; setarch -R turns randomisation off for the run.
    local norandom=()
    if setarch "$(uname -m)" -R true 2>/dev/null; then
        norandom=(setarch "$(uname -m)" -R)
    fi
    # The pool's fork handler holds every pool lock across fork() (include/lodestar_pool.h);
    # TSan's deadlock detector tracks at most 64 held locks and then stops the process, so the
    # tests that fork run with it off. Data races are still reported.
    local rc=0 mult
    mult=$(timeout_multiplier)
    echo "meson test: timeout multiplier $mult (load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs)"
    TSAN_OPTIONS="detect_deadlocks=0${TSAN_OPTIONS:+ $TSAN_OPTIONS}" LDS_SANITIZE=thread \
        "${norandom[@]}" meson test -C build-tsan --print-errorlogs --suite tsan --no-rebuild \
        --timeout-multiplier "$mult" || rc=$?
    keep_log build-tsan
    return "$rc"
}

stage_slow() {
    # Alone (--only slow), it configures build-ci itself; meson test builds what it needs.
    if [ ! -f build-ci/build.ninja ]; then
        setup build-ci --werror || return 1
    fi
    local rc=0
    mtest build-ci --setup slow --suite slow || rc=$?
    # Which decision records hold on this machine (docs/adr/README.md): the verdict is printed,
    # never gating; a flip is information for the records, not a failure of the stage. A release
    # build in build-release (configured by the script if absent); under 10 minutes.
    echo "== adr-check (informs, does not gate)"
    scripts/adr-check.sh --build build-release || echo "adr-check did not run (ignored)"
    return "$rc"
}

# Stage fuzz: every libFuzzer target under ASan+UBSan (scripts/fuzz.sh, build-fuzz/), within
# a total of $FUZZ_BUDGET (default 300) s of wall time shared among the targets, or for
# $FUZZ_SECONDS s each when set; a crash fails and its input joins tests/fuzz/corpus/.
# Runs when CI=true or with --fuzz.
STAGES+=(fuzz)
stage_fuzz() {
    if [ -n "${FUZZ_SECONDS:-}" ]; then
        scripts/fuzz.sh -t "$FUZZ_SECONDS"
    else
        scripts/fuzz.sh -T "${FUZZ_BUDGET:-300}"
    fi
}

# Why stage $1 will not run (printed), or nothing (status 1) if it will.
skip_reason() {
    case "$1" in
    slow) [ "$SLOW" = 1 ] && return 1; echo "run with --slow, --only slow, or CI=true" ;;
    fuzz) [ "$FUZZ" = 1 ] && return 1; echo "run with --fuzz, --only fuzz, or CI=true" ;;
    *) return 1 ;;
    esac
}

if [ -n "$ONLY" ]; then
    for s in ${ONLY//,/ }; do
        if [ "$(type -t "stage_$s")" != function ] || [[ " ${STAGES[*]} " != *" $s "* ]]; then
            echo "test.sh: unknown stage '$s' (stages: ${STAGES[*]})" >&2
            exit 2
        fi
    done
    # A stage named in --only runs, whatever --slow or --fuzz say.
    [[ $ONLY == *",slow,"* ]] && SLOW=1
    [[ $ONLY == *",fuzz,"* ]] && FUZZ=1
fi

declare -A status seconds
failed_any=0
for s in "${STAGES[@]}"; do
    if [ -n "$ONLY" ] && [[ $ONLY != *",$s,"* ]]; then
        continue
    fi
    if reason=$(skip_reason "$s"); then
        [ "$DRY" = 1 ] || printf '\n======== stage %s ========\nskipped (%s)\n' "$s" "$reason"
        status[$s]=skipped
        continue
    fi
    if [ "$DRY" = 1 ]; then
        status[$s]="would run"
        continue
    fi
    printf '\n======== stage %s ========\n' "$s"
    start=$(date +%s)
    if "stage_$s"; then status[$s]=ok; else status[$s]=FAILED; failed_any=1; fi
    seconds[$s]=$(($(date +%s) - start))
done

printf '\n======== summary ========\n'
for s in "${STAGES[@]}"; do
    case "${status[$s]:-}" in
    "") ;;
    ok | FAILED) printf '%-8s %-7s %4d s\n' "$s" "${status[$s]}" "${seconds[$s]}" ;;
    *) printf '%-8s %s\n' "$s" "${status[$s]}" ;;
    esac
done
if [ "$DRY" = 1 ]; then
    echo "tests: none run (--dry-run)"
    exit 0
fi
python3 - "$RESULTS" <<'EOF'
import json, os, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for name in sorted(os.listdir(sys.argv[1])):
    with open(os.path.join(sys.argv[1], name)) as f:
        for line in f:
            r = json.loads(line).get("result", "")
            if r in ("OK", "EXPECTEDFAIL"):
                counts["passed"] += 1
            elif r == "SKIP":
                counts["skipped"] += 1
            else:
                counts["failed"] += 1
print(f"tests: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
EOF
exit $failed_any
