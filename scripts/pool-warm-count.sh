#!/usr/bin/env bash
# Counts the instructions of the pool's warm rent+return pair, exactly (callgrind).
#
# usage: scripts/pool-warm-count.sh BUILD [SIZE...]
#
# BUILD is a meson build folder of this tree (a release build: `meson setup B
# --buildtype=release`, then `ninja -C B pool/liblds_pool.a common/liblds_common.a`). For each
# SIZE (bytes; default 64 1024 4096 1048576) a small driver linked with BUILD's pool library
# runs N warm lds_pool_rent + lds_pool_return pairs on a private pool (default options) under
# valgrind --tool=callgrind, for N = 1,000 and 101,000; a call's count is the difference of
# the two runs' totals for that function / 100,000, so set-up and the first (cold) pairs drop
# out. Prints, per size: instructions per rent, per return, per loop iteration (pair plus the
# driver's loop), the same loop's iteration through bench/pool_inline.h (the pair inline
# in the driver, no call when warm), and the lock-prefixed instructions in the two functions
# (objdump -d).
# Exit 77 (meson's "skipped") when valgrind, callgrind_annotate, objdump or cc is missing
# (scripts/deps.sh valgrind binutils). -h or --help prints this.
set -euo pipefail

case "${1:-}" in
-h | --help | "") awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
for tool in valgrind callgrind_annotate objdump cc; do
    if ! command -v "$tool" >/dev/null; then
        echo "pool-warm-count: $tool not found (scripts/deps.sh valgrind binutils): skipped" >&2
        exit 77
    fi
done
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64 1024 4096 1048576)
work=$(mktemp -d "${TMPDIR:-/tmp}/pool-warm-count.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/pair.c" <<'C'
#include "lodestar_pool.h"
#include <stdlib.h>
int main(int argc, char **argv)
{
    size_t size = argc > 2 ? strtoull(argv[1], NULL, 0) : 64;
    long n = argc > 2 ? atol(argv[2]) : 1000;
    lds_pool *pool;
    if (lds_pool_create(NULL, &pool) != LDS_OK)
        return 1;
    for (long i = 0; i < n; i++) {
        lds_lease l;
        if (lds_pool_rent(pool, size, &l) != LDS_OK)
            return 2;
        __asm__ volatile("" : : "r"(l.ptr) : "memory");
        if (lds_pool_return(pool, &l, 0) != LDS_OK)
            return 3;
    }
    lds_pool_free(pool);
    return 0;
}
C
sed -e 's/"lodestar_pool.h"/"pool_inline.h"/' -e 's/lds_pool_rent(/lds_pool_rent_inline(/' \
    -e 's/lds_pool_return(/lds_pool_return_inline(/' "$work/pair.c" >"$work/pair_inline.c"
for d in pair pair_inline; do
    cc -O2 -I"$here/../include" -I"$here/../bench" -o "$work/$d" "$work/$d.c" "$build/pool/liblds_pool.a" \
        "$build/common/liblds_common.a" -lpthread
done
ir() { # FILE FUNCTION: the function's own Ir (TOTAL: the program's), from lines such as
    # "7,473,934 (40.75%)  ???:lds_pool_rent [/path/pair]"
    callgrind_annotate "$1" 2>/dev/null |
        awk -v f="$2" '!done && (f == "TOTAL" ? /PROGRAM TOTALS/ : index($0, ":" f " [")) {
            gsub(",", "", $1); print $1; done = 1 }'
}
locks=$(objdump -d --no-show-raw-insn "$work/pair" |
    awk '/<lds_pool_(rent|return)>:/ { on = 1; next } /^$/ { on = 0 } on && /\tlock /' | wc -l)
printf '%-10s %6s %7s %9s %9s %7s\n' size rent return iteration inline locked
for s in "${sizes[@]}"; do
    for d in pair pair_inline; do
        for n in 1000 101000; do
            valgrind --tool=callgrind --callgrind-out-file="$work/cg.$d.$n" "$work/$d" "$s" "$n" \
                2>/dev/null
        done
    done
    row=()
    for f in pair:lds_pool_rent pair:lds_pool_return pair:TOTAL pair_inline:TOTAL; do
        a=$(ir "$work/cg.${f%%:*}.1000" "${f#*:}")
        b=$(ir "$work/cg.${f%%:*}.101000" "${f#*:}")
        row+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", (b - a) / 100000 }')")
    done
    printf '%-10s %6s %7s %9s %9s %7s\n' "$s" "${row[0]}" "${row[1]}" "${row[2]}" "${row[3]}" "$locks"
done
