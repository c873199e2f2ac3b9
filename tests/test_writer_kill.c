/*
 * The writer never loses a good index (issue 7). A good index sits at a path; a
 * child process starts writing a different index to the same path with
 * lds_writer_open_path and is killed with SIGKILL at a random moment: after a random
 * delay (anywhere from before the first row to after the rename), or by itself after
 * a random number of rows, or just before lds_writer_finish. After each round the
 * file at the path must load, checksum verified, and be either the previous index or
 * the complete new one, never a mixture or a prefix. The two contents alternate, so
 * each round tests the index the previous round left.
 *
 * usage: test_writer_kill [ROUNDS]   (default 60, or $LDS_KILL_ROUNDS)
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lodestar.h"

#define ROWS 20000
#define DIM  32

static char dir[64], path[128];

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "test_writer_kill: %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Writes index `which` (0 or 1: different values and keys) to `p`. In a child,
 * `die_after_rows` >= 0 makes it SIGKILL itself after that many rows (ROWS: just
 * before finishing). Returns the status of the write. */
static lds_status write_index(const char *p, int which, long die_after_rows)
{
    lds_writer_options wo;
    lds_writer_options_default(&wo);
    wo.dim = DIM;
    wo.dtype = which ? LDS_DTYPE_F16 : LDS_DTYPE_F32;
    wo.with_keys = true;
    wo.unique_keys = true;
    wo.with_ids = which == 1;
    lds_writer *w = NULL;
    lds_status st = lds_writer_open_path(p, &wo, &w, NULL);
    float v[DIM];
    char key[32];
    for (long r = 0; st == LDS_OK && r < ROWS; r++) {
        if (r == die_after_rows)
            raise(SIGKILL);
        for (int i = 0; i < DIM; i++)
            v[i] = (float)((r * 31 + i * (which ? 7 : 13)) % 97) / 97.0f;
        int kl = snprintf(key, sizeof key, "%s-%ld", which ? "new" : "old", r);
        st = lds_writer_add_row(w, v, DIM, (uint64_t)r * 3, key, (size_t)kl, NULL);
    }
    if (die_after_rows == ROWS)
        raise(SIGKILL);
    if (st == LDS_OK)
        st = lds_writer_finish(w, NULL);
    lds_writer_free(w);
    return st;
}

static uint64_t checksum_at(const char *p)
{
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_load_path(p, NULL, &idx, NULL, &err);
    if (st != LDS_OK) {
        fprintf(stderr, "test_writer_kill: %s does not load: %s\n", p, err.message);
        exit(1);
    }
    CHECK(lds_index_checksum_verified(idx));
    CHECK(lds_index_rows(idx) == ROWS);
    uint64_t c = lds_index_checksum(idx);
    lds_index_free(idx);
    return c;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Removes what killed writers left next to the path (their temporary files). */
static int sweep(void)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int stale = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".index.ldsi.lds-tmp-", 20) != 0)
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
        stale++;
    }
    closedir(d);
    return stale;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1                    ? atoi(argv[1])
                 : getenv("LDS_KILL_ROUNDS") ? atoi(getenv("LDS_KILL_ROUNDS"))
                                             : 60;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/lds-kill-XXXXXX", tmp);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/index.ldsi", dir);

    /* The checksums of both contents, and how long a whole write takes. */
    uint64_t sum[2];
    double t0 = now_us();
    CHECK(write_index(path, 1, -1) == LDS_OK);
    double write_us = now_us() - t0;
    sum[1] = checksum_at(path);
    CHECK(write_index(path, 0, -1) == LDS_OK);
    sum[0] = checksum_at(path);
    CHECK(sum[0] != sum[1]);

    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("test_writer_kill: %d rounds, seed %u, a whole write takes %.0f us\n", rounds, seed,
           write_us);
    srand(seed);
    int current = 0, replaced = 0, killed_early = 0, stale = 0;
    for (int round = 0; round < rounds; round++) {
        int next = 1 - current;
        int how = rand() % 4; /* 0, 1: a random delay; 2: after random rows; 3: before finish */
        long die_after = how == 2 ? rand() % ROWS : how == 3 ? ROWS : -1;
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            _exit(write_index(path, next, die_after) == LDS_OK ? 0 : 3);
        if (how < 2) {
            /* Anywhere from before the first row to a little after a whole write. */
            useconds_t delay = (useconds_t)((double)rand() / RAND_MAX * write_us * 1.2);
            usleep(delay);
            kill(pid, SIGKILL);
        }
        int ws;
        CHECK(waitpid(pid, &ws, 0) == pid);
        CHECK(WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0));
        if (WIFSIGNALED(ws))
            killed_early++;
        uint64_t c = checksum_at(path);
        if (c == sum[next]) {
            current = next;
            replaced++;
        } else if (c != sum[current]) {
            fprintf(stderr, "test_writer_kill: round %d: the file is neither index\n", round);
            return 1;
        }
        CHECK(how < 2 || c == sum[current]); /* killed before finishing: nothing replaced */
        stale += sweep();
    }
    unlink(path);
    rmdir(dir);
    printf("test_writer_kill: %d rounds, %d killed, %d replaced the index, %d temporary files "
           "left by killed writers; the index always loaded intact\n",
           rounds, killed_early, replaced, stale);
    return 0;
}
