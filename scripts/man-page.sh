#!/usr/bin/env bash
# Writes the man page of `lodestar` or of one of its commands from its --help, with help2man.
#
# usage: scripts/man-page.sh LODESTAR [COMMAND] OUT
#
# The page is lodestar(1) or lodestar-COMMAND(1); its one-line NAME is the command's line in
# `lodestar --help`. help2man runs this script itself (as the "program", with LDS_MAN_*
# set) to get the help: "usage:" is spelled "Usage:" (and a further usage line "or:") for
# help2man's SYNOPSIS, and the
# --max-payload default that --help computes for the machine at hand is left out (the page
# is built once and read on other machines). The build (meson.build) runs this for every
# command; -h or --help prints this and does nothing else.
set -euo pipefail

if [ -n "${LDS_MAN_PROG:-}" ]; then
    # Called by help2man.
    if [ "${1:-}" = --version ]; then
        "$LDS_MAN_PROG" --version | sed -e "s/^lodestar /lodestar${LDS_MAN_COMMAND:+-$LDS_MAN_COMMAND} /" \
            -e 's/ (library [^)]*)$//'
        exit 0
    fi
    # shellcheck disable=SC2086 # no command is an empty word, not an empty argument
    "$LDS_MAN_PROG" ${LDS_MAN_COMMAND:-} "$@" |
        sed -e 's/^usage: /Usage: /' -e 's/^       lodestar /   or: lodestar /' \
            -e 's/^\( *\)(here [^)]*)$/\1(lodestar COMMAND --help shows it for the machine at hand)/'
    exit "${PIPESTATUS[0]}"
fi

case "${1:-}" in
-h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
if [ $# -eq 2 ]; then
    prog=$1 cmd="" out=$2
elif [ $# -eq 3 ]; then
    prog=$1 cmd=$2 out=$3
else
    echo "man-page.sh: usage: man-page.sh LODESTAR [COMMAND] OUT (try --help)" >&2
    exit 2
fi
prog=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")

if [ -z "$cmd" ]; then
    name="build, inspect and query lodestar embedding indexes"
else
    # The command's line of `lodestar --help`, with its continuation lines.
    name=$("$prog" --help | awk -v cmd="$cmd" '
        found && /^           [^ ]/ { sub(/^ +/, ""); line = line " " $0; next }
        found { exit }
        $1 == cmd && /^  [a-z]/ { found = 1; sub(/^  [a-z]+ +/, ""); line = $0 }
        END { print line }')
    if [ -z "$name" ]; then
        echo "man-page.sh: '$cmd' is not among the commands of 'lodestar --help'" >&2
        exit 1
    fi
fi
include=$(mktemp)
trap 'rm -f "$include"' EXIT
{
    echo "[SEE ALSO]"
    if [ -n "$cmd" ]; then
        echo ".BR lodestar (1)"
    else
        echo "The commands' own pages:"
        "$prog" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }' |
            while read -r c; do echo ".BR lodestar\\-$c (1)"; done
    fi
} >"$include"
LDS_MAN_PROG=$prog LDS_MAN_COMMAND=$cmd help2man --no-info --no-discard-stderr \
    --name="$name" --section=1 --source=lodestar --include="$include" \
    --output="$out" "$0"
