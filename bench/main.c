/*
 * lodestar-bench: benchmarks and diagnostics of lodestar.
 *
 * One program, one subcommand per question. bench-map.json (top level) says
 * which subcommands are nightly rows and which are diagnostics, each with its
 * exact command. An unknown subcommand or option exits 2 with usage on stderr,
 * so a typo never gives a green run.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct subcommand {
    const char *name;
    int (*run)(const bench_opts *o);
    const char *summary;
    const char *help; /* its options, their defaults and its typical run time */
} subcommand;

static const subcommand subcommands[] = {
    {"rent-return", bench_rent_return,
     "warm rent+return pairs per size class, one thread, against malloc/free",
     "warm rent+return pairs of a private pool against malloc+free of the same size, the same\n"
     "pair through LDS_SCOPED_LEASE and other pools (mimalloc's heap API, tcmalloc), one\n"
     "thread, interleaved; then the checked modes (off, canary, poison, guard, bypass) at 4 KiB.\n"
     "\noptions:\n"
     "  --size LIST        sizes (default 64, 256, 1K, 4K, 16K, 64K, 256K, 1M, 4M, 16M, 64M)\n"
     "  --allocator LIST   other pools beside the pool and malloc, comma-separated: mi-heap\n"
     "                     (mi_heap_malloc/mi_free on a private mi_heap_new heap), tcmalloc\n"
     "                     (tc_malloc/tc_free); all (default: every one this build has,\n"
     "                     the rest listed as skipped) or none. Each is dlopen()ed, so malloc\n"
     "                     stays the process's own (LD_PRELOAD picks that one)\n"
     "  --iterations N     measured rounds (default 15), --warmup N (default 2)\n"
     "typical run time: a few seconds\n"},
    {"contention", bench_contention,
     "rent+return throughput at 1..32 threads, ratio to 1 thread, usable cores stated",
     "rent+return throughput of one pool at 1..N threads (with and without thread caches)\n"
     "and malloc+free as the control, interleaved; the ratio to one thread.\n"
     "\noptions:\n"
     "  --threads N        highest thread count (default 32: 1, 2, 4, 8, 16, 32 workers);\n"
     "                     the cores usable (sched_getaffinity) are printed, and counts\n"
     "                     above them measure oversubscription, not scaling\n"
     "  --iterations N     measured rounds (default 11), --warmup N (default 2)\n"
     "typical run time: a few seconds to half a minute (more threads, longer)\n"},
    {"capacity", bench_capacity,
     "32..65,536 retained buffers: warm rent/return, rent from empty, drain and refill",
     "C retained buffers of 1 KiB: warm rent/return, rent from an empty pool, drain (rent\n"
     "all C) and refill (return all C) per operation, and drain + refill as one pass over\n"
     "the whole capacity, against malloc.\n"
     "\noptions:\n"
     "  --counts LIST      retained buffers C (default 32,256,4096,65536; 1 to 1048576)\n"
     "  --iterations N     measured rounds (default 15; 9 above 4,096 buffers),\n"
     "                     --warmup N (default 2)\n"
     "typical run time: about ten seconds\n"},
    {"pool-cost", bench_pool_cost,
     "diagnostic: allocate / rent / rent+clear / owner on the whole operation (fill, "
     "consume, checksum, return), same thread and a consumer thread",
     "the whole operation per size: acquire, fill the logical length with a pattern, a\n"
     "consumer reads every byte into a checksum (checked per batch), end the lease; for\n"
     "allocate (malloc), rent, rent + clear on return and owner (the consumer returns the\n"
     "lease), with the consumer on the same thread, on a consumer thread over a queue and\n"
     "on the same thread yielding per chunk. Columns: bytes allocated per op (counted and\n"
     "observed), the first op, faults, residency (pool, allocator, RSS) and time.\n"
     "\noptions:\n"
     "  --size LIST        sizes (default 64, 4K, 64K, 1M, 20589008, 128M)\n"
     "  --full             64 B to 1 GiB\n"
     "  --processes N      each case (strategy, consumer, size) in its own process, N\n"
     "                     per case; the median and range of the process averages\n"
     "  --strategy S       one strategy: allocate, rent, rent-clear or owner\n"
     "  --consumer C       one consumer: same (a call), thread (a consumer thread over a\n"
     "                     queue) or yield (a call that yields before each 64 KiB chunk);\n"
     "                     with --strategy and one --size: exactly one case\n"
     "  --observe          preload liblds-bench-observe.so (the allocation counter at the\n"
     "                     allocator boundary, whole process; --processes always does)\n"
     "  --acquire          price acquisition only (stack, malloc, rent, rent + clear, mmap\n"
     "                     per call; default sizes 64, 1K, 4K, 64K, 1M, 20589008, 128M)\n"
     "  --touch page|full  with --acquire: one byte per page (default) or every byte\n"
     "  --retouch          re-touch a retained buffer (20589008 B, or --size) after 1 s\n"
     "                     idle or 1 s of page-table churn elsewhere in the process (4 KiB\n"
     "                     and huge pages): CPU time and faults of the touch alone\n"
     "  --iterations N     measured rounds (default 15; 9 from 64 MiB, 5 from 512 MiB),\n"
     "                     --warmup N (default 2)\n"
     "typical run time: tens of seconds (the default sizes); --full, minutes\n"},
    {"load", bench_load,
     "load an index: bare read, pooled copy/adopt, mapped, growable; hash while reading vs "
     "two passes",
     "every load path on a generated 10,000 x 512 f32 reference index with keys (and on\n"
     ".cache/glove/glove-100d.ldsi when present): bare read, pooled copy and adopt, hash\n"
     "while reading vs a second pass, unverified, mapped (and populate), growable.\n"
     "\noptions:\n"
     "  --index FILE       load this index instead\n"
     "  --rows N --dim N   shape of the generated index (default 10000 x 512)\n"
     "  --dir DIR          where it is written (default $TMPDIR or /tmp)\n"
     "  --iterations N     measured rounds (default 21), --warmup N (default 3)\n"
     "typical run time: about ten seconds, a minute with GloVe\n"},
    {"load-scale", bench_load_scale,
     "gigabyte loads: the read floor, pooled verified with 1..T readers and huge pages on/off, "
     "mapped, numpy.load; fresh process and warm",
     "for each size, a vectors-only index of N x D f32, the same with keys and a .npy of the\n"
     "same vectors; timed interleaved, each in a fresh process (one load) and warm (loads\n"
     "repeated in one process, the first dropped): bare read() into a pre-touched buffer (the\n"
     "floor), the pooled verified load with 1..T readers (huge pages on, and off at 1 and T),\n"
     "automatic, with keys, the mapped verified load and numpy.load (bench/compare/load_numpy.py, run\n"
     "from the repository's top); warm, also T readers hashing 1 MiB pieces as read (ADR\n"
     "0040). Rows rotate each round. Wall time, CPU time and the kernel's share of it, page\n"
     "faults, peak RSS, and the median as a ratio to the floor and to numpy.load.\n"
     "\noptions:\n"
     "  --size LIST        payload sizes (default 256M,1G; e.g. 256M,1G,2G; --full adds 4G)\n"
     "  --dim N            dimension (default 128; rows = size / (4 dim))\n"
     "  --threads N        most readers (default: the CPUs, at most 8)\n"
     "  --dir DIR          where the files are written (default $TMPDIR or /tmp; reused)\n"
     "  --iterations N     fresh-process rounds (default 5)\n"
     "  --mode cold        add a cold-cache table (the file's pages dropped before each\n"
     "                     process with posix_fadvise DONTNEED: that file only)\n"
     "  --mode populate    only the populate strategies: fault on first write, MAP_POPULATE,\n"
     "                     MADV_POPULATE_WRITE per reader, 1..T readers (diagnostic)\n"
     "typical run time: minutes (the files are written once: about 20 s per GiB)\n"},
    {"reload", bench_reload,
     "diagnostic: 100 cycles of load-then-free-previous, pooled vs plain malloc",
     "100 cycles of load-then-free-the-previous: time, faults per cycle and RSS across the\n"
     "cycles, pooled adopt, pooled copy and plain malloc; then each alone in a fresh process.\n"
     "\noptions:\n"
     "  --cycles N         cycles (default 100)\n"
     "  --index FILE, --rows N --dim N, --dir DIR   as for load\n"
     "typical run time: tens of seconds\n"},
    {"heap-warmth", bench_heap_warmth,
     "diagnostic: a fresh process's first load vs a warmed process's (see heap-warmth.sh)",
     "a fresh process's first load against a warmed process's, each load in its own child\n"
     "process, with and without huge pages (see bench/env/heap-warmth.sh for hyperfine).\n"
     "\noptions:\n"
     "  --loads N          loads before the measured one in a warmed process (default 6)\n"
     "  --index FILE, --rows N --dim N, --dir DIR   as for load\n"
     "  --iterations N     processes per row (default 21), --warmup N (default 2)\n"
     "  --mode fresh|warm|none   (internal: the child's role)\n"
     "typical run time: tens of seconds\n"},
    {"live", bench_live,
     "the service reload loop: query threads on pinned generations while one thread reloads; "
     "pooled adopt/copy, malloc, mapped",
     "T query threads (key lookups plus exact top-k) on whatever generation they pin while\n"
     "one thread reloads the index every R ms, per strategy (pooled-adopt: the live index's\n"
     "own pool; pooled-adopt-sized: a hand-sized private pool; pooled-copy, malloc, mapped,\n"
     "pooled-adopt-tcache), interleaved; every query checks its result against its own pinned\n"
     "generation (wrong_results).\n"
     "\noptions:\n"
     "  --index FILE       reload this index (f32 with keys; default: a generated one)\n"
     "  --rows N --dim N   shape of the generated index (default 40000 x 256)\n"
     "  --changed PCT      each reload's file: PCT of rows updated in place, at random\n"
     "  --clustered PCT    ... PCT of rows updated in place, in runs of >= 64 rows\n"
     "  --appended PCT     ... PCT of rows appended at the end (none of the three: every\n"
     "                     element changes); with any, a full reload of the same file is\n"
     "                     timed after each (full_reload_ms)\n"
     "  --delta on|off     timed reloads as delta reloads (docs/adr/0047, opt-in in the\n"
     "                     library; here default on); the interleaved full reloads never are\n"
     "  --strategy LIST    strategies to run, comma-separated (default: all)\n"
     "  --threads N        query threads (default: cores - 1, at least 1)\n"
     "  --cycles N         reloads per strategy (default 12; 3 rounds of N / 3)\n"
     "  --interval MS      ms between reloads (default 120, 250 with --index)\n"
     "  --dir DIR          where the generated and step files are written (reused)\n"
     "  --json FILE        rows with p50_us, p99_us, p99_during_reload_us, reload_ms, ...\n"
     "faults_per_reload: minor faults of the reloader and its reader threads (the process's\n"
     "minus the query threads'); reload phases and the fill's parts (fill_copy_ms, fill_read_ms,\n"
     "fill_verify_ms, summed over readers) as in docs/adr/0055.\n"
     "environment: LODESTAR_BENCH_LIVE_TRACE=1 each reload's phases and RSS on stderr;\n"
     "what-ifs, never the library's defaults (docs/adr/0055): LODESTAR_BENCH_LIVE_NO_REHASH=1\n"
     "(copied chunks not hashed again), LODESTAR_BENCH_DELTA_PREAD=1 (no io_uring),\n"
     "LODESTAR_BENCH_LIVE_POPULATE_STANDBY=1 (the standby's pages faulted in before each\n"
     "timed delta reload).\n"
     "typical run time: under a minute (a few minutes with GloVe)\n"},
    {"delta", bench_delta,
     "delta reloads of a live index (1% changed, clustered, appended, key edits, a deletion) "
     "against a full reload, per chunk size and section layout",
     "per chunk size and section layout (packed; aligned to chunks, format 1.2), a generated\n"
     "index with ids and keys and new builds of it (1% of rows changed at random, 1% in runs\n"
     "of 64 rows, 1% appended, 1% of keys edited to the same length, one key one byte\n"
     "longer, the middle row deleted, one metadata value edited); interleaved: a full\n"
     "reload of the base, and each build delta-reloaded over the base (docs/adr/0047, 0048,\n"
     "0052). Rows: ms\n"
     "per reload, bytes and chunks read, read_pct of the payload, over_full (time ratio).\n"
     "\noptions:\n"
     "  --rows N, --dim N  the generated index (default 1000000 x 128: 540 MB)\n"
     "  --size LIST        chunk sizes (default 4K, 64K, 4M)\n"
     "  --iterations N     measured rounds (default 5), --warmup N, --dir DIR, --json FILE\n"
     "typical run time: about a minute per chunk size at the default size\n"},
    {"pin-cost", bench_pin_cost,
     "diagnostic: one pin+unpin of the live index vs a shared refcount, rwlock, liburcu, libck",
     "one pin+unpin of lds_live against a shared atomic refcount, a pthread rwlock, liburcu\n"
     "(memb, bp) and libck, one reader alone and two at once, interleaved.\n"
     "\noptions:\n"
     "  --iterations N     measured rounds, --warmup N, --json FILE\n"
     "typical run time: a few seconds\n"},
    {"chunk-sizes", bench_chunk_sizes,
     "diagnostic: format 1.1's chunk size: XXH3-64 per chunk size, verification on 1..T threads",
     "over one payload in memory (default 1 GiB; --size N), interleaved: XXH3-64 of the whole\n"
     "payload (format 1.0's checksum) against the same bytes hashed in chunks of 4 KiB to\n"
     "64 MiB, one thread; then lds_payload_verify_chunks (the mapped path's verification) for 4, 8\n"
     "and 16 MiB chunks on 1..T threads (--threads T, default 2). ADR 0031.\n"
     "\noptions:\n"
     "  --size N           payload bytes (default 1G)\n"
     "  --threads T        the most verification threads (default 2, at most 8)\n"
     "  --iterations N     measured rounds (default 11), --warmup N (default 2), --json FILE\n"
     "typical run time: about a minute at 1 GiB on 2 vCPUs\n"},
    {"read-offset", bench_read_offset,
     "diagnostic: read() of a cached file into buffers at page+0/16/64/256/2048",
     "read() of a file in the page cache into buffers at page+0, +16, +64, +256\n"
     "(LDS_POOL_MAP_OFFSET) and +2048, interleaved: the evidence for the pool's map offset.\n"
     "\noptions:\n"
     "  --size LIST        file sizes (default 1M, 16M, 64M)\n"
     "  --iterations N     measured rounds (default 31), --warmup N (default 3)\n"
     "typical run time: a few seconds\n"},
    {"search", bench_search,
     "exact top-k per dtype, metric, batch (1, 8, 100, 1000), threads and kernel: ms/query, "
     "GFLOP/s, % of read bandwidth",
     "exact top-10 search on rows x dim generated unit rows (default 341,479 x 100, GloVe's\n"
     "shape) or an index's rows, written as each dtype and metric: every combination of dtype,\n"
     "metric, batch size, thread count (1 and --threads) and kernel, interleaved in a rotating\n"
     "order; wall and CPU ms per query, GFLOP/s and the rows' read rate against memchr.\n"
     "\noptions:\n"
     "  --index FILE       search this index's rows (read as f32) instead of generated ones\n"
     "  --rows N --dim N   shape of the generated rows (default 341479 x 100)\n"
     "  --dtype LIST       f32, f16, bf16, i8 (default all four)\n"
     "  --metric LIST      dot, cosine, l2 (default dot)\n"
     "  --batch LIST       queries per call (default 1,8,100,1000; batch 1 is 8 calls)\n"
     "  --threads N        thread counts 1 and N (default 2)\n"
     "  --kernel LIST      kernels (default every one this CPU runs, lds_search_kernels)\n"
     "  --dir DIR          where the temporary indexes are written (default $TMPDIR or /tmp)\n"
     "  --iterations N     measured rounds (default 5), --warmup N (default 1)\n"
     "  --json FILE        also write the rows (per-round wall ms per query, faults per query,\n"
     "                     CPU ms, GFLOP/s, GB/s, % of memchr's rate) through the harness's JSON\n"
     "typical run time: a few minutes (about 10 s with --dry)\n"},
};

