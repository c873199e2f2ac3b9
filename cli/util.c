/* Helpers shared by the subcommands: errors, number parsing, loading, floats. */
#include "cli.h"
#if CLI_HAVE_TO_CHARS
#include "format_f32.h"
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

int cli_fail(const char *what, lds_status status, const lds_error *err)
{
    bool own = err && err->status == status && err->message[0];
    const char *detail = own ? err->message : lds_strerror(status);
    /* The writer's refusals concern the index being built, not a byte of any file: no
       "writer: " prefix and no "(at byte 0)". */
    bool writer = own && strncmp(detail, "writer: ", 8) == 0;
    if (writer)
        detail += 8;
    /* The library's message names the file too ("cannot open F: ...", "cannot open the keys
       file F: ...", "F is a directory"), after the "F: " put before it: once is enough
       (found by a tester: "lodestar: F: cannot open F: No such file or directory"). */
    char once[sizeof err->message];
    size_t wn = what ? strlen(what) : 0;
    if (own && wn > 0) {
        const char *at = NULL;
        for (const char *s = strstr(detail, what); s && !at; s = strstr(s + 1, what))
            if (s > detail && s[-1] == ' ' && s[wn] == ':')
                at = s - 1; /* " F:" */
        if (at != NULL) {
            snprintf(once, sizeof once, "%.*s%s", (int)(at - detail), detail, at + 1 + wn);
            detail = once;
        } else if (strncmp(detail, what, wn) == 0 && strncmp(detail + wn, " is ", 4) == 0) {
            detail += wn + 1; /* "F is ..." */
        }
    }
    int len = (int)strlen(detail);
    /* A file that cannot be opened has no byte to point at: drop the loader's "(at byte 0)". */
    static const char at0[] = " (at byte 0)";
    if (own && (writer || (status == LDS_E_IO && err->field && strcmp(err->field, "path") == 0)) &&
        len >= (int)sizeof at0 - 1 && strcmp(detail + len - (sizeof at0 - 1), at0) == 0)
        len -= (int)sizeof at0 - 1;
    /* The detail may echo bytes of the input (a token, a key, a header): escaped, like the
       file name, so that neither can drive the terminal. */
    fputs("lodestar: ", stderr);
    if (what) {
        cli_put_escaped(stderr, what, strlen(what));
        fputs(": ", stderr);
    }
    cli_put_message(stderr, detail, (size_t)len);
    fputc('\n', stderr);
    if (status == LDS_E_LIMIT && strstr(detail, "max_payload_bytes"))
        fputs("lodestar: a larger payload needs a larger --max-payload SIZE\n", stderr);
    return CLI_FAIL;
}

int cli_failf(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof msg ? sizeof msg - 1 : (size_t)n;
    fputs("lodestar: ", stderr);
    cli_put_escaped(stderr, msg, len);
    fputc('\n', stderr);
    return CLI_FAIL;
}

int cli_usage_error(const char *prog, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof msg ? sizeof msg - 1 : (size_t)n;
    fprintf(stderr, "%s: ", prog);
    cli_put_escaped(stderr, msg, len); /* arguments and file names are echoed escaped */
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    return CLI_USAGE;
}

int cli_option_error(const char *prog, int c, char **argv)
{
    /* opterr is 0 (main): getopt's own messages would echo the argument unescaped. */
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (c == ':')
        return cli_usage_error(prog, "option '%s' requires an argument", arg);
    if (optopt != 0 && !(arg[0] == '-' && arg[1] == '-'))
        return cli_usage_error(prog, "invalid option -- '%c'", optopt);
    return cli_usage_error(prog, "unrecognized option '%s'", arg);
}

bool cli_parse_u64(const char *text, uint64_t *out)
{
    if (!text || *text < '0' || *text > '9')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = (uint64_t)v;
    return true;
}

bool cli_parse_size(const char *text, uint64_t *out)
{
    if (!text || *text < '0' || *text > '9')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0)
        return false;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    default:
        return false;
    }
    /* "64M" or "64MiB"; the same rule as lodestar-bench's sizes (bench_parse_size). */
    if (shift && (++end)[0] == 'i' && end[1] == 'B')
        end += 2;
    if (shift && *end != '\0')
        return false;
    if (v == 0 || v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

uint64_t cli_default_max_payload(void)
{
    uint64_t limit = LDS_DEFAULT_MAX_PAYLOAD_BYTES;
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
        uint64_t half;
        if (__builtin_mul_overflow((uint64_t)pages, (uint64_t)page, &half))
            half = UINT64_MAX;
        half /= 2;
        if (half < limit)
            limit = half;
    }
    return limit;
}

