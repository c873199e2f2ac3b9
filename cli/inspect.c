/* lodestar info and lodestar verify: load an index and describe it. */
#include "cli.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char info_usage[] =
    "usage: lodestar info [options] FILE|-\n"
    "\n"
    "Load the index FILE (or standard input for -) with the stream loader,\n"
    "verifying its checksum, and print rows, dim, dtype, metric, metadata,\n"
    "sizes, checksum status, the load path used and the load time.\n"
    "Indexes compressed with zstd are recognised and decoded. FILE may be an\n"
    "http:// or https:// URL (shown without its user:password; credentials also\n"
    "come from ~/.netrc).\n"
    "\n"
    "Keys declared unique are checked for repeats (the key table a first lookup\n"
    "builds: about 5 ms and 8 MiB for 341,479 keys); one that repeats is named\n"
    "on stderr after the description, and the exit status is 1.\n"
    "\n"
    "options:\n"
    "  --json      print one JSON object instead of text\n"
    "  --mmap      map the file instead of reading it (regular files only)\n"
    "              do not truncate or rewrite it in place while in use\n"
    "  --no-mmap   read the file into a pooled buffer (the default)\n"
    "  --read-threads N\n"
    "              threads that read a regular file's payload in parallel\n"
    "              (0, the default: one per CPU, at most 8, one per 128 MiB)\n"
    "  -h, --help  print this help\n";
/* followed by cli_print_max_payload_help() */

static const char verify_usage[] =
    "usage: lodestar verify [options] FILE|-\n"
    "\n"
    "Validate the index FILE completely: header, every section, offset and size,\n"
    "keys (UTF-8, uniqueness), metadata and the payload checksum (format 1.1:\n"
    "the chunk table and every chunk). Prints one line and exits 0 if it is\n"
    "sound; otherwise prints what is wrong, naming the field and its byte offset,\n"
    "and exits 1. The file is always read, never mapped, so that every byte goes\n"
    "through the checksum; when a chunk of a regular file is bad, every chunk is\n"
    "then checked and each bad one named. FILE may be an http:// or https:// URL.\n"
    "\n"
    "A FILE ending in .json is a manifest written by 'lodestar split', a path or\n"
    "an http(s) URL: every rule of docs/format.md section 9 is checked (fields,\n"
    "row ranges in order with no overlap and no gap, limits), then every shard\n"
    "file it names, loaded once however many entries name it, against the\n"
    "manifest's checksum, rows, dim, dtype, metric, ids, keys and payload_bytes.\n"
    "A shard's file is a name beside the manifest or an http:// or https:// URL.\n"
    "\n"
    "options:\n"
    "  --read-threads N\n"
    "              threads that read a regular file's payload in parallel\n"
    "              (0, the default: one per CPU, at most 8, one per 128 MiB)\n"
    "  -h, --help  print this help\n";
/* followed by cli_print_max_payload_help() */

static double elapsed_ms(const lds_load_info *info)
{
    return (double)info->elapsed_ns / 1e6;
}

/* Why --mmap did not map the file (NULL: it was not asked, or it did), from what the
   loader reports in lds_load_info. */
static const char *mmap_not_used(int asked, const lds_load_info *info)
{
    if (asked != 1 || info->path == LDS_LOAD_MAPPED)
        return NULL;
    if (info->compressed)
        return "compressed input";
    if (info->mmap_fallback)
        return "mapping failed, the file was read";
    return "not a regular file";
}

/* The keys line: "yes (unique)" only once lds_index_check_keys said so (`keys`, its status;
   the load does not check format.md K7, ADR 0010). */
static const char *keys_text(const lds_index *idx, lds_status keys)
{
    if (!lds_index_has_keys(idx))
        return "no";
    if (!lds_index_keys_unique(idx))
        return "yes";
    if (keys == LDS_OK)
        return "yes (unique)";
    return keys == LDS_E_DUP_KEY ? "yes (declared unique, but a key repeats)"
                                 : "yes (declared unique, not checked)";
}

