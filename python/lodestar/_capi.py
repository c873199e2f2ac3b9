"""The C side of the binding: finding liblodestar, the struct mirrors, the signatures.

The library is the liblodestar.so installed beside this file (pip install . puts it
there; docs/adr/0016). Only when there is none, as when the package is used from a
source checkout, is $LODESTAR_LIB used (the build's library: meson test sets it); no
other place is searched, so an installed package never picks up a checkout's or a
system's copy.

Each mirrored struct starts with its size, so the library reads only the fields
this mirror knows; tests/python/test_layout.py compares every mirror here with the
compiler's sizeof and offsetof (tests/python/layout.c).
"""
import ctypes
import os
import threading

LIBRARY_FILE = "liblodestar.so"

_c = ctypes
P = _c.c_void_p
I = _c.c_int  # noqa: E741 (lds_status and the enums are ints)
SZ = _c.c_size_t
U64 = _c.c_uint64
U32 = _c.c_uint32
B = _c.c_bool
S = _c.c_char_p


class Error_(_c.Structure):
    """lds_error."""
    _fields_ = [("size", SZ), ("status", I), ("field", S), ("offset", U64), ("line", U64),
                ("sys_errno", I), ("zstd_error", S), ("message", _c.c_char * 256)]


class Limits(_c.Structure):
    """lds_limits."""
    _fields_ = [("size", SZ), ("max_dim", U64), ("max_rows", U64), ("max_key_bytes", U64),
                ("max_metadata_bytes", U64)]


class LoadOptions(_c.Structure):
    """lds_load_options (cancel, progress: function pointers, set by _interrupt.Call from
    CANCEL_FN and PROGRESS_FN)."""
    _fields_ = [("size", SZ), ("pool", P), ("max_payload_bytes", U64), ("limits", Limits),
                ("ownership", I), ("use_mmap", B), ("populate", B), ("verify_checksum", B),
                ("hash_while_reading", B), ("cancel", P), ("progress", P),
                ("callback_ctx", P), ("chunk_bytes", SZ), ("hash_thread", B),
                ("url", P), ("read_threads", U32), ("url_connections", U32)]


class UrlOptions(_c.Structure):
    """lds_url_options."""
    _fields_ = [("size", SZ), ("connect_timeout_ms", U32), ("low_speed_time_s", U32),
                ("low_speed_bytes", U32), ("max_redirects", U32), ("max_resumes", U32),
                ("ca_file", S), ("userpwd", S), ("use_netrc", B), ("timeout_ms", U32)]


class LoadInfo(_c.Structure):
    """lds_load_info."""
    _fields_ = [("size", SZ), ("path", I), ("ownership", I), ("compressed", B),
                ("checksum_verified", B), ("hashed_while_reading", B), ("mmap_fallback", B),
                ("payload_bytes", U64), ("declared_bytes", U64), ("stream_bytes", U64),
                ("capacity_bytes", U64), ("elapsed_ns", U64), ("hashed_on_thread", B),
                ("http_status", I), ("resumes", U32), ("read_threads", U32),
                ("huge_pages", B), ("huge_pages_fallback", B),
                ("bytes_read", U64), ("bytes_shared", U64), ("bytes_copied", U64),
                ("chunks_read", U32), ("chunks_shared", U32), ("chunks_copied", U32),
                ("delta_fallback", B), ("url_connections", U32)]


class WriterOptions(_c.Structure):
    """lds_writer_options."""
    _fields_ = [("size", SZ), ("dim", U32), ("dtype", I), ("metric", I), ("normalize", B),
                ("with_ids", B), ("with_keys", B), ("unique_keys", B), ("i8_scale", _c.c_float),
                ("chunk_bytes", U32), ("layout", I)]


class Hit(_c.Structure):
    """lds_hit."""
    _fields_ = [("row", U64), ("score", _c.c_float)]


def hit_dtype():
    """lds_hit as a numpy structured dtype (offsets and padding from the mirror)."""
    import numpy as np
    return np.dtype({"names": ["row", "score"], "formats": ["<u8", "<f4"],
                     "offsets": [Hit.row.offset, Hit.score.offset], "itemsize": _c.sizeof(Hit)})


class SearchOptions(_c.Structure):
    """lds_search_options of lds_index_search_batch."""
    _fields_ = [("size", SZ), ("threads", _c.c_uint), ("kernel", _c.c_char_p)]


class PoolOptions(_c.Structure):
    """lds_pool_options (check and huge_pages: enums)."""
    _fields_ = [("size", SZ), ("check", I), ("fill_on_rent", I), ("max_retained_bytes", SZ),
                ("max_per_class", U32), ("thread_cache_count", U32),
                ("thread_cache_bytes", SZ), ("mmap_threshold", SZ), ("max_idle_ns", U64),
                ("guard_quarantine", U32), ("huge_pages", I), ("large_buffers", U32)]


class LiveOptions(_c.Structure):
    """lds_live_options."""
    _fields_ = [("size", SZ), ("max_retired", U32), ("delta", B)]


