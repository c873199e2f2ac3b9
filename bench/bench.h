/*
 * lodestar-bench: the shared harness.
 *
 * Every subcommand builds a list of alternatives (bench_alt) and hands them to
 * bench_interleave(), which runs them round-robin in one process (A B A B ...),
 * drops the warm-up rounds and records, per sample: the time, the minor page
 * faults (getrusage) and the resident bytes afterwards (/proc/self/statm).
 * Results live in a bench_report: tables of rows, each row with its samples and
 * named extra columns grouped under a heading (allocation, residency, ...).
 * The report prints as text, and optionally as JSON and as a gnuplot PNG.
 */
#ifndef LDS_BENCH_H
#define LDS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lodestar.h"

#define BENCH_MAX_SIZES 64

/* Options shared by every subcommand; main.c parses them. */
typedef struct bench_opts {
    const char *subcommand;
    const char *json_path;         /* --json FILE, or NULL */
    const char *plot_path;         /* --plot FILE.png, or NULL */
    bool dry;                      /* --dry: tiny sizes, 2 iterations */
    bool full;                     /* --full: the full sweep */
    int iterations;                /* measured rounds; 0 = the subcommand's default */
    int warmup;                    /* dropped rounds; -1 = the subcommand's default */
    size_t sizes[BENCH_MAX_SIZES]; /* --size LIST (bytes) */
    size_t n_sizes;                /* 0 = the subcommand's default sweep */
    int threads;                   /* --threads N: the highest thread count; 0 = default */
    const char *index_path;        /* --index FILE: load this index instead of generating */
    const char *work_dir;          /* --dir DIR: where generated indexes go */
    uint64_t rows;                 /* --rows N for the generated reference index */
    uint32_t dim;                  /* --dim N */
    int cycles;                    /* --cycles N (reload) */
    const char *mode;              /* --mode NAME (heap-warmth child) */
    int loads;                     /* --loads N (heap-warmth child) */
    const char *touch;             /* --touch page|full (pool-cost) */
    int interval_ms;               /* --interval MS between reloads (live); 0 = default */
    /* live: update patterns of each reload's new file, percent of rows (0 = none; none at
       all = every element of every row changes): --changed (in place, at random),
       --clustered (in place, runs of >= 64 rows), --appended (rows added at the end) */
    double changed_pct, clustered_pct, appended_pct;
    int delta; /* live --delta: 0 = on (this bench's default), 1 = off */
    bool acquire;                  /* --acquire: pool-cost prices acquisition only */
    bool retouch;                  /* --retouch: pool-cost re-touches a retained buffer */
    int processes;                 /* --processes N: pool-cost re-run in N fresh processes */
    const char *strategy;          /* --strategy allocate|rent|rent-clear|owner (pool-cost) */
    const char *consumer;          /* --consumer same|thread|yield (pool-cost) */
    bool observe;                  /* --observe: pool-cost preloads its allocation counter */
    int argc;                      /* the program's own arguments, for re-running it */
    char **argv;

    /* rent-return --allocator LIST: other pools beside malloc; NULL = all this build has */
    const char *allocators;
    /* capacity --counts LIST: retained buffer counts; n_counts 0 = the default points */
    size_t counts[BENCH_MAX_SIZES];
    size_t n_counts;
    /* search: --dtype, --metric, --batch, --kernel LISTs (comma-separated); NULL = default */
    const char *dtypes, *metrics, *batches, *kernels;
} bench_opts;

/* How a row's samples are expressed. */
typedef enum bench_scale {
    BENCH_NS_PER_OP, /* elapsed ns / ops */
    BENCH_US,        /* elapsed microseconds per op */
    BENCH_MS,        /* elapsed ms per op (an op is one load, one cycle, ...) */
    BENCH_MOPS       /* ops / elapsed, in millions per second (higher is better) */
} bench_scale;

/* Kinds of extra columns, for formatting. */
typedef enum bench_kind {
    BENCH_BYTES, /* printed exactly and in IEC units */
    BENCH_COUNT, /* integer */
    BENCH_NUM,   /* decimal */
    BENCH_RATIO, /* "1.23x" */
    BENCH_PCT,   /* "12.3%" */
    BENCH_TEXT   /* a string */
} bench_kind;

