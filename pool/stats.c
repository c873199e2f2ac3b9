/*
 * stats.c: statistics snapshots and their JSON form.
 *
 * Hot-path counters live in each thread's cache (written by that thread only, per
 * size class; a cache outlives its thread, abandoned to its pool); a snapshot sums
 * them with the pool's own slow-path counters, under the thread-cache registry lock.
 * The peak of leased bytes is the sum of the caches' own high-waters: never below the
 * true peak, equal to it when one thread does the renting (lodestar_pool.h).
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
    t->leased_top = LOAD(tc->leased_top);
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
    uint64_t cached_bytes = 0, cached_count = 0, peak = 0;
    lds__pool_collect_mine(pool);
    bytes_out = bytes_in = waste_out = waste_in = returns = 0;
    pthread_mutex_lock(&lds__g_lock);
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
        peak += t.leased_top;
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
    st.slots_retired = LOAD(pool->slots_retired);
    st.guard_failures = LOAD(pool->guard_failures);
    st.leases_current = st.rents >= returns ? st.rents - returns : 0;
    st.bytes_leased = bytes_out >= bytes_in ? bytes_out - bytes_in : 0;
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

/* The JSON keys in struct order; refused[] is written as one object. */
#define FIELD(f)                                                                                   \
    {                                                                                              \
#f, offsetof(lds_pool_stats, f)                                                            \
    }
static const struct {
    const char *name;
    size_t at;
} json_fields[] = {
    FIELD(rents),
    FIELD(hits_thread),
    FIELD(hits_shared),
    FIELD(misses_cold),
    FIELD(misses_exhausted),
    FIELD(misses_oversize),
    FIELD(returns),
    FIELD(refused),
    FIELD(refused_total),
    FIELD(canary_failures),
    FIELD(drops),
    FIELD(trims),
    FIELD(trimmed_bytes),
    FIELD(leases_current),
    FIELD(bytes_leased),
    FIELD(bytes_leased_peak),
    FIELD(bytes_retained),
    FIELD(buffers_retained),
    FIELD(bytes_resident_estimate),
    FIELD(bytes_mapped),
    FIELD(waste_bytes_total),
    FIELD(waste_bytes_current),
    FIELD(bytes_requested_total),
    FIELD(slots_retired),
    FIELD(guard_failures),
};
#undef FIELD
_Static_assert(offsetof(lds_pool_stats, guard_failures) + sizeof(uint64_t) ==
                   sizeof(lds_pool_stats),
               "a new lds_pool_stats field needs its entry in json_fields");

lds_status lds_pool_stats_json(const lds_pool_stats *s, char *buf, size_t cap, size_t *needed)
{
    if (!s || (!buf && cap > 0) || s->size < offsetof(lds_pool_stats, hits_thread))
        return LDS_E_INVALID_ARG;
    /* A struct from an older header is shorter: only the fields within its size exist. */
    size_t size = s->size < sizeof *s ? s->size : sizeof *s;
    static const char *const refused[LDS_POOL_REFUSED_COUNT] = {"stale", "unknown", "pointer",
                                                                "size"};
    char tmp[2048];
    size_t n = 0;
    tmp[n++] = '{';
    for (size_t i = 0; i < sizeof json_fields / sizeof json_fields[0]; i++) {
        size_t at = json_fields[i].at;
        int is_refused = at == offsetof(lds_pool_stats, refused);
        if (at + (is_refused ? sizeof s->refused : sizeof(uint64_t)) > size)
            break;
        const char *sep = i ? "," : "";
        int k;
        if (is_refused) {
            k = snprintf(tmp + n, sizeof tmp - n, "%s\"refused\":{", sep);
            for (int r = 0; k > 0 && r < LDS_POOL_REFUSED_COUNT; r++)
                k += snprintf(tmp + n + (size_t)k, sizeof tmp - n - (size_t)k, "%s\"%s\":%" PRIu64,
                              r ? "," : "", refused[r], s->refused[r]);
            k += snprintf(tmp + n + (size_t)k, sizeof tmp - n - (size_t)k, "}");
        } else {
            uint64_t v;
            memcpy(&v, (const char *)s + at, sizeof v);
            k = snprintf(tmp + n, sizeof tmp - n, "%s\"%s\":%" PRIu64, sep, json_fields[i].name, v);
        }
        if (k < 0 || (size_t)k >= sizeof tmp - n)
            return LDS_E_LIMIT;
        n += (size_t)k;
    }
    if (n + 2 > sizeof tmp)
        return LDS_E_LIMIT;
    tmp[n++] = '}';
    tmp[n] = '\0';
    if (needed)
        *needed = n;
    if (cap > 0) {
        size_t k = n < cap ? n : cap - 1;
        memcpy(buf, tmp, k);
        buf[k] = '\0';
    }
    return n < cap ? LDS_OK : LDS_E_LIMIT;
}
