/*
 * read-offset: read() of a file in the page cache into buffers that start at
 * page+0, +16, +64, +256 and +2048, interleaved. It prices the address at which
 * the pool places a mapped rental (LDS_POOL_MAP_OFFSET) against a page-aligned
 * buffer and against page+16, where glibc's malloc puts a block it maps.
 * Every buffer is its own anonymous mapping, written in full beforehand so that
 * no page faults while timing; reads are chunked as the loader chunks them.
 */
#include "bench.h"

#include "lodestar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const size_t offsets[] = {0, 16, 64, LDS_POOL_MAP_OFFSET, 2048};
#define N_OFFSETS (sizeof offsets / sizeof offsets[0])

typedef struct ro_ctx {
    int fd;
    unsigned char *map; /* the mapping; the buffer starts at map + offset */
    size_t map_bytes;
    size_t offset;
    size_t size;
} ro_ctx;

static int read_once(const ro_ctx *c)
{
    unsigned char *buf = c->map + c->offset;
    size_t got = 0;
    while (got < c->size) {
        size_t want = c->size - got;
        if (want > LDS_DEFAULT_CHUNK_BYTES)
            want = LDS_DEFAULT_CHUNK_BYTES;
        ssize_t n = pread(c->fd, buf + got, want, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "read-offset: read at %zu: %s\n", got,
                    n < 0 ? strerror(errno) : "unexpected end of file");
            return -1;
        }
        got += (size_t)n;
    }
    bench_escape(buf);
    return 0;
}

static int run(void *p, uint64_t ops, uint64_t *elapsed)
{
    (void)elapsed;
    for (uint64_t i = 0; i < ops; i++)
        if (read_once(p) != 0)
            return -1;
    return 0;
}

/* Writes `bytes` of pseudo-random data to `path` unless a file of that size is
 * there, then reads it through once with loader-sized reads so that it sits in
 * the page cache (small reads: one huge read() of a cold file leaves it cached in
 * a way that slows later reads). */
static int prepare_file(const char *path, size_t bytes)
{
    struct stat sb;
    static unsigned char chunk[1 << 20];
    if (stat(path, &sb) != 0 || (size_t)sb.st_size != bytes) {
        char tmp[4216]; /* the caller's path buffer (4200) and ".tmp" */
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "read-offset: %s: %s\n", tmp, strerror(errno));
            return -1;
        }
        uint64_t state = 0x9E3779B97F4A7C15u;
        for (size_t done = 0; done < bytes;) {
            for (size_t i = 0; i + 8 <= sizeof chunk; i += 8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                memcpy(chunk + i, &state, 8);
            }
            size_t n = bytes - done < sizeof chunk ? bytes - done : sizeof chunk;
            ssize_t w = write(fd, chunk, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                fprintf(stderr, "read-offset: writing %s: %s\n", tmp, strerror(errno));
                close(fd);
                unlink(tmp);
                return -1;
            }
            done += (size_t)w;
        }
        if (close(fd) != 0 || rename(tmp, path) != 0) {
            fprintf(stderr, "read-offset: %s: %s\n", path, strerror(errno));
            unlink(tmp);
            return -1;
        }
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n;
    do
        n = read(fd, chunk, LDS_DEFAULT_CHUNK_BYTES);
    while (n > 0 || (n < 0 && errno == EINTR));
    close(fd);
    return n == 0 ? 0 : -1;
}

static void offset_name(size_t off, char *buf, size_t cap)
{
    if (off == 16)
        snprintf(buf, cap, "page+16 (where glibc malloc puts a mapped block)");
    else if (off == LDS_POOL_MAP_OFFSET)
        snprintf(buf, cap, "page+%zu (LDS_POOL_MAP_OFFSET, the pool's)", off);
    else
        snprintf(buf, cap, "page+%zu", off);
}

