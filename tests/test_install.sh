#!/usr/bin/env bash
# Installed programs start from any prefix: install the build into a scratch DESTDIR, move
# the installed tree to another prefix (as if configured with --prefix there), and run
# lodestar and lodestar-bench from it with no LD_LIBRARY_PATH and no ldconfig. Each must
# find the liblodestar of its own tree (the $ORIGIN-relative install_rpath in meson.build).
# lodestar-bench is installed only with -Dinstall_bench=true (INSTALL_BENCH is that option,
# "true" or "false"): without it, it must be absent from the installed tree.
#
# usage: test_install.sh MESON BUILD_ROOT PREFIX BINDIR INSTALL_BENCH
set -euo pipefail
MESON=$1 BUILD=$2 PREFIX=$3 BINDIR=$4 INSTALL_BENCH=${5:-false}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$MESON" install -C "$BUILD" --no-rebuild --quiet --destdir "$WORK/stage" >/dev/null
moved="$WORK/elsewhere/not-the-prefix"
mkdir -p "$(dirname "$moved")"
mv "$WORK/stage$PREFIX" "$moved"
fail=0
progs=(lodestar)
if [ "$INSTALL_BENCH" = true ]; then
    progs+=(lodestar-bench)
elif [ -e "$moved/$BINDIR/lodestar-bench" ]; then
    echo "FAIL lodestar-bench: installed although -Dinstall_bench=false"
    fail=1
else
    echo "ok   lodestar-bench: not installed (-Dinstall_bench=false)"
fi
for prog in "${progs[@]}"; do
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
# lodestar.pc: Cflags name lodestar's include directory alone (no HDF5, curl or compression
# include paths: the installed headers include none of them); their link flags are in
# Libs.private, which only a static link reads.
pc=$(find "$moved" -name lodestar.pc | head -n 1)
if [ -z "$pc" ]; then
    echo "FAIL lodestar.pc: not installed"
    fail=1
elif command -v pkg-config >/dev/null; then
    cflags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$moved" --cflags lodestar)
    libs=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --define-variable=prefix="$moved" --libs lodestar)
    if [ "$(echo $cflags)" = "-I$moved/include" ]; then
        echo "ok   pkg-config --cflags lodestar: $cflags"
    else
        echo "FAIL pkg-config --cflags lodestar: '$cflags', expected -I$moved/include alone"
        fail=1
    fi
    case " $libs " in
    *" -llodestar "*) echo "ok   pkg-config --libs lodestar: $libs" ;;
    *) echo "FAIL pkg-config --libs lodestar: '$libs'"; fail=1 ;;
    esac
    if grep -q '^Requires.private:.*hdf5' "$pc"; then
        echo "FAIL lodestar.pc: hdf5 in Requires.private (its Cflags reach consumers)"
        fail=1
    fi
fi
exit $fail
