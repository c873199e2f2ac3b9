"""lodestar.write: an index from numpy arrays, through the C writer."""
import ctypes
import operator

import numpy as np

from . import _capi, _interrupt
from ._capi import library
from ._errors import check
from ._index import _cstr


def _code(kind, name):
    if not isinstance(name, str):
        raise TypeError("%s must be a str, not %s" % (kind, type(name).__name__))
    out = ctypes.c_int()
    fn = library().lds_dtype_from_name if kind == "dtype" else library().lds_metric_from_name
    if b"\0" in name.encode() or fn(name.encode(), ctypes.byref(out)) != 0:
        known = "'f32', 'f16', 'bf16', 'i8'" if kind == "dtype" else "'cosine', 'dot', 'l2'"
        raise ValueError("unknown %s %r (one of %s)" % (kind, name, known))
    return out.value


def write(path, vectors, *, keys=None, ids=None, dtype="f32", metric="cosine",
          normalize=False, metadata=None, i8_scale=None, progress=None, chunk_bytes=None,
          layout="auto"):
    """Writes an index of `vectors` to `path`, atomically (a temporary file in the same
    folder, renamed over `path` once complete, as lds_writer_open_path does).

    vectors: (rows, dim) of any real dtype, converted to float32 (float64 included).
    keys: None or one str per row, unique (a repeat is lodestar.DuplicateKeyError naming
    the row). ids: None or one non-negative integer per row (uint64). dtype: "f32",
    "f16", "bf16" or "i8". metric: "cosine", "dot" or "l2". normalize: L2-normalize each
    row before storing it. metadata: a dict of str to str ("metric" and "normalized"
    are written from the options). i8_scale: dtype "i8" only, stored = round(x / scale);
    None for the library's default 1/127 (values in [-1, 1]). progress: None or a callable
    of (bytes done, bytes total) of the float32 rows written, called about every MiB and
    at the end with done == total; what it raises stops the write (nothing appears at
    `path`) and is raised here. Ctrl-C raises KeyboardInterrupt between two rows, the
    temporary file removed (the final lds_writer_finish, which fsyncs, runs to its end
    first: a Ctrl-C then is raised after it, with the file in place).
    chunk_bytes: None for the writer's default chunk table (format 1.1, 4 KiB chunks);
    a power of two from 1024 to 2**30 for chunks of that size (smaller chunks make delta
    reloads read less: docs/adr/0048); 0 for format 1.0 (no chunk table).
    layout: where the sections after the vectors start (docs/format.md 4.4, ADR 0052):
    "auto" (on chunk boundaries, format 1.2, when the vectors fill at least 256 chunks;
    packed below), "packed" (multiples of 64, format 1.1) or "chunks" (on chunk
    boundaries whatever the size). Without a chunk table (chunk_bytes=0) it is packed.
    Raises TypeError / ValueError for bad arguments, lodestar.Error subclasses for what
    the writer refuses (BadValueError for a NaN or a value the dtype cannot hold),
    before anything appears at `path`.
    """
    lib = library()
    v = np.asarray(vectors)
    if v.dtype.kind not in "biuf":
        raise TypeError("vectors must be a real-valued array, not %s" % v.dtype)
    if v.ndim != 2:
        raise ValueError("vectors must be 2-D (rows, dim), not %d-D" % v.ndim)
    call = _interrupt.Call(progress)
    with np.errstate(over="ignore"):  # a float64 beyond float32 becomes inf: refused below
        v = np.ascontiguousarray(v, dtype=np.float32)
    rows, dim = v.shape
    if dim == 0:
        raise ValueError("vectors must have at least one column")
    opts = _capi.WriterOptions()
    lib.lds_writer_options_default(ctypes.byref(opts))
    opts.dim = dim
    opts.dtype = _code("dtype", dtype)
    opts.metric = _code("metric", metric)
    opts.normalize = bool(normalize)
    if chunk_bytes is not None:
        c = operator.index(chunk_bytes)
        if c != 0 and (c < 1024 or c > 1 << 30 or c & (c - 1)):
            raise ValueError("chunk_bytes must be 0 or a power of two from 1024 to 2**30, "
                             "not %d" % c)
        opts.chunk_bytes = c if c else 0xFFFFFFFF  # LDS_CHUNKS_NONE
    layouts = {"auto": 0, "packed": 1, "chunks": 2}  # lds_layout
    if layout not in layouts:
        raise ValueError("unknown layout %r (one of auto, packed, chunks)" % (layout,))
    opts.layout = layouts[layout]
    if i8_scale is not None:
        if dtype != "i8":
            raise ValueError("i8_scale applies to dtype 'i8' only")
        opts.i8_scale = float(i8_scale)
    if keys is not None:
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys must be a sequence of str, not one %s" % type(keys).__name__)
        keys = list(keys)
        if len(keys) != rows:
            raise ValueError("%d keys for %d rows" % (len(keys), rows))
        for i, k in enumerate(keys):
            if not isinstance(k, str):
                raise TypeError("keys[%d] is %s, not str" % (i, type(k).__name__))
        opts.with_keys = opts.unique_keys = True
    if ids is not None:
        a = np.asarray(ids)
        if a.dtype.kind not in "iu":
            raise TypeError("ids must be integers, not %s" % a.dtype)
        if a.shape != (rows,):
            raise ValueError("ids must have shape (%d,), not %s" % (rows, a.shape))
        if a.dtype.kind == "i" and a.size and a.min() < 0:
            raise ValueError("ids must be >= 0 (uint64); ids[%d] is %d"
                             % (int(np.argmin(a)), int(a.min())))
        ids = a.astype(np.uint64)
        opts.with_ids = True
    meta = []
    for mk, mv in (metadata or {}).items():
        meta.append((_cstr(mk, "metadata key"), _cstr(mv, "metadata value")))
    cpath = _cstr(path, "path")
    err = _capi.new_error()
    w = ctypes.c_void_p()
    check(lib.lds_writer_open_path(cpath, ctypes.byref(opts), ctypes.byref(w),
                                   ctypes.byref(err)), err)
    try:
        base, stride = v.ctypes.data, v.strides[0]
        add = lib.lds_writer_add_row
        row_bytes = 4 * dim
        every = max(1, (1 << 20) // row_bytes)
        for i in range(rows):
            if progress is not None and i % every == 0:
                call.report(i * row_bytes, rows * row_bytes)
            k = keys[i].encode() if keys is not None else None
            check(add(w, base + i * stride, dim, int(ids[i]) if ids is not None else 0, k,
                      len(k) if k is not None else 0, ctypes.byref(err)), err)
        for mk, mv in meta:
            check(lib.lds_writer_set_meta(w, mk, mv, ctypes.byref(err)), err)
        call.report(rows * row_bytes, rows * row_bytes)
        check(lib.lds_writer_finish(w, ctypes.byref(err)), err)
    finally:
        lib.lds_writer_free(w)


def pool_stats(_pool=None):
    """The shared pool's counters (lds_pool_get_stats, through lds_pool_stats_json) as a
    dict: rents, returns, leases_current, bytes_leased, ... (_pool: another pool's
    handle, as Live's private one; for the tests)"""
    import json
    lib = library()
    stats = (ctypes.c_uint64 * 512)()  # room for any lds_pool_stats this library has
    lib.lds_pool_stats_init(stats)
    check(lib.lds_pool_get_stats(_pool, stats))
    need = ctypes.c_size_t()
    lib.lds_pool_stats_json(stats, None, 0, ctypes.byref(need))
    buf = ctypes.create_string_buffer(need.value + 1)
    check(lib.lds_pool_stats_json(stats, buf, len(buf), None))
    return json.loads(buf.value.decode())