static int size_table(const bench_opts *o, bench_report *rep, int fd, size_t size)
{
    size_t page = bench_page_size();
    ro_ctx ctx[N_OFFSETS];
    bench_alt alts[N_OFFSETS];
    char names[N_OFFSETS][80];
    char size_s[32], title[160];
    int rc = -1;
    size_t pool_at = 0;

    memset(ctx, 0, sizeof ctx);
    bench_fmt_bytes((double)size, size_s, sizeof size_s);
    snprintf(title, sizeof title, "%s (%zu bytes) read into a buffer at each page offset", size_s,
             size);
    bench_table(rep, title, true);
    /* At least 16 MiB per sample, so that small sizes are not all timer noise. */
    uint64_t ops = size >= ((size_t)16 << 20) ? 1 : ((size_t)16 << 20) / size;
    if (o->dry)
        ops = 1;
    for (size_t i = 0; i < N_OFFSETS; i++) {
        ro_ctx *c = &ctx[i];
        c->fd = fd;
        c->offset = offsets[i];
        c->size = size;
        c->map_bytes = (offsets[i] + size + page - 1) / page * page;
        void *m =
            mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "read-offset: mmap of %zu bytes: %s\n", c->map_bytes, strerror(errno));
            goto out;
        }
        c->map = m;
        memset(c->map, 0, c->map_bytes); /* warm: every page resident before timing */
        if (offsets[i] == LDS_POOL_MAP_OFFSET)
            pool_at = i;
        offset_name(offsets[i], names[i], sizeof names[i]);
        alts[i] = (bench_alt){.name = names[i],
                              .scale = BENCH_US,
                              .unit = "us/read",
                              .run = run,
                              .ctx = c,
                              .ops = ops,
                              .row = bench_row_new(rep, names[i], "us/read")};
    }
    rc = bench_interleave(alts, N_OFFSETS, bench_warmup(o, 3), bench_iters(o, 31));
    if (rc != 0)
        goto out;
    double pool_us = bench_row_median(alts[pool_at].row);
    size_t best = 0;
    for (size_t i = 0; i < N_OFFSETS; i++) {
        bench_row *row = alts[i].row;
        double med = bench_row_median(row), lo = bench_row_min(row);
        bench_row_set(row, "buffer", "page_offset", BENCH_COUNT, (double)offsets[i]);
        bench_row_set(row, "buffer", "bytes", BENCH_BYTES, (double)size);
        /* bytes per microsecond / 1000 = GB/s (decimal) */
        bench_row_set(row, "speed", "GB_per_s", BENCH_NUM, med > 0 ? (double)size / med / 1e3 : 0);
        bench_row_set(row, "speed", "best_GB_per_s", BENCH_NUM,
                      lo > 0 ? (double)size / lo / 1e3 : 0);
        bench_row_set(row, "speed", "vs_page_256", BENCH_RATIO, med > 0 ? pool_us / med : 0);
        if (med < bench_row_median(alts[best].row))
            best = i;
    }
    bench_note(rep,
               "fastest median: page+%zu; vs page+256 = page+256 median / this median (below "
               "1: slower than the pool's offset)",
               offsets[best]);
    /* The best samples too: on a busy machine they are the steadier comparison. */
    double pool_best = bench_row_min(alts[pool_at].row);
    for (size_t i = 0; i < N_OFFSETS; i++)
        if (i != pool_at)
            bench_note(rep, "page+%zu runs at %.2fx the speed of page+%zu (best samples: %.2fx)",
                       offsets[i], pool_us / bench_row_median(alts[i].row),
                       (size_t)LDS_POOL_MAP_OFFSET, pool_best / bench_row_min(alts[i].row));
out:
    for (size_t i = 0; i < N_OFFSETS; i++)
        if (ctx[i].map)
            munmap(ctx[i].map, ctx[i].map_bytes);
    return rc;
}

int bench_read_offset(const bench_opts *o)
{
    static const size_t defaults[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)64 << 20};
    static const size_t dry_sizes[] = {(size_t)64 << 10};
    const size_t *sizes = o->dry ? dry_sizes : defaults;
    size_t n =
        o->dry ? sizeof dry_sizes / sizeof dry_sizes[0] : sizeof defaults / sizeof defaults[0];
    if (o->n_sizes) {
        sizes = o->sizes;
        n = o->n_sizes;
    }
    size_t largest = 0;
    for (size_t i = 0; i < n; i++)
        if (sizes[i] > largest)
            largest = sizes[i];
    char path[4200];
    snprintf(path, sizeof path, "%s/lodestar-bench-read-offset-%zu.bin", bench_work_dir(o),
             largest);
    if (prepare_file(path, largest) != 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "read-offset: %s: %s\n", path, strerror(errno));
        return -1;
    }
    bench_report *rep = bench_report_new(o);
    if (!rep) {
        close(fd);
        return -1;
    }
    char chunk[64];
    bench_param(rep, "file", path);
    bench_param(rep, "page cache", "warm: the file is read through with 1 MiB reads first");
    snprintf(chunk, sizeof chunk, "pread() of %zu bytes at a time, as the loader reads",
             (size_t)LDS_DEFAULT_CHUNK_BYTES);
    bench_param(rep, "reads", chunk);
    bench_param(rep, "buffers", "one anonymous mapping per offset, written in full before timing");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = size_table(o, rep, fd, sizes[i]);
    if (rc == 0)
        rc = bench_report_finish(rep);
    bench_report_free(rep);
    close(fd);
    return rc;
}
