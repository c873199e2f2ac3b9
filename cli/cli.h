/*
 * cli.h: what the subcommands of the `lodestar` program share.
 *
 * The program uses the public API only (include/). Exit codes: 0 success,
 * 1 failure, 2 usage error. Errors go to stderr as "lodestar: <message>".
 */
#ifndef LODESTAR_CLI_H
#define LODESTAR_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lodestar.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Subcommands. argv[0] is "lodestar NAME"; options are parsed with getopt_long. */
int cli_pack(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_verify(int argc, char **argv);
int cli_get(int argc, char **argv);
int cli_similar(int argc, char **argv);
int cli_export(int argc, char **argv);
int cli_keys(int argc, char **argv);
int cli_split(int argc, char **argv);
int cli_diff(int argc, char **argv);

/* similar --positive/--negative (cli/analogy.c, called by similar in cli/query.c): the keys
   of both lists. */
typedef struct cli_analogy cli_analogy;

/* Splits each of pos[0, npos) and neg[0, nneg) (option arguments, borrowed until
   cli_analogy_free) at commas into keys. An empty key (",," or an empty argument) or a
   key in both lists is a usage error for `prog` (CLI_USAGE); else stores the lists in
   *out and returns -1. */
int cli_analogy_parse(const char *prog, char *const *pos, size_t npos, char *const *neg,
                      size_t nneg, cli_analogy **out);

/* gensim's most_similar on `idx` (a cosine index with keys): the k rows nearest to the
   normalized mean of the keys' normalized vectors (weights +1 positive, -1 negative), the
   keys' own rows left out, printed as similar's table or (json) one object. Keys missing
   from the index are named together (CLI_FAIL). */
int cli_analogy_run(cli_analogy *an, const lds_index *idx, const char *file, uint64_t k,
                    unsigned threads, bool json);

/* Frees what cli_analogy_parse made; NULL is ok. */
void cli_analogy_free(cli_analogy *an);

/* Verifies a shard manifest written by split (cli_verify on a FILE ending ".json"):
   its row ranges (in order, no overlap, no gap), then every shard, fully loaded and
   checked against the manifest's checksum, rows, dim, dtype, metric, ids and keys. */
int cli_verify_manifest(const char *path);

/* Prints "lodestar: <what>: <detail>" where the detail is the error's message
   (which names field and offset) or, without one, the status text. <what> is escaped
   as cli_put_escaped does, the detail as cli_put_message does; a writer's message loses
   its "writer: " prefix and its "(at byte 0)". Returns CLI_FAIL. */
int cli_fail(const char *what, lds_status status, const lds_error *err);

/* Prints "lodestar: <formatted message>" to stderr, escaped. Returns CLI_FAIL. */
int cli_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "<prog>: <formatted message>" and a hint to run --help, to stderr.
   Returns CLI_USAGE. */
int cli_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reports the option getopt_long refused (it returned `c`: ':' for a missing argument,
   with a ':' leading the optstring, or '?') as a usage error naming it, escaped; getopt's
   own messages are off (opterr = 0). Returns CLI_USAGE. */
int cli_option_error(const char *prog, int c, char **argv);

/* Parses a whole decimal unsigned integer; false on junk, a sign or overflow. */
/* Whether s names an http://, https:// or s3:// source (case-insensitive scheme). */
bool cli_is_url(const char *s);
bool cli_parse_u64(const char *text, uint64_t *out);

/* Parses a byte count: a decimal integer with an optional suffix K, M, G or T (powers of
   1024, either case), which may be followed by "iB" (64M, 64MiB); false on junk, zero or
   overflow. lodestar-bench's --size takes the same (bench_parse_size). */
bool cli_parse_size(const char *text, uint64_t *out);

/* The program's default max_payload_bytes: the library's default
   (LDS_DEFAULT_MAX_PAYLOAD_BYTES) or half the machine's physical memory, whichever is
   smaller, so that a hostile stream cannot make the program take more than that. */
uint64_t cli_default_max_payload(void);

/* Formats a byte count for people ("12 GiB", "1.5 MiB", "100 bytes") into buf. */
void cli_format_size(char *buf, size_t cap, uint64_t bytes);

/* Writes `len` bytes of `s` with every byte that is not part of printable UTF-8 text
   (controls, DEL, C1 controls, malformed sequences) and every backslash escaped C-style
   (\xNN, \\), and every invisible format character (bidi overrides and isolates,
   zero-width marks, U+FEFF) as \uXXXX, so that a key or value cannot drive the terminal
   or pass for another. */
void cli_put_escaped(FILE *f, const char *s, size_t len);

/* As cli_put_escaped, but a backslash passes as it is: for a library message, which
   already writes the input bytes it quotes as \xNN (so they are not escaped twice). */
void cli_put_message(FILE *f, const char *s, size_t len);

/* How a subcommand wants an index loaded. */
typedef struct cli_load_request {
    const char *file;      /* for messages: the path, "-", or the URL without user:password */
    const char *source;    /* what is loaded (cli_set_source); NULL: `file` */
    int mmap;              /* -1: the loader's default; 0: read; 1: map */
    uint64_t max_payload;  /* max_payload_bytes; 0: cli_default_max_payload() */
    uint32_t read_threads; /* options.read_threads; 0: automatic */
} cli_load_request;

/* Handles --read-threads N for `prog`: stores it in `req` and returns -1, or prints a
   usage error and returns CLI_USAGE. */
int cli_parse_read_threads(const char *prog, const char *arg, cli_load_request *req);

/* Sets what `req` loads: a path, "-" for standard input, or an http:// or https:// URL
   (loaded with lds_load_url; shown everywhere without its user:password). */
void cli_set_source(cli_load_request *req, const char *arg);

/* Handles --max-payload SIZE (the option's argument) for `prog`: stores it in `req` and
   returns -1, or prints a usage error and returns CLI_USAGE. */
int cli_parse_max_payload(const char *prog, const char *arg, cli_load_request *req);

/* Prints the --max-payload lines of a loading subcommand's help, with this machine's
   default, to `f`. */
void cli_print_max_payload_help(FILE *f);

/* Loads an index with the loader, checksum verified. `info` receives what the load did.
   Returns CLI_OK, or prints the loader's error (naming req->file, field and offset) and
   returns its exit code. */
int cli_load(const cli_load_request *req, lds_index **out, lds_load_info *info);

/* What the file at `path` is (lds_import_sniff of its first KiB) and, in *format, the
   format that packs it; NULL for "-", a URL, a file that cannot be read or is not a regular
   file (a FIFO is never opened a second time: opened O_NONBLOCK, then fstat), or no kind
   known. */
const char *cli_sniff_path(const char *path, lds_import_format *format);

/* Where the first zstd frame of the file `fd` (of `size` bytes) starts: 0 when the file starts
   with one; past the skippable frames it starts with (RFC 8878 section 3.1.2: magic
   0x184D2A50..0x184D2A5F, then the content's size in 4 little-endian bytes; at most 16 of
   them, each inside the file) when a zstd frame follows them; -1 otherwise (not zstd, or
   skippable frames that run past the file's end, are too many or end in something else). */
int64_t cli_zstd_frame_at(int fd, uint64_t size);

/* When the file at `path` (shown as `file`) is not a lodestar index but a kind that
   lds_import_sniff knows, prints to stderr what it is and what to do (the `lodestar pack`
   command that converts it; for a shard manifest, lodestar.search_shards) and returns
   true; else prints nothing and returns false. A zstd file whose first frame (after any
   skippable frames; streamed, at most 4 MiB of it read) decompresses to a lodestar magic is
   a compressed index, not explained as something to pack: when another zstd (or skippable)
   frame follows its first frame, a line says that a compressed index must be one frame and
   what to do (returns true); else nothing (the loader's message says what is wrong). */
bool cli_explain_file(const char *file, const char *path);

/* Writes `x` in the shortest decimal form that reads back as the same float (from one
   significant digit up: 1e-45, 0.5); every NaN as "nan", whatever its sign bit. */
void cli_print_float(FILE *f, float x);

/* Writes the shortest decimal form of `x` into buf (at least 32 bytes). */
void cli_format_float(char *buf, size_t cap, float x);

/* The widths of a hit table's score and row columns (similar's and the analogy's): the
   longest of hits[0, n)'s scores as cli_format_float writes them and of their row numbers,
   at least `score_min` and `row_min` (the headers' widths), so that a long score
   ("-1.2345679e-38") keeps the columns in line (found by a tester: "%-10s" pushed the rest
   of its line right). */
void cli_hit_widths(const lds_hit *hits, size_t n, int score_min, int row_min, int *score_w,
                    int *row_w);

/* The key of `row` as a new JSON string (json-c), or NULL (JSON null) without keys
   (cli/json.c: used by get and similar in query.c and by the analogy in analogy.c). */
struct json_object *cli_json_key(const lds_index *idx, uint64_t row);

/* Finishes standard output; returns CLI_FAIL (with a message) if writing it failed. */
int cli_close_stdout(int code);

/* Where a file written beside its final name and renamed over it must be renamed, by the
   library writer's rule (format/writer.c): `path` itself when nothing or a regular file is
   there; the link's target when `path` is a symbolic link to a regular file (the link
   survives); anything else (a device such as /dev/stdout's target, a FIFO, a directory, a
   dangling link) is refused with a message naming it, before a byte is written. Fills
   target[cap]; returns CLI_OK, or CLI_FAIL with the message printed. */
int cli_output_target(const char *path, char *target, size_t cap);

/* ---- options every command takes (main.c takes them out of argv before the command runs):
   --quiet (no progress line) and --timeout SECONDS (the deadline of a URL load). */

/* --quiet was given. */
extern bool cli_quiet;

/* Default of --timeout: an hour, in milliseconds (docs/adr/0034: the longest download the
   program should wait for unattended; 0 = none). */
#define CLI_DEFAULT_TIMEOUT_MS 3600000u

/* --timeout in milliseconds (lds_url_options.timeout_ms of every URL load); 0 = none. */
extern uint32_t cli_timeout_ms;

/* --url-connections (lds_load_options.url_connections of every URL load); 0 = automatic. */
extern uint32_t cli_url_connections;

/* The progress line: on standard error only, only when it is a terminal and --quiet is
   not given, and only once the work has taken more than a second; redrawn at most five
   times a second as "WHAT: 42% (1.5 MiB of 3.6 MiB, 2 s)", erased by cli_progress_end. */
typedef struct cli_progress {
    const char *what; /* borrowed */
    bool on;
    bool shown;
    double start;
    double last;
} cli_progress;

void cli_progress_start(cli_progress *p, const char *what);
/* `total` 0 or UINT64_MAX: unknown (the line shows the bytes done only). */
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total);
/* An lds_load_options/lds_import_options progress callback; ctx is a cli_progress. */
void cli_progress_callback(uint64_t done, uint64_t total, void *ctx);
void cli_progress_end(cli_progress *p);
/* Seconds since cli_progress_start. */
double cli_progress_seconds(const cli_progress *p);

