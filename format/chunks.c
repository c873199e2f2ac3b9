/* The chunk table of format 1.1 (format.md §2.5, rules C5 and C6; ADR 0031). */
#include "format_internal.h"

#include <setjmp.h>
#include <stdlib.h>
#include <unistd.h>
#if LDS_HAVE_XXH3_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define lds__xxh3 XXH3_64bits_dispatch
#else
#define lds__xxh3 XXH3_64bits
#endif

/* Most threads lds_payload_verify_chunks starts on its own (threads = 0). */
#define LDS__VERIFY_THREADS_MAX 8u

bool lds_header_chunked(const lds_header *h)
{
    return h != NULL && (h->flags & LDS_HEADER_CHUNKED) != 0 && h->chunk_bytes != 0;
}

lds_status lds_chunk_range(const lds_header *h, uint64_t k, uint64_t *start, uint64_t *end)
{
    if (!lds_header_chunked(h) || k >= h->chunk_count || !start || !end)
        return LDS_E_INVALID_ARG;
    *start = k * h->chunk_bytes;
    uint64_t e = *start + h->chunk_bytes;
    *end = e < h->chunk_table_offset ? e : h->chunk_table_offset;
    return LDS_OK;
}

lds_status lds_chunk_table_check(const lds_header *h, const void *table, size_t n, lds_error *err)
{
    LDS__FAIL_IF_MSG(!lds_header_chunked(h) || (!table && n > 0), err, LDS_E_INVALID_ARG, NULL, 0,
                     "lds_chunk_table_check: NULL argument or a header without chunks");
    uint64_t at = LDS_HEADER_SIZE + h->chunk_table_offset;
    /* The caller read the table itself (a stream has it only at the end), so its
       size is checked against the count C3 and C4 accepted before it is hashed. */
    LDS__FAIL_IF_MSG(n / 8 != h->chunk_count || n % 8 != 0, err, LDS_E_BAD_SECTION, "chunk_table",
                     at, "chunk table: %zu bytes, but the header declares %llu entries of 8", n,
                     (unsigned long long)h->chunk_count);
    /* C5: the table is checked before any chunk against it, so a bad chunk is a bad
       chunk and not a damaged table pointing at good bytes. */
    uint64_t got = lds__xxh3(table, n);
    LDS__FAIL_IF_MSG(got != h->chunk_table_hash, err, LDS_E_CHECKSUM, "chunk_table", at,
                     "chunk table: stored hash %016llx (header.chunk_table_hash), computed "
                     "%016llx over payload bytes %llu..%llu",
                     (unsigned long long)h->chunk_table_hash, (unsigned long long)got,
                     (unsigned long long)h->chunk_table_offset,
                     (unsigned long long)(h->chunk_table_offset + n - 1));
    return LDS_OK;
}

/* C6: the one message for a bad chunk, whichever path found it (the parser, the
   stream loader's running hashes, lodestar verify). */
static lds_status bad_chunk(const lds_header *h, uint64_t k, uint64_t s, uint64_t e,
                            uint64_t stored, uint64_t computed, lds_error *err)
{
    (void)h;
    return lds__fail(err, LDS_E_CHECKSUM, "chunk", LDS_HEADER_SIZE + s,
                     "checksum of chunk %llu (payload bytes %llu..%llu): stored %016llx, "
                     "computed %016llx",
                     (unsigned long long)k, (unsigned long long)s, (unsigned long long)(e - 1),
                     (unsigned long long)stored, (unsigned long long)computed);
}

lds_status lds_chunk_verify(const lds_header *h, const void *table, uint64_t k, const void *chunk,
                            size_t n, lds_error *err)
{
    uint64_t s, e;
    LDS__FAIL_IF_MSG(!table || !chunk || lds_chunk_range(h, k, &s, &e) != LDS_OK || n != e - s, err,
                     LDS_E_INVALID_ARG, NULL, 0,
                     "lds_chunk_verify: chunk %llu: NULL argument, no such chunk, or %zu "
                     "bytes where the chunk has another length",
                     (unsigned long long)k, n);
    uint64_t stored = lds__ld64((const uint8_t *)table + k * 8);
    uint64_t got = lds__xxh3(chunk, n);
    if (got != stored)
        return bad_chunk(h, k, s, e, stored, got, err);
    return LDS_OK;
}

/* Threads hash chunks taken from a shared counter (so a slow thread takes fewer),
   each result into its slot. */
typedef struct verify_job {
    const lds_header *h;
    const uint8_t *payload;
    _Atomic(uint64_t) next;
    uint64_t *computed;     /* chunk_count entries */
    _Atomic(uint8_t) *done; /* chunk_count flags: computed[k] is set */
} verify_job;

static void verify_loop(verify_job *j)
{
    for (;;) {
        uint64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->h->chunk_count)
            return;
        uint64_t s, e;
        lds_chunk_range(j->h, k, &s, &e);
        j->computed[k] = lds__xxh3(j->payload + s, (size_t)(e - s));
        atomic_store_explicit(&j->done[k], 1, memory_order_release);
    }
}