static void print_info_text(const char *file, const lds_index *idx, const lds_load_info *info,
                            int mmap_asked, lds_status keys)
{
    printf("file:       %s\n", strcmp(file, "-") == 0 ? "(standard input)" : file);
    printf("rows:       %" PRIu64 "\n", lds_index_rows(idx));
    printf("dim:        %" PRIu32 "\n", lds_index_dim(idx));
    printf("dtype:      %s", lds_dtype_name(lds_index_dtype(idx)));
    if (lds_index_dtype(idx) == LDS_DTYPE_I8) {
        printf(" (scale ");
        cli_print_float(stdout, lds_index_i8_scale(idx));
        printf(")");
    }
    printf("\n");
    printf("metric:     %s\n", lds_metric_name(lds_index_metric(idx)));
    printf("normalized: %s\n", lds_index_normalized(idx) ? "yes" : "no");
    printf("keys:       %s\n", keys_text(idx, keys));
    printf("ids:        %s\n", lds_index_has_ids(idx) ? "yes" : "no");
    size_t n_meta = lds_index_meta_count(idx);
    printf("metadata:   %zu entr%s\n", n_meta, n_meta == 1 ? "y" : "ies");
    for (size_t i = 0; i < n_meta; i++) {
        const char *key = NULL, *value = NULL;
        if (lds_index_meta_at(idx, i, &key, &value) == LDS_OK) {
            fputs("  ", stdout);
            cli_put_escaped(stdout, key, strlen(key));
            fputs(" = ", stdout);
            cli_put_escaped(stdout, value, strlen(value));
            fputc('\n', stdout);
        }
    }
    printf("bytes:      %" PRIu64 " payload + %d header", lds_index_payload_bytes(idx),
           LDS_HEADER_SIZE);
    if (info->compressed)
        printf(" (%" PRIu64 " compressed with zstd)", info->stream_bytes);
    printf("\n");
    printf("checksum:   xxh3-64 %016" PRIx64 " %s\n", lds_index_checksum(idx),
           lds_index_checksum_verified(idx) ? "(verified)" : "(not verified)");
    if (lds_index_chunk_count(idx) > 0)
        printf("chunks:     %" PRIu64 " of %" PRIu32 " bytes (format %s, each %s)\n",
               lds_index_chunk_count(idx), lds_index_chunk_bytes(idx),
               lds_index_chunk_aligned(idx) ? "1.2, sections on chunk boundaries" : "1.1",
               lds_index_checksum_verified(idx) ? "verified" : "not verified");
    else
        printf("chunks:     none (format 1.0, one checksum)\n");
    /* The same words as the JSON's load.ownership. */
    printf("load path:  %s (%s)\n", lds_load_path_name(info->path),
           info->ownership == LDS_OWN_COPY ? "copy" : "adopt");
    const char *why = mmap_not_used(mmap_asked, info);
    if (why)
        printf("mmap:       not used (%s)\n", why);
    printf("load time:  %.3f ms\n", elapsed_ms(info));
    if (info->read_threads > 1)
        printf("readers:    %" PRIu32 " threads\n", info->read_threads);
    if (info->url_connections > 1)
        printf("fetched by: %" PRIu32 " connections\n", info->url_connections);
    if (info->huge_pages || info->huge_pages_fallback)
        printf("pages:      %s\n", info->huge_pages ? "huge (transparent huge pages advised)"
                                                    : "4 KiB (huge pages not available)");
    if (info->http_status != 0)
        printf("http:       status %d, %" PRIu32 " resumption%s\n", info->http_status,
               info->resumes, info->resumes == 1 ? "" : "s");
}

