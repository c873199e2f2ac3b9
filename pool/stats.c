/*
 * stats.c: statistics snapshots and their JSON form.
 *
 * The warm path counts one thing, the lengths rented (`requested`, in the renting thread's
 * cache). Rents, returns, leases out, bytes leased and waste are read off the slots: a
 * slot's generation grows by one at each rent and each return, so the buffer it holds has
 * been rented (gen - gen_base + 1) / 2 times and is out on lease when gen is odd; a buffer
 * that is freed folds its rents into the pool's (buffers.c). A snapshot walks the slot
 * table under slot_lock, so it costs time in proportion to the slots (buffers that exist,
 * plus retired slots). Slow-path counters (misses, refusals, trims) are the pool's or the
 * caches'. The peak of leased bytes is bounded by the peak of what each cache held
 * (lodestar_pool.h: bytes_leased_peak, docs/adr/0025).
 */
#include "pool_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define RLX     memory_order_relaxed
#define LOAD(x) atomic_load_explicit(&(x), RLX)

/* What the slots say: rents (done and live), leases out and their bytes. */
typedef struct slot_sums {
    uint64_t rents, rented_bytes, leases, leased_bytes, leased_waste;
} slot_sums;

static void sum_slots(lds_pool *pool, slot_sums *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&pool->slot_lock);
    t->rents = pool->rents_done;
    t->rented_bytes = pool->rented_bytes_done;
    uint32_t count = atomic_load_explicit(&pool->slot_count, memory_order_acquire);
    for (uint32_t c = 0; c * LDS__POOL_CHUNK_SLOTS < count; c++) {
        const lds__slot *chunk = atomic_load_explicit(&pool->chunks[c], memory_order_acquire);
        if (!chunk)
            break;
        uint32_t end = count - c * LDS__POOL_CHUNK_SLOTS;
        if (end > LDS__POOL_CHUNK_SLOTS)
            end = LDS__POOL_CHUNK_SLOTS;
        for (uint32_t i = 0; i < end; i++) {
            const lds__slot *s = &chunk[i];
            if (atomic_load_explicit(&s->ptr, memory_order_acquire) == 0)
                continue; /* no buffer (its rents are folded) */
            uint64_t gen =
                atomic_load_explicit(&s->word, memory_order_acquire) >> LDS__POOL_GEN_SHIFT;
            uint64_t rents = (gen - s->gen_base + 1) / 2;
            t->rents += rents;
            t->rented_bytes += rents * atomic_load_explicit(&s->cap, RLX);
            if (gen & 1u) {
                /* Each read once: the test and the difference see the same capacity. */
                size_t len = atomic_load_explicit(&s->length, RLX);
                size_t cap = atomic_load_explicit(&s->cap, RLX);
                t->leases++;
                t->leased_bytes += cap;
                t->leased_waste += cap > len ? cap - len : 0;
            }
        }
    }
    pthread_mutex_unlock(&pool->slot_lock);
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

    uint64_t misses = 0, cached_bytes = 0, cached_count = 0, peak = 0;
    lds__pool_collect_mine(pool);
    pthread_mutex_lock(&lds__g_lock);
    for (const lds__tcache *tc = pool->tcaches; tc; tc = tc->next_in_pool) {
        for (uint32_t c = 0; c < LDS__POOL_CLASSES; c++) {
            uint64_t n = LOAD(tc->n[c]);
            misses += LOAD(tc->misses[c]);
            cached_count += n;
            cached_bytes += n * lds__class_capacity(c);
        }
        st.bytes_requested_total += LOAD(tc->requested);
        peak += LOAD(tc->held_top);
    }
    pthread_mutex_unlock(&lds__g_lock);
    /* Read after the caches' counters: a rent in flight may show its miss or its length
     * but not yet its generation, so the differences are clamped rather than wrapped. */
    slot_sums t;
    sum_slots(pool, &t);

    st.rents = t.rents;
    st.hits_thread = t.rents > misses ? t.rents - misses : 0;
    st.returns = t.rents - t.leases;
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
    st.leases_current = t.leases;
    st.bytes_leased = t.leased_bytes;
    st.bytes_leased_peak = peak > st.bytes_leased ? peak : st.bytes_leased;
    uint64_t q_bytes = LOAD(pool->q_bytes);
    st.bytes_retained = cached_bytes + LOAD(pool->shared_bytes) + q_bytes;
    st.buffers_retained = cached_count + LOAD(pool->shared_count) + LOAD(pool->q_count);
    st.bytes_resident_estimate = st.bytes_leased + st.bytes_retained;
    st.bytes_mapped = LOAD(pool->bytes_mapped);
    st.waste_bytes_total =
        t.rented_bytes > st.bytes_requested_total ? t.rented_bytes - st.bytes_requested_total : 0;
    st.waste_bytes_current = t.leased_waste;
    /* Whole fields only: a size that ends inside one leaves that field as it was. */
    size_t whole = st.size < sizeof st ? st.size / sizeof(uint64_t) * sizeof(uint64_t) : st.size;
    memcpy(out, &st, whole);
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
