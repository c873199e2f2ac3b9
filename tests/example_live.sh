#!/usr/bin/env bash
# Runs the README's service-loop example (tests/example_live.c) on an index packed from the
# tiny GloVe fixture and checks its output line by line: three requests, each on the
# generation the previous reload swapped in, each finding "queen" at row 1.
#
# usage: example_live.sh LODESTAR EXAMPLE_LIVE FIXTURES_DIR
set -euo pipefail
lodestar=$1 example=$2 fixtures=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/lds-example-live.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$lodestar" pack "$fixtures/tiny.glove.txt" "$work/tiny.ldsi" >/dev/null
got=$("$example" "$work/tiny.ldsi" queen)
want=$'generation 1: queen OK at row 1\ngeneration 2: queen OK at row 1\ngeneration 3: queen OK at row 1'
if [[ $got != "$want" ]]; then
    printf 'FAIL example_live output:\n%s\nwanted:\n%s\n' "$got" "$want"
    exit 1
fi
if "$example" "$work/missing.ldsi" queen 2>/dev/null; then
    echo "FAIL example_live accepted a missing index"
    exit 1
fi
echo "ok   example_live: three requests on generations 1, 2, 3; a missing index is refused"
