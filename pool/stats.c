/*
 * stats.c: statistics snapshots and their JSON form.
 *
 * Hot-path counters live in each thread's cache (written by that thread only, per
 * size class); a snapshot sums them with the tallies of exited threads and the
 * pool's own slow-path counters, under the thread-cache registry lock.
 */
#include "pool_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define RLX     memory_order_relaxed
#define LOAD(x) atomic_load_explicit(&(x), RLX)

void lds__tally_of(const lds__tcache *tc, lds__tally *t)
{
    memset(t, 0, sizeof *t);
    for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
        uint64_t cap = lds__class_capacity(c);
        uint64_t hits = LOAD(tc->hits[c]), rents = hits + LOAD(tc->misses[c]);
        uint64_t returns = LOAD(tc->in[c]), cached = LOAD(tc->n[c]);
        t->rents += rents;
        t->hits_thread += hits;
        t->returns += returns;
        t->bytes_out += rents * cap;
        t->bytes_in += returns * cap;
        t->cached_count += cached;
        t->cached_bytes += cached * cap;
    }
    /* Lengths are read after the counts, so a rent in flight may show its length only:
     * clamp rather than wrap. */
    t->requested = LOAD(tc->requested);
    uint64_t len_in = LOAD(tc->len_in);
    t->waste_out = t->bytes_out > t->requested ? t->bytes_out - t->requested : 0;
    t->waste_in = t->bytes_in > len_in ? t->bytes_in - len_in : 0;
}

void lds_pool_stats_init(lds_pool_stats *stats)
{
    if (!stats)
        return;
    memset(stats, 0, sizeof *stats);
    stats->size = sizeof *stats;
}

lds_status lds_pool_get_stats(lds_pool *pool, lds_pool_stats *out)
{
    if (!out || out->size < offsetof(lds_pool_stats, hits_thread))
        return LDS_E_INVALID_ARG;
    if (!pool && !(pool = lds_pool_shared()))
        return LDS_E_NOMEM;
    lds_pool_stats st;
    memset(&st, 0, sizeof st);
    st.size = out->size < sizeof st ? out->size : sizeof st;

    uint64_t bytes_out, bytes_in, waste_out, waste_in, returns;
    uint64_t cached_bytes = 0, cached_count = 0;
    pthread_mutex_lock(&lds__g_lock);
    st.rents = pool->retired.rents;
    st.hits_thread = pool->retired.hits_thread;
    returns = pool->retired.returns;
    bytes_out = pool->retired.bytes_out;
    bytes_in = pool->retired.bytes_in;
    waste_out = pool->retired.waste_out;
    waste_in = pool->retired.waste_in;
    st.bytes_requested_total = pool->retired.requested;
    for (const lds__tcache *tc = pool->tcaches; tc; tc = tc->next_in_pool) {
        lds__tally t;
        lds__tally_of(tc, &t);
        st.rents += t.rents;
        st.hits_thread += t.hits_thread;
        returns += t.returns;
        bytes_out += t.bytes_out;
        bytes_in += t.bytes_in;
        waste_out += t.waste_out;
        waste_in += t.waste_in;
        st.bytes_requested_total += t.requested;
        cached_bytes += t.cached_bytes;
        cached_count += t.cached_count;
    }
    pthread_mutex_unlock(&lds__g_lock);

    st.returns = returns;
    st.hits_shared = LOAD(pool->hits_shared);
    st.misses_cold = LOAD(pool->misses_cold);
    st.misses_exhausted = LOAD(pool->misses_exhausted);
    st.misses_oversize = LOAD(pool->misses_oversize);
    for (int i = 0; i < LDS_POOL_REFUSED_COUNT; i++) {
        st.refused[i] = LOAD(pool->refused[i]);
        st.refused_total += st.refused[i];
    }
    st.canary_failures = LOAD(pool->canary_failures);
    st.drops = LOAD(pool->drops);
    st.trims = LOAD(pool->trims);
    st.trimmed_bytes = LOAD(pool->trimmed_bytes);
    st.leases_current = st.rents >= returns ? st.rents - returns : 0;
    st.bytes_leased = bytes_out >= bytes_in ? bytes_out - bytes_in : 0;
    uint64_t peak = LOAD(pool->leased_peak);
    st.bytes_leased_peak = peak > st.bytes_leased ? peak : st.bytes_leased;
    uint64_t q_bytes = LOAD(pool->q_bytes);
    st.bytes_retained = cached_bytes + LOAD(pool->shared_bytes) + q_bytes;
    st.buffers_retained = cached_count + LOAD(pool->shared_count) + pool->q_count;
    st.bytes_resident_estimate = st.bytes_leased + st.bytes_retained;
    st.bytes_mapped = LOAD(pool->bytes_mapped);
    st.waste_bytes_total = waste_out;
    st.waste_bytes_current = waste_out >= waste_in ? waste_out - waste_in : 0;
    memcpy(out, &st, st.size);
    return LDS_OK;
}

lds_status lds_pool_stats_json(const lds_pool_stats *s, char *buf, size_t cap, size_t *needed)
{
    if (!s || (!buf && cap > 0))
        return LDS_E_INVALID_ARG;
    char tmp[2048];
    int n = snprintf(
        tmp, sizeof tmp,
        "{\"rents\":%" PRIu64 ",\"hits_thread\":%" PRIu64 ",\"hits_shared\":%" PRIu64
        ",\"misses_cold\":%" PRIu64 ",\"misses_exhausted\":%" PRIu64 ",\"misses_oversize\":%" PRIu64
        ",\"returns\":%" PRIu64 ",\"refused\":{\"stale\":%" PRIu64 ",\"unknown\":%" PRIu64
        ",\"pointer\":%" PRIu64 ",\"size\":%" PRIu64 "},\"refused_total\":%" PRIu64
        ",\"canary_failures\":%" PRIu64 ",\"drops\":%" PRIu64 ",\"trims\":%" PRIu64
        ",\"trimmed_bytes\":%" PRIu64 ",\"leases_current\":%" PRIu64 ",\"bytes_leased\":%" PRIu64
        ",\"bytes_leased_peak\":%" PRIu64 ",\"bytes_retained\":%" PRIu64
        ",\"buffers_retained\":%" PRIu64 ",\"bytes_resident_estimate\":%" PRIu64
        ",\"bytes_mapped\":%" PRIu64 ",\"waste_bytes_total\":%" PRIu64
        ",\"waste_bytes_current\":%" PRIu64 ",\"bytes_requested_total\":%" PRIu64 "}",
        s->rents, s->hits_thread, s->hits_shared, s->misses_cold, s->misses_exhausted,
        s->misses_oversize, s->returns, s->refused[0], s->refused[1], s->refused[2], s->refused[3],
        s->refused_total, s->canary_failures, s->drops, s->trims, s->trimmed_bytes,
        s->leases_current, s->bytes_leased, s->bytes_leased_peak, s->bytes_retained,
        s->buffers_retained, s->bytes_resident_estimate, s->bytes_mapped, s->waste_bytes_total,
        s->waste_bytes_current, s->bytes_requested_total);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return LDS_E_LIMIT;
    if (needed)
        *needed = (size_t)n;
    if (cap > 0) {
        size_t k = (size_t)n < cap ? (size_t)n : cap - 1;
        memcpy(buf, tmp, k);
        buf[k] = '\0';
    }
    return (size_t)n < cap ? LDS_OK : LDS_E_LIMIT;
}
