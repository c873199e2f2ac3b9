#!/usr/bin/env bash
# Installed programs start from any prefix: install the build into a scratch DESTDIR, move
# the installed tree to another prefix (as if configured with --prefix there), and run
# lodestar and lodestar-bench from it with no LD_LIBRARY_PATH and no ldconfig. Each must
# find the liblodestar of its own tree (the $ORIGIN-relative install_rpath in meson.build).
#
# usage: test_install.sh MESON BUILD_ROOT PREFIX BINDIR
set -euo pipefail
MESON=$1 BUILD=$2 PREFIX=$3 BINDIR=$4
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$MESON" install -C "$BUILD" --no-rebuild --quiet --destdir "$WORK/stage" >/dev/null
moved="$WORK/elsewhere/not-the-prefix"
mkdir -p "$(dirname "$moved")"
mv "$WORK/stage$PREFIX" "$moved"
fail=0
for prog in lodestar lodestar-bench; do
    exe="$moved/$BINDIR/$prog"
    if [ ! -x "$exe" ]; then
        echo "FAIL $prog: not installed at $exe"
        fail=1
        continue
    fi
    lib=$(env -u LD_LIBRARY_PATH ldd "$exe" | awk '$1 ~ /^liblodestar/ { print $3 }')
    case "$lib" in
    "$moved"/*) echo "ok   $prog finds $lib" ;;
    *) echo "FAIL $prog: liblodestar resolves to '$lib', not inside $moved"; fail=1 ;;
    esac
done
if out=$(env -u LD_LIBRARY_PATH "$moved/$BINDIR/lodestar" --version 2>&1); then
    echo "ok   lodestar --version: $out"
else
    echo "FAIL lodestar --version: $out"
    fail=1
fi
exit $fail