void cli_format_size(char *buf, size_t cap, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%" PRIu64 " bytes", bytes);
        return;
    }
    double v = (double)bytes;
    size_t u = 0;
    for (v /= 1024; v >= 1024 && u + 1 < sizeof units / sizeof units[0]; v /= 1024)
        u++;
    if (v == (double)(uint64_t)v)
        snprintf(buf, cap, "%.0f %s", v, units[u]);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
}

void cli_print_max_payload_help(FILE *f)
{
    char here[32];
    cli_format_size(here, sizeof here, cli_default_max_payload());
    fprintf(f,
            "  --max-payload SIZE\n"
            "              refuse an index whose payload (decompressed) is larger than\n"
            "              SIZE bytes; suffix K, M, G or T (powers of 1024, also KiB..TiB).\n"
            "              Default: 64G or half the physical memory, whichever is smaller\n"
            "              (here %s)\n"
            "  --timeout SECONDS, --quiet\n"
            "              a URL's deadline, no progress line: see 'lodestar --help'\n",
            here);
}

int cli_parse_read_threads(const char *prog, const char *arg, cli_load_request *req)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || v > 64)
        return cli_usage_error(prog, "--read-threads wants a count from 0 (automatic) to 64");
    req->read_threads = (uint32_t)v;
    return -1;
}

int cli_parse_max_payload(const char *prog, const char *arg, cli_load_request *req)
{
    if (!cli_parse_size(arg, &req->max_payload))
        return cli_usage_error(prog,
                               "--max-payload wants a size in bytes with an optional suffix K, "
                               "M, G or T (for instance 512M), not '%s'",
                               arg);
    return -1;
}

/* True for the invisible format characters that reorder or hide text (bidi overrides,
   embeddings and isolates, zero-width marks, the byte order mark): printed, they make a
   key look like another, so they are escaped as \uXXXX. */
static bool is_format_control(uint32_t cp)
{
    return cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206f) || cp == 0xfeff;
}

/* Length of the UTF-8 sequence at s[0..n) if it is well formed and not a control
   character (C0, DEL, C1); 0 otherwise. *cp receives the code point of a well-formed
   sequence (a format control among them is reported with its length, for the caller). */
static size_t printable_utf8(const unsigned char *s, size_t n, uint32_t *cpo)
{
    unsigned char c = s[0];
    *cpo = c;
    if (c >= 0x20 && c < 0x7f)
        return c == '\\' ? 0 : 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    /* Overlong forms, surrogates, beyond U+10FFFF, and the C1 controls. */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0))
        return 0;
    *cpo = cp;
    return len;
}

static void put_escaped(FILE *f, const char *s, size_t len, bool backslash)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t n = p[i] == '\\' && !backslash ? 1 : printable_utf8(p + i, len - i, &cp);
        if (n && is_format_control(cp)) {
            fprintf(f, "\\u%04" PRIx32, cp);
            i += n;
        } else if (n) {
            fwrite(p + i, 1, n, f);
            i += n;
        } else {
            if (p[i] == '\\')
                fputs("\\\\", f);
            else
                fprintf(f, "\\x%02x", p[i]);
            i++;
        }
    }
}

/* Whether s[k] is the ')' closing a token opened by '(' in a message ("... (URL) ..."):
   unmatched within the token and followed by the end, white space, a quote, or a run of
   ",.;:!?" that the end, white space or a quote follows. A ')' anywhere else stays in the token
   (and in a query value, redacted), so nothing after it up to white space can leak. */
static bool closes_paren(const char *s, size_t len, size_t k, int depth)
{
    if (s[k] != ')' || depth > 0)
        return false;
    size_t j = k + 1;
    while (j < len && strchr(",.;:!?", s[j]))
        j++;
    return j >= len || strchr(" \t\n\"'", s[j]);
}

/* The length of the scheme "[A-Za-z][A-Za-z0-9+.-]*" at s[i] (without its ':'), when a ':'
   follows it; else 0. */
