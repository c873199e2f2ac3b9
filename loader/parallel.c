/*
 * Parallel reads of a regular file's payload (docs/adr/0030): T readers pread disjoint
 * ranges straight into the rented buffer, so that the reads and the destination's page
 * faults run in parallel. The calling thread is reader 0; it alone calls the caller's
 * cancel and progress callbacks, and it hashes the format 1.0 checksum in order, a range
 * once every range before it is complete, while the others read. Each completed range can
 * be checked by a hook on the thread that read it (format 1.1's per-chunk checksums).
 *
 * Errors behave as the single reader's: one status, field and byte; of several failures
 * the one at the lowest payload offset is reported (the one a single reader meets first).
 * Every reader has ended before lds__pread_payload returns, on every path, so the caller
 * returns its rental only after the last reader is done with it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#if LDS_HAVE_XXH3_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define lds__xxh3_update XXH3_64bits_update_dispatch
#else
#define lds__xxh3_update XXH3_64bits_update
#endif

#include "load_internal.h"

static ssize_t plain_pread(int fd, void *buf, size_t n, off_t off, unsigned reader)
{
    (void)reader;
    return pread(fd, buf, n, off);
}

ssize_t (*lds__load_pread)(int fd, void *buf, size_t n, off_t off, unsigned reader) = plain_pread;

size_t lds__load_piece_override;

/* Shared state of one parallel read. Fields after `lock` are under it. */
typedef struct preader {
    lds__pread_job *job;
    size_t ranges;
    _Atomic size_t next; /* next range to claim */
    _Atomic bool stop;   /* a failure or cancellation: claim no more ranges */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a range completed, a reader ended, or a failure */
    unsigned char *done; /* per range: complete (and verified) */
    size_t prefix;       /* ranges complete in order from the first */
    unsigned running;    /* spawned readers not yet ended */
    bool failed;
    uint64_t fail_at; /* payload offset of the reported failure */
    lds_status st;
    lds_error err;
} preader;

static size_t range_len(const preader *p, size_t i)
{
    size_t off = i * p->job->range;
    return p->job->length - off < p->job->range ? p->job->length - off : p->job->range;
}