typedef struct bench_report bench_report;
typedef struct bench_row bench_row;

typedef struct bench_alt {
    const char *name;
    bench_scale scale;
    const char *unit; /* e.g. "ns/pair"; printed and written to JSON */
    /* Runs one sample of `ops` operations. Returns 0, or -1 after printing why.
       May store its own elapsed time (threads timing themselves); 0 = the
       harness's clock around the call. */
    int (*run)(void *ctx, uint64_t ops, uint64_t *elapsed_ns);
    void *ctx;
    uint64_t ops;
    bench_row *row; /* created by the caller with bench_row_new */
} bench_alt;

/* ---- clocks and counters ---- */
uint64_t bench_now_ns(void);
uint64_t bench_minflt(void); /* minor page faults of the process so far */
uint64_t bench_rss(void);    /* resident bytes now (statm) */
/* Makes the file at `path` resident in the page cache before a "warm" timing: the pages
   mincore(2) finds absent (evicted, e.g. by a DAMON pageout scheme) are read back with
   pread. Returns the bytes it read (0: all resident already), UINT64_MAX on an error. */
uint64_t bench_file_resident(const char *path);
size_t bench_page_size(void);
/* Keeps the compiler from removing work whose result is unused. */
static inline void bench_escape(const void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}
/* Writes one byte per page over [p, p+n) (and the last byte), as a reader would. */
void bench_touch_pages(void *p, size_t n);
/* Parses "64", "4K", "4KiB", "20589008", "1G": digits, then K, M, G or T (powers of 1024,
   either case) optionally followed by "iB", as the lodestar program's sizes. 0 on success. */
int bench_parse_size(const char *s, size_t *out);
/* "20.6 MB"-style IEC string ("19.6 MiB") into buf. */
const char *bench_fmt_bytes(double bytes, char *buf, size_t cap);

/* ---- reports ---- */
bench_report *bench_report_new(const bench_opts *opts);
void bench_report_free(bench_report *rep);
/* Starts a new table; rows created afterwards belong to it. `show_time`
   false for tables without samples (e.g. rounding waste). */
void bench_table(bench_report *rep, const char *title, bool show_time);
bench_row *bench_row_new(bench_report *rep, const char *name, const char *unit);
void bench_row_sample(bench_row *row, double value, double faults_per_op, uint64_t rss);
void bench_row_set(bench_row *row, const char *group, const char *key, bench_kind kind,
                   double value);
