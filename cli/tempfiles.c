/*
 * Temporary files of the `lodestar` program and their removal on SIGINT, SIGTERM and
 * SIGHUP (cli.h: cli_temp_*; docs/adr/0034-deadline-interrupt-tempfiles.md).
 *
 * Every file a command writes goes first to DIR/.NAME.lds-tmp-PID-XXXXXX beside its final
 * name DIR/NAME (the library writer, lds_writer_open_path, uses the same pattern), and is
 * renamed over NAME once complete. The program registers what it may leave behind: exact
 * paths, folders, and "every entry of DIR starting with .NAME.lds-tmp-PID-" for the files
 * the library creates under names the program does not see. On one of those signals the
 * handler removes them, with system calls only (async-signal-safe), and the signal is
 * raised again with its default action, so the exit status is the signal's. A file left by
 * SIGKILL keeps the pattern, and its PID names the process that wrote it.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { SLOT_FREE = 0, SLOT_FILE, SLOT_PATTERN, SLOT_FOLDER, SLOT_DIR };

#define CLI_TEMP_SLOTS 32

typedef struct temp_slot {
    volatile sig_atomic_t kind;
    char path[PATH_MAX]; /* the file or folder; for a pattern, the folder */
    char prefix[NAME_MAX + 1];
} temp_slot;

static temp_slot slots[CLI_TEMP_SLOTS];

static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};

/* struct linux_dirent64, as getdents64(2) fills it. */
struct dirent64_raw {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Removes the entries of `dir` that start with `text` (anywhere: contain it). */
static void remove_matching(const char *dir, const char *text, bool anywhere)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t plen = strlen(text);
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct dirent64_raw *d = (struct dirent64_raw *)(void *)(buf + off);
            if (anywhere ? strstr(d->d_name, text) != NULL : strncmp(d->d_name, text, plen) == 0)
                unlinkat(fd, d->d_name, 0);
            off += d->d_reclen;
        }
    }
    close(fd);
}

static void remove_registered(void)
{
    for (int pass = 0; pass < 2; pass++) /* files first, then their folders */
        for (size_t i = 0; i < CLI_TEMP_SLOTS; i++) {
            int kind = slots[i].kind;
            if (pass == 0 && kind == SLOT_FILE)
                unlink(slots[i].path);
            else if (pass == 0 && (kind == SLOT_PATTERN || kind == SLOT_FOLDER))
                remove_matching(slots[i].path, slots[i].prefix, kind == SLOT_FOLDER);
            else if (pass == 1 && kind == SLOT_DIR)
                rmdir(slots[i].path);
        }
}

static void on_signal(int sig)
{
    int saved = errno;
    remove_registered();
    /* SA_RESETHAND restored the default action; SA_NODEFER lets it act now. */
    raise(sig);
    errno = saved;
}

void cli_temp_init(void)
{
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++) {
        struct sigaction old;
        if (sigaction(cleanup_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue; /* nohup and the like: an ignored signal stays ignored */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof cleanup_signals / sizeof cleanup_signals[0]; j++)
            sigaddset(&sa.sa_mask, cleanup_signals[j]);
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(cleanup_signals[i], &sa, NULL);
    }
}

static int add(int kind, const char *path, const char *prefix)
{
    for (int i = 0; i < CLI_TEMP_SLOTS; i++) {
        if (slots[i].kind != SLOT_FREE)
            continue;
        if ((size_t)snprintf(slots[i].path, sizeof slots[i].path, "%s", path) >=
                sizeof slots[i].path ||
            (size_t)snprintf(slots[i].prefix, sizeof slots[i].prefix, "%s", prefix ? prefix : "") >=
                sizeof slots[i].prefix)
            return -1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the path before the handler may see it */
        slots[i].kind = kind;
        return i;
    }
    return -1;
}

int cli_temp_add_file(const char *path)
{
    return add(SLOT_FILE, path, NULL);
}

int cli_temp_add_dir(const char *path)
{
    return add(SLOT_DIR, path, NULL);
}

/* Splits `final` into its folder ("." when none) and its last component. */
static void split_path(const char *final, char *dir, size_t dcap, const char **base)
{
    const char *slash = strrchr(final, '/');
    *base = slash ? slash + 1 : final;
    if (!slash)
        snprintf(dir, dcap, ".");
    else if (slash == final)
        snprintf(dir, dcap, "/");
    else
        snprintf(dir, dcap, "%.*s", (int)(slash - final), final);
}

int cli_temp_add_writer(const char *final)
{
    char dir[PATH_MAX], prefix[NAME_MAX + 1];
    const char *base;
    split_path(final, dir, sizeof dir, &base);
    if ((size_t)snprintf(prefix, sizeof prefix, ".%s" CLI_TEMP_INFIX "%ld-", base,
                         (long)getpid()) >= sizeof prefix)
        return -1;
    return add(SLOT_PATTERN, dir, prefix);
}

int cli_temp_add_folder(const char *dir)
{
    char infix[64];
    snprintf(infix, sizeof infix, CLI_TEMP_INFIX "%ld-", (long)getpid());
    return add(SLOT_FOLDER, dir, infix);
}

void cli_temp_forget(int slot)
{
    if (slot >= 0 && slot < CLI_TEMP_SLOTS)
        slots[slot].kind = SLOT_FREE;
}

int cli_temp_create(const char *target, char *tmp, size_t cap, int *slot)
{
    *slot = -1;
    char dir[PATH_MAX];
    const char *base;
    split_path(target, dir, sizeof dir, &base);
    if ((size_t)snprintf(tmp, cap, "%s/.%s" CLI_TEMP_INFIX "%ld-XXXXXX", dir, base,
                         (long)getpid()) >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* Blocked while the file exists unregistered. */
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof cleanup_signals[0]; i++)
        sigaddset(&block, cleanup_signals[i]);
    sigprocmask(SIG_BLOCK, &block, &old);
    int fd = mkstemp(tmp);
    int e = errno;
    if (fd >= 0 && (*slot = cli_temp_add_file(tmp)) < 0) {
        close(fd);
        unlink(tmp);
        fd = -1;
        e = ENOSPC;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        errno = e;
        return -1;
    }
    struct stat st;
    mode_t mode;
    if (stat(target, &st) == 0) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0); /* read the umask: the program is one thread here */
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (fchmod(fd, mode) != 0) {
        e = errno;
        close(fd);
        unlink(tmp);
        cli_temp_forget(*slot);
        *slot = -1;
        errno = e;
        return -1;
    }
    return fd;
}
