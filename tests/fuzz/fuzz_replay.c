/*
 * The main() of a fuzz target built without libFuzzer: runs LLVMFuzzerTestOneInput
 * once on every file named on the command line, and on every file (in name order) of
 * every directory named there, so that `meson test` replays the corpora as ordinary
 * tests. Each input is handed over in an exact-size heap block, as libFuzzer does.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fz_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int fz_run_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    size_t n = (size_t)sb.st_size;
    /* An exact-size heap copy, so that ASan sees a read one past the input. */
    uint8_t *buf = malloc(n ? n : 1);
    size_t off = 0;
    while (buf && off < n) {
        ssize_t r = read(fd, buf + off, n - off);
        if (r <= 0)
            break;
        off += (size_t)r;
    }
    close(fd);
    if (!buf || off != n) {
        fprintf(stderr, "cannot read %s\n", path);
        free(buf);
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int fz_run_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown)
                abort();
            names = grown;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n])
            abort();
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, fz_cmp);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        rc |= fz_run_file(names[i]);
        free(names[i]);
    }
    free(names);
    *count += n;
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            rc |= fz_run_dir(argv[i], &count);
        } else {
            rc |= fz_run_file(argv[i]);
            count++;
        }
    }
    if (count == 0) {
        fprintf(stderr, "%s: no inputs replayed\n", argv[0]);
        return 1;
    }
    printf("%s: replayed %zu inputs\n", argv[0], count);
    return rc;
}
