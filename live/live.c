/*
 * The live index: pinned readers, reloads that swap, retirement at the last pin.
 *
 * Reclamation is by per-thread hazard slots (docs/adr/0013):
 * - Each thread that pins gets a record of LV_SLOTS slots per live index, on a
 *   cache line of its own. Only the owning thread fills a slot (NULL -> gen);
 *   any thread may empty one (an unpin from another thread).
 * - pin:   g = current; slot = g; fence; if current != g, retry. After the
 *          re-check, a reloader that swaps g out later sees the slot when it
 *          scans (its swap is after the re-check, its scan after its fence).
 * - unpin: slot = NULL; fence; if current != g, the generation is (or is about
 *          to be) retired: take the mutex and free every retired generation no
 *          slot names. The unpin and the reloader's scan are a Dekker pair: at
 *          least one of them sees the other's store, so a retired generation is
 *          freed by whichever call releases its last pin.
 * - reload: swap; heavy fence; then, under the mutex, push the old generation
 *          on the retired list and scan. A generation is only freed under the
 *          mutex, after a scan finds no slot naming it and no counted pin on it.
 * The readers' fence is a compiler barrier when the reloader's heavy fence is
 * membarrier(2) (as liburcu's memb flavour does), else a full fence (below).
 * Pins beyond a thread's slots (or when its record cannot be allocated) are
 * counted per generation under the mutex (correct, slower).
 */
#include "lodestar_live.h"

#include "../pool/pool_internal.h"
#include "../loader/delta_internal.h"
#include "../format/format_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LV_SLOTS       6
#define LV_TLS_ENTRIES 4

typedef struct lv_gen {
    lds_index *index;
    uint64_t number;
    uint64_t bytes;
    uint64_t counted_pins; /* pins beyond the slots; under the mutex */
    bool own_pool;         /* its buffer is a rental from the live index's own pool */
    bool has_base;         /* `base` describes its payload: a delta reload may reuse it */
    lds__delta_base base;  /* its payload and chunk table (read only, never written) */
    struct lv_gen *next;   /* retired list; under the mutex */
} lv_gen;

/* One thread's slots for one live index: exactly one cache line. */
typedef struct lv_rec {
    _Alignas(64) _Atomic(lv_gen *) slot[LV_SLOTS];
    _Atomic uint64_t owner; /* thread token; 0 = free for any thread to adopt */
    struct lv_rec *next;    /* set before the record is published, then constant */
} lv_rec;
_Static_assert(sizeof(lv_rec) == 64, "a record is one cache line");

struct lds_live {
    /* Read by every pin and unpin, written by swaps only: a line of its own. */
    _Alignas(64) _Atomic(lv_gen *) current;
    _Alignas(64) uint64_t id;
    _Atomic(lv_rec *) recs; /* grows only; freed by lds_live_free */
    uint32_t max_retired;
    bool delta;                  /* lds_live_options.delta */
    char delta_why[128];         /* why the last delta reload fell back; under mtx */
    pthread_mutex_t mtx;        /* retired list, counted pins, counters, record adoption */
    pthread_mutex_t reload_mtx; /* held by the one reload in progress (trylock) */
    lv_gen *retired;
    uint64_t n_retired;
    uint64_t retired_peak;
    uint64_t reloads_done, reloads_failed, reloads_refused, freed;
    lds_status last_status;
    lds_load_info last_load;
    /* The pool reloads rent from when their options name none (docs/adr/0049): thread
     * caches off, never aged, room for (2 + max_retired) buffers of a class; between
     * reloads it keeps one spare buffer of the current generation's class. */
    lds_pool *pool;
    /* The standby (docs/adr/0050): the buffer of the last generation freed, with its chunk
     * table, kept out of the pool for the next delta reload to write into; under mtx, taken
     * out whole by the reloader. Only once a delta reload was asked (`standby_on`). */
    lds__delta_standby standby;
    _Atomic bool standby_on;
    /* The delta loads' plan scratch, kept across reloads (lds__delta_scratch). Reloader
     * only (under reload_mtx); freed at close. */
    lds__delta_scratch scratch;
    /* The spare key table (docs/adr/0055): the slots of the last freed generation's key table
     * when it was that table's only holder, kept (as the standby is) for the next reload
     * that must copy a table (rows appended) to copy into: warm pages, no fresh mapping.
     * Under mtx; taken out whole by the reloader; no reader can reach it. Empty (slots NULL)
     * when none. Only once a delta reload was asked (`standby_on`). */
    lds__hashtab spare_keys;
    /* Where the reload in progress spends its time (reloader only, under reload_mtx), and
     * the last reload's (under mtx; lds__live_phases, docs/adr/0055). */
    lds__delta_phases phases, last_phases;
    uint64_t reload_t0_ns;
    struct lds_live *next_live; /* registry of live indexes, for thread exit */
};

/* ==== fences ============================================================ */

/* The store-load order of a pin (slot, then re-check) and of an unpin (slot,
 * then current) against the reloader's (current, then scan) is asymmetric, as
 * in liburcu's memb flavour: readers need only a compiler barrier when the
 * reloader issues membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a
 * full barrier on every CPU running a thread of this process. Where the kernel
 * lacks it (and under ThreadSanitizer, which models fences, not IPIs), readers
 * use a full fence instead. Decided once per process, before any live index. */
static int g_membarrier;
static pthread_once_t g_fence_once = PTHREAD_ONCE_INIT;

