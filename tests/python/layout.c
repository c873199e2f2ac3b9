/* Prints sizeof and offsetof of every struct the Python binding mirrors
 * (python/lodestar/_capi.py), one "NAME SIZE" or "NAME.FIELD OFFSET SIZE" per line;
 * test_layout.py compares them with the ctypes mirrors. A field renamed in a header
 * stops this file compiling, so it fails the suite too. */
#include <lodestar.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(s)     printf("%s %zu\n", #s, sizeof(s))
#define FIELD(s, f) printf("%s.%s %zu %zu\n", #s, #f, offsetof(s, f), sizeof(((s *)0)->f))

int main(void)
{
    SIZE(lds_error);
    FIELD(lds_error, size);
    FIELD(lds_error, status);
    FIELD(lds_error, field);
    FIELD(lds_error, offset);
    FIELD(lds_error, line);
    FIELD(lds_error, sys_errno);
    FIELD(lds_error, zstd_error);
    FIELD(lds_error, message);

    SIZE(lds_limits);
    FIELD(lds_limits, size);
    FIELD(lds_limits, max_dim);
    FIELD(lds_limits, max_rows);
    FIELD(lds_limits, max_key_bytes);
    FIELD(lds_limits, max_metadata_bytes);

    SIZE(lds_load_options);
    FIELD(lds_load_options, size);
    FIELD(lds_load_options, pool);
    FIELD(lds_load_options, max_payload_bytes);
    FIELD(lds_load_options, limits);
    FIELD(lds_load_options, ownership);
    FIELD(lds_load_options, use_mmap);
    FIELD(lds_load_options, populate);
    FIELD(lds_load_options, verify_checksum);
    FIELD(lds_load_options, hash_while_reading);
    FIELD(lds_load_options, cancel);
    FIELD(lds_load_options, progress);
    FIELD(lds_load_options, callback_ctx);
    FIELD(lds_load_options, chunk_bytes);
    FIELD(lds_load_options, hash_thread);
    FIELD(lds_load_options, url);
    FIELD(lds_load_options, read_threads);
    FIELD(lds_load_options, url_connections);

    SIZE(lds_url_options);
    FIELD(lds_url_options, size);
    FIELD(lds_url_options, connect_timeout_ms);
    FIELD(lds_url_options, low_speed_time_s);
    FIELD(lds_url_options, low_speed_bytes);
    FIELD(lds_url_options, max_redirects);
    FIELD(lds_url_options, max_resumes);
    FIELD(lds_url_options, ca_file);
    FIELD(lds_url_options, userpwd);
    FIELD(lds_url_options, use_netrc);
    FIELD(lds_url_options, timeout_ms);

    SIZE(lds_load_info);
    FIELD(lds_load_info, size);
    FIELD(lds_load_info, path);
    FIELD(lds_load_info, ownership);
    FIELD(lds_load_info, compressed);
    FIELD(lds_load_info, checksum_verified);
    FIELD(lds_load_info, hashed_while_reading);
    FIELD(lds_load_info, mmap_fallback);
    FIELD(lds_load_info, payload_bytes);
    FIELD(lds_load_info, declared_bytes);
    FIELD(lds_load_info, stream_bytes);
    FIELD(lds_load_info, capacity_bytes);
    FIELD(lds_load_info, elapsed_ns);
    FIELD(lds_load_info, hashed_on_thread);
    FIELD(lds_load_info, http_status);
    FIELD(lds_load_info, resumes);
    FIELD(lds_load_info, read_threads);
    FIELD(lds_load_info, huge_pages);
    FIELD(lds_load_info, huge_pages_fallback);
    FIELD(lds_load_info, bytes_read);
    FIELD(lds_load_info, bytes_shared);
    FIELD(lds_load_info, bytes_copied);
    FIELD(lds_load_info, chunks_read);
    FIELD(lds_load_info, chunks_shared);
    FIELD(lds_load_info, chunks_copied);
    FIELD(lds_load_info, delta_fallback);
    FIELD(lds_load_info, url_connections);

    SIZE(lds_writer_options);
    FIELD(lds_writer_options, size);
    FIELD(lds_writer_options, dim);
    FIELD(lds_writer_options, dtype);
    FIELD(lds_writer_options, metric);
    FIELD(lds_writer_options, normalize);
    FIELD(lds_writer_options, with_ids);
    FIELD(lds_writer_options, with_keys);
    FIELD(lds_writer_options, unique_keys);
    FIELD(lds_writer_options, i8_scale);
    FIELD(lds_writer_options, chunk_bytes);
    FIELD(lds_writer_options, layout);

    SIZE(lds_hit);
    FIELD(lds_hit, row);
    FIELD(lds_hit, score);

    SIZE(lds_search_options);
    FIELD(lds_search_options, size);
    FIELD(lds_search_options, threads);
    FIELD(lds_search_options, kernel);

    SIZE(lds_pool_options);
    FIELD(lds_pool_options, size);
    FIELD(lds_pool_options, check);
    FIELD(lds_pool_options, fill_on_rent);
    FIELD(lds_pool_options, max_retained_bytes);
    FIELD(lds_pool_options, max_per_class);
    FIELD(lds_pool_options, thread_cache_count);
    FIELD(lds_pool_options, thread_cache_bytes);
    FIELD(lds_pool_options, mmap_threshold);
    FIELD(lds_pool_options, max_idle_ns);
    FIELD(lds_pool_options, guard_quarantine);
    FIELD(lds_pool_options, huge_pages);
    FIELD(lds_pool_options, large_buffers);

    SIZE(lds_live_options);
    FIELD(lds_live_options, size);
    FIELD(lds_live_options, max_retired);
    FIELD(lds_live_options, delta);

    SIZE(lds_pin);
    FIELD(lds_pin, index);
    FIELD(lds_pin, generation);
    FIELD(lds_pin, internal_);

    SIZE(lds_live_stats);
    FIELD(lds_live_stats, size);
    FIELD(lds_live_stats, generation);
    FIELD(lds_live_stats, reloads_done);
    FIELD(lds_live_stats, reloads_failed);
    FIELD(lds_live_stats, reloads_refused);
    FIELD(lds_live_stats, retired_pinned);
    FIELD(lds_live_stats, retired_pinned_peak);
    FIELD(lds_live_stats, pins_on_retired);
    FIELD(lds_live_stats, bytes_retired);
    FIELD(lds_live_stats, bytes_current);
    FIELD(lds_live_stats, generations_freed);
    FIELD(lds_live_stats, last_status);
    FIELD(lds_live_stats, last_load);
    FIELD(lds_live_stats, delta_fallback_reason);
    SIZE(lds_manifest_options);
    FIELD(lds_manifest_options, size);
    FIELD(lds_manifest_options, max_bytes);
    FIELD(lds_manifest_options, load);

    SIZE(lds_manifest_info);
    FIELD(lds_manifest_info, size);
    FIELD(lds_manifest_info, version);
    FIELD(lds_manifest_info, dim);
    FIELD(lds_manifest_info, rows);
    FIELD(lds_manifest_info, dtype);
    FIELD(lds_manifest_info, metric);
    FIELD(lds_manifest_info, has_ids);
    FIELD(lds_manifest_info, has_keys);
    FIELD(lds_manifest_info, shards);

    SIZE(lds_manifest_shard);
    FIELD(lds_manifest_shard, size);
    FIELD(lds_manifest_shard, file);
    FIELD(lds_manifest_shard, location);
    FIELD(lds_manifest_shard, first_row);
    FIELD(lds_manifest_shard, rows);
    FIELD(lds_manifest_shard, payload_bytes);
    FIELD(lds_manifest_shard, checksum);

    SIZE(lds_manifest_verify_stats);
    FIELD(lds_manifest_verify_stats, size);
    FIELD(lds_manifest_verify_stats, entries);
    FIELD(lds_manifest_verify_stats, loads);
    FIELD(lds_manifest_verify_stats, failed);
    FIELD(lds_manifest_verify_stats, stream_bytes);

    return 0;
}
