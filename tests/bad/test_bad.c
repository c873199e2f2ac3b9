/*
 * Replays the catalog of bad inputs (tests/bad/, written by make_catalog.c). Each
 * file is NAME[.nolimits].STATUS.EXT and must produce exactly STATUS:
 *   .ldsi, .zst            through the stream loader (lds_load_callback, short reads),
 *                          then lds_load_path (read and mapped) and lds_load_memory,
 *                          which see the file's size too: a declared length that
 *                          disagrees with it is E_LENGTH_MISMATCH there (lodestar_load.h);
 *                          each load that succeeds is followed by lds_index_check_keys,
 *                          which finds repeated keys (ADR 0010);
 *   .npy .txt .bin .fvecs .npz  through lds_import_file (format from the extension).
 * Every refusal must fill lds_error with the same status, a field, and a message that
 * gives the offset (or line). The stream load of each input may not raise the peak
 * resident memory (VmHWM) by more than the input's size plus a small constant, which
 * pins docs/design.md invariant 6 for the lying lengths (32 GiB declared, a few hundred
 * bytes delivered). With a second argument, the lodestar program: `lodestar verify`
 * (index inputs) or `lodestar pack` (importer inputs) must exit 1 on a sample of the
 * refusals and 0 on the inputs named OK.
 *
 * usage: test_bad CATALOG_DIR [LODESTAR]
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lodestar.h"

/* Peak resident growth allowed beyond the bytes delivered: the parser's tables, the
   zstd decoder's window and buffers, the pool's first small rentals. */
#define SLACK_BYTES ((long)16 << 20)

static int failures, checked;
static const char *cli;
static char tmpdir[64];

static void fail(const char *file, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "FAIL %s: ", file);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    failures++;
}

static bool status_from_name(const char *s, size_t n, lds_status *out)
{
    for (int v = 0; v < 64; v++) {
        const char *name = lds_status_name((lds_status)v);
        if (strlen(name) == n && memcmp(name, s, n) == 0) {
            *out = (lds_status)v;
            return true;
        }
    }
    return false;
}