#define N_SUBCOMMANDS (sizeof subcommands / sizeof subcommands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: lodestar-bench SUBCOMMAND [options]\n\nsubcommands:\n");
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        fprintf(out, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out,
            "\noptions:\n"
            "  --json FILE        write raw samples and the summary as JSON\n"
            "  --plot FILE.png    draw the sample distributions (gnuplot)\n"
            "  --dry              quick mode: tiny sizes, 2 iterations\n"
            "  --full             the full sweep (pool-cost: 64 B to 1 GiB)\n"
            "  --iterations N     measured rounds (after warm-up)\n"
            "  --warmup N         rounds dropped before measuring\n"
            "  --size LIST        sizes, e.g. 4K or 64,4KiB,20589008,1G (K/M/G/T: 1024^n)\n"
            "  --threads N        highest thread count (contention); query threads (live)\n"
            "  --allocator LIST   rent-return: other pools (mi-heap, tcmalloc, all, none)\n"
            "  --counts LIST      capacity: retained buffer counts, e.g. 32,256,4096,65536\n"
            "  --index FILE       load this index (load, reload, heap-warmth, live)\n"
            "  --rows N --dim N   shape of the generated reference index\n"
            "  --dir DIR          where generated indexes are written (default $TMPDIR or /tmp)\n"
            "  --cycles N         reload cycles (reload: default 100; live: per strategy, default 12)\n"
            "  --interval MS      live: ms between reloads (default 120, 250 with --index)\n"
            "  --changed/--clustered/--appended PCT   live: update pattern of each reload\n"
            "  --acquire          pool-cost: price acquisition only (the earlier tables)\n"
            "  --processes N      pool-cost: each case in its own process, N per case; report\n"
            "                     the median of the process averages and their range\n"
            "  --strategy S --consumer C   pool-cost: one strategy (allocate, rent,\n"
            "                     rent-clear, owner) / consumer (same, thread, yield)\n"
            "  --observe          pool-cost: preload the allocation counter (observed bytes)\n"
            "  --retouch          pool-cost: re-touch a retained buffer after idle or churn\n"
            "  --touch page|full  pool-cost --acquire: write one byte per page (default) or\n"
            "                     every byte\n"
            "  --mode fresh|warm|none --loads N   heap-warmth child process mode\n"
            "  --dtype LIST --metric LIST --batch LIST --kernel LIST   search: what to run\n"
            "  --list             print the subcommand names, one a line\n"
            "  --help             this text\n");
}