/* ---- temporary files (cli/tempfiles.c; docs/adr/0034)
   Every file is written as DIR/.NAME.lds-tmp-PID-XXXXXX beside DIR/NAME and renamed over
   it when complete; what is registered here is removed on SIGINT, SIGTERM and SIGHUP,
   which are then raised again with their default action (the exit status says so). */
#define CLI_TEMP_INFIX ".lds-tmp-"

/* Installs the handlers (a signal already ignored stays ignored). Called by main. */
void cli_temp_init(void);

/* Creates DIR/.NAME.lds-tmp-PID-XXXXXX for `target` DIR/NAME (tmp[cap] receives the
   name) with the mode of the file it will replace, or 0666 less the umask, and registers
   it (*slot; cli_temp_forget it once renamed or removed). Returns the fd or -1 (errno). */
int cli_temp_create(const char *target, char *tmp, size_t cap, int *slot);

/* Registers a file or an (empty by then) folder to remove; returns the slot or -1. */
int cli_temp_add_file(const char *path);
int cli_temp_add_dir(const char *path);

/* Registers the temporary files the library writer makes for `final` in this process
   (DIR/.NAME.lds-tmp-PID-*); returns the slot or -1. */
int cli_temp_add_writer(const char *final);

/* Registers every temporary name of this process in folder `dir` (entries holding
   ".lds-tmp-PID-"); returns the slot or -1. */
int cli_temp_add_folder(const char *dir);

/* Unregisters a slot (negative: nothing). */
void cli_temp_forget(int slot);

#endif /* LODESTAR_CLI_H */