/* Keeps the failure at the lowest payload offset (a cancellation only when none came). */
static void record(preader *p, lds_status st, const lds_error *e, uint64_t at, bool cancel)
{
    pthread_mutex_lock(&p->lock);
    if (!p->failed || (!cancel && at < p->fail_at)) {
        p->failed = true;
        p->fail_at = at;
        p->st = st;
        p->err = *e;
    }
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

/* Reads range `i` whole: short reads continue, EINTR/EAGAIN retry, 0 bytes is the file's
 * end (truncated), an error is LDS_E_IO. false when a failure was recorded, or when asked
 * to stop while retrying an interruption (then nothing is recorded: an earlier failure or
 * the cancellation is the load's). */
static bool read_range(preader *p, unsigned reader, size_t i, XXH3_state_t *hs)
{
    lds__pread_job *j = p->job;
    size_t off = i * j->range, n = range_len(p, i), got = 0;
    /* Hashing piece by piece: each pread asks for at most `piece` bytes, and what it
     * returned is hashed before the next (still in this core's cache). */
    size_t piece = hs != NULL ? j->piece : n;
    if (hs != NULL)
        XXH3_64bits_reset(hs);
    if (j->fill != NULL) {
        lds_error err;
        lds_error_init(&err);
        lds_status st = j->fill(j->fill_ctx, reader, off, j->dst + off, n, &err);
        if (st != LDS_OK) {
            record(p, st, &err, off, false);
            return false;
        }
        got = n;
    }
    while (got < n) {
        size_t want = n - got < piece ? n - got : piece;
        ssize_t r = lds__load_pread(j->fd, j->dst + off + got, want,
                                    (off_t)(j->file_at + off + got), reader);
        if (r > 0) {
            size_t g = (size_t)r < want ? (size_t)r : want;
            size_t at = off + got, h = at >= j->hash_end      ? 0
                                       : j->hash_end - at < g ? j->hash_end - at
                                                              : g;
            if (hs != NULL && h > 0)
                lds__xxh3_update(hs, j->dst + at, h);
            got += g;
            continue;
        }
        int e = errno;
        if (r < 0 && (e == EINTR || e == EAGAIN)) {
            if (atomic_load(&p->stop))
                return false;
            continue;
        }
        lds_error err;
        lds_error_init(&err);
        size_t at = off + got;
        lds_status st;
        if (r == 0)
            st = lds__load_fail(&err, LDS_E_TRUNCATED, "payload", j->payload_at + at, 0, NULL,
                                "the input ended after %zu of the %llu declared payload bytes", at,
                                (unsigned long long)j->length);
        else
            st = lds__load_fail(&err, LDS_E_IO, "stream", j->stream_at + at, e, NULL,
                                "read failed after %llu bytes: %s",
                                (unsigned long long)(j->stream_at + at), strerror(e));
        record(p, st, &err, at, false);
        return false;
    }
    if (j->verify != NULL && j->fill == NULL) {
        lds_error err;
        lds_error_init(&err);
        lds_status st = hs != NULL ? j->verify_hashed(j->verify_ctx, off, j->dst + off, n,
                                                      XXH3_64bits_digest(hs), &err)
                                   : j->verify(j->verify_ctx, off, j->dst + off, n, &err);
        if (st != LDS_OK) {
            record(p, st, &err, off, false);
            return false;
        }
    }
    pthread_mutex_lock(&p->lock);
    p->done[i] = 1;
    bool advanced = false;
    while (p->prefix < p->ranges && p->done[p->prefix]) {
        p->prefix++;
        advanced = true;
    }
    if (advanced)
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return true;
}

/* Claims and reads one range; false when none is left or the read stopped. `hs`: the
 * reader's hash state when it hashes piece by piece, else NULL. */
static bool read_next(preader *p, unsigned reader, XXH3_state_t *hs)
{
    if (atomic_load(&p->stop))
        return false;
    size_t i = atomic_fetch_add(&p->next, 1);
    if (i >= p->ranges)
        return false;
    return read_range(p, reader, i, hs);
}

/* A reader's piece-by-piece hash state, or NULL: none wanted, or none allocated (then
 * the range is read whole and the `verify` hook hashes it). */
static XXH3_state_t *piece_state(const lds__pread_job *j)
{
    if (j->verify == NULL || j->verify_hashed == NULL || j->piece == 0 || j->piece >= j->range)
        return NULL;
    return XXH3_createState();
}

typedef struct reader_arg {
    preader *p;
    unsigned reader;
} reader_arg;

static void *reader_main(void *arg)
{
    reader_arg *a = arg;
    preader *p = a->p;
    XXH3_state_t *hs = piece_state(p->job);
    while (read_next(p, a->reader, hs))
        ;
    XXH3_freeState(hs);
    pthread_mutex_lock(&p->lock);
    p->running--;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static bool cancel_asked(const lds__pread_job *j)
{
    return j->opts->cancel != NULL && j->opts->cancel(j->opts->callback_ctx);
}

static void cancel_now(preader *p, size_t done_bytes)
{
    lds_error err;
    lds_error_init(&err);
    lds_status st =
        lds__load_fail(&err, LDS_E_CANCELLED, "payload", p->job->payload_at + done_bytes, 0, NULL,
                       "cancelled after %zu payload bytes", done_bytes);
    record(p, st, &err, done_bytes, true);
}

static size_t prefix_bytes(const preader *p)
{
    size_t b = p->prefix * p->job->range;
    return b < p->job->length ? b : p->job->length;
}

/* The calling thread between its reads: the checksum in order over what is complete,
 * lagging LDS_CHECKSUM_SIZE bytes so that the stored checksum is never hashed. */
static void hash_ready(preader *p, XXH3_state_t *hs, size_t *hashed, size_t ready)
{
    size_t end = p->job->length >= LDS_CHECKSUM_SIZE ? p->job->length - LDS_CHECKSUM_SIZE : 0;
    size_t to = ready < end ? ready : end;
    if (hs != NULL && to > *hashed) {
        lds__xxh3_update(hs, p->job->dst + *hashed, to - *hashed);
        *hashed = to;
    }
}

/* A reader's full error into the caller's lds_error of any accepted size: the message
 * again through lds__error_fill, its " (at byte N)" ending kept as the ending. */
static void copy_error(lds_error *dst, const lds_error *src)
{
    if (dst == NULL)
        return;
    if (dst->size == sizeof *dst) {
        *dst = *src;
        return;
    }
    char text[sizeof src->message];
    memcpy(text, src->message, sizeof text);
    text[sizeof text - 1] = '\0';
    char tail[48];
    snprintf(tail, sizeof tail, " (at byte %llu)", (unsigned long long)src->offset);
    size_t n = strlen(text), t = strlen(tail);
    bool at_byte = n >= t && strcmp(text + n - t, tail) == 0;
    if (at_byte)
        text[n - t] = '\0';
    (void)lds__error_fill(dst, src->status, src->field, src->offset, at_byte, src->line,
                          src->sys_errno, src->zstd_error, "%s", text);
}

static void deadline_in(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_nsec += ms * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += ts->tv_nsec / 1000000000L;
        ts->tv_nsec %= 1000000000L;
    }
}

lds_status lds__pread_payload(lds__pread_job *j, lds_error *err)
{
    j->hashed = false;
    j->hash_value = 0;
    j->threads_used = 1;
    if (j->range == 0 || j->length == 0)
        return lds__load_fail(err, LDS_E_INVALID_ARG, "payload", j->payload_at, 0, NULL,
                              "parallel read of %zu bytes in ranges of %zu", j->length, j->range);
    preader p;
    memset(&p, 0, sizeof p);
    p.job = j;
    p.ranges = (j->length - 1) / j->range + 1;
    p.done = calloc(p.ranges, 1);
    XXH3_state_t *hs = j->hash ? XXH3_createState() : NULL;
    if (p.done == NULL || (j->hash && hs == NULL)) {
        free(p.done);
        XXH3_freeState(hs);
        return lds__load_fail(err, LDS_E_NOMEM, "payload", j->payload_at, 0, NULL,
                              "cannot allocate the state of a parallel read");
    }
    if (hs != NULL)
        XXH3_64bits_reset(hs);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&p.lock, NULL) != 0 || pthread_cond_init(&p.cond, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(p.done);
        XXH3_freeState(hs);
        return lds__load_fail(err, LDS_E_NOMEM, "payload", j->payload_at, 0, NULL,
                              "cannot set up a parallel read");
    }
    pthread_condattr_destroy(&ca);

    unsigned want = j->threads;
    if ((size_t)want > p.ranges)
        want = (unsigned)p.ranges;
    pthread_t tid[LDS__READ_THREADS_MAX];
    reader_arg args[LDS__READ_THREADS_MAX];
    unsigned spawned = 0;
    /* Cancelled already: no reader starts. */
    if (cancel_asked(j))
        cancel_now(&p, 0);
    for (unsigned k = 1; k < want && !atomic_load(&p.stop); k++) {
        args[spawned] = (reader_arg){.p = &p, .reader = k};
        pthread_mutex_lock(&p.lock);
        p.running++;
        pthread_mutex_unlock(&p.lock);
        if (pthread_create(&tid[spawned], NULL, reader_main, &args[spawned]) != 0) {
            pthread_mutex_lock(&p.lock);
            p.running--;
            pthread_mutex_unlock(&p.lock);
            break; /* fewer readers: the ones there are read everything */
        }
        spawned++;
    }
    j->threads_used = spawned + 1;
    XXH3_state_t *piece_hs = piece_state(j);

    /* Reader 0: read, and between reads check for cancellation, hash and report. */
    size_t hashed = 0, seen = 0;
    for (;;) {
        pthread_mutex_lock(&p.lock);
        size_t ready = prefix_bytes(&p);
        pthread_mutex_unlock(&p.lock);
        if (atomic_load(&p.stop))
            break;
        if (cancel_asked(j)) {
            cancel_now(&p, ready);
            break;
        }
        if (ready > seen) {
            hash_ready(&p, hs, &hashed, ready);
            if (j->opts->progress != NULL)
                j->opts->progress(ready, j->length, j->opts->callback_ctx);
            seen = ready;
        }
        if (!read_next(&p, 0, piece_hs))
            break;
    }
    /* Then hash and report what the others complete, until they have all ended. */
    pthread_mutex_lock(&p.lock);
    for (;;) {
        size_t ready = prefix_bytes(&p);
        if (!atomic_load(&p.stop) && ready > seen) {
            pthread_mutex_unlock(&p.lock);
            hash_ready(&p, hs, &hashed, ready);
            if (j->opts->progress != NULL)
                j->opts->progress(ready, j->length, j->opts->callback_ctx);
            seen = ready;
            pthread_mutex_lock(&p.lock);
            continue;
        }
        if (p.running == 0)
            break;
        struct timespec ts;
        deadline_in(&ts, 50);
        int w = pthread_cond_timedwait(&p.cond, &p.lock, &ts);
        if (w == ETIMEDOUT && !atomic_load(&p.stop)) {
            /* A reader is blocked: the caller may still cancel (outside the lock). */
            size_t r = prefix_bytes(&p);
            pthread_mutex_unlock(&p.lock);
            if (cancel_asked(j))
                cancel_now(&p, r);
            pthread_mutex_lock(&p.lock);
        }
    }
    pthread_mutex_unlock(&p.lock);
    for (unsigned k = 0; k < spawned; k++)
        pthread_join(tid[k], NULL);

    lds_status st = LDS_OK;
    if (p.failed) {
        st = p.st;
        copy_error(err, &p.err);
    } else {
        hash_ready(&p, hs, &hashed, j->length);
        j->hashed = hs != NULL && j->length >= LDS_CHECKSUM_SIZE;
        j->hash_value = j->hashed ? XXH3_64bits_digest(hs) : 0;
    }
    pthread_cond_destroy(&p.cond);
    pthread_mutex_destroy(&p.lock);
    free(p.done);
    XXH3_freeState(hs);
    XXH3_freeState(piece_hs);
    return st;
}

unsigned lds__read_threads_auto(size_t length)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    size_t cpus = n > 0 ? (size_t)n : 1;
    size_t by_size = length / LDS__READ_BYTES_PER_THREAD;
    size_t t = cpus < by_size ? cpus : by_size;
    if (t > LDS__READ_THREADS_AUTO_MAX)
        t = LDS__READ_THREADS_AUTO_MAX;
    return t < 1 ? 1u : (unsigned)t;
}
