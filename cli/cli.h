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

/* similar --positive/--negative (cli/similar.c): the keys of both lists. */
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

/* Writes `x` in the shortest decimal form that reads back as the same float (from one
   significant digit up: 1e-45, 0.5); every NaN as "nan", whatever its sign bit. */
void cli_print_float(FILE *f, float x);

/* Writes the shortest decimal form of `x` into buf (at least 32 bytes). */
void cli_format_float(char *buf, size_t cap, float x);

/* The key of `row` as a new JSON string (json-c), or NULL (JSON null) without keys. */
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

/* mkstemp(tmpl), then the mode of the file at `target` it will replace, or when there is
   none the mode an ordinary new file gets (0666 less the umask), instead of mkstemp's
   0600. Returns the fd or -1 (errno). */
int cli_create_temp(char *tmpl, const char *target);

#endif /* LODESTAR_CLI_H */
