# Sourced (not run) by bench/env/pool-cost-allocators.sh and bench/env/live-allocators.sh: the one copy
# of "run this lodestar-bench command under each allocator", glibc as it is, glibc with a fixed
# mmap threshold, and jemalloc, mimalloc and tcmalloc by LD_PRELOAD of Debian's shared objects.
#
#   allocators_run TAG RUN_ONE ALLOCATOR...
#
# calls `RUN_ONE NAME [VAR=VALUE...]` once per allocator that is installed, in the order given,
# with the environment assignments that select it, and appends NAME to the array
# allocators_ran; one that is not installed is skipped with a line on stderr naming the Debian
# package. ALLOCATOR is glibc, glibc-mmap-threshold-BYTES, jemalloc, mimalloc or tcmalloc.
# RUN_ONE typically does: env "$@" "$bench" SUBCOMMAND --json "$out/$name.json" ...

allocators_ran=()

allocators_find_lib() { # prints the path of a shared object known to the dynamic linker
    # awk reads all of its input (no early exit): under pipefail an early exit would let
    # ldconfig die of SIGPIPE and fail the script now and then.
    ldconfig -p | awk -v n="$1" '$1 == n && /x86-64|x86_64|64bit/ && !found { print $NF; found = 1 }'
}

allocators_run() {
    local tag=$1 run_one=$2 name soname package lib
    local -a env_set
    shift 2
    for name in "$@"; do
        soname=
        case $name in
        glibc) env_set=() ;;
        glibc-mmap-threshold-*) env_set=("MALLOC_MMAP_THRESHOLD_=${name##*-}") ;;
        jemalloc) soname=libjemalloc.so.2 package=libjemalloc2 ;;
        mimalloc) soname=libmimalloc.so.2 package=libmimalloc2.0 ;;
        tcmalloc) soname=libtcmalloc_minimal.so.4 package=libtcmalloc-minimal4 ;;
        *)
            echo "$tag: unknown allocator '$name'" >&2
            return 2
            ;;
        esac
        if [[ $name == tcmalloc && -n ${LDS_SANITIZE:-} ]]; then
            # tcmalloc leaks one object at its start-up (MallocExtension::Register), which
            # LeakSanitizer reports; a sanitizer build's malloc is the sanitizer's anyway.
            echo "$tag: tcmalloc skipped under LDS_SANITIZE=$LDS_SANITIZE" >&2
            continue
        fi
        if [[ -n $soname ]]; then
            lib=$(allocators_find_lib "$soname")
            if [[ -z $lib ]]; then
                echo "$tag: $soname not found (apt-get install $package): skipped" >&2
                continue
            fi
            env_set=("LD_PRELOAD=$lib")
        fi
        echo "$tag: running under $name" >&2
        "$run_one" "$name" "${env_set[@]}"
        allocators_ran+=("$name")
    done
}
