/*
 * Other pools beside the system allocator, for `rent-return --allocator`: mimalloc's heap API
 * on a private heap (mi_heap_new, mi_heap_malloc, mi_free) and tcmalloc's tc_malloc/tc_free
 * (libtcmalloc_minimal).
 *
 * Each is compiled in only when meson found its development package (the header gives the
 * prototypes), and bound at run time with dlopen(RTLD_LOCAL) rather than linked: both
 * libraries export malloc and free, so linking either one would interpose them for the whole
 * process (the executable's DT_NEEDED entries come before libc), and the plain malloc+free
 * baseline of the same table would silently become that allocator. Loaded locally, they serve
 * only the calls made through the pointers below.
 */
#include "bench.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef BENCH_HAVE_MIMALLOC
#include <mimalloc.h>
#endif
#ifdef BENCH_HAVE_TCMALLOC
#include <gperftools/tcmalloc.h>
#endif

struct bench_other {
    const char *name;
    const char *label;
    char version[128];
    void *lib;
    void *heap; /* mi-heap: the private heap */
#ifdef BENCH_HAVE_MIMALLOC
    __typeof__(mi_heap_new) *mi_heap_new;
    __typeof__(mi_heap_malloc) *mi_heap_malloc;
    __typeof__(mi_free) *mi_free;
    __typeof__(mi_heap_delete) *mi_heap_delete;
#endif
#ifdef BENCH_HAVE_TCMALLOC
    __typeof__(tc_malloc) *tc_malloc;
    __typeof__(tc_free) *tc_free;
#endif
};

static const char *const known[] = {"mi-heap", "tcmalloc"};

size_t bench_other_count(void)
{
    return sizeof known / sizeof known[0];
}

const char *bench_other_name(size_t i)
{
    return i < bench_other_count() ? known[i] : NULL;
}

/* A symbol of `lib` as a function pointer (the cast through uintptr_t is what POSIX allows). */
static int sym(void *lib, const char *name, void *out, size_t out_size, char *why, size_t cap)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(why, cap, "%s not found in the library", name);
        return -1;
    }
    uintptr_t u = (uintptr_t)p;
    if (out_size != sizeof u)
        return -1;
    memcpy(out, &u, sizeof u);
    return 0;
}

#define SYM(lib, field, name) sym(lib, name, &(field), sizeof(field), why, cap)

static void *open_lib(const char *soname, char *why, size_t cap)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e ? e : "dlopen failed");
    }
    return lib;
}

static int open_mi_heap(bench_other *p, char *why, size_t cap)
{
#ifdef BENCH_HAVE_MIMALLOC
    p->label = "mi_heap_malloc+mi_free";
    p->lib = open_lib("libmimalloc.so.2", why, cap);
    if (!p->lib)
        return -1;
    __typeof__(mi_version) *version = NULL;
    if (SYM(p->lib, version, "mi_version") || SYM(p->lib, p->mi_heap_new, "mi_heap_new") ||
        SYM(p->lib, p->mi_heap_malloc, "mi_heap_malloc") || SYM(p->lib, p->mi_free, "mi_free") ||
        SYM(p->lib, p->mi_heap_delete, "mi_heap_delete"))
        return -1;
    p->heap = p->mi_heap_new();
    if (!p->heap) {
        snprintf(why, cap, "mi_heap_new returned NULL");
        return -1;
    }
    int v = version();
    snprintf(p->version, sizeof p->version,
             "mimalloc %d.%d.%d (mi_version() %d; header %d), libmimalloc.so.2 by dlopen, "
             "private heap from mi_heap_new",
             v / 100, (v / 10) % 10, v % 10, v, MI_MALLOC_VERSION);
    return 0;
#else
    (void)p;
    snprintf(why, cap, "not built: meson did not find mimalloc (Debian libmimalloc-dev)");
    return -1;
#endif
}

static int open_tcmalloc(bench_other *p, char *why, size_t cap)
{
#ifdef BENCH_HAVE_TCMALLOC
    p->label = "tc_malloc+tc_free";
    p->lib = open_lib("libtcmalloc_minimal.so.4", why, cap);
    if (!p->lib)
        return -1;
    __typeof__(tc_version) *version = NULL;
    if (SYM(p->lib, version, "tc_version") || SYM(p->lib, p->tc_malloc, "tc_malloc") ||
        SYM(p->lib, p->tc_free, "tc_free"))
        return -1;
    int major = 0, minor = 0;
    const char *patch = NULL;
    const char *s = version(&major, &minor, &patch);
    snprintf(p->version, sizeof p->version,
             "%s (tc_version() %d.%d%s), libtcmalloc_minimal.so.4 by dlopen", s ? s : "?", major,
             minor, patch ? patch : "");
    return 0;
#else
    (void)p;
#if defined(BENCH_SANITIZED)
    snprintf(why, cap,
             "not in sanitizer builds (LeakSanitizer reports tcmalloc's own startup "
             "allocation)");
#else
    snprintf(why, cap,
             "not built: meson did not find libtcmalloc_minimal (Debian "
             "libgoogle-perftools-dev)");
#endif
    return -1;
#endif
}

int bench_other_open(const char *name, bench_other **out, char *why, size_t cap)
{
    *out = NULL;
    bench_other *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    int rc = -1;
    if (strcmp(name, "mi-heap") == 0) {
        p->name = "mi-heap";
        rc = open_mi_heap(p, why, cap);
    } else if (strcmp(name, "tcmalloc") == 0) {
        p->name = "tcmalloc";
        rc = open_tcmalloc(p, why, cap);
    } else {
        snprintf(why, cap, "unknown pool '%s' (known: mi-heap, tcmalloc)", name);
    }
    if (rc != 0) {
        bench_other_close(p);
        return -1;
    }
    *out = p;
    return 0;
}

void bench_other_close(bench_other *p)
{
    if (!p)
        return;
#ifdef BENCH_HAVE_MIMALLOC
    if (p->heap && p->mi_heap_delete)
        p->mi_heap_delete(p->heap);
#endif
    /* The libraries stay loaded: a dlclose of an allocator with thread-local state and
       atexit handlers is not worth the risk in a benchmark that exits soon after. */
    free(p);
}

const char *bench_other_label(const bench_other *p)
{
    return p->label;
}

const char *bench_other_version(const bench_other *p)
{
    return p->version;
}

int bench_other_pairs(bench_other *p, size_t size, uint64_t ops)
{
#ifdef BENCH_HAVE_MIMALLOC
    if (p->heap) {
        for (uint64_t i = 0; i < ops; i++) {
            void *b = p->mi_heap_malloc(p->heap, size);
            if (!b)
                return -1;
            bench_escape(b);
            p->mi_free(b);
        }
        return 0;
    }
#endif
#ifdef BENCH_HAVE_TCMALLOC
    if (p->tc_malloc) {
        for (uint64_t i = 0; i < ops; i++) {
            void *b = p->tc_malloc(size);
            if (!b)
                return -1;
            bench_escape(b);
            p->tc_free(b);
        }
        return 0;
    }
#endif
    (void)size;
    (void)ops;
    return -1;
}
