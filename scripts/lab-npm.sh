#!/usr/bin/env bash
# Install the lab's npm packages, pinned, into .cache/npm (git-ignored): usearch, the peer
# of bench/compare/compare_usearch.py. scripts/test.sh's deps stage runs it after
# `scripts/deps.sh --lab npm` when the slow stage will run.
#
# usage: scripts/lab-npm.sh [--check] [--prefix DIR]
#
#   --check       install nothing: exit 0 if every pinned package is installed at its
#                 version and loads under node, else print what is missing and exit 1
#   --prefix DIR  where node_modules/ goes (default $LDS_NPM_PREFIX, else .cache/npm)
#
# The package ships prebuilt addons (prebuilds/linux-x64/usearch.node, N-API, loaded by
# node-gyp-build at require time), so its install script is not run (--ignore-scripts):
# no compiler, node-gyp or node headers are needed on x86-64 and arm64 Linux. Needs node
# (Debian nodejs; usearch 2.26 asks for node >= 22 in package.json but loads and runs on
# Debian's node 20) and npm (scripts/deps.sh npm). npm checks the tarball against the
# registry's sha512; this script checks that sha512 is the one pinned below.
# Exit status: 0 done; 1 failure; 3 the npm registry could not be reached.
set -euo pipefail

PKG=usearch
VERSION=2.26.2
INTEGRITY=sha512-jz4MKg09LFn6CP/fh9MwY7NV3qQUcXrQIt92LV7CMx44AEnGP1QenhHReua3ETqzgoIYcISJ+SsDoX0DOpFh9Q==

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${LDS_NPM_PREFIX:-$ROOT/.cache/npm}
CHECK=0
while [ $# -gt 0 ]; do
    case "$1" in
    --check) CHECK=1; shift ;;
    --prefix) PREFIX=$2; shift 2 ;;
    -h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    *) echo "lab-npm.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

log() { printf 'lab-npm: %s\n' "$*" >&2; }

# 0 when $PREFIX holds $PKG@$VERSION and node can load it.
installed() {
    local dir=$PREFIX/node_modules/$PKG
    [ -f "$dir/package.json" ] && command -v node >/dev/null &&
        node -e '
            const [dir, want] = process.argv.slice(1);
            const v = require(dir + "/package.json").version;
            if (v !== want) { console.error("lab-npm: " + dir + " is " + v + ", not " + want); process.exit(1); }
            require(dir).exactSearch(new Float32Array([1, 0, 0, 1]), new Float32Array([0, 1]), 2, 1, "ip", 1);
        ' "$dir" "$VERSION"
}

if [ "$CHECK" = 1 ]; then
    installed && exit 0
    echo "$PKG@$VERSION"
    exit 1
fi
if installed; then
    log "$PKG@$VERSION present in $PREFIX"
    exit 0
fi
for p in node npm; do
    command -v "$p" >/dev/null || { log "$p is not installed (scripts/deps.sh npm)"; exit 1; }
done
got=$(npm view "$PKG@$VERSION" dist.integrity 2>/dev/null) || {
    log "the npm registry could not be reached (npm view $PKG@$VERSION)"
    exit 3
}
if [ "$got" != "$INTEGRITY" ]; then
    log "$PKG@$VERSION's integrity on the registry is $got, pinned $INTEGRITY: not installing"
    exit 1
fi
mkdir -p "$PREFIX"
log "npm install $PKG@$VERSION into $PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --ignore-scripts --no-save \
    --loglevel=error "$PKG@$VERSION" >&2
if ! installed; then
    log "$PKG@$VERSION installed but does not load under node $(node --version) (no prebuilt addon for $(uname -m)?)"
    exit 1
fi
log "$PKG@$VERSION ready in $PREFIX"