/* `lodestar-bench SUBCOMMAND --help`: that subcommand's options, defaults, run time. */
static void sub_usage(const subcommand *sub)
{
    printf("usage: lodestar-bench %s [options]\n\n%s\n\n%s", sub->name, sub->summary, sub->help);
    printf("\ncommon options:\n"
           "  --json FILE        write raw samples and the summary as JSON\n"
           "  --plot FILE.png    draw the sample distributions (gnuplot)\n"
           "  --dry              quick mode: tiny sizes, 2 iterations\n"
           "  --help             this text; `lodestar-bench --help` lists every subcommand\n");
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* --counts LIST: comma-separated integers in [1, 1048576], no empty item. */
static int parse_counts(const char *list, bench_opts *o)
{
    o->n_counts = 0;
    for (const char *q = list;;) {
        char item[32];
        size_t len = strcspn(q, ",");
        long n = 0;
        if (len == 0 || len >= sizeof item || o->n_counts == BENCH_MAX_SIZES)
            return -1;
        memcpy(item, q, len);
        item[len] = '\0';
        if (parse_int(item, 1, 1L << 20, &n) != 0)
            return -1;
        o->counts[o->n_counts++] = (size_t)n;
        q += len;
        if (*q == '\0')
            return 0;
        q++;
    }
}

/* --allocator LIST: all, none, or a comma list of the other pools' names. */
static int check_allocators(const char *list)
{
    if (strcmp(list, "all") == 0 || strcmp(list, "none") == 0)
        return 0;
    if (!*list)
        return -1;
    for (const char *q = list; *q;) {
        size_t item = strcspn(q, ",");
        bool ok = false;
        for (size_t i = 0; i < bench_other_count(); i++) {
            const char *name = bench_other_name(i);
            if (item == strlen(name) && strncmp(q, name, item) == 0)
                ok = true;
        }
        if (!ok)
            return -1;
        q += item;
        if (*q == ',' && *++q == '\0')
            return -1;
    }
    return 0;
}

static int parse_sizes(const char *list, bench_opts *o)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    o->n_sizes = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (o->n_sizes == BENCH_MAX_SIZES || bench_parse_size(tok, &o->sizes[o->n_sizes]) != 0 ||
            o->sizes[o->n_sizes] == 0)
            return -1;
        o->n_sizes++;
    }
    return o->n_sizes ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < N_SUBCOMMANDS; i++)
            printf("%s\n", subcommands[i].name);
        return 0;
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const subcommand *sub = NULL;
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            sub = &subcommands[i];
    if (!sub) {
        fprintf(stderr, "lodestar-bench: unknown subcommand '%s'\n\n", argv[1]);
        usage(stderr);
        return 2;
    }

    bench_opts o;
    memset(&o, 0, sizeof o);
    o.subcommand = sub->name;
    o.warmup = -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        bool takes = true;
        int bad = 0;
        if (strcmp(a, "--dry") == 0) {
            o.dry = true;
            takes = false;
        } else if (strcmp(a, "--full") == 0) {
            o.full = true;
            takes = false;
        } else if (strcmp(a, "--acquire") == 0) {
            o.acquire = true;
            takes = false;
        } else if (strcmp(a, "--retouch") == 0) {
            o.retouch = true;
            takes = false;
        } else if (strcmp(a, "--observe") == 0) {
            o.observe = true;
            takes = false;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            sub_usage(sub);
            return 0;
        } else if (!v) {
            bad = 1;
        } else if (strcmp(a, "--json") == 0) {
            o.json_path = v;
        } else if (strcmp(a, "--plot") == 0) {
            o.plot_path = v;
        } else if (strcmp(a, "--iterations") == 0) {
            bad = parse_int(v, 1, 1000000, &n);
            o.iterations = (int)n;
        } else if (strcmp(a, "--warmup") == 0) {
            bad = parse_int(v, 0, 1000000, &n);
            o.warmup = (int)n;
        } else if (strcmp(a, "--size") == 0) {
            bad = parse_sizes(v, &o);
        } else if (strcmp(a, "--counts") == 0) {
            bad = parse_counts(v, &o);
        } else if (strcmp(a, "--allocator") == 0) {
            o.allocators = v;
            bad = check_allocators(v);
        } else if (strcmp(a, "--threads") == 0) {
            bad = parse_int(v, 1, 256, &n);
            o.threads = (int)n;
        } else if (strcmp(a, "--index") == 0) {
            o.index_path = v;
        } else if (strcmp(a, "--dir") == 0) {
            o.work_dir = v;
        } else if (strcmp(a, "--rows") == 0) {
            bad = parse_int(v, 1, 100000000, &n);
            o.rows = (uint64_t)n;
        } else if (strcmp(a, "--dim") == 0) {
            bad = parse_int(v, 1, 65536, &n);
            o.dim = (uint32_t)n;
        } else if (strcmp(a, "--cycles") == 0) {
            bad = parse_int(v, 1, 1000000, &n);
            o.cycles = (int)n;
        } else if (strcmp(a, "--interval") == 0) {
            bad = parse_int(v, 1, 600000, &n);
            o.interval_ms = (int)n;
        } else if (strcmp(a, "--processes") == 0) {
            bad = parse_int(v, 1, 1000, &n);
            o.processes = (int)n;
        } else if (strcmp(a, "--loads") == 0) {
            bad = parse_int(v, 0, 1000000, &n);
            o.loads = (int)n;
        } else if (strcmp(a, "--mode") == 0) {
            o.mode = v;
        } else if (strcmp(a, "--dtype") == 0) {
            o.dtypes = v;
        } else if (strcmp(a, "--metric") == 0) {
            o.metrics = v;
        } else if (strcmp(a, "--batch") == 0) {
            o.batches = v;
        } else if (strcmp(a, "--kernel") == 0) {
            o.kernels = v;
        } else if (strcmp(a, "--strategy") == 0) {
            o.strategy = v;
            /* live takes a list of its own strategies and checks it itself */
            bad = strcmp(sub->name, "live") != 0 && !bench_pool_cost_key(false, v);
        } else if (strcmp(a, "--changed") == 0 || strcmp(a, "--clustered") == 0 ||
                   strcmp(a, "--appended") == 0) {
            char *end = NULL;
            double pct = strtod(v, &end);
            bad = end == v || *end != '\0' || !(pct > 0 && pct <= 100);
            *(a[2] == 'a' ? &o.appended_pct : a[3] == 'h' ? &o.changed_pct : &o.clustered_pct) = pct;
        } else if (strcmp(a, "--delta") == 0) {
            bad = strcmp(v, "on") != 0 && strcmp(v, "off") != 0;
            o.delta = strcmp(v, "off") == 0;
        } else if (strcmp(a, "--consumer") == 0) {
            o.consumer = v;
            bad = !bench_pool_cost_key(true, v);
        } else if (strcmp(a, "--touch") == 0) {
            o.touch = v;
            bad = strcmp(v, "page") != 0 && strcmp(v, "full") != 0;
        } else {
            fprintf(stderr, "lodestar-bench %s: unknown option '%s'\n\n", sub->name, a);
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "lodestar-bench %s: bad or missing value for %s\n\n", sub->name, a);
            usage(stderr);
            return 2;
        }
        if (takes)
            i++;
    }
    o.argc = argc;
    o.argv = argv;
    int rc = sub->run(&o);
    return rc == 0 ? 0 : 1;
}
