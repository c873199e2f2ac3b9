/*
 * Two builds of liblodestar side by side in one process, interleaved (old, new, old, new, ...):
 * the diagnostic of docs/adr/0010 (the keyed hash tables), where the change under test was
 * inside the parse and a whole-command A/B (bench/env/bench-compare.sh) drowned it in process
 * start-up. Each build is dlopen()ed RTLD_LOCAL | RTLD_DEEPBIND, so each resolves its own
 * symbols; the program itself links no liblodestar (lodestar.h gives it the types only).
 *
 *   parse: lds_index_from_payload with the checksum off (what a load adds to the read);
 *   table: the same, then lds_index_check_keys where the build has it (the key table and K7;
 *          a build older than 0010 builds its table inside the parse);
 *   load:  lds_load_path with the defaults (pooled, checksum verified while reading).
 *
 * Built by meson as BUILD/bench/lodestar-ab-builds; never run by the suite (it needs two
 * builds). Prints, per build, the median, min and max of ITERATIONS timed calls (3 untimed
 * first), and new/old for the median and the min.
 *
 * usage: lodestar-ab-builds OLD/liblodestar.so NEW/liblodestar.so INDEX parse|table|load ITERATIONS
 */
#include "lodestar.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef lds_status (*parse_fn)(const void *, size_t, const lds_parse_options *, lds_index **,
                               lds_error *);
typedef void (*free_fn)(lds_index *);
typedef void (*defaults_fn)(lds_parse_options *);
typedef lds_status (*check_fn)(const lds_index *, lds_error *);
typedef lds_status (*load_fn)(const char *, const void *, lds_index **, void *, lds_error *);

typedef struct build {
    const char *path;
    parse_fn parse;
    free_fn free_index;
    defaults_fn defaults;
    check_fn check_keys; /* NULL in a build older than ADR 0010 */
    load_fn load;
    double *ms;
} build;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ISO C has no conversion from dlsym's object pointer to a function pointer: go through
   an integer of the same width, as POSIX guarantees works. */
static int sym(void *lib, const char *name, void *out, size_t out_size, int required)
{
    void *p = dlsym(lib, name);
    uintptr_t u = (uintptr_t)p;
    if (out_size != sizeof u)
        return -1;
    memcpy(out, &u, sizeof u);
    if (!p && required) {
        fprintf(stderr, "lodestar-ab-builds: %s not found in the library\n", name);
        return -1;
    }
    return 0;
}

static int open_build(build *b, const char *path)
{
    b->path = path;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib) {
        fprintf(stderr, "lodestar-ab-builds: %s\n", dlerror());
        return -1;
    }
    if (sym(lib, "lds_index_from_payload", &b->parse, sizeof b->parse, 1) != 0 ||
        sym(lib, "lds_index_free", &b->free_index, sizeof b->free_index, 1) != 0 ||
        sym(lib, "lds_parse_options_default", &b->defaults, sizeof b->defaults, 1) != 0 ||
        sym(lib, "lds_index_check_keys", &b->check_keys, sizeof b->check_keys, 0) != 0 ||
        sym(lib, "lds_load_path", &b->load, sizeof b->load, 1) != 0)
        return -1;
    return 0;
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    unsigned char *buf = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 64 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)len)) != NULL && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf)
        fprintf(stderr, "lodestar-ab-builds: cannot read %s (an index of at least 64 bytes)\n",
                path);
    *n = (size_t)len;
    return buf;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* The bytes lds_index_from_payload parses: the payload after the 64-byte header, less the
   chunk table of a format 1.1 file (header flag bit 0, CHUNKED: the chunks cover the first
   chunk_table_offset bytes, docs/format.md 2.5). */
static size_t parse_length(const unsigned char *file, size_t n)
{
    uint64_t d = le64(file + 24);
    if ((file[12] & 1) && d <= n - 64)
        return (size_t)d;
    return n - 64;
}

/* One timed call of `mode` on build `b`; the index is freed outside the timing. */
static int one_call(const build *b, const char *mode, const char *path, const unsigned char *file,
                    size_t n, double *ms)
{
    lds_index *idx = NULL;
    lds_error e;
    memset(&e, 0, sizeof e);
    e.size = sizeof e;
    lds_status st;
    double t0 = now_ms();
    if (strcmp(mode, "load") == 0) {
        st = b->load(path, NULL, &idx, NULL, &e);
    } else {
        lds_parse_options o;
        b->defaults(&o);
        o.verify_checksum = false;
        st = b->parse(file + 64, parse_length(file, n), &o, &idx, &e);
        if (st == LDS_OK && strcmp(mode, "table") == 0 && b->check_keys)
            st = b->check_keys(idx, &e);
    }
    *ms = now_ms() - t0;
    if (st != LDS_OK) {
        fprintf(stderr, "lodestar-ab-builds: %s: %s\n", b->path, e.message);
        return -1;
    }
    b->free_index(idx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6 ||
        (strcmp(argv[4], "parse") != 0 && strcmp(argv[4], "table") != 0 &&
         strcmp(argv[4], "load") != 0) ||
        atoi(argv[5]) < 1) {
        fprintf(stderr, "usage: lodestar-ab-builds OLD/liblodestar.so NEW/liblodestar.so INDEX "
                        "parse|table|load ITERATIONS\n");
        return 2;
    }
    const char *path = argv[3], *mode = argv[4];
    int iters = atoi(argv[5]);
    build b[2];
    memset(b, 0, sizeof b);
    size_t n = 0;
    unsigned char *file = read_file(path, &n);
    if (!file || open_build(&b[0], argv[1]) != 0 || open_build(&b[1], argv[2]) != 0)
        return 1;
    for (int i = 0; i < 2; i++)
        if (!(b[i].ms = malloc((size_t)iters * sizeof(double))))
            return 1;
    for (int it = -3; it < iters; it++) /* three untimed rounds first */
        for (int i = 0; i < 2; i++) {
            double ms;
            if (one_call(&b[i], mode, path, file, n, &ms) != 0)
                return 1;
            if (it >= 0)
                b[i].ms[it] = ms;
        }
    for (int i = 0; i < 2; i++) {
        qsort(b[i].ms, (size_t)iters, sizeof(double), cmp_double);
        printf("  %-44s median %7.3f ms  min %7.3f  max %7.3f\n", b[i].path, b[i].ms[iters / 2],
               b[i].ms[0], b[i].ms[iters - 1]);
    }
    printf("  %s: new/old median %.3f, min %.3f\n", mode, b[1].ms[iters / 2] / b[0].ms[iters / 2],
           b[1].ms[0] / b[0].ms[0]);
    for (int i = 0; i < 2; i++)
        free(b[i].ms);
    free(file);
    return 0;
}