class Pin(_c.Structure):
    """lds_pin (internal_: the library's two words)."""
    _fields_ = [("index", P), ("generation", U64), ("internal_", P * 2)]


class LiveStats(_c.Structure):
    """lds_live_stats."""
    _fields_ = [("size", SZ), ("generation", U64), ("reloads_done", U64),
                ("reloads_failed", U64), ("reloads_refused", U64), ("retired_pinned", U64),
                ("retired_pinned_peak", U64), ("pins_on_retired", U64),
                ("bytes_retired", U64), ("bytes_current", U64), ("generations_freed", U64),
                ("last_status", I), ("last_load", LoadInfo),
                ("delta_fallback_reason", _c.c_char * 128)]


class ManifestOptions(_c.Structure):
    """lds_manifest_options (load: an lds_load_options pointer)."""
    _fields_ = [("size", SZ), ("max_bytes", U64), ("load", P)]


class ManifestInfo(_c.Structure):
    """lds_manifest_info."""
    _fields_ = [("size", SZ), ("version", U32), ("dim", U32), ("rows", U64), ("dtype", I),
                ("metric", I), ("has_ids", B), ("has_keys", B), ("shards", SZ)]


class ManifestShard(_c.Structure):
    """lds_manifest_shard (file, location: borrowed from the manifest)."""
    _fields_ = [("size", SZ), ("file", S), ("location", S), ("first_row", U64), ("rows", U64),
                ("payload_bytes", U64), ("checksum", U64)]


MANIFEST_NO_PAYLOAD_BYTES = (1 << 64) - 1  # LDS_MANIFEST_NO_PAYLOAD_BYTES


class ManifestVerifyStats(_c.Structure):
    """lds_manifest_verify_stats."""
    _fields_ = [("size", SZ), ("entries", U64), ("loads", U64), ("failed", U64),
                ("stream_bytes", U64)]


# name in the C headers -> mirror; the layout test walks this.
MIRRORS = {
    "lds_error": Error_,
    "lds_limits": Limits,
    "lds_load_options": LoadOptions,
    "lds_url_options": UrlOptions,
    "lds_load_info": LoadInfo,
    "lds_writer_options": WriterOptions,
    "lds_hit": Hit,
    "lds_search_options": SearchOptions,
    "lds_pool_options": PoolOptions,
    "lds_live_options": LiveOptions,
    "lds_pin": Pin,
    "lds_live_stats": LiveStats,
    "lds_manifest_options": ManifestOptions,
    "lds_manifest_info": ManifestInfo,
    "lds_manifest_shard": ManifestShard,
    "lds_manifest_verify_stats": ManifestVerifyStats,
}

READ_FN = _c.CFUNCTYPE(I, P, P, SZ, _c.POINTER(SZ))
READ_RETRY = (1 << (8 * _c.sizeof(SZ))) - 1  # LDS_READ_RETRY, SIZE_MAX
CANCEL_FN = _c.CFUNCTYPE(B, P)  # lds_load_options.cancel
PROGRESS_FN = _c.CFUNCTYPE(None, U64, U64, P)  # lds_load_options.progress
LENGTH_UNKNOWN = (1 << 64) - 1  # LDS_LENGTH_UNKNOWN

