/*
 * Fuzz target: the shard manifest reader, lds_manifest_parse (docs/format.md
 * section 9), then the views of what it accepted and lds_manifest_verify over
 * shard files that do not exist. Input:
 *   byte 0   control: bits 0-1 the manifest's location (NULL, a path, a URL with
 *            user:password, query and fragment, a bare https host), which every
 *            "file" is resolved against; bit 2 a max_bytes of 256
 *   rest     the manifest text
 * Invariants: a refusal has its status, a message and no raw control character
 * in it (names are escaped); an accepted manifest's entries cover rows 0..rows
 * in order, their names hold no control character, their locations are set.
 */
#include "fuzz_common.h"

#include <strings.h>

static const char *const wheres[] = {NULL, "fz/dir/manifest.json",
                                     "http://u:PW@127.0.0.1:9/d/m.json?sig=1#f", "https://h"};

static void no_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            abort();
}

static bool is_url(const char *s)
{
    return strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0;
}

static void on_entry(void *ctx, size_t i, lds_status st, const lds_error *err)
{
    size_t *calls = ctx;
    if (i != (*calls)++ || (st == LDS_OK) != (err == NULL))
        abort();
    if (err)
        no_control(err->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in = {data, size};
    uint8_t ctl = fz_byte(&in);
    const char *where = wheres[ctl & 3];
    lds_manifest_options o;
    lds_manifest_options_default(&o);
    if (ctl & 4)
        o.max_bytes = 256;
    lds_manifest *m = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_manifest_parse(in.p, in.n, where, &o, &m, &err);
    if (st != LDS_OK) {
        if (m || err.status != st || err.message[0] == 0)
            abort();
        no_control(err.message);
        return 0;
    }
    lds_manifest_info info;
    lds_manifest_info_init(&info);
    if (lds_manifest_get_info(m, &info) != LDS_OK || info.version != 1 || info.dim == 0 ||
        info.shards == 0 || !lds_dtype_name(info.dtype) || !lds_metric_name(info.metric))
        abort();
    uint64_t next = 0;
    bool any_url = false;
    for (size_t i = 0; i < info.shards; i++) {
        lds_manifest_shard s;
        lds_manifest_shard_init(&s);
        if (lds_manifest_get_shard(m, i, &s) != LDS_OK || !s.file || !s.location ||
            s.first_row != next || s.rows > info.rows - next)
            abort();
        no_control(s.file);
        any_url |= is_url(s.location);
        next += s.rows;
    }
    if (next != info.rows)
        abort();
    /* Verification over names that lead nowhere (never to the network). */
    if (!any_url && info.shards <= 64) {
        size_t calls = 0;
        lds_manifest_verify_stats vs;
        lds_manifest_verify_stats_init(&vs);
        lds_error_init(&err);
        st = lds_manifest_verify(m, NULL, on_entry, &calls, &vs, &err);
        if (calls != info.shards || vs.entries != info.shards || vs.loads > info.shards ||
            (st == LDS_OK) != (vs.failed == 0))
            abort();
    }
    lds_manifest_free(m);
    return 0;
}
