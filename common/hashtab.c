/* The process's hash key and the table's out-of-line parts (hashtab.h, ADR 0010). */
#include "hashtab.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static lds__hashkey process_key;
static pthread_once_t process_key_once = PTHREAD_ONCE_INIT;

/* Fills buf[0, n) from getrandom(2), else /dev/urandom; false if neither gives all. */
static bool os_random(void *buf, size_t n)
{
    uint8_t *p = (uint8_t *)buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got == n)
        return true;
    /* A sandbox without getrandom (ENOSYS, EPERM under seccomp). */
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    return got == n;
}

static void draw_process_key(void)
{
    if (os_random(&process_key, sizeof process_key))
        return;
    /* No randomness from the OS at all: a key from the clock, the pid and
       addresses (ASLR) is still unknown to whoever wrote the input offline,
       if far weaker than a random one. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t seed = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed ^= ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16);
    seed ^= (uint64_t)(uintptr_t)&seed ^ ((uint64_t)(uintptr_t)&process_key << 7);
    uint8_t *p = (uint8_t *)&process_key;
    for (size_t i = 0; i < sizeof process_key; i += 8) {
        uint64_t v = XXH3_64bits_withSeed(&i, sizeof i, seed);
        memcpy(p + i, &v, sizeof process_key - i < 8 ? sizeof process_key - i : 8);
    }
}

const lds__hashkey *lds__hashkey_get(void)
{
    pthread_once(&process_key_once, draw_process_key);
    return &process_key;
}

uint64_t lds__hash_key(const lds__hashkey *hk, const void *key, size_t len)
{
    if (len >= LDS__KEY_HASH_READ)
        return lds__hash_key_over(hk, key, len);
    uint8_t padded[LDS__KEY_HASH_READ] = {0};
    if (len > 0)
        memcpy(padded, key, len);
    return lds__hash_key_over(hk, padded, len);
}

static unsigned row_bits_for(uint64_t max_rows)
{
    unsigned bits = 32;
    while (bits < 63 && max_rows > ((uint64_t)1 << bits))
        bits++;
    return bits;
}

/* Tables of LDS__HASHTAB_HUGE bytes or more (a key table of 262,144 slots and up) are mapped
   on a 2 MiB boundary and advised MADV_HUGEPAGE: in a VM where a page fault costs tens of
   microseconds, a 4M-key table's 64 MiB of zeroed 4 KiB pages cost 16,384 faults (about half
   a second, ADR 0050's reload of 2 GiB) where 2 MiB pages cost 32. The kernel zeroes them.
   Smaller tables come from calloc. free_slots tells the two apart by the same size rule. */
#define LDS__HASHTAB_HUGE ((size_t)2 << 20)

static uint64_t *alloc_slots(uint64_t cap)
{
    if (cap == 0 || cap > (SIZE_MAX - LDS__HASHTAB_HUGE) / sizeof(uint64_t))
        return NULL;
    size_t bytes = (size_t)cap * sizeof(uint64_t);
    if (bytes < LDS__HASHTAB_HUGE)
        return (uint64_t *)calloc((size_t)cap, sizeof(uint64_t));
    size_t span = bytes + LDS__HASHTAB_HUGE;
    void *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uintptr_t raw = (uintptr_t)m;
    uintptr_t at = (raw + LDS__HASHTAB_HUGE - 1) & ~(uintptr_t)(LDS__HASHTAB_HUGE - 1);
    size_t head = (size_t)(at - raw), tail = span - head - bytes;
    if (head > 0)
        (void)munmap(m, head);
    if (tail > 0)
        (void)munmap((void *)(at + bytes), tail);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)at, bytes, MADV_HUGEPAGE); /* THP "never": 4 KiB pages, still good */
#endif
    return (uint64_t *)at;
}

/* Frees what alloc_slots(cap) returned. */
static void free_slots(uint64_t *slots, uint64_t cap)
{
    if (!slots)
        return;
    size_t bytes = (size_t)cap * sizeof(uint64_t);
    if (bytes < LDS__HASHTAB_HUGE)
        free(slots);
    else
        (void)munmap(slots, bytes);
}

uint8_t lds__hashtab_row_bits(uint64_t max_rows)
{
    return (uint8_t)row_bits_for(max_rows);
}

lds_status lds__hashtab_init(lds__hashtab *t, uint64_t n, uint64_t max_rows)
{
    memset(t, 0, sizeof *t);
    uint64_t cap = lds__table_capacity(n);
    t->slots = alloc_slots(cap);
    if (!t->slots)
        return LDS_E_NOMEM;
    t->mask = cap - 1;
    t->row_bits = (uint8_t)row_bits_for(max_rows);
    t->hk = lds__hashkey_get();
    return LDS_OK;
}

void lds__hashtab_free(lds__hashtab *t)
{
    if (!t)
        return;
    free_slots(t->slots, t->mask + 1);
    t->slots = NULL;
    t->mask = 0;
    t->count = 0;
}

bool lds__hashtab_reserve(lds__hashtab *t, uint64_t n, lds__hashtab_rehash rehash, const void *ctx)
{
    if (n <= (t->mask + 1) / 2)
        return true; /* the common case: room already */
    uint64_t cap = lds__table_capacity(n);
    if (cap == 0)
        return false;
    if (cap <= t->mask + 1)
        return true;
    uint64_t *s = alloc_slots(cap);
    if (!s)
        return false;
    uint64_t mask = cap - 1, high = ~(((uint64_t)1 << t->row_bits) - 1);
    for (uint64_t i = 0; i <= t->mask; i++) {
        uint64_t v = t->slots[i];
        if (v == 0)
            continue;
        uint64_t n_probes = 1;
        for (uint64_t j = rehash(ctx, v & ~high) & mask;; j = (j + 1) & mask, n_probes++) {
            if (s[j] == 0) {
                s[j] = v;
                break;
            }
        }
        t->inserts++;
        t->probes += n_probes;
        if (n_probes > t->longest)
            t->longest = n_probes > UINT32_MAX ? UINT32_MAX : (uint32_t)n_probes;
    }
    free_slots(t->slots, t->mask + 1);
    t->slots = s;
    t->mask = mask;
    return true;
}

void lds__hashtab_stats(const lds__hashtab *t, lds__probe_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!t || !t->slots)
        return;
    out->inserts = t->inserts;
    out->probes = t->probes;
    out->longest = t->longest;
    out->capacity = t->mask + 1;
    /* A run may wrap from the last slot to the first: start after an empty slot. */
    uint64_t start = 0;
    while (start <= t->mask && t->slots[start] != 0)
        start++;
    if (start > t->mask) {
        out->longest_run = t->mask + 1;
        return;
    }
    uint64_t run = 0;
    for (uint64_t i = 1; i <= t->mask + 1; i++) {
        if (t->slots[(start + i) & t->mask] != 0) {
            if (++run > out->longest_run)
                out->longest_run = run;
        } else {
            run = 0;
        }
    }
}

uint64_t lds__table_capacity(uint64_t n)
{
    uint64_t cap = 16;
    while (cap / 2 < n) {
        if (cap > (UINT64_MAX >> 4))
            return 0;
        cap <<= 1;
    }
    return cap;
}