_PS, _PSZ, _PU64 = _c.POINTER(S), _c.POINTER(SZ), _c.POINTER(U64)
SIGNATURES = {
    "lds_version": (S, []),
    "lds_status_name": (S, [I]),
    "lds_strerror": (S, [I]),
    "lds_error_init": (None, [P]),
    "lds_dtype_name": (S, [I]),
    "lds_dtype_from_name": (I, [S, _c.POINTER(I)]),
    "lds_metric_name": (S, [I]),
    "lds_metric_from_name": (I, [S, _c.POINTER(I)]),
    "lds_load_options_default": (None, [P]),
    "lds_load_info_init": (None, [P]),
    "lds_load_path_name": (S, [I]),
    "lds_load_path": (I, [S, P, _c.POINTER(P), P, P]),
    "lds_load_url": (I, [S, P, _c.POINTER(P), P, P]),
    "lds_url_supported": (B, []),
    "lds_url_options_default": (None, [P]),
    "lds_load_fd": (I, [I, P, _c.POINTER(P), P, P]),
    "lds_load_memory": (I, [P, SZ, B, P, _c.POINTER(P), P, P]),
    "lds_load_callback": (I, [READ_FN, P, P, _c.POINTER(P), P, P]),
    "lds_index_free": (None, [P]),
    "lds_index_rows": (U64, [P]),
    "lds_index_dim": (U32, [P]),
    "lds_index_dtype": (I, [P]),
    "lds_index_metric": (I, [P]),
    "lds_index_i8_scale": (_c.c_float, [P]),
    "lds_index_normalized": (B, [P]),
    "lds_index_has_ids": (B, [P]),
    "lds_index_has_keys": (B, [P]),
    "lds_index_keys_unique": (B, [P]),
    "lds_index_payload_bytes": (U64, [P]),
    "lds_index_checksum": (U64, [P]),
    "lds_index_checksum_verified": (B, [P]),
    "lds_index_row": (P, [P, U64]),
    "lds_index_row_f32": (I, [P, U64, P, SZ]),
    "lds_index_id": (I, [P, U64, _PU64]),
    "lds_index_ids": (P, [P]),
    "lds_index_key": (I, [P, U64, _PS, _PSZ]),
    "lds_index_find_key": (I, [P, S, SZ, _PU64]),
    "lds_index_check_keys": (I, [P, P]),
    "lds_index_find_id": (I, [P, U64, _PU64]),
    "lds_index_meta_count": (SZ, [P]),
    "lds_index_meta_at": (I, [P, SZ, _PS, _PS]),
    "lds_index_meta": (S, [P, S]),
    "lds_index_search": (I, [P, P, SZ, SZ, P, _PSZ, P]),
    "lds_index_search_batch": (I, [P, P, SZ, SZ, SZ, P, P, _PSZ, P]),
    "lds_search_options_default": (None, [P]),
    "lds_search_kernels": (SZ, [P, SZ]),
    "lds_writer_options_default": (None, [P]),
    "lds_writer_open_path": (I, [S, P, _c.POINTER(P), P]),
    "lds_writer_add_row": (I, [P, P, SZ, U64, S, SZ, P]),
    "lds_writer_set_meta": (I, [P, S, S, P]),
    "lds_writer_rows": (U64, [P]),
    "lds_writer_finish": (I, [P, P]),
    "lds_writer_free": (None, [P]),
    "lds_pool_stats_init": (None, [P]),
    "lds_pool_get_stats": (I, [P, P]),
    "lds_pool_stats_json": (I, [P, P, SZ, _PSZ]),
    "lds_pool_options_default": (None, [P]),
    "lds_pool_create": (I, [P, _c.POINTER(P)]),
    "lds_pool_free": (None, [P]),
    "lds_pool_class_capacity": (SZ, [SZ]),
    "lds_live_options_default": (None, [P]),
    "lds_live_create": (I, [P, _c.POINTER(P), P]),
    "lds_live_free": (None, [P]),
    "lds_live_pool": (P, [P]),
    "lds_live_pin": (I, [P, P]),
    "lds_live_unpin": (None, [P, P]),
    "lds_live_reload_path": (I, [P, S, P, _PU64, P, P]),
    "lds_live_reload_url": (I, [P, S, P, _PU64, P, P]),
    "lds_live_reload_fd": (I, [P, I, P, _PU64, P, P]),
    "lds_live_reload_path_delta": (I, [P, S, B, P, _PU64, P, P]),
    "lds_live_reload_fd_delta": (I, [P, I, B, P, _PU64, P, P]),
    "lds_live_reload_url_delta": (I, [P, S, B, P, _PU64, P, P]),
    "lds_live_reload_memory": (I, [P, P, SZ, B, P, _PU64, P, P]),
    "lds_live_reload_callback": (I, [P, READ_FN, P, P, _PU64, P, P]),
    "lds_live_stats_init": (None, [P]),
    "lds_live_get_stats": (I, [P, P]),
    "lds_live_stats_json": (I, [P, P, SZ, _PSZ]),
    "lds_manifest_options_default": (None, [P]),
    "lds_manifest_info_init": (None, [P]),
    "lds_manifest_shard_init": (None, [P]),
    "lds_manifest_verify_stats_init": (None, [P]),
    "lds_manifest_read": (I, [S, P, _c.POINTER(P), P]),
    "lds_manifest_parse": (I, [P, SZ, S, P, _c.POINTER(P), P]),
    "lds_manifest_free": (None, [P]),
    "lds_manifest_get_info": (I, [P, P]),
    "lds_manifest_get_shard": (I, [P, SZ, P]),
    "lds_manifest_check_index": (I, [P, P, SZ, P, P]),
    "lds_manifest_verify": (I, [P, P, P, P, P, P]),
    "lds_import_sniff": (S, [P, SZ, _c.POINTER(I)]),  # h-python: errors that say what to do
    "lds_import_format_name": (S, [I]),
}

_lib = None
_lib_path = None
_lock = threading.Lock()


def library_path():
    """The path of the liblodestar this package loads (see the module docstring)."""
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, LIBRARY_FILE)
    if os.path.exists(bundled):
        return bundled
    env = os.environ.get("LODESTAR_LIB")
    if env:
        return env
    raise ImportError(
        "lodestar: no %s beside %s; install the package (pip install .) or, in a source "
        "checkout, set LODESTAR_LIB to the built library" % (LIBRARY_FILE, here))


def library():
    """The loaded liblodestar (a ctypes.CDLL, which releases the GIL around each call)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = library_path()
            lib = _c.CDLL(path)
            for name, (res, args) in SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            _lib_path = os.path.abspath(path)
            _lib = lib
    return _lib


def new_error():
    err = Error_()
    library().lds_error_init(_c.byref(err))
    return err
