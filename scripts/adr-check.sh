#!/bin/sh
# adr-check.sh: which decision records hold on this machine.
#
# Each record in docs/adr/ states, in its '- Holds-if:' line, the condition its decision rests
# on: a bench-map.json command, a row (or a ratio of two rows) and a comparison (syntax in
# docs/adr/README.md). This script builds a release build if it has none, runs each
# condition's command with the quick options the line gives (a few minutes in all, each
# command once), and prints per record the decision, the condition, the value measured here
# with its min-max over the rounds, and holds / flips / too noisy to say; then the machine line
# and "N of M decisions hold on this machine".
#
# It informs, it is not a test: exit status 0 whatever it finds, 2 on a usage error.
#
# usage: scripts/adr-check.sh [--build DIR] [--dry] [--only NNNN[,NNNN...]] [--list]
#                             [--keep DIR] [--bound S] [--budget S] [--superseded]
#   --build DIR  a release build to use (default: $LODESTAR_BUILD if set, else build if it
#                is configured as release, else build-release, configured here if absent)
#   --dry        tiny sizes: checks that every condition can be evaluated, no verdicts
#   --only LIST  only these records (e.g. --only 0001,0004)
#   --list       print each condition and the command it would run; run nothing
#   --keep DIR   keep every command's JSON and text output in DIR
#   --bound S    repeat a too-noisy condition until S seconds of its runs (default 90)
#   --budget S   start no repeat that would end past S seconds of the whole check (default
#                570: every command runs once, then undecided ones again, fewest seconds first)
#   --superseded also run superseded records (reported, not counted)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

usage() {
    sed -n 's/^# \{0,1\}//; /^usage:/,/^  --superseded/p' "$0"
}

build=${LODESTAR_BUILD:-}
pass=
while [ $# -gt 0 ]; do
    case "$1" in
    --help | -h)
        usage
        exit 0
        ;;
    --build)
        [ $# -ge 2 ] || { echo "adr-check.sh: --build needs a directory" >&2; usage >&2; exit 2; }
        build=$2
        shift 2
        ;;
    --only | --keep | --bound | --budget)
        [ $# -ge 2 ] || { echo "adr-check.sh: $1 needs a value" >&2; usage >&2; exit 2; }
        pass="$pass $1 $2"
        shift 2
        ;;
    --dry | --list | --superseded)
        pass="$pass $1"
        shift
        ;;
    *)
        echo "adr-check.sh: unknown argument '$1'" >&2
        usage >&2
        exit 2
        ;;
    esac
done

is_release() {
    [ -f "$1/meson-info/intro-buildoptions.json" ] &&
        python3 -c 'import json,sys
o = {x["name"]: x["value"] for x in json.load(open(sys.argv[1]))}
sys.exit(0 if o.get("buildtype") == "release" else 1)' "$1/meson-info/intro-buildoptions.json"
}

if [ -z "$build" ]; then
    if is_release build; then
        build=build
    else
        build=build-release
    fi
fi
if [ ! -d "$build/meson-info" ]; then
    echo "adr-check.sh: configuring a release build in $build" >&2
    meson setup "$build" -Dbuildtype=release >/dev/null
elif ! is_release "$build"; then
    echo "adr-check.sh: note: $build is not a release build; figures will not be comparable" >&2
fi
ninja -C "$build" >/dev/null || {
    echo "adr-check.sh: building $build failed" >&2
    exit 0
}

# shellcheck disable=SC2086 # $pass holds options and their values, none with spaces
python3 "$top/scripts/adr_check.py" --source-root "$top" --build "$build" $pass || rc=$?
[ "${rc:-0}" = 2 ] && exit 2
exit 0
