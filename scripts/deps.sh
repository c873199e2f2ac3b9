#!/usr/bin/env bash
# Install the Debian packages lodestar needs, if any are missing, in two sets.
#
# usage: scripts/deps.sh [--lab] [--check] [EXTRA_PACKAGE...]
#
#   (default)  the core set: build the library, the program and lodestar-bench, run
#              scripts/demo.sh and the quick suite (werror, asan, tsan stages of
#              scripts/test.sh), pip install the Python package
#   --lab      also the lab: the peers and tools the benchmarks compare with or drive
#              (faiss, gensim, dask, nginx, jemalloc/mimalloc/tcmalloc, liburcu, ck,
#              spin, hyperfine, valgrind...), which the slow suite uses; scripts/test.sh
#              asks for it only when its slow stage runs. A test that needs a lab package
#              skips (exit 77) when it is absent.
#   --check    install nothing: print what is missing of the sets asked for, one per
#              line, and exit 1 if anything is (0 if nothing is)
#
# Does nothing when everything is present. Otherwise runs `apt-get update` once and
# installs what is missing; as root directly, else through sudo. Extra packages
# (for instance npm, for the slow suite's download) are installed the same way;
# a package that provides a program (npm) counts as present when the program is on
# PATH, however it was installed. When another apt or dpkg holds the package manager's
# lock (an unattended upgrade on a fresh machine), apt-get waits for it up to
# LDS_DPKG_LOCK_TIMEOUT seconds (default 600) instead of failing at once. A failing
# apt-get ends the script with exit 1 and a message naming the command and what to do.
# -h or --help prints this and does nothing else.
set -euo pipefail

LAB=0
CHECK=0
EXTRA=()
for arg in "$@"; do
    case "$arg" in
    -h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    --lab) LAB=1 ;;
    --check) CHECK=1 ;;
    -*) echo "deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    *) EXTRA+=("$arg") ;;
    esac
done
LOCK_WAIT=${LDS_DPKG_LOCK_TIMEOUT:-600}
if ! [[ $LOCK_WAIT =~ ^[0-9]+$ ]]; then
    echo "deps.sh: LDS_DPKG_LOCK_TIMEOUT wants whole seconds, not '$LOCK_WAIT'" >&2
    exit 2
fi

# The core set: the library, the program, the demo and the quick suite.
CORE=(
    meson ninja-build pkg-config gcc clang # build (gcc and clang both build -Werror clean)
    libzstd-dev libxxhash-dev libjson-c-dev # libraries (dependency() in meson)
    zlib1g-dev liblzma-dev                  # gzip/.npz deflate and xz inputs of pack
    libcmocka-dev                          # unit tests
    liburing-dev                           # delta reload batched reads (optional: pread fallback)
    libcurl4-openssl-dev curl              # lds_load_url (optional: meson -Dcurl=auto); test_url.py
    zstd                                   # the shipped sample is zstd-compressed
    python3 python3-numpy python3-pytest   # test scripts, fixtures; the Python package's suite
    python3-mesonpy python3-venv git       # pip install . (meson-python), its test
    cmake help2man                         # find_package(lodestar) test; man pages from --help
    g++ libfast-float-dev                  # pack's number parser (optional: meson -Dfast_float=auto)
    libhdf5-dev python3-h5py               # pack --format hdf5 (optional: -Dhdf5=auto); its fixtures
)

# The lab: the benchmarks' peers and tools, and the slow suite (--lab).
LAB_PACKAGES=(
    nginx-light time                       # test_url.py --nginx; bench/compare/load_url.py (GNU time)
    python3-cffi                           # bench/compare/python_binding.py
    python3-distributed python3-dask       # lodestar.dask and its LocalCluster test (suite slow)
    python3-faiss libopenblas0-pthread     # bench/compare/compare_faiss.py (faiss, numpy's sgemm)
    hyperfine gnuplot-nox                  # lodestar-bench: whole-process runs, --plot
    libjemalloc2 libmimalloc2.0            # pool-cost-allocators.sh, live-allocators.sh preload each
    liburcu-dev libck-dev                  # lodestar-bench pin-cost compares lds_live pins with them
    spin                                   # slow suite: the pool protocol's model check
    python3-gensim                         # similar --positive/--negative test; bench/compare/compare_pack.py
    libmimalloc-dev libgoogle-perftools-dev # rent-return: mimalloc heap API and tcmalloc rows
    valgrind binutils                      # scripts/pool-warm-count.sh: callgrind, objdump
    # h-python (issue 28): torch.from_dlpack(index) test (skipped without it; ~170 MB)
    python3-torch
)

PACKAGES=("${CORE[@]}")
[ "$LAB" = 1 ] && PACKAGES+=("${LAB_PACKAGES[@]}")
PACKAGES+=("${EXTRA[@]}")

present() {
    case "$1" in
    npm | hyperfine | curl) command -v "$1" >/dev/null ;;
    *) [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ] ;;
    esac
}

missing=()
for p in "${PACKAGES[@]}"; do
    present "$p" || missing+=("$p")
done
sets="core"
[ "$LAB" = 1 ] && sets="core and lab"
if [ "$CHECK" = 1 ]; then
    [ ${#missing[@]} -eq 0 ] && exit 0
    printf '%s\n' "${missing[@]}"
    exit 1
fi
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all present ($sets)"
    exit 0
fi

if [ "$(id -u)" = 0 ]; then
    as_root=()
elif command -v sudo >/dev/null; then
    as_root=(sudo)
else
    echo "deps: missing ${missing[*]}; run this script as root, or install sudo" >&2
    exit 1
fi

# Runs apt-get with the remaining arguments, waiting up to LOCK_WAIT s for the package
# manager's locks (apt-get waits for dpkg's lock itself; `update`'s lists lock is retried
# here); on failure, says which command failed and what to try.
apt_get() {
    local log rc start=$SECONDS said=0
    log=$(mktemp)
    while :; do
        rc=0
        "${as_root[@]}" apt-get -o DPkg::Lock::Timeout="$LOCK_WAIT" "$@" 2>"$log" || rc=$?
        if [ "$rc" = 0 ] || ! grep -qi 'could not get lock\|unable to lock\|unable to acquire' "$log" ||
            [ $((SECONDS - start)) -ge "$LOCK_WAIT" ]; then
            break
        fi
        if [ "$said" = 0 ]; then
            echo "deps: waiting for the package manager's lock (another apt or dpkg holds it;" \
                "up to $LOCK_WAIT s, LDS_DPKG_LOCK_TIMEOUT)" >&2
            said=1
        fi
        sleep 5
    done
    cat "$log" >&2
    if [ "$rc" != 0 ]; then
        echo "deps: 'apt-get $*' failed (exit $rc)." >&2
        if grep -qi 'lock' "$log"; then
            echo "deps: another apt or dpkg still held the package manager's lock after" \
                "$LOCK_WAIT s; wait for it to finish (or raise LDS_DPKG_LOCK_TIMEOUT) and run" \
                "scripts/deps.sh again." >&2
        else
            echo "deps: check the network and the apt sources, or install by hand:" \
                "sudo apt-get install ${missing[*]}" >&2
        fi
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
}

echo "deps: installing ($sets) ${missing[*]}"
echo "deps: if another apt or dpkg holds its lock, apt-get waits for it up to $LOCK_WAIT s" \
    "(LDS_DPKG_LOCK_TIMEOUT)"
export DEBIAN_FRONTEND=noninteractive
apt_get update -qq
apt_get install -y -qq "${missing[@]}"
