#!/usr/bin/env bash
# Install the Debian packages lodestar needs to build, demo and test, if any are missing.
#
# usage: scripts/deps.sh [EXTRA_PACKAGE...]
#
# Does nothing when everything is present. Otherwise runs `apt-get update` once and
# installs what is missing; as root directly, else through sudo. Extra packages
# (for instance npm, for the slow suite's download) are installed the same way;
# a package that provides a program (npm) counts as present when the program is on
# PATH, however it was installed. -h or --help prints this and does nothing else.
set -euo pipefail

for arg in "$@"; do
    case "$arg" in
    -h | --help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
    -*) echo "deps.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

PACKAGES=(
    meson ninja-build pkg-config gcc clang # build (gcc and clang both build -Werror clean)
    libzstd-dev libxxhash-dev libjson-c-dev # libraries (dependency() in meson)
    zlib1g-dev liblzma-dev                  # gzip/.npz deflate and xz inputs of pack
    libcmocka-dev                          # unit tests
    libcurl4-openssl-dev                   # lds_load_url (optional: meson -Dcurl=auto)
    nginx-light curl time                  # test_url.py --nginx; bench/load_url.py (GNU time)
    zstd                                   # the shipped sample is zstd-compressed
    python3 python3-numpy                  # test scripts, fixtures and comparisons
    python3-mesonpy python3-venv git       # pip install . (meson-python), its test
    python3-pytest python3-cffi            # the Python package's suite; bench/python_binding.py
    python3-distributed python3-dask       # lodestar.dask and its LocalCluster test
    python3-faiss libopenblas0-pthread     # bench/compare_faiss.py (faiss, numpy's sgemm)
    hyperfine gnuplot-nox                  # lodestar-bench: whole-process runs, --plot
    libjemalloc2 libmimalloc2.0            # pool-cost-allocators.sh, live-allocators.sh preload each
    liburcu-dev libck-dev                  # lodestar-bench pin-cost compares lds_live pins with them
    spin                                   # slow suite: the pool protocol's model check
    cmake help2man                         # find_package(lodestar) test; man pages from --help
    python3-gensim                         # similar --positive/--negative test; bench/compare_pack.py
    libmimalloc-dev libgoogle-perftools-dev # rent-return: mimalloc heap API and tcmalloc rows
    g++ libfast-float-dev                  # pack's number parser (optional: meson -Dfast_float=auto)
    valgrind binutils                      # scripts/pool-warm-count.sh: callgrind, objdump
    libhdf5-dev python3-h5py               # pack --format hdf5 (optional: -Dhdf5=auto); its fixtures
    # h-python (issue 28): torch.from_dlpack(index) test (skipped without it; ~170 MB)
    python3-torch
)
PACKAGES+=("$@")

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
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps: all present"
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

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq "${missing[@]}"