/* A helper thread reads the payload inside its own fault window: a mapped file
   cut short underneath faults here, the thread ends, and the chunk it was hashing
   is left to the calling thread, whose own window (the loader's) reports it. */
static void *verify_main(void *arg)
{
    verify_job *j = (verify_job *)arg;
    lds__fault_window w;
    bool guarded = lds__fault_install();
    if (guarded) {
        if (sigsetjmp(w.jb, 1) != 0)
            return NULL;
        lds__fault_enter(&w);
    }
    verify_loop(j);
    if (guarded)
        lds__fault_leave(&w);
    return NULL;
}

/* Frees what a job holds (also the cleanup of a fault on the calling thread). */
static void job_free(void *arg)
{
    verify_job *j = (verify_job *)arg;
    free(j->computed);
    free((void *)j->done);
}

/* Hashes every chunk into j->computed: helpers share the chunks while the calling
   thread waits (it never reads the payload while they run, so a fault on it cannot
   leave them running on its stack), then the calling thread hashes what no helper
   finished. */
static void hash_chunks(verify_job *j, unsigned t)
{
    pthread_t tid[LDS__VERIFY_THREADS_MAX];
    unsigned started = 0;
    if (t > LDS__VERIFY_THREADS_MAX)
        t = LDS__VERIFY_THREADS_MAX;
    for (unsigned i = 0; t > 1 && i < t; i++) {
        if (pthread_create(&tid[started], NULL, verify_main, j) != 0)
            break;
        started++;
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    lds__fault_set_cleanup(job_free, j);
    for (uint64_t k = 0; k < j->h->chunk_count; k++) {
        if (atomic_load_explicit(&j->done[k], memory_order_acquire))
            continue;
        uint64_t s, e;
        lds_chunk_range(j->h, k, &s, &e);
        j->computed[k] = lds__xxh3(j->payload + s, (size_t)(e - s));
    }
    lds__fault_set_cleanup(NULL, NULL);
}

unsigned lds__verify_threads(unsigned asked, uint64_t chunks)
{
    unsigned t = asked;
    if (t == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        t = cpus > 0 ? (unsigned)cpus : 1;
        if (t > LDS__VERIFY_THREADS_MAX)
            t = LDS__VERIFY_THREADS_MAX;
    }
    if ((uint64_t)t > chunks)
        t = chunks > 0 ? (unsigned)chunks : 1;
    return t;
}

lds_status lds_payload_verify_chunks(const lds_header *h, const void *payload, size_t length,
                                     unsigned threads,
                                     void (*bad)(void *ctx, const lds_bad_chunk *b), void *ctx,
                                     uint64_t *n_bad, lds_error *err)
{
    if (n_bad)
        *n_bad = 0;
    LDS__FAIL_IF_MSG(!lds_header_chunked(h) || (!payload && length > 0), err, LDS_E_INVALID_ARG,
                     NULL, 0,
                     "lds_payload_verify_chunks: NULL argument or a header without chunks");
    /* P0 */
    LDS__FAIL_IF(length != h->payload_length, err, LDS_E_TRUNCATED, "payload",
                 LDS_HEADER_SIZE + length, "%zu bytes, but the header declares %llu", length,
                 (unsigned long long)h->payload_length);
    const uint8_t *p = (const uint8_t *)payload;
    const uint8_t *table = p + h->chunk_table_offset;
    lds_status st = lds_chunk_table_check(h, table, (size_t)(h->chunk_count * 8), err);
    if (st != LDS_OK)
        return st;
    if (lds__parse_test_hook)
        lds__parse_test_hook("chunk table checked");
    uint64_t n = h->chunk_count;
    verify_job j = {.h = h, .payload = p};
    atomic_init(&j.next, 0);
    /* Hashes are kept, not compared as they come, so every bad chunk can be named
       in order after the threads end; + 1 keeps a zero-chunk malloc non-NULL. */
    j.computed = (uint64_t *)malloc((size_t)n * sizeof(uint64_t) + 1);
    j.done = (_Atomic(uint8_t) *)calloc((size_t)n + 1, sizeof *j.done);
    if (!j.computed || !j.done) {
        job_free(&j);
        return lds__fail(err, LDS_E_NOMEM, NULL, 0, "no memory for %llu chunk hashes",
                         (unsigned long long)n);
    }
    hash_chunks(&j, lds__verify_threads(threads, n));
    uint64_t nb = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t stored = lds__ld64(table + k * 8);
        if (j.computed[k] == stored)
            continue;
        lds_bad_chunk b = {.chunk = k, .stored = stored, .computed = j.computed[k]};
        lds_chunk_range(h, k, &b.start, &b.end);
        /* The first bad chunk is the error; the callback hears of every one. */
        if (nb == 0)
            st = bad_chunk(h, k, b.start, b.end, stored, j.computed[k], err);
        nb++;
        if (bad)
            bad(ctx, &b);
    }
    job_free(&j);
    if (n_bad)
        *n_bad = nb;
    return st;
}