static void fence_init(void)
{
#if defined(LDS_LIVE_FORCE_FENCE) || defined(__SANITIZE_THREAD__)
    g_membarrier = 0;
#else
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
    g_membarrier = 0;
    return;
#endif
#endif
    long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    g_membarrier = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                   syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

static inline void light_fence(void)
{
    if (g_membarrier)
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

static void heavy_fence(void)
{
    if (g_membarrier && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    /* A child of fork() may have lost the registration: register again; failing
     * that, the calling thread is (in such a child) the only one, and a full fence
     * orders its own accesses. */
    if (g_membarrier &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    atomic_thread_fence(memory_order_seq_cst);
}

/* ==== thread records ===================================================== */

/* Lives that exist, so that a thread's exit can release its records only in
 * those (a freed live's records are gone). Touched at create, free and thread
 * exit only. */
static pthread_mutex_t g_mtx = PTHREAD_MUTEX_INITIALIZER;
static lds_live *g_lives;
static uint64_t g_next_id = 1;
static _Atomic uint64_t g_next_token = 1;
static pthread_key_t g_exit_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

typedef struct lv_tls_entry {
    uint64_t live_id;
    lv_rec *rec;
} lv_tls_entry;

/* initial-exec: a pin's lookup is one %fs-relative load, not a __tls_get_addr call
 * (these 80 bytes fit glibc's static TLS surplus, also when liblodestar is dlopen'ed). */
#define LV_TLS __attribute__((tls_model("initial-exec")))
static _Thread_local lv_tls_entry tls_cache[LV_TLS_ENTRIES] LV_TLS;
static _Thread_local unsigned tls_victim LV_TLS;
static _Thread_local uint64_t tls_token LV_TLS;

/* Thread exit: give this thread's records back in every live that still exists,
 * also those that fell out of its LV_TLS_ENTRIES-entry cache (a thread that pinned
 * in more lives than that kept the older records owned forever, so thread churn grew
 * each live's record list without bound). Slots it still fills (pins handed to other
 * threads) stay filled. Cost: one walk of each live's records, at thread exit only. */
static void on_thread_exit(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&g_mtx);
    for (lds_live *l = g_lives; l && tls_token; l = l->next_live)
        for (lv_rec *r = atomic_load(&l->recs); r; r = r->next) {
            uint64_t mine = tls_token;
            atomic_compare_exchange_strong(&r->owner, &mine, 0);
        }
    for (int i = 0; i < LV_TLS_ENTRIES; i++)
        tls_cache[i] = (lv_tls_entry){0, NULL};
    pthread_mutex_unlock(&g_mtx);
}

/* Test hook (tests/test_live.c): the number of thread records `live` holds. */
size_t lds__live_test_records(lds_live *live);
size_t lds__live_test_records(lds_live *live)
{
    size_t n = 0;
    for (lv_rec *r = atomic_load(&live->recs); r; r = r->next)
        n++;
    return n;
}

static void make_key(void)
{
    if (pthread_key_create(&g_exit_key, on_thread_exit) != 0)
        g_exit_key = (pthread_key_t)-1;
}

/* The calling thread's record in `live`, adopting a free one or making one;
 * NULL when none can be had (the caller then counts its pin). */
/* Out of line (as collect and pin_counted): the pin's fast path then needs no callee-saved
 * registers and no frame. */
#define LV_COLD __attribute__((noinline, cold))

LV_COLD static lv_rec *record_slow(lds_live *live)
{
    if (!tls_token) {
        tls_token = atomic_fetch_add(&g_next_token, 1);
        pthread_once(&g_key_once, make_key);
        if (g_exit_key != (pthread_key_t)-1)
            pthread_setspecific(g_exit_key, (void *)1);
    }
    lv_rec *found = NULL;
    pthread_mutex_lock(&live->mtx);
    for (lv_rec *r = atomic_load(&live->recs); r && !found; r = r->next)
        if (atomic_load(&r->owner) == tls_token)
            found = r;
    for (lv_rec *r = atomic_load(&live->recs); r && !found; r = r->next) {
        uint64_t zero = 0;
        if (atomic_compare_exchange_strong(&r->owner, &zero, tls_token))
            found = r;
    }
    if (!found) {
        found = aligned_alloc(64, sizeof *found);
        if (found) {
            for (int i = 0; i < LV_SLOTS; i++)
                atomic_init(&found->slot[i], NULL);
            atomic_init(&found->owner, tls_token);
            found->next = atomic_load(&live->recs);
            atomic_store(&live->recs, found);
        }
    }
    pthread_mutex_unlock(&live->mtx);
    if (found) {
        unsigned v = tls_victim++ % LV_TLS_ENTRIES;
        tls_cache[v].live_id = live->id;
        tls_cache[v].rec = found;
    }
    return found;
}

static inline lv_rec *record(lds_live *live)
{
    for (int i = 0; i < LV_TLS_ENTRIES; i++)
        if (tls_cache[i].live_id == live->id)
            return tls_cache[i].rec;
    return record_slow(live);
}

/* ==== retirement ========================================================= */

static bool named_by_a_slot(lds_live *live, const lv_gen *g)
{
    for (lv_rec *r = atomic_load(&live->recs); r; r = r->next)
        for (int i = 0; i < LV_SLOTS; i++)
            if (atomic_load_explicit(&r->slot[i], memory_order_acquire) == g)
                return true;
    return false;
}

static void gen_free(lv_gen *g)
{
    if (g) {
        lds_index_free(g->index);
        free(g);
    }
}

/* Under the mutex: unlinks every retired generation nobody pins; returns them. */
static lv_gen *collect_locked(lds_live *live)
{
    lv_gen *dead = NULL;
    for (lv_gen **p = &live->retired; *p;) {
        lv_gen *g = *p;
        if (g->counted_pins == 0 && !named_by_a_slot(live, g)) {
            *p = g->next;
            g->next = dead;
            dead = g;
            live->n_retired--;
            live->freed++;
        } else {
            p = &g->next;
        }
    }
    return dead;
}

/* Returns a standby's rental to its pool unless a load took it; empties *sb. */
static void standby_return(lds__delta_standby *sb)
{
    if (sb->lease.ptr != NULL && !sb->taken)
        (void)lds_pool_return(sb->pool, &sb->lease, 0);
    memset(sb, 0, sizeof *sb);
}

/* Frees a generation nobody pins; with `keep`, a generation whose payload is a verified
 * rental of the live's own pool becomes the standby instead (its rental is kept, the
 * rest of its index freed), and the older standby goes back to the pool. Any thread. */
static void gen_retire_free(lds_live *live, lv_gen *g, bool keep)
{
    lds__delta_standby sb = {0};
    lds__hashtab spare;
    if (keep && atomic_load(&live->standby_on) && lds__index_take_keys(g->index, &spare)) {
        pthread_mutex_lock(&live->mtx);
        lds__hashtab older = live->spare_keys;
        live->spare_keys = spare;
        pthread_mutex_unlock(&live->mtx);
        lds__hashtab_free(&older);
    }
    if (keep && atomic_load(&live->standby_on) && g->own_pool && g->has_base && g->base.verified &&
        lds__index_take_lease(g->index, &sb.pool, &sb.lease)) {
        sb.has_table = g->base.payload == (const unsigned char *)sb.lease.ptr;
        sb.held = g->base;
        pthread_mutex_lock(&live->mtx);
        lds__delta_standby older = live->standby;
        live->standby = sb;
        pthread_mutex_unlock(&live->mtx);
        standby_return(&older);
        free(g);
        return;
    }
    gen_free(g);
}

static void free_list_in(lds_live *live, lv_gen *dead, bool keep)
{
    while (dead) {
        lv_gen *next = dead->next;
        gen_retire_free(live, dead, keep);
        dead = next;
    }
}



LV_COLD static void collect(lds_live *live)
{
    pthread_mutex_lock(&live->mtx);
    lv_gen *dead = collect_locked(live);
    pthread_mutex_unlock(&live->mtx);
    /* Freed outside the mutex: returning a rental or unmapping takes its time. */
    free_list_in(live, dead, true);
}

/* ==== create, free ======================================================= */

static lds_status set_err(lds_error *err, lds_status st, const char *field, const char *msg)
{
    if (!err || err->size < LDS_ERROR_MIN_SIZE || err->size > sizeof *err)
        return st;
    lds_error e;
    memset(&e, 0, sizeof e);
    e.size = err->size;
    e.status = st;
    e.field = field;
    snprintf(e.message, sizeof e.message, "%.*s", (int)sizeof e.message - 1, msg); /* cut to fit */
    memcpy(err, &e, err->size);
    return st;
}

void lds_live_options_default(lds_live_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->max_retired = LDS_LIVE_DEFAULT_MAX_RETIRED;
}

lds_status lds_live_create(const lds_live_options *opts, lds_live **out, lds_error *err)
{
    if (!out) {
        set_err(err, LDS_E_INVALID_ARG, "out", "lds_live_create: out is NULL");
        return LDS_E_INVALID_ARG;
    }
    *out = NULL;
    lds_live_options o;
    lds_live_options_default(&o);
    if (opts) {
        if (opts->size < LDS_LIVE_OPTIONS_MIN_SIZE || opts->size > sizeof o) {
            set_err(err, LDS_E_INVALID_ARG, "lds_live_options.size",
                    "lds_live_create: lds_live_options.size is out of range (set it with "
                    "lds_live_options_default)");
            return LDS_E_INVALID_ARG;
        }
        memcpy(&o, opts, opts->size);
    }
    if (o.max_retired == 0)
        o.max_retired = LDS_LIVE_DEFAULT_MAX_RETIRED;
    if (o.max_retired > LDS_LIVE_MAX_RETIRED_LIMIT) {
        char msg[128];
        snprintf(msg, sizeof msg, "lds_live_create: max_retired %" PRIu32 " is above %u",
                 o.max_retired, LDS_LIVE_MAX_RETIRED_LIMIT);
        set_err(err, LDS_E_INVALID_ARG, "lds_live_options.max_retired", msg);
        return LDS_E_INVALID_ARG;
    }
    pthread_once(&g_fence_once, fence_init);
    lds_live *live = aligned_alloc(64, sizeof *live);
    if (!live) {
        set_err(err, LDS_E_NOMEM, NULL, "lds_live_create: out of memory");
        return LDS_E_NOMEM;
    }
    memset(live, 0, sizeof *live);
    atomic_init(&live->current, NULL);
    atomic_init(&live->recs, NULL);
    live->max_retired = o.max_retired;
    live->delta = o.delta;
    atomic_init(&live->standby_on, o.delta);
    live->last_status = LDS_OK;
    lds_load_info_init(&live->last_load);
    if (pthread_mutex_init(&live->mtx, NULL) != 0) {
        free(live);
        set_err(err, LDS_E_NOMEM, NULL, "lds_live_create: pthread_mutex_init failed");
        return LDS_E_NOMEM;
    }
    if (pthread_mutex_init(&live->reload_mtx, NULL) != 0) {
        pthread_mutex_destroy(&live->mtx);
        free(live);
        set_err(err, LDS_E_NOMEM, NULL, "lds_live_create: pthread_mutex_init failed");
        return LDS_E_NOMEM;
    }
    lds_pool_options po;
    lds_pool_options_default(&po); /* LDS_POOL_CHECK and LDS_POOL_HUGE_PAGES still apply */
    po.thread_cache_count = 0;     /* a reader's return must reach the reloader's next rent */
    po.max_idle_ns = UINT64_MAX;   /* the spare waits for the next reload, however late */
    po.max_per_class = 2u + o.max_retired;          /* current, loading, retired */
    po.max_retained_bytes = LDS_POOL_MAX_REQUEST * 4; /* bounded per class instead */
    if (lds_pool_create(&po, &live->pool) != LDS_OK) {
        pthread_mutex_destroy(&live->reload_mtx);
        pthread_mutex_destroy(&live->mtx);
        free(live);
        set_err(err, LDS_E_NOMEM, NULL, "lds_live_create: its pool could not be created");
        return LDS_E_NOMEM;
    }
    pthread_mutex_lock(&g_mtx);
    live->id = g_next_id++;
    live->next_live = g_lives;
    g_lives = live;
    pthread_mutex_unlock(&g_mtx);
    *out = live;
    return LDS_OK;
}

/* Pins held now on any generation of `live`, counted from the thread records' slots and
 * the counted pins (nothing is added to the pin's path for this: a held pin is always in
 * one or the other). Writes "generation N: K pins, ..." into `where`. Exact when no other
 * call on `live` runs, as close and free require. Takes the mutex. */
static uint64_t pins_held(lds_live *live, char *where, size_t cap)
{
    lv_gen *gens[1 + LDS_LIVE_MAX_RETIRED_LIMIT];
    size_t ng = 0;
    uint64_t total = 0;
    size_t at = 0;
    where[0] = '\0';
    pthread_mutex_lock(&live->mtx);
    lv_gen *cur = atomic_load(&live->current);
    if (cur)
        gens[ng++] = cur;
    for (lv_gen *g = live->retired; g && ng < sizeof gens / sizeof gens[0]; g = g->next)
        gens[ng++] = g;
    for (size_t i = 0; i < ng; i++) {
        uint64_t n = gens[i]->counted_pins;
        for (lv_rec *r = atomic_load(&live->recs); r; r = r->next)
            for (int k = 0; k < LV_SLOTS; k++)
                n += atomic_load_explicit(&r->slot[k], memory_order_acquire) == gens[i];
        if (n && at < cap) {
            int w = snprintf(where + at, cap - at, "%sgeneration %" PRIu64 ": %" PRIu64 " pin%s",
                             total ? ", " : "", gens[i]->number, n, n == 1 ? "" : "s");
            at = w < 0 ? cap : at + (size_t)w;
        }
        total += n;
    }
    pthread_mutex_unlock(&live->mtx);
    return total;
}

static void live_destroy(lds_live *live)
{
    pthread_mutex_lock(&g_mtx);
    for (lds_live **p = &g_lives; *p; p = &(*p)->next_live)
        if (*p == live) {
            *p = live->next_live;
            break;
        }
    pthread_mutex_unlock(&g_mtx);
    /* Forget this live in the calling thread's cache; other threads' caches hold
     * its id, which is never handed out again. */
    for (int i = 0; i < LV_TLS_ENTRIES; i++)
        if (tls_cache[i].live_id == live->id)
            tls_cache[i] = (lv_tls_entry){0, NULL};
    gen_free(atomic_load(&live->current));
    free_list_in(live, live->retired, false);
    standby_return(&live->standby);
    lds__delta_scratch_free(&live->scratch);
    lds__hashtab_free(&live->spare_keys);
    for (lv_rec *r = atomic_load(&live->recs); r;) {
        lv_rec *next = r->next;
        free(r);
        r = next;
    }
    lds_pool_free(live->pool);
    pthread_mutex_destroy(&live->reload_mtx);
    pthread_mutex_destroy(&live->mtx);
    free(live);
}

lds_status lds_live_close(lds_live *live, lds_error *err)
{
    if (!live)
        return LDS_OK;
    char where[256];
    uint64_t held = pins_held(live, where, sizeof where);
    if (held) {
        char msg[sizeof where + 160];
        snprintf(msg, sizeof msg,
                 "lds_live_close: %" PRIu64 " pin%s still held (%s); release %s with "
                 "lds_live_unpin first: the live index stays open",
                 held, held == 1 ? "" : "s", where, held == 1 ? "it" : "them");
        return set_err(err, LDS_E_STATE, "live.pins", msg);
    }
    live_destroy(live);
    return LDS_OK;
}

void lds_live_free(lds_live *live)
{
    if (!live)
        return;
    char where[256];
    uint64_t held = pins_held(live, where, sizeof where);
    if (held) {
        /* Freeing would leave every such pin's index pointing at freed memory (a
         * use-after-free in the reader); the caller's error is made loud instead. */
        fprintf(stderr,
                "lodestar: lds_live_free: %" PRIu64 " pin%s still held (%s); release every pin "
                "first (lds_live_close refuses with LDS_E_STATE instead); aborting\n",
                held, held == 1 ? "" : "s", where);
        abort();
    }
    live_destroy(live);
}

/* ==== pin, unpin ========================================================= */

LV_COLD static lds_status pin_counted(lds_live *live, lds_pin *pin)
{
    pthread_mutex_lock(&live->mtx);
    lv_gen *g = atomic_load(&live->current);
    if (g)
        g->counted_pins++;
    pthread_mutex_unlock(&live->mtx);
    if (!g)
        return LDS_E_STATE;
    pin->index = g->index;
    pin->generation = g->number;
    pin->internal_[0] = NULL;
    pin->internal_[1] = g;
    return LDS_OK;
}

lds_status lds_live_pin(lds_live *live, lds_pin *pin)
{
    if (!pin)
        return LDS_E_INVALID_ARG;
    memset(pin, 0, sizeof *pin);
    if (!live)
        return LDS_E_INVALID_ARG;
    lv_rec *rec = record(live);
    _Atomic(lv_gen *) *slot = NULL;
    for (int i = 0; rec && i < LV_SLOTS && !slot; i++)
        if (atomic_load_explicit(&rec->slot[i], memory_order_relaxed) == NULL)
            slot = &rec->slot[i];
    if (!slot)
        return pin_counted(live, pin);
    lv_gen *g = atomic_load_explicit(&live->current, memory_order_acquire);
    for (;;) {
        if (!g)
            return LDS_E_STATE;
        atomic_store_explicit(slot, g, memory_order_relaxed);
        light_fence();
        lv_gen *again = atomic_load_explicit(&live->current, memory_order_acquire);
        if (again == g)
            break;
        /* Swapped meanwhile: g may already be retired and waiting for this slot. */
        atomic_store_explicit(slot, NULL, memory_order_release);
        collect(live);
        g = again;
    }
    pin->index = g->index;
    pin->generation = g->number;
    pin->internal_[0] = (void *)slot;
    pin->internal_[1] = g;
    return LDS_OK;
}

void lds_live_unpin(lds_live *live, lds_pin *pin)
{
    if (!pin || !pin->index || !live)
        return;
    _Atomic(lv_gen *) *slot = pin->internal_[0];
    lv_gen *g = pin->internal_[1];
    memset(pin, 0, sizeof *pin);
    if (slot) {
        atomic_store_explicit(slot, NULL, memory_order_release);
        light_fence();
        /* g is not dereferenced from here on: it may be freed by now. */
        if (atomic_load_explicit(&live->current, memory_order_acquire) != g)
            collect(live);
        return;
    }
    pthread_mutex_lock(&live->mtx);
    g->counted_pins--;
    lv_gen *dead = atomic_load(&live->current) != g ? collect_locked(live) : NULL;
    pthread_mutex_unlock(&live->mtx);
    free_list_in(live, dead, true);
}

/* ==== reloads ============================================================ */

static lds_status reload_begin(lds_live *live, lds_error *err)
{
    if (pthread_mutex_trylock(&live->reload_mtx) != 0) {
        pthread_mutex_lock(&live->mtx);
        live->reloads_refused++;
        pthread_mutex_unlock(&live->mtx);
        set_err(err, LDS_E_STATE, "live.reload",
                "reload refused: another reload of this live index is running");
        return LDS_E_STATE;
    }
    pthread_mutex_lock(&live->mtx);
    uint64_t waiting = live->n_retired;
    if (waiting >= live->max_retired)
        live->reloads_refused++;
    else
        live->delta_why[0] = '\0'; /* this reload's reason, set again only if it falls back */
    pthread_mutex_unlock(&live->mtx);
    if (waiting < live->max_retired) {
        memset(&live->phases, 0, sizeof live->phases);
        live->reload_t0_ns = lds__now_ns();
    }
    if (waiting >= live->max_retired) {
        pthread_mutex_unlock(&live->reload_mtx);
        char msg[160];
        snprintf(msg, sizeof msg,
                 "reload refused: %" PRIu64
                 " retired generations still pinned (max_retired %" PRIu32 ")",
                 waiting, live->max_retired);
        set_err(err, LDS_E_LIMIT, "live.max_retired", msg);
        return LDS_E_LIMIT;
    }
    return LDS_OK;
}

static uint64_t held_bytes(const lds_index *idx, const lds_load_info *info)
{
    if (info && info->ownership == LDS_OWN_ADOPT && info->capacity_bytes)
        return info->capacity_bytes;
    return lds_index_payload_bytes(idx);
}

static lv_gen *gen_new(lds_index *idx, const lds_load_info *info)
{
    lv_gen *g = calloc(1, sizeof *g);
    if (g) {
        g->index = idx;
        g->bytes = held_bytes(idx, info);
        /* Not a mapped generation: a copy from a file truncated underneath would fault
           outside any fault window. */
        g->has_base = info && info->path != LDS_LOAD_MAPPED && lds__delta_base_of(idx, &g->base);
    }
    return g;
}

/* The live index's own pool keeps, between reloads, one spare buffer of the serving
 * generation's class (the next reload rents it warm) and frees any other: a buffer made
 * while a retired generation was still pinned, or one of a class the payload left. At the
 * end of a reload (`at_end`), a retired generation of this pool still pinned will bring its
 * buffer back when its last pin goes: that buffer is then the spare, and the cached one is
 * freed now (else three payloads stay resident until the next reload). Called by the
 * reloader under reload_mtx (so `current` cannot change); it also collects the returns
 * readers queued for this thread. */
static void keep_one_spare(lds_live *live, bool at_end)
{
    lv_gen *cur = atomic_load(&live->current);
    uint32_t keep = cur ? 1u : 0u;
    pthread_mutex_lock(&live->mtx);
    if (live->standby.lease.ptr != NULL)
        keep = 0; /* the standby is the next reload's buffer */
    pthread_mutex_unlock(&live->mtx);
    if (at_end) {
        pthread_mutex_lock(&live->mtx);
        for (lv_gen *g = live->retired; g && keep; g = g->next)
            if (g->own_pool)
                keep = 0;
        pthread_mutex_unlock(&live->mtx);
    }
    lds__pool_keep_spares(live->pool, cur ? cur->bytes : 0, keep);
}

/* Before a reload that will not write into the standby: its rental goes back to the pool
 * (where the reload may rent it warm) and its table is forgotten. Reloader only. */
static void standby_drop(lds_live *live)
{
    pthread_mutex_lock(&live->mtx);
    lds__delta_standby sb = live->standby;
    memset(&live->standby, 0, sizeof live->standby);
    pthread_mutex_unlock(&live->mtx);
    standby_return(&sb);
}

/* `opts` with the live index's own pool when it names none (the default, NULL, is the
 * shared pool): `local` is filled and returned. Options of a size the loader refuses are
 * passed on unchanged, for the loader to report. */
static const lds_load_options *with_own_pool(lds_live *live, const lds_load_options *opts,
                                             lds_load_options *local, bool *own)
{
    *own = false;
    if (opts && (opts->size < LDS_LOAD_OPTIONS_MIN_SIZE || opts->size > sizeof *local ||
                 opts->pool))
        return opts;
    lds_load_options_default(local);
    if (opts)
        memcpy(local, opts, opts->size);
    local->pool = live->pool;
    *own = true;
    keep_one_spare(live, false);
    return local;
}

/* Ends the reload begun by reload_begin: swaps `g` in (st == LDS_OK) or records the
 * failure (`info` non-NULL: a load ran, its status and info go to the stats); releases
 * the reload mutex. */
static lds_status reload_end(lds_live *live, lds_status st, lv_gen *g, const lds_load_info *info,
                             uint64_t *generation, bool own_pool, lds_error *err)
{
    /* The key table before the swap, here on the reloader, when the serving generation has
     * one (docs/adr/0050): else the first lookup would build it under its pin, for seconds
     * at millions of keys, and keep the retired generation (and the standby) from the next
     * reload. The current generation cannot be swapped out meanwhile (reload mutex). */
    lv_gen *cur = atomic_load(&live->current);
    lv_gen *dup = NULL;
    uint64_t t0 = lds__now_ns();
    if (st == LDS_OK && cur) {
        lds__hashtab spare;
        pthread_mutex_lock(&live->mtx);
        spare = live->spare_keys;
        memset(&live->spare_keys, 0, sizeof live->spare_keys);
        pthread_mutex_unlock(&live->mtx);
        int how = lds__index_keys_from(g->index, cur->index, &spare);
        live->phases.keys_spare = how == LDS__KEYS_BUILT_SPARE;
        live->phases.keys_extended = how == LDS__KEYS_EXTENDED;
        /* The table built or handed on knows K7's verdict before the swap: a file whose keys
           repeat (under KEYS_UNIQUE) would answer every lookup with LDS_E_DUP_KEY, so it is
           refused here and the serving generation keeps serving. Its buffer, verified, is
           kept as the standby like any retired generation's. Only a loaded reload
           (`info`): an installed index is the caller's, its lookups report K7 themselves. */
        if (info && how != LDS__KEYS_LAZY &&
            lds_index_check_keys(g->index, err) == LDS_E_DUP_KEY) {
            st = LDS_E_DUP_KEY;
            dup = g;
            g = NULL;
        }
        if (spare.slots != NULL) { /* not used: kept unless a newer one came meanwhile */
            pthread_mutex_lock(&live->mtx);
            lds__hashtab newer = live->spare_keys;
            if (newer.slots == NULL)
                live->spare_keys = spare;
            pthread_mutex_unlock(&live->mtx);
            lds__hashtab_free(newer.slots == NULL ? &newer : &spare);
        }
    }
    uint64_t t1 = lds__now_ns();
    live->phases.keys_ns = t1 - t0;
    pthread_mutex_lock(&live->mtx);
    if (info) {
        live->last_status = st;
        memcpy(&live->last_load, info,
               info->size < sizeof live->last_load ? info->size : sizeof live->last_load);
        live->last_load.size = sizeof live->last_load;
    }
    lv_gen *old = NULL;
    uint64_t number = 0;
    if (st == LDS_OK) {
        old = atomic_load(&live->current);
        number = g->number = ++live->reloads_done;
        atomic_store(&live->current, g);
    } else {
        live->reloads_failed++;
    }
    pthread_mutex_unlock(&live->mtx);
    lv_gen *dead = NULL;
    if (old) {
        /* Every reader's slot store made before this point is visible after it, and every
         * reader's re-check after it sees `g` (see the top of this file). Only then may
         * `old` join the retired list, where scans look for it. */
        heavy_fence();
        pthread_mutex_lock(&live->mtx);
        old->next = live->retired;
        live->retired = old;
        live->n_retired++;
        dead = collect_locked(live);
        /* The peak is taken after the scan: a generation nobody pins is freed at once and
         * never counts as retired-and-pinned, even for the instant it sat on the list. */
        if (live->n_retired > live->retired_peak)
            live->retired_peak = live->n_retired;
        pthread_mutex_unlock(&live->mtx);
    }
    /* Freed before the next reload may start, so that the trim below sees its buffer. */
    free_list_in(live, dead, true);
    if (dup)
        gen_retire_free(live, dup, true); /* nobody ever pinned it */
    if (own_pool)
        keep_one_spare(live, true);
    t0 = lds__now_ns();
    live->phases.swap_ns = t0 - t1;
    live->phases.total_ns = t0 - live->reload_t0_ns;
    pthread_mutex_lock(&live->mtx);
    live->last_phases = live->phases;
    pthread_mutex_unlock(&live->mtx);
    pthread_mutex_unlock(&live->reload_mtx);
    if (st == LDS_OK && generation)
        *generation = number;
    return st;
}

/* After a load: wraps the index in a generation and ends the reload. */
static lds_status load_end(lds_live *live, lds_status st, lds_index *idx, const lds_load_info *info,
                           uint64_t *generation, lds_error *err, bool own_pool)
{
    lv_gen *g = NULL;
    if (st == LDS_OK && !(g = gen_new(idx, info))) {
        lds_index_free(idx);
        st = set_err(err, LDS_E_NOMEM, NULL, "reload: out of memory");
    }
    if (g)
        g->own_pool = own_pool && info->ownership == LDS_OWN_ADOPT &&
                      info->path == LDS_LOAD_POOLED;
    return reload_end(live, st, g, info, generation, own_pool, err);
}

/* The lds_load_info the load writes: the caller's, or ours when it passed NULL,
 * so that the stats always have the last load's. */
#define LOAD_INFO(info, local) ((info) ? (info) : (lds_load_info_init(&(local)), &(local)))

/* The body every lds_live_reload_* shares: refuse a concurrent or over-bound reload,
 * give `opts` the live index's own pool if it names none, run LOAD (a loader call on
 * `opts` that fills `idx` and `inf`), then swap in or report. */
#define RELOAD_WITH(LOAD) RELOAD_WITH_STANDBY(LOAD, false)
#define RELOAD_WITH_STANDBY(LOAD, USES_STANDBY)                                                    \
    do {                                                                                           \
        lds_status st_ = reload_begin(live, err);                                                  \
        if (st_ != LDS_OK)                                                                         \
            return st_;                                                                            \
        lds_load_options own_opts_;                                                                \
        bool own_;                                                                                 \
        if (!(USES_STANDBY))                                                                       \
            standby_drop(live);                                                                    \
        opts = with_own_pool(live, opts, &own_opts_, &own_);                                       \
        lds_load_info local_;                                                                      \
        lds_load_info *inf = LOAD_INFO(info, local_);                                              \
        lds_index *idx = NULL;                                                                     \
        st_ = (LOAD);                                                                              \
        return load_end(live, st_, idx, inf, generation, err, own_);                               \
    } while (0)

/* After the full load a delta fell back to (or a reload that asked for none): marks the
 * load info and keeps the reason for the stats (reload_begin cleared the last one). */
static void note_fallback(lds_live *live, bool delta, lds_load_info *inf, const char *why)
{
    if (!delta)
        return;
    if (inf->size >= offsetof(lds_load_info, delta_fallback) + sizeof inf->delta_fallback)
        inf->delta_fallback = true;
    pthread_mutex_lock(&live->mtx);
    snprintf(live->delta_why, sizeof live->delta_why, "%s", why);
    pthread_mutex_unlock(&live->mtx);
}

/* A reload from a path (fd < 0) or an fd: a delta against the current generation when
 * asked and possible (docs/adr/0047), else the full load, with delta_fallback set and the
 * reason kept for the stats. Runs under the reload mutex: the current generation cannot be
 * swapped out (nor freed) meanwhile, so its payload is safe to read. */
static lds_status load_delta_or_full(lds_live *live, const char *path, int fd, bool delta,
                                     const lds_load_options *opts, lds_index **idx,
                                     lds_load_info *inf, lds_error *err)
{
    char why[sizeof live->delta_why] = "";
    if (delta) {
        lv_gen *cur = atomic_load(&live->current);
        bool fallback = false;
        /* The standby is the reloader's alone from here: no reader can see it. */
        lds__delta_standby sb;
        atomic_store(&live->standby_on, true);
        pthread_mutex_lock(&live->mtx);
        sb = live->standby;
        memset(&live->standby, 0, sizeof live->standby);
        pthread_mutex_unlock(&live->mtx);
        sb.scratch = &live->scratch; /* the reloader's alone (reload_mtx) */
        lds_status st = lds__load_delta_into(path, fd, opts,
                                             cur && cur->has_base ? &cur->base : NULL, &sb, idx,
                                             inf, err, &fallback, why, sizeof why,
                                             &live->phases);
        standby_return(&sb); /* unless the load took it: then it is the new index's, or the
                                pool's again after a failure (its contents unknown) */
        if (!fallback)
            return st;
    }
    lds_status st = path ? lds_load_path(path, opts, idx, inf, err) : lds_load_fd(fd, opts, idx, inf, err);
    note_fallback(live, delta, inf, why);
    return st;
}

lds_status lds_live_reload_path_delta(lds_live *live, const char *path, bool delta,
                                      const lds_load_options *opts, uint64_t *generation,
                                      lds_load_info *info, lds_error *err)
{
    if (!live || !path)
        return set_err(err, LDS_E_INVALID_ARG, "path", "reload: live or path is NULL");
    RELOAD_WITH_STANDBY(load_delta_or_full(live, path, -1, delta, opts, &idx, inf, err), delta);
}

lds_status lds_live_reload_fd_delta(lds_live *live, int fd, bool delta,
                                    const lds_load_options *opts, uint64_t *generation,
                                    lds_load_info *info, lds_error *err)
{
    if (!live)
        return set_err(err, LDS_E_INVALID_ARG, "live", "reload: live is NULL");
    if (fd < 0)
        RELOAD_WITH(lds_load_fd(fd, opts, &idx, inf, err)); /* its own LDS_E_INVALID_ARG */
    RELOAD_WITH_STANDBY(load_delta_or_full(live, NULL, fd, delta, opts, &idx, inf, err), delta);
}

lds_status lds_live_reload_path(lds_live *live, const char *path, const lds_load_options *opts,
                                uint64_t *generation, lds_load_info *info, lds_error *err)
{
    return lds_live_reload_path_delta(live, path, live ? live->delta : false, opts, generation,
                                      info, err);
}

lds_status lds_live_reload_fd(lds_live *live, int fd, const lds_load_options *opts,
                              uint64_t *generation, lds_load_info *info, lds_error *err)
{
    return lds_live_reload_fd_delta(live, fd, live ? live->delta : false, opts, generation, info,
                                    err);
}

lds_status lds_live_reload_file(lds_live *live, FILE *f, const lds_load_options *opts,
                                uint64_t *generation, lds_load_info *info, lds_error *err)
{
    if (!live || !f)
        return set_err(err, LDS_E_INVALID_ARG, "f", "reload: live or f is NULL");
    RELOAD_WITH(lds_load_file(f, opts, &idx, inf, err));
}

lds_status lds_live_reload_memory(lds_live *live, const void *bytes, size_t n, bool copy,
                                  const lds_load_options *opts, uint64_t *generation,
                                  lds_load_info *info, lds_error *err)
{
    if (!live || !bytes)
        return set_err(err, LDS_E_INVALID_ARG, "bytes", "reload: live or bytes is NULL");
    RELOAD_WITH(lds_load_memory(bytes, n, copy, opts, &idx, inf, err));
}

/* load_delta_or_full for a URL (docs/adr/0053): the same fallback rules and bookkeeping. */
static lds_status load_url_delta_or_full(lds_live *live, const char *url, bool delta,
                                         const lds_load_options *opts, lds_index **idx,
                                         lds_load_info *inf, lds_error *err)
{
    char why[sizeof live->delta_why] = "";
    if (delta) {
        lv_gen *cur = atomic_load(&live->current);
        bool fallback = false;
        lds_status st = lds__load_delta_url(url, opts, cur && cur->has_base ? &cur->base : NULL,
                                            idx, inf, err, &fallback, why, sizeof why);
        if (!fallback)
            return st;
    }
    lds_status st = lds_load_url(url, opts, idx, inf, err);
    note_fallback(live, delta, inf, why);
    return st;
}

lds_status lds_live_reload_url_delta(lds_live *live, const char *url, bool delta,
                                     const lds_load_options *opts, uint64_t *generation,
                                     lds_load_info *info, lds_error *err)
{
    if (!live || !url)
        return set_err(err, LDS_E_INVALID_ARG, "url", "reload: live or url is NULL");
    RELOAD_WITH(load_url_delta_or_full(live, url, delta, opts, &idx, inf, err));
}

lds_status lds_live_reload_url(lds_live *live, const char *url, const lds_load_options *opts,
                               uint64_t *generation, lds_load_info *info, lds_error *err)
{
    return lds_live_reload_url_delta(live, url, live ? live->delta : false, opts, generation,
                                     info, err);
}

lds_status lds_live_reload_callback(lds_live *live, lds_read_fn read, void *ctx,
                                    const lds_load_options *opts, uint64_t *generation,
                                    lds_load_info *info, lds_error *err)
{
    if (!live || !read)
        return set_err(err, LDS_E_INVALID_ARG, "read", "reload: live or read is NULL");
    RELOAD_WITH(lds_load_callback(read, ctx, opts, &idx, inf, err));
}

lds_status lds_live_install_take(lds_live *live, lds_index *idx, uint64_t *generation,
                                 lds_error *err)
{
    if (!live || !idx)
        return set_err(err, LDS_E_INVALID_ARG, "idx", "install: live or idx is NULL");
    lds_status st = reload_begin(live, err);
    if (st != LDS_OK)
        return st;
    lv_gen *g = gen_new(idx, NULL);
    if (!g) {
        pthread_mutex_unlock(&live->reload_mtx);
        return set_err(err, LDS_E_NOMEM, NULL, "install: out of memory"); /* caller keeps idx */
    }
    return reload_end(live, LDS_OK, g, NULL, generation, false, err);
}

lds_pool *lds_live_pool(lds_live *live)
{
    return live ? live->pool : NULL;
}

/* ==== statistics ========================================================= */

void lds_live_stats_init(lds_live_stats *stats)
{
    if (!stats)
        return;
    memset(stats, 0, sizeof *stats);
    stats->size = sizeof *stats;
    lds_load_info_init(&stats->last_load);
}

lds_status lds_live_get_stats(lds_live *live, lds_live_stats *out)
{
    if (!live || !out || out->size < LDS_LIVE_STATS_MIN_SIZE || out->size > sizeof *out)
        return LDS_E_INVALID_ARG;
    lds_live_stats s;
    lds_live_stats_init(&s);
    pthread_mutex_lock(&live->mtx);
    lv_gen *cur = atomic_load(&live->current);
    s.generation = cur ? cur->number : 0;
    s.bytes_current = cur ? cur->bytes : 0;
    s.reloads_done = live->reloads_done;
    s.reloads_failed = live->reloads_failed;
    s.reloads_refused = live->reloads_refused;
    s.retired_pinned = live->n_retired;
    s.retired_pinned_peak = live->retired_peak;
    s.generations_freed = live->freed;
    s.last_status = live->last_status;
    s.last_load = live->last_load;
    memcpy(s.delta_fallback_reason, live->delta_why, sizeof s.delta_fallback_reason);
    for (lv_gen *g = live->retired; g; g = g->next) {
        s.bytes_retired += g->bytes;
        s.pins_on_retired += g->counted_pins;
        for (lv_rec *r = atomic_load(&live->recs); r; r = r->next)
            for (int i = 0; i < LV_SLOTS; i++)
                s.pins_on_retired += atomic_load(&r->slot[i]) == g;
    }
    pthread_mutex_unlock(&live->mtx);
    memcpy(out, &s, sizeof s);
    return LDS_OK;
}

#define STAT_FIELDS(X)                                                                             \
    X(generation)                                                                                  \
    X(reloads_done)                                                                                \
    X(reloads_failed)                                                                              \
    X(reloads_refused)                                                                             \
    X(retired_pinned)                                                                              \
    X(retired_pinned_peak)                                                                         \
    X(pins_on_retired)                                                                             \
    X(bytes_retired)                                                                               \
    X(bytes_current)                                                                               \
    X(generations_freed)

#define INFO_U64(X)                                                                                \
    X(payload_bytes)                                                                               \
    X(declared_bytes)                                                                              \
    X(stream_bytes)                                                                                \
    X(capacity_bytes)                                                                              \
    X(elapsed_ns)                                                                                  \
    X(bytes_read)                                                                                  \
    X(bytes_shared)                                                                                \
    X(bytes_copied)                                                                                \
    X(chunks_read)                                                                                 \
    X(chunks_shared)                                                                               \
    X(chunks_copied)

#define INFO_BOOL(X)                                                                               \
    X(compressed)                                                                                  \
    X(checksum_verified)                                                                           \
    X(hashed_while_reading)                                                                        \
    X(mmap_fallback)                                                                               \
    X(hashed_on_thread)                                                                            \
    X(delta_fallback)

lds_status lds_live_stats_json(const lds_live_stats *s, char *buf, size_t cap, size_t *needed)
{
    if (!s || (!buf && cap > 0) || s->size < LDS_LIVE_STATS_MIN_SIZE || s->size > sizeof *s)
        return LDS_E_INVALID_ARG;
    char tmp[2048];
    size_t n = 0;
    int k;
#define APPEND(...)                                                                                \
    do {                                                                                           \
        k = snprintf(tmp + n, sizeof tmp - n, __VA_ARGS__);                                        \
        if (k < 0 || (size_t)k >= sizeof tmp - n)                                                  \
            return LDS_E_LIMIT;                                                                    \
        n += (size_t)k;                                                                            \
    } while (0)
    APPEND("{");
#define STAT_JSON(f) APPEND("\"%s\":%" PRIu64 ",", #f, s->f);
    STAT_FIELDS(STAT_JSON)
#undef STAT_JSON
    APPEND("\"last_status\":\"%s\",", lds_status_name(s->last_status));
    const lds_load_info *li = &s->last_load;
    const char *own = li->ownership == LDS_OWN_ADOPT  ? "adopt"
                      : li->ownership == LDS_OWN_COPY ? "copy"
                                                      : "none";
    APPEND("\"last_load\":{\"path\":\"%s\",\"ownership\":\"%s\"", lds_load_path_name(li->path),
           own);
#define INFO_U64_JSON(f) APPEND(",\"%s\":%" PRIu64, #f, (uint64_t)li->f);
    INFO_U64(INFO_U64_JSON)
#undef INFO_U64_JSON
#define INFO_BOOL_JSON(f) APPEND(",\"%s\":%s", #f, li->f ? "true" : "false");
    INFO_BOOL(INFO_BOOL_JSON)
#undef INFO_BOOL_JSON
    APPEND("},\"delta_fallback_reason\":\"");
    for (size_t i = 0; i < sizeof s->delta_fallback_reason && s->delta_fallback_reason[i]; i++) {
        unsigned char ch = (unsigned char)s->delta_fallback_reason[i];
        if (ch == '"' || ch == '\\')
            APPEND("\\%c", ch);
        else if (ch < 0x20)
            APPEND("\\u%04x", ch);
        else
            APPEND("%c", ch);
    }
    APPEND("\"}");
#undef APPEND
    if (needed)
        *needed = n;
    if (cap > 0) {
        size_t c = n < cap ? n : cap - 1;
        memcpy(buf, tmp, c);
        buf[c] = '\0';
    }
    return n < cap ? LDS_OK : LDS_E_LIMIT;
}

void lds__live_phases(lds_live *live, lds__delta_phases *out)
{
    pthread_mutex_lock(&live->mtx);
    *out = live->last_phases;
    pthread_mutex_unlock(&live->mtx);
}

const lds__delta_scratch *lds__live_scratch(lds_live *live)
{
    return &live->scratch;
}

size_t lds__live_populate_standby(lds_live *live, size_t length)
{
    size_t done = 0;
#ifdef MADV_POPULATE_WRITE
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096u;
    pthread_mutex_lock(&live->mtx);
    const lds__delta_standby *sb = &live->standby;
    if (sb->lease.ptr != NULL && !sb->taken) {
        size_t n = length < sb->lease.capacity ? length : sb->lease.capacity;
        uintptr_t a = ((uintptr_t)sb->lease.ptr + page - 1) & ~(page - 1);
        uintptr_t e = ((uintptr_t)sb->lease.ptr + n) & ~(page - 1);
        if (e > a && madvise((void *)a, e - a, MADV_POPULATE_WRITE) == 0)
            done = n;
    }
    pthread_mutex_unlock(&live->mtx);
#else
    (void)live;
    (void)length;
#endif
    return done;
}

void lds__live_phases_ns(lds_live *live, uint64_t *out, size_t n)
{
    lds__delta_phases p;
    lds__live_phases(live, &p);
    uint64_t v[] = {p.table_ns, p.plan_ns, p.rent_ns,  p.fill_ns, p.parse_ns,
                    p.keys_ns,  p.swap_ns, p.total_ns, p.delta,   p.keys_spare,
                    p.keys_extended, p.fill_copy_ns, p.fill_read_ns, p.fill_verify_ns};
    for (size_t i = 0; i < n && i < sizeof v / sizeof v[0]; i++)
        out[i] = v[i];
}