void bench_row_text(bench_row *row, const char *group, const char *key, const char *text);
/* Summary of a row's samples (0 samples: all zero). */
double bench_row_median(const bench_row *row);
double bench_row_min(const bench_row *row);
double bench_row_faults(const bench_row *row); /* median faults per op */
uint64_t bench_row_rss_max(const bench_row *row);
size_t bench_row_count(const bench_row *row);
double bench_row_at(const bench_row *row, size_t i);
double bench_row_faults_at(const bench_row *row, size_t i);
uint64_t bench_row_rss_at(const bench_row *row, size_t i);
/* A line printed under the current table (verdicts, notes). printf-style. */
void bench_note(bench_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A free-form key/value for the JSON "params" object and the report header. */
void bench_param(bench_report *rep, const char *key, const char *value);
/* Prints the tables to stdout, writes --json and --plot. 0 on success. */
int bench_report_finish(bench_report *rep);
/* Writes only --json (when given; no tables on stdout, no --plot), for a subcommand that
   prints its own table (search). 0 on success or without --json, -1 if the file cannot be
   written (the reason on stderr). */
int bench_report_write_json(const bench_report *rep);

/* Runs the alternatives interleaved: `warmup` dropped rounds, then `iters`
   measured rounds, each round one sample of every alternative in order.
   0 on success, -1 if any run failed. */
int bench_interleave(bench_alt *alts, size_t n, int warmup, int iters);

/* The machine line: "cpu | kernel | allocator version". Static buffer. */
const char *bench_machine_line(void);
const char *bench_allocator_name(void);    /* "glibc", "jemalloc", "mimalloc" */
const char *bench_allocator_version(void); /* "2.36", "5.3.0-0-g...", "209" */
const char *bench_cpu_model(void);         /* lscpu's model name, "AMD EPYC" */
const char *bench_kernel(void);            /* "Linux 6.18.44-fc-v1045" */
const char *bench_host_facts(void);         /* "hypervisor kvm | THP madvise, defrag madvise | DAMON off, swap none" */
const char *bench_build_type(void);        /* meson's buildtype of lodestar-bench, "release" */

/* Defaults resolved against --dry. */
int bench_iters(const bench_opts *o, int normal);
int bench_warmup(const bench_opts *o, int normal);

/* ---- reference index (refindex.c) ---- */
/* Writes `path`: `rows` x `dim` f32 rows of a fixed xorshift sequence in [-0.5, 0.5), with
   the keys "word0".. (unique) when `with_keys`. 0 on success (a failure is printed). */
int bench_write_index(const char *path, uint64_t rows, uint32_t dim, bool with_keys);
/* Writes (once, reused when present and of the same shape) a reference index of
   `rows` x `dim` f32 with keys into `dir`; its path goes to out. 0 on success. */
int bench_reference_index(const char *dir, uint64_t rows, uint32_t dim, bool unknown_length,
                          char *out, size_t cap);
/* Copies `src` into `dir` with the header's declared length set to unknown (so only
   the growable path can load it from a stream that does not know its length). */
int bench_unknown_length_copy(const char *src, const char *dir, char *out, size_t cap);
/* The directory for generated files: --dir, else $TMPDIR or /tmp. */
/* The plain-allocation baseline of the reload benchmarks (live, reload): reads the index at
   `path` into one malloc()ed buffer with read() and parses it in place, the checksum verified;
   the index frees the buffer. LDS_OK or the first failing status (LDS_E_IO for open/read). */
lds_status bench_load_malloc(const char *path, lds_index **out);

const char *bench_work_dir(const bench_opts *o);

/* ---- other pools (other_pools.c), for rent-return --allocator ---- */
/* One of the other pools beside the system allocator, bound at run time (dlopen, RTLD_LOCAL)
   so that the process's own malloc stays what it was. */
typedef struct bench_other bench_other;
size_t bench_other_count(void);         /* the pools this program knows, built or not */
const char *bench_other_name(size_t i); /* "mi-heap", "tcmalloc"; NULL past the end */
/* Opens the named pool into *out. 0 on success; -1 with the reason in why (not built, not
   installed, a symbol missing, unknown name) and *out NULL. */
int bench_other_open(const char *name, bench_other **out, char *why, size_t cap);
void bench_other_close(bench_other *p);                /* NULL is fine */
const char *bench_other_label(const bench_other *p);   /* row prefix: "tc_malloc+tc_free" */
const char *bench_other_version(const bench_other *p); /* version line for the header */
/* ops allocate+free pairs of `size` bytes. 0, or -1 if an allocation failed. */
int bench_other_pairs(bench_other *p, size_t size, uint64_t ops);

/* ---- subcommands ---- */
int bench_rent_return(const bench_opts *o);
int bench_contention(const bench_opts *o);
int bench_capacity(const bench_opts *o);
int bench_pool_cost(const bench_opts *o);
/* Whether `v` names a pool-cost strategy (consumer false) or consumer (consumer true). */
bool bench_pool_cost_key(bool consumer, const char *v);
int bench_load(const bench_opts *o);
int bench_load_scale(const bench_opts *o);
int bench_reload(const bench_opts *o);
int bench_heap_warmth(const bench_opts *o);
int bench_read_offset(const bench_opts *o);
int bench_chunk_sizes(const bench_opts *o);
int bench_search(const bench_opts *o);
int bench_live(const bench_opts *o);
int bench_pin_cost(const bench_opts *o);
int bench_delta(const bench_opts *o);

#endif /* LDS_BENCH_H */