static int print_info_json(const char *file, const lds_index *idx, const lds_load_info *info,
                           int mmap_asked, lds_status keys)
{
    json_object *o = json_object_new_object();
    if (!o)
        return cli_failf("out of memory");
    json_object_object_add(o, "file", strcmp(file, "-") == 0 ? NULL : json_object_new_string(file));
    json_object_object_add(o, "rows", json_object_new_uint64(lds_index_rows(idx)));
    json_object_object_add(o, "dim", json_object_new_uint64(lds_index_dim(idx)));
    json_object_object_add(o, "dtype",
                           json_object_new_string(lds_dtype_name(lds_index_dtype(idx))));
    if (lds_index_dtype(idx) == LDS_DTYPE_I8)
        json_object_object_add(o, "i8_scale", json_object_new_double(lds_index_i8_scale(idx)));
    json_object_object_add(o, "metric",
                           json_object_new_string(lds_metric_name(lds_index_metric(idx))));
    json_object_object_add(o, "normalized", json_object_new_boolean(lds_index_normalized(idx)));
    json_object_object_add(o, "has_keys", json_object_new_boolean(lds_index_has_keys(idx)));
    /* keys_unique: declared and checked; keys_declared_unique: the file's flag alone. */
    json_object_object_add(o, "keys_unique",
                           json_object_new_boolean(lds_index_keys_unique(idx) && keys == LDS_OK));
    json_object_object_add(o, "keys_declared_unique",
                           json_object_new_boolean(lds_index_keys_unique(idx)));
    json_object_object_add(o, "has_ids", json_object_new_boolean(lds_index_has_ids(idx)));

    json_object *meta = json_object_new_object();
    for (size_t i = 0; i < lds_index_meta_count(idx); i++) {
        const char *key = NULL, *value = NULL;
        if (lds_index_meta_at(idx, i, &key, &value) == LDS_OK)
            json_object_object_add(meta, key, json_object_new_string(value));
    }
    json_object_object_add(o, "metadata", meta);

    json_object_object_add(o, "payload_bytes",
                           json_object_new_uint64(lds_index_payload_bytes(idx)));
    json_object_object_add(o, "header_bytes", json_object_new_uint64(LDS_HEADER_SIZE));
    json_object_object_add(o, "stream_bytes", json_object_new_uint64(info->stream_bytes));
    json_object_object_add(o, "compressed", json_object_new_boolean(info->compressed));

    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, lds_index_checksum(idx));
    json_object *sum = json_object_new_object();
    json_object_object_add(sum, "algorithm", json_object_new_string("xxh3-64"));
    json_object_object_add(sum, "value", json_object_new_string(hex));
    json_object_object_add(sum, "verified",
                           json_object_new_boolean(lds_index_checksum_verified(idx)));
    json_object_object_add(o, "checksum", sum);
    json_object *chunks = json_object_new_object();
    json_object_object_add(chunks, "bytes", json_object_new_uint64(lds_index_chunk_bytes(idx)));
    json_object_object_add(chunks, "count", json_object_new_uint64(lds_index_chunk_count(idx)));
    json_object_object_add(o, "chunks", chunks);
    json_object_object_add(o, "format",
                           json_object_new_string(lds_index_chunk_aligned(idx)     ? "1.2"
                                                  : lds_index_chunk_count(idx) > 0 ? "1.1"
                                                                                   : "1.0"));

    json_object *load = json_object_new_object();
    json_object_object_add(load, "path", json_object_new_string(lds_load_path_name(info->path)));
    json_object_object_add(
        load, "ownership",
        json_object_new_string(info->ownership == LDS_OWN_COPY ? "copy" : "adopt"));
    const char *why = mmap_not_used(mmap_asked, info);
    if (why) /* only with --mmap: "not used (...)", as the text's mmap line */
        json_object_object_add(load, "mmap_not_used", json_object_new_string(why));
    json_object_object_add(load, "elapsed_ns", json_object_new_uint64(info->elapsed_ns));
    json_object_object_add(load, "read_threads", json_object_new_uint64(info->read_threads));
    json_object_object_add(load, "url_connections",
                           json_object_new_uint64(info->url_connections));
    json_object_object_add(load, "huge_pages", json_object_new_boolean(info->huge_pages));
    json_object_object_add(load, "huge_pages_fallback",
                           json_object_new_boolean(info->huge_pages_fallback));
    if (info->http_status != 0) {
        json_object_object_add(load, "http_status", json_object_new_int(info->http_status));
        json_object_object_add(load, "resumes", json_object_new_uint64(info->resumes));
    }
    json_object_object_add(o, "load", load);

    const char *text = json_object_to_json_string_ext(
        o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = CLI_OK;
    if (text)
        printf("%s\n", text);
    else
        rc = cli_failf("out of memory");
    json_object_put(o);
    return rc;
}

/* Whether FILE names a manifest: its path (for an http(s) URL, before any '?' or '#', so a
   presigned URL's query does not hide it) ends in ".json". */
static bool names_manifest(const char *file)
{
    size_t n = strlen(file);
    if (strncasecmp(file, "http://", 7) == 0 || strncasecmp(file, "https://", 8) == 0 ||
        strncasecmp(file, "s3://", 5) == 0)
        n = strcspn(file, "?#");
    return n > 5 && strncmp(file + n - 5, ".json", 5) == 0;
}

int cli_info(int argc, char **argv)
{
    enum { OPT_JSON = 256, OPT_MMAP, OPT_NO_MMAP, OPT_MAX_PAYLOAD, OPT_READ_THREADS };
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"mmap", no_argument, NULL, OPT_MMAP},
        {"no-mmap", no_argument, NULL, OPT_NO_MMAP},
        {"max-payload", required_argument, NULL, OPT_MAX_PAYLOAD},
        {"read-threads", required_argument, NULL, OPT_READ_THREADS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    bool json = false;
    cli_load_request req = {.mmap = -1};
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(info_usage, stdout);
            cli_print_max_payload_help(stdout);
            return CLI_OK;
        case OPT_JSON:
            json = true;
            break;
        case OPT_MMAP:
            req.mmap = 1;
            break;
        case OPT_NO_MMAP:
            req.mmap = 0;
            break;
        case OPT_MAX_PAYLOAD:
            if (cli_parse_max_payload(prog, optarg, &req) >= 0)
                return CLI_USAGE;
            break;
        case OPT_READ_THREADS:
            if (cli_parse_read_threads(prog, optarg, &req) >= 0)
                return CLI_USAGE;
            break;
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(prog, "expected one FILE (or - for standard input)");
    if (names_manifest(argv[optind]))
        return cli_verify_manifest(argv[optind]);
    cli_set_source(&req, argv[optind]);

    lds_index *idx = NULL;
    lds_load_info info;
    int rc = cli_load(&req, &idx, &info);
    if (rc != CLI_OK)
        return rc;
    /* What the load leaves to the key table (K7), so that "unique" is checked, not declared. */
    lds_error kerr;
    lds_error_init(&kerr);
    lds_status keys = lds_index_check_keys(idx, &kerr);
    if (json)
        rc = print_info_json(req.file, idx, &info, req.mmap, keys);
    else
        print_info_text(req.file, idx, &info, req.mmap, keys);
    if (keys != LDS_OK && rc == CLI_OK) {
        fflush(stdout);
        rc = cli_fail(req.file, keys, &kerr);
    }
    lds_index_free(idx);
    return rc;
}