static long vm_hwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* Resets VmHWM to the current RSS (Linux "clear_refs" 5); false if not allowed. */
static bool reset_hwm(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

typedef struct mem_stream {
    const unsigned char *p;
    size_t n, pos, calls;
} mem_stream;

/* Short reads of varying size, as a socket would give. */
static lds_status read_cb(void *ctx, void *buf, size_t cap, size_t *got)
{
    mem_stream *s = ctx;
    size_t want = 1 + (s->calls++ * 37) % 701;
    if (want > cap)
        want = cap;
    if (want > s->n - s->pos)
        want = s->n - s->pos;
    memcpy(buf, s->p + s->pos, want);
    s->pos += want;
    *got = want;
    return LDS_OK;
}

/* The refusal detail: same status, a field, and a message with the offset or line. */
static void check_detail(const char *file, const char *how, lds_status st, const lds_error *err)
{
    if (st == LDS_OK)
        return;
    if (err->status != st)
        fail(file, "%s: lds_error.status disagrees with the returned status%s", how, "");
    if (err->field == NULL || err->field[0] == 0)
        fail(file, "%s: no field named (message: %s)", how, err->message);
    char off[32], line[32];
    snprintf(off, sizeof off, "%llu", (unsigned long long)err->offset);
    snprintf(line, sizeof line, "%llu", (unsigned long long)err->line);
    if (strstr(err->message, off) == NULL && (err->line == 0 || strstr(err->message, line) == NULL))
        fail(file, "%s: the message does not give the offset or line (%s)", how, err->message);
}

static lds_status expect_with_size(const unsigned char *b, size_t n, bool zst, lds_status expect)
{
    lds_header h;
    if (zst || n < LDS_HEADER_SIZE || lds_header_decode(b, n, &h, NULL) != LDS_OK)
        return expect;
    if (h.payload_length != LDS_LENGTH_UNKNOWN && h.payload_length != n - LDS_HEADER_SIZE)
        return LDS_E_LENGTH_MISMATCH;
    return expect;
}

/* After a load, what it leaves to the key table (repeated keys, ADR 0010). */
static lds_status check_keys(const lds_index *idx, lds_status st, lds_error *err)
{
    return st == LDS_OK && idx ? lds_index_check_keys(idx, err) : st;
}

static void replay_index(const char *path, const char *file, const unsigned char *b, size_t n,
                         bool zst, bool nolimits, lds_status expect)
{
    lds_load_options o;
    lds_load_options_default(&o);
    if (nolimits) {
        o.limits.max_dim = UINT64_MAX;
        o.limits.max_rows = UINT64_MAX;
        o.limits.max_key_bytes = UINT64_MAX;
        o.limits.max_metadata_bytes = UINT64_MAX;
    }
    char how[64];
    lds_index *idx = NULL;
    lds_error err;

    /* The stream: no length but the header's. */
    bool measured = reset_hwm();
    long before = vm_hwm_kb();
    mem_stream s = {b, n, 0, 0};
    lds_error_init(&err);
    lds_status st = lds_load_callback(read_cb, &s, &o, &idx, NULL, &err);
    long grown = (vm_hwm_kb() - before) * 1024;
    if ((st == LDS_OK) != (idx != NULL))
        fail(file, "stream load: index and status disagree%s%s", "", "");
    st = check_keys(idx, st, &err);
    if (st != expect)
        fail(file, "stream load: %s (%s)", lds_status_name(st), err.message);
    check_detail(file, "stream load", st, &err);
    lds_index_free(idx);
    if (measured && grown > (long)n + SLACK_BYTES) {
        char g[32];
        snprintf(g, sizeof g, "%ld", grown);
        fail(file, "stream load raised peak RSS by %s bytes%s", g, "");
    }

    /* The path, read and mapped, and memory: the file's size is known too. */
    lds_status want = expect_with_size(b, n, zst, expect);
    for (int mode = 0; mode < 3; mode++) {
        o.use_mmap = mode == 1;
        lds_error_init(&err);
        idx = NULL;
        if (mode < 2)
            st = lds_load_path(path, &o, &idx, NULL, &err);
        else
            st = lds_load_memory(b, n, true, &o, &idx, NULL, &err);
        st = check_keys(idx, st, &err);
        snprintf(how, sizeof how, "%s load", mode == 0 ? "path" : mode == 1 ? "mapped" : "memory");
        if (st != want)
            fail(file, "%s: %s", how, lds_status_name(st));
        check_detail(file, how, st, &err);
        lds_index_free(idx);
    }
    checked++;
}

static void replay_import(const char *path, const char *file, lds_status expect)
{
    char out[128];
    snprintf(out, sizeof out, "%s/out.ldsi", tmpdir);
    lds_error err;
    lds_error_init(&err);
    lds_import_result res = {.size = sizeof res};
    lds_status st = lds_import_file(path, out, NULL, &res, &err);
    if (st != expect)
        fail(file, "import: %s (%s)", lds_status_name(st), err.message);
    check_detail(file, "import", st, &err);
    if (st != LDS_OK && access(out, F_OK) == 0)
        fail(file, "import: a refused import left a file at the output path%s%s", "", "");
    unlink(out);
    checked++;
}

/* Runs the lodestar program; returns its exit status, or -1. */
static int run_cli(const char *cmd, const char *in, const char *out)
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        if (out)
            execl(cli, cli, cmd, in, out, (char *)NULL);
        else
            execl(cli, cli, cmd, in, (char *)NULL);
        _exit(127);
    }
    int ws;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws))
        return -1;
    return WEXITSTATUS(ws);
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CATALOG_DIR [LODESTAR]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    cli = argc > 2 ? argv[2] : NULL;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lds-bad-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    DIR *d = opendir(dir);
    if (!d) {
        perror(dir);
        return 1;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 256;
            names = realloc(names, cap * sizeof *names);
        }
        names[count++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof *names, cmp);

    size_t cli_runs = 0;
    for (size_t i = 0; i < count; i++) {
        const char *file = names[i];
        const char *ext = strrchr(file, '.');
        if (!ext || ext == file)
            continue;
        bool index = strcmp(ext, ".ldsi") == 0 || strcmp(ext, ".zst") == 0;
        bool import = strcmp(ext, ".npy") == 0 || strcmp(ext, ".txt") == 0 ||
                      strcmp(ext, ".bin") == 0 || strcmp(ext, ".fvecs") == 0 ||
                      strcmp(ext, ".npz") == 0;
        if (!index && !import)
            continue; /* the generator, this test, the build file */
        const char *sdot = ext - 1;
        while (sdot > file && *sdot != '.')
            sdot--;
        lds_status expect;
        if (sdot == file || !status_from_name(sdot + 1, (size_t)(ext - sdot - 1), &expect)) {
            fail(file, "the name does not end in .STATUS.EXT%s%s", "", "");
            continue;
        }
        bool nolimits = sdot - file > 9 && memcmp(sdot - 9, ".nolimits", 9) == 0;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (import) {
            replay_import(path, file, expect);
        } else {
            FILE *f = fopen(path, "rb");
            struct stat sb;
            if (!f || fstat(fileno(f), &sb) != 0) {
                fail(file, "cannot read %s%s", path, "");
                continue;
            }
            size_t n = (size_t)sb.st_size;
            unsigned char *b = malloc(n ? n : 1);
            if (n && fread(b, 1, n, f) != n)
                fail(file, "cannot read %s%s", path, "");
            fclose(f);
            replay_index(path, file, b, n, strcmp(ext, ".zst") == 0, nolimits, expect);
            free(b);
        }
        /* The program: every refusal but most of the truncation and flip series. */
        bool series = strncmp(file, "truncated-at-", 13) == 0 || strncmp(file, "flip-", 5) == 0;
        if (cli && !nolimits && (!series || i % 16 == 0)) {
            char out[128];
            snprintf(out, sizeof out, "%s/cli.ldsi", tmpdir);
            int rc = index ? run_cli("verify", path, NULL) : run_cli("pack", path, out);
            unlink(out);
            if (rc != (expect == LDS_OK ? 0 : 1)) {
                char r[16];
                snprintf(r, sizeof r, "%d", rc);
                fail(file, "lodestar %s exited %s", index ? "verify" : "pack", r);
            }
            cli_runs++;
        }
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    rmdir(tmpdir);
    printf("test_bad: %d inputs replayed, %zu runs of the lodestar program, %d failures\n", checked,
           cli_runs, failures);
    return failures == 0 && checked > 0 ? 0 : 1;
}