static size_t scheme_at(const char *s, size_t len, size_t i)
{
    size_t k = i;
    if (k >= len || !((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z')))
        return 0;
    while (k < len && (isalnum((unsigned char)s[k]) || s[k] == '+' || s[k] == '.' || s[k] == '-'))
        k++;
    return k < len && s[k] == ':' ? k - i : 0;
}

/* Where a URL-looking token ("scheme:" and anything but white space or a second ':' after
   it: "http://", "http:/", "http:\\", "https:\/\/", "HTTP:", "http:u:pw@h", found by a
   tester: the backslash and slash-less forms were printed with their password) starts at
   s[i]: at the start or after a space, quote or '(' (so "a:/b" inside a word is not one); its
   length up to the next white space, quote, ": " (a message's "URL: reason"), or, after '(',
   the ')' closing it, else 0. */
static size_t url_token(const char *s, size_t len, size_t i)
{
    if (i > 0 && !strchr(" \t\"'(", s[i - 1]))
        return 0;
    bool paren = i > 0 && s[i - 1] == '(';
    int depth = 0;
    size_t k = scheme_at(s, len, i);
    if (k == 0)
        return 0;
    k += i;
    if (k + 1 >= len || strchr(" \t\n\"'", s[k + 1]))
        return 0;
    while (k < len && s[k] != ' ' && s[k] != '\t' && s[k] != '\n' && s[k] != '"' && s[k] != '\'' &&
           !(s[k] == ':' && k + 1 < len && s[k + 1] == ' ') &&
           !(paren && closes_paren(s, len, k, depth))) {
        depth += s[k] == '(' ? 1 : s[k] == ')' && depth > 0 ? -1 : 0;
        k++;
    }
    return k - i;
}

/* put_escaped, with every URL-looking token written through lds_url_redact: a password or a
   signed query's token in an argument echoed by any message (a mistyped URL taken for a
   path: "cannot open http:/u:pw@h/x") is never printed. */
static void put_redacted(FILE *f, const char *s, size_t len, bool backslash)
{
    size_t from = 0;
    for (size_t i = 0; i < len; i++) {
        size_t n = url_token(s, len, i);
        if (n == 0)
            continue;
        put_escaped(f, s + from, i - from, backslash);
        /* lds_url_redact reads "http:u:pw@h/x" (a special scheme without slashes) as the URL
           it is; a name that only looks like one ("a:b", "C:\x") comes back as it was. */
        char url[2048], shown[2048];
        if (n >= sizeof url) { /* too long to redact here: none of it shown (fails closed) */
            fprintf(f, "(a name of %zu bytes, not shown)", n);
            i += n - 1;
            from = i + 1;
            continue;
        }
        memcpy(url, s + i, n);
        url[n] = '\0';
        lds_url_redact(url, shown, sizeof shown);
        size_t w = strlen(shown);
        put_escaped(f, shown, w, backslash);
        i += n - 1;
        from = i + 1;
    }
    put_escaped(f, s + from, len - from, backslash);
}

void cli_put_escaped(FILE *f, const char *s, size_t len)
{
    put_redacted(f, s, len, true);
}

void cli_put_message(FILE *f, const char *s, size_t len)
{
    put_redacted(f, s, len, false);
}

bool cli_is_url(const char *s)
{
    return strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0 ||
           strncasecmp(s, "s3://", 5) == 0;
}

void cli_set_source(cli_load_request *req, const char *arg)
{
    /* One index per process: one buffer for the name shown. */
    static char shown[4096];
    req->source = arg;
    req->file = cli_is_url(arg) ? lds_url_redact(arg, shown, sizeof shown) : arg;
}

static lds_status load(const cli_load_request *req, lds_index **out, lds_load_info *info,
                       lds_error *err)
{
    const char *source = req->source != NULL ? req->source : req->file;
    lds_load_options opts;
    lds_load_options_default(&opts);
    opts.verify_checksum = true;
    if (req->mmap >= 0)
        opts.use_mmap = req->mmap != 0;
    opts.max_payload_bytes = req->max_payload ? req->max_payload : cli_default_max_payload();
    opts.read_threads = req->read_threads;
    opts.url_connections = cli_url_connections;
    lds_url_options uo;
    lds_url_options_default(&uo);
    uo.timeout_ms = cli_timeout_ms;
    opts.url = &uo;
    char what[300];
    snprintf(what, sizeof what, "lodestar: loading %.280s", req->file);
    cli_progress progress;
    cli_progress_start(&progress, what);
    opts.progress = cli_progress_callback;
    opts.callback_ctx = &progress;
    lds_load_info_init(info);
    if (strcmp(source, "-") == 0) {
        if (isatty(STDIN_FILENO)) {
            if (err) {
                err->status = LDS_E_INVALID_ARG;
                snprintf(err->message, sizeof err->message,
                         "standard input is a terminal; redirect or pipe an index into it");
            }
            return LDS_E_INVALID_ARG;
        }
        lds_status st = lds_load_fd(STDIN_FILENO, &opts, out, info, err);
        cli_progress_end(&progress);
        return st;
    }
    lds_status st = cli_is_url(source) ? lds_load_url(source, &opts, out, info, err)
                                   : lds_load_path(source, &opts, out, info, err);
    cli_progress_end(&progress);
    return st;
}

/* A mapped index whose file is truncated while in use faults on the next page it
   touches (SIGBUS): the documented --mmap hazard. The program stops with a line that
   says so instead of dying of a bus error (exit 135). Async-signal-safe: write(2) and
   _exit only. */
static void mapped_file_changed(int sig)
{
    (void)sig;
    static const char msg[] = "lodestar: the mapped index file changed underneath (truncated "
                              "or rewritten while in use with --mmap); stopped\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(CLI_FAIL);
}

/* pread of up to n bytes at off, through EINTR; the count read, or -1. */
static ssize_t pread_at(int fd, void *b, size_t n, uint64_t off);

/* How much compressed input zstd_holds_index reads at most: a frame's first block is at most
   128 KiB of content (RFC 8878 section 3.1.1.2.4) and compresses to about that at worst. */
#define CLI_SNIFF_ZSTD_MAX ((uint64_t)4 << 20)

/* Whether the zstd frame at byte `at` of `fd` decompresses to a lodestar magic: then the file
   is a compressed index (cut, or of several frames, or with bytes after it: the loader says
   which), not something for `lodestar pack` (found by a tester: the hint told users to pack
   a damaged compressed index, which pack refuses). The frame is streamed until 8 bytes come
   out, reading at most CLI_SNIFF_ZSTD_MAX bytes (found by a tester: its first 1 KiB alone
   held no whole block of a real index, which was then called "not a lodestar index"). */
static bool zstd_holds_index(int fd, uint64_t at)
{
    ZSTD_DCtx *z = ZSTD_createDCtx();
    unsigned char out[LDS_MAGIC_SIZE];
    bool yes = false;
    if (z != NULL) {
        unsigned char in[1 << 16];
        ZSTD_outBuffer ob = {out, sizeof out, 0};
        for (uint64_t off = at; ob.pos < ob.size && off - at < CLI_SNIFF_ZSTD_MAX;) {
            ssize_t r = pread_at(fd, in, sizeof in, off);
            if (r <= 0)
                break;
            off += (uint64_t)r;
            ZSTD_inBuffer ib = {in, (size_t)r, 0};
            bool stuck = false;
            while (ob.pos < ob.size && ib.pos < ib.size) {
                size_t before = ib.pos, got = ob.pos;
                size_t ret = ZSTD_decompressStream(z, &ob, &ib);
                if (ZSTD_isError(ret) || ret == 0 || (ib.pos == before && ob.pos == got)) {
                    stuck = true; /* an error, or the frame's end (ret 0) */
                    break;
                }
            }
            if (stuck)
                break;
        }
        yes = ob.pos == sizeof out && memcmp(out, LDS_MAGIC, LDS_MAGIC_SIZE) == 0;
        ZSTD_freeDCtx(z);
    }
    return yes;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* pread of up to n bytes at off, through EINTR; the count read, or -1. */
static ssize_t pread_at(int fd, void *b, size_t n, uint64_t off)
{
    ssize_t r;
    do
        r = pread(fd, b, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r;
}

int64_t cli_zstd_frame_at(int fd, uint64_t size)
{
    uint64_t off = 0;
    for (int frames = 0; frames <= 16; frames++) {
        unsigned char h[8];
        ssize_t r = pread_at(fd, h, sizeof h, off);
        if (r < 4)
            return -1;
        if (le32(h) == 0xFD2FB528u) /* a zstd frame (RFC 8878 section 3.1.1) */
            return (int64_t)off;
        if ((le32(h) & 0xFFFFFFF0u) != 0x184D2A50u || r < 8 || frames == 16)
            return -1;
        uint64_t end = off + 8 + le32(h + 4);
        if (end > size || end > INT64_MAX)
            return -1; /* declared past the file's end */
        off = end;
    }
    return -1;
}

const char *cli_sniff_path(const char *path, lds_import_format *format)
{
    *format = LDS_IMPORT_AUTO;
    if (strcmp(path, "-") == 0 || cli_is_url(path))
        return NULL;
    /* Only a regular file is read for a hint: a FIFO (or a terminal, a socket) was consumed
       by the load, and opening it again waits for a writer forever (found by a tester:
       `lodestar info FIFO` never ended). O_NONBLOCK makes the open itself return at once. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return NULL;
    }
    unsigned char head[1024];
    ssize_t r = pread_at(fd, head, sizeof head, 0);
    size_t n = r > 0 ? (size_t)r : 0;
    const char *kind = lds_import_sniff(head, n, format);
    /* A zstd frame, maybe after skippable frames (found by a tester: a compressed index that
       starts with one was called something else): its start read again for zstd_holds_index */
    int64_t at = n >= 4 ? cli_zstd_frame_at(fd, (uint64_t)st.st_size) : -1;
    bool index = at >= 0 && zstd_holds_index(fd, (uint64_t)at);
    close(fd);
    if (index)
        return "a lodestar index"; /* compressed: the loader's own message says what is wrong */
    return kind;
}

/* Whether the regular file at `path` is zstd whose first frame (after any skippable frames)
   ends before the file does, another frame (zstd or skippable) following it: a compressed
   index in several frames, which the loader refuses (it reads one frame, ADR 0018). Only the
   frames' block headers are read (ZSTD_findFrameCompressedSize on a mapping). */
static bool zstd_frames_follow(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    struct stat st;
    bool yes = false;
    int64_t at = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0
                     ? cli_zstd_frame_at(fd, (uint64_t)st.st_size)
                     : -1;
    if (at >= 0) {
        size_t size = (size_t)st.st_size;
        const unsigned char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            size_t n = ZSTD_findFrameCompressedSize(p + at, size - (size_t)at);
            if (!ZSTD_isError(n) && size - (size_t)at - n >= 4) {
                uint32_t next = le32(p + at + n);
                yes = next == 0xFD2FB528u || (next & 0xFFFFFFF0u) == 0x184D2A50u;
            }
            munmap((void *)p, size);
        }
    }
    close(fd);
    return yes;
}

/* `name` without its last extension (and a compression suffix before it), plus ".ldsi":
   what the hints propose as OUT. */
static void ldsi_name(const char *name, char *out, size_t cap)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t n = strlen(base);
    static const char *const zips[] = {".gz", ".zst", ".xz"};
    for (size_t i = 0; i < sizeof zips / sizeof zips[0]; i++) {
        size_t z = strlen(zips[i]);
        if (n > z && strcmp(base + n - z, zips[i]) == 0) {
            n -= z;
            break;
        }
    }
    for (size_t i = n; i > 1; i--)
        if (base[i - 1] == '.') {
            n = i - 1;
            break;
        }
    snprintf(out, cap, "%.*s.ldsi", (int)n, base);
}

bool cli_explain_file(const char *file, const char *path)
{
    lds_import_format f;
    const char *kind = cli_sniff_path(path, &f);
    if (kind && strcmp(kind, "a lodestar index") == 0 && zstd_frames_follow(path)) {
        /* found by a tester: the loader's "the input ended after N of M declared payload
           bytes" alone did not say why */
        fputs("lodestar: ", stderr);
        cli_put_escaped(stderr, file, strlen(file));
        fputs(": a compressed index must be one zstd frame; this file has several: decompress "
              "it first (zstd -d) or recompress it as one frame\n",
              stderr);
        return true;
    }
    if (!kind || strcmp(kind, "a lodestar index") == 0)
        return false;
    /* The name in the hint's commands through the redactor as well: a file whose name
       starts like a URL shows no password there either. */
    char *named = NULL;
    size_t named_len = 0;
    FILE *m = open_memstream(&named, &named_len);
    if (m != NULL) {
        cli_put_message(m, file, strlen(file));
        if (fclose(m) != 0) {
            free(named);
            named = NULL;
        }
    }
    if (named == NULL)
        return false;
    char out[512];
    ldsi_name(named, out, sizeof out);
    fputs("lodestar: ", stderr);
    cli_put_escaped(stderr, file, strlen(file));
    file = named;
    if (strstr(kind, "manifest")) {
        fprintf(stderr,
                " is %s, written by `lodestar split`: a split is searched through "
                "Python, lodestar.search_shards(\"%s\", queries, k=10), and checked "
                "with `lodestar verify %s`\n",
                kind, file, file);
    } else if (f == LDS_IMPORT_AUTO) {
        fprintf(stderr,
                " is %s, not a lodestar index: if it holds embeddings, `lodestar pack %s "
                "%s` reads through the compression and converts them\n",
                kind, file, out);
    } else {
        fprintf(stderr, " is %s, not a lodestar index: convert it with `lodestar pack%s%s %s %s`\n",
                kind, f == LDS_IMPORT_HDF5 || f == LDS_IMPORT_NPZ ? " --format " : "",
                f == LDS_IMPORT_HDF5 || f == LDS_IMPORT_NPZ ? lds_import_format_name(f) : "", file,
                out);
    }
    free(named);
    return true;
}

int cli_load(const cli_load_request *req, lds_index **out, lds_load_info *info)
{
    lds_error err;
    lds_error_init(&err);
    lds_status st = load(req, out, info, &err);
    /* The loader's messages about a URL name it already, redacted ("GET URL: ...", or
       "URL: ..." for one refused before any request: "s3://b: an s3:// URL names a bucket
       and a key"); the file is not put before them a second time. */
    size_t lead = url_token(err.message, strlen(err.message), 0);
    size_t sl = scheme_at(err.message, strlen(err.message), 0);
    bool named = strncmp(err.message, "GET ", 4) == 0 ||
                 (lead > 0 && err.message[lead] == ':' && err.message[sl + 1] == '/');
    if (st == LDS_OK && info->path == LDS_LOAD_MAPPED) {
        /* Installed only while a mapped index is in use: the process ends with it. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = mapped_file_changed;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
    }
    if (st == LDS_OK)
        return CLI_OK;
    int rc = cli_fail(named ? NULL : req->file, st, &err);
    /* Not an index: say what the file is and what to do with it (a file shorter than
       the header is refused as truncated before its magic is read). */
    if (st == LDS_E_BAD_MAGIC || st == LDS_E_TRUNCATED)
        cli_explain_file(req->file, req->source ? req->source : req->file);
    return rc;
}

/* The shortest scientific decimal "[-]d[.ddd]e(+|-)XX" that reads back as finite x, into
   buf[0, cap); its length, or -1. std::to_chars finds it at once (cli/format_f32.cpp); the
   fallback tries 1 to FLT_DECIMAL_DIG (9) significant digits with snprintf and strtof, which
   gives the same digit count and, but for a tie towards the exact value, the same digits. */
static int shortest_scientific(char *buf, size_t cap, float x)
{
#if CLI_HAVE_TO_CHARS
    return cli_f32_scientific(buf, cap, x);
#else
    for (int digits = 1; digits <= 9; digits++) {
        int n = snprintf(buf, cap, "%.*e", digits - 1, (double)x);
        if (n < 0 || (size_t)n >= cap)
            return -1;
        if (digits == 9 || strtof(buf, NULL) == x)
            return n;
    }
    return -1;
#endif
}

void cli_hit_widths(const lds_hit *hits, size_t n, int score_min, int row_min, int *score_w,
                    int *row_w)
{
    *score_w = score_min;
    *row_w = row_min;
    for (size_t i = 0; i < n; i++) {
        char s[32];
        cli_format_float(s, sizeof s, hits[i].score);
        int w = (int)strlen(s);
        if (w > *score_w)
            *score_w = w;
        w = snprintf(s, sizeof s, "%" PRIu64, hits[i].row);
        if (w > *row_w)
            *row_w = w;
    }
}

void cli_format_float(char *buf, size_t cap, float x)
{
    /* One spelling for NaN whatever its sign and payload bits ("%g" writes "-nan" too). */
    if (isnan(x)) {
        snprintf(buf, cap, "nan");
        return;
    }
    char sci[32];
    if (isinf(x) || x == 0.0f || shortest_scientific(sci, sizeof sci, x) < 0) {
        snprintf(buf, cap, "%.9g", (double)x); /* inf, -inf, 0, -0 */
        return;
    }
    /* Sign, significant digits and the decimal exponent of the first digit. */
    const char *c = sci;
    bool neg = *c == '-';
    c += neg;
    char digs[16];
    size_t nd = 0;
    for (; *c && *c != 'e'; c++)
        if (*c != '.' && nd < sizeof digs)
            digs[nd++] = *c;
    int exp10 = *c == 'e' ? atoi(c + 1) : 0;
    while (nd > 1 && digs[nd - 1] == '0')
        nd--;
    /* Laid out as "%.*g" with nd digits writes them (C11 7.21.6.1: fixed when
       -4 <= exp10 < nd, else d.ddde+XX with at least two exponent digits), except that a
       positive exponent whose plain form, the digits padded with zeros, is not longer is
       written plain (50, 100, not 5e+01, 1e+02; 3e+15 stays). */
    char out[48];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp10 >= -4 && exp10 < (int)nd) {
        if (exp10 < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int z = -1; z > exp10; z--)
                out[o++] = '0';
            memcpy(out + o, digs, nd);
            o += nd;
        } else {
            memcpy(out + o, digs, (size_t)exp10 + 1);
            o += (size_t)exp10 + 1;
            if (nd > (size_t)exp10 + 1) {
                out[o++] = '.';
                memcpy(out + o, digs + exp10 + 1, nd - (size_t)exp10 - 1);
                o += nd - (size_t)exp10 - 1;
            }
        }
    } else {
        size_t sci_len =
            (neg ? 1u : 0u) + nd + (nd > 1) + 2 + (exp10 >= 100 || exp10 <= -100 ? 3 : 2);
        size_t plain_len = (neg ? 1u : 0u) + (size_t)exp10 + 1;
        if (exp10 > 0 && plain_len <= sci_len) {
            memcpy(out + o, digs, nd);
            o += nd;
            for (size_t z = nd; z < (size_t)exp10 + 1; z++)
                out[o++] = '0';
        } else {
            out[o++] = digs[0];
            if (nd > 1) {
                out[o++] = '.';
                memcpy(out + o, digs + 1, nd - 1);
                o += nd - 1;
            }
            unsigned e = (unsigned)(exp10 < 0 ? -exp10 : exp10);
            out[o++] = 'e';
            out[o++] = exp10 < 0 ? '-' : '+';
            if (e >= 100)
                out[o++] = (char)('0' + e / 100);
            out[o++] = (char)('0' + e / 10 % 10);
            out[o++] = (char)('0' + e % 10);
        }
    }
    if (cap == 0)
        return;
    if (o >= cap)
        o = cap - 1; /* not with the 32 bytes the contract asks for */
    memcpy(buf, out, o);
    buf[o] = '\0';
}

void cli_print_float(FILE *f, float x)
{
    char buf[40];
    cli_format_float(buf, sizeof buf, x);
    fputs(buf, f);
}

int cli_close_stdout(int code)
{
    /* A full disk or a closed pipe shows up here, not at printf. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (code == CLI_OK)
            cli_failf("writing standard output: %s", strerror(errno));
        return code == CLI_OK ? CLI_FAIL : code;
    }
    return code;
}

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

int cli_output_target(const char *path, char *target, size_t cap)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return cli_failf("cannot stat %s: %s", path, strerror(errno));
    } else if (S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real)
            return cli_failf("%s is a symbolic link whose target cannot be reached (%s); "
                             "refusing to write through it",
                             path, strerror(errno));
        int bad = stat(real, &st) != 0 || !S_ISREG(st.st_mode);
        int rc = CLI_OK;
        if (bad)
            rc = cli_failf("%s is a symbolic link to %s, which is %s; only a regular file is "
                           "replaced",
                           path, real, file_kind(st.st_mode));
        else if ((size_t)snprintf(target, cap, "%s", real) >= cap)
            rc = cli_failf("%s: path too long", real);
        free(real);
        return rc;
    } else if (!S_ISREG(st.st_mode)) {
        return cli_failf("%s is %s; only a regular file is replaced", path, file_kind(st.st_mode));
    }
    if ((size_t)snprintf(target, cap, "%s", path) >= cap)
        return cli_failf("%s: path too long", path);
    return CLI_OK;
}