static void print_bad_chunk(void *ctx, const lds_bad_chunk *b)
{
    printf("%s: checksum of chunk %" PRIu64 " (payload bytes %" PRIu64 "..%" PRIu64
           "): stored %016" PRIx64 ", computed %016" PRIx64 "\n",
           (const char *)ctx, b->chunk, b->start, b->end - 1, b->stored, b->computed);
}

/* After a failed load: if `file` is a regular file in format 1.1, checks every chunk
   (mapped, on every core) and names each bad one. Returns the number found. */
static uint64_t list_bad_chunks(const char *file)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: no second wait */
    if (fd < 0)
        return 0;
    struct stat st;
    uint64_t n_bad = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= LDS_HEADER_SIZE) {
        size_t size = (size_t)st.st_size;
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        lds_header h;
        if (p != MAP_FAILED) {
            if (lds_header_decode(p, size, &h, NULL) == LDS_OK && lds_header_chunked(&h) &&
                h.payload_length == size - LDS_HEADER_SIZE) {
                (void)lds_payload_verify_chunks(&h, (const unsigned char *)p + LDS_HEADER_SIZE,
                                                size - LDS_HEADER_SIZE, 0, print_bad_chunk,
                                                (void *)file, &n_bad, NULL);
                if (n_bad > 0)
                    printf("%s: %" PRIu64 " of %" PRIu64 " chunks bad\n", file, n_bad,
                           h.chunk_count);
            }
            munmap(p, size);
        }
    }
    close(fd);
    return n_bad;
}

int cli_verify(int argc, char **argv)
{
    enum { OPT_MAX_PAYLOAD = 256, OPT_READ_THREADS };
    static const struct option longopts[] = {
        {"max-payload", required_argument, NULL, OPT_MAX_PAYLOAD},
        {"read-threads", required_argument, NULL, OPT_READ_THREADS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    /* Read, not mapped: every byte goes through the checksum as it arrives. */
    cli_load_request req = {.mmap = 0};
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(verify_usage, stdout);
            cli_print_max_payload_help(stdout);
            return CLI_OK;
        case OPT_MAX_PAYLOAD:
            if (cli_parse_max_payload(prog, optarg, &req) >= 0)
                return CLI_USAGE;
            break;
        case OPT_READ_THREADS:
            if (cli_parse_read_threads(prog, optarg, &req) >= 0)
                return CLI_USAGE;
            break;
        default:
            return cli_option_error(prog, c, argv);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(prog, "expected one FILE (or - for standard input)");
    if (names_manifest(argv[optind]))
        return cli_verify_manifest(argv[optind]);
    cli_set_source(&req, argv[optind]);

    lds_index *idx = NULL;
    lds_load_info info;
    int rc = cli_load(&req, &idx, &info);
    if (rc != CLI_OK) {
        if (strcmp(req.file, "-") != 0 && !strstr(req.file, "://"))
            (void)list_bad_chunks(req.file);
        return rc;
    }
    if (!lds_index_checksum_verified(idx)) {
        lds_index_free(idx);
        return cli_failf("%s: the checksum was not verified", req.file);
    }
    /* What the load leaves to the key table: repeated keys under KEYS_UNIQUE (ADR 0010). */
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_index_check_keys(idx, &err);
    if (st != LDS_OK) {
        lds_index_free(idx);
        return cli_fail(req.file, st, &err);
    }
    printf("%s: ok: %" PRIu64 " rows x %" PRIu32 " %s, checksum %016" PRIx64 " verified", req.file,
           lds_index_rows(idx), lds_index_dim(idx), lds_dtype_name(lds_index_dtype(idx)),
           lds_index_checksum(idx));
    if (lds_index_chunk_count(idx) > 0)
        printf(" (%" PRIu64 " chunk%s of %" PRIu32 " bytes)", lds_index_chunk_count(idx),
               lds_index_chunk_count(idx) == 1 ? "" : "s", lds_index_chunk_bytes(idx));
    printf("\n");
    lds_index_free(idx);
    return CLI_OK;
}
