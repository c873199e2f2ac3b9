"""A small ctypes binding of liblodestar: load an index, see its vectors as numpy.

    import lodestar
    with lodestar.load("glove-100d.ldsi") as idx:
        v = idx.vectors          # numpy array (rows, dim), no copy, read-only
        print(idx.rows, idx.dim, idx.key(0))

The array views the index's own memory (the pool rental, the mapping, or the
copy the index keeps); it holds a reference to the index, so the memory stays
valid while the array (or any array derived from it) lives. Leaving the `with`
block closes the index: at once if no array views it, otherwise when the last
such array is collected; either way the Index object itself is closed from then
on (its methods raise ValueError). close() frees at once and so refuses
(RuntimeError) while an array views the index.

Rows are checked (IndexError unless 0 <= row < rows); strings passed to the
library (paths, keys, metadata) must not hold NUL (ValueError).

The library is found through $LODESTAR_LIB, then build/liblodestar.so beside
this folder, then the dynamic linker (ctypes.util.find_library("lodestar")).
The structs mirrored here follow include/lodestar*.h; each carries its size
first, so the library only reads the fields this mirror knows.
"""
import ctypes
import ctypes.util
import os
import weakref

__all__ = ["Error", "Index", "LoadInfo", "load", "write_index", "library"]

_F32, _F16, _BF16, _I8 = 1, 2, 3, 4
_METRICS = {"cosine": 1, "dot": 2, "l2": 3}
_OWNERSHIP = {None: 0, "default": 0, "copy": 1, "adopt": 2}
_PATHS = {0: "none", 1: "pooled", 2: "growable", 3: "mapped", 4: "memory"}


class _Error(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("status", ctypes.c_int),
                ("field", ctypes.c_char_p), ("offset", ctypes.c_uint64),
                ("line", ctypes.c_uint64), ("sys_errno", ctypes.c_int),
                ("zstd_error", ctypes.c_char_p), ("message", ctypes.c_char * 256)]


class _Limits(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("max_dim", ctypes.c_uint64),
                ("max_rows", ctypes.c_uint64), ("max_key_bytes", ctypes.c_uint64),
                ("max_metadata_bytes", ctypes.c_uint64)]


class _LoadOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("pool", ctypes.c_void_p),
                ("max_payload_bytes", ctypes.c_uint64), ("limits", _Limits),
                ("ownership", ctypes.c_int), ("use_mmap", ctypes.c_bool),
                ("populate", ctypes.c_bool), ("verify_checksum", ctypes.c_bool),
                ("hash_while_reading", ctypes.c_bool), ("cancel", ctypes.c_void_p),
                ("progress", ctypes.c_void_p), ("callback_ctx", ctypes.c_void_p),
                ("chunk_bytes", ctypes.c_size_t), ("hash_thread", ctypes.c_bool)]


class LoadInfo(ctypes.Structure):
    """What a load did (lds_load_info)."""
    _fields_ = [("size", ctypes.c_size_t), ("path", ctypes.c_int), ("ownership", ctypes.c_int),
                ("compressed", ctypes.c_bool), ("checksum_verified", ctypes.c_bool),
                ("hashed_while_reading", ctypes.c_bool), ("mmap_fallback", ctypes.c_bool),
                ("payload_bytes", ctypes.c_uint64), ("declared_bytes", ctypes.c_uint64),
                ("stream_bytes", ctypes.c_uint64), ("capacity_bytes", ctypes.c_uint64),
                ("elapsed_ns", ctypes.c_uint64), ("hashed_on_thread", ctypes.c_bool)]

    @property
    def path_name(self):
        return _PATHS.get(self.path, "unknown")


class _WriterOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("dim", ctypes.c_uint32), ("dtype", ctypes.c_int),
                ("metric", ctypes.c_int), ("normalize", ctypes.c_bool),
                ("with_ids", ctypes.c_bool), ("with_keys", ctypes.c_bool),
                ("unique_keys", ctypes.c_bool), ("i8_scale", ctypes.c_float)]


class Error(Exception):
    """A refusal from the library: .status (name), .field, .offset, str() the message
    (the library's detail, or its text for the status when it gave none)."""

    def __init__(self, status_name, err, status=None):
        self.status = status_name
        self.field = err.field.decode() if err.field else None
        self.offset = err.offset
        message = err.message.decode(errors="replace")
        if not message and status is not None:
            message = library().lds_strerror(status).decode(errors="replace")
        super().__init__("%s: %s" % (status_name, message))


def _cstr(text, what):
    """`text` (str, or bytes for paths) as bytes for a C string; ValueError on NUL."""
    b = os.fsencode(text) if what == "path" else text.encode()
    if b"\0" in b:
        raise ValueError("%s holds an embedded NUL character" % what)
    return b


def _find_library():
    env = os.environ.get("LODESTAR_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    local = os.path.join(here, os.pardir, "build", "liblodestar.so")
    if os.path.exists(local):
        return local
    found = ctypes.util.find_library("lodestar")
    if not found:
        raise OSError("liblodestar not found: set LODESTAR_LIB to the path of liblodestar.so")
    return found


_lib = None


def library():
    """The loaded liblodestar (ctypes.CDLL), with argument types declared."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(_find_library())
    P, I = ctypes.c_void_p, ctypes.c_int
    sig = {
        "lds_version": (ctypes.c_char_p, []),
        "lds_status_name": (ctypes.c_char_p, [I]),
        "lds_strerror": (ctypes.c_char_p, [I]),
        "lds_error_init": (None, [P]),
        "lds_load_options_default": (None, [P]),
        "lds_load_info_init": (None, [P]),
        "lds_load_path": (I, [ctypes.c_char_p, P, ctypes.POINTER(P), P, P]),
        "lds_index_free": (None, [P]),
        "lds_index_rows": (ctypes.c_uint64, [P]),
        "lds_index_dim": (ctypes.c_uint32, [P]),
        "lds_index_dtype": (I, [P]),
        "lds_index_metric": (I, [P]),
        "lds_index_row": (P, [P, ctypes.c_uint64]),
        "lds_index_has_keys": (ctypes.c_bool, [P]),
        "lds_index_key": (I, [P, ctypes.c_uint64, ctypes.POINTER(ctypes.c_char_p),
                              ctypes.POINTER(ctypes.c_size_t)]),
        "lds_index_meta": (ctypes.c_char_p, [P, ctypes.c_char_p]),
        "lds_writer_options_default": (None, [P]),
        "lds_writer_open_path": (I, [ctypes.c_char_p, P, ctypes.POINTER(P), P]),
        "lds_writer_add_row": (I, [P, P, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_char_p,
                                   ctypes.c_size_t, P]),
        "lds_writer_set_meta": (I, [P, ctypes.c_char_p, ctypes.c_char_p, P]),
        "lds_writer_finish": (I, [P, P]),
        "lds_writer_free": (None, [P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    _lib = lib
    return lib


def _check(status, err):
    if status != 0:
        raise Error(library().lds_status_name(status).decode(), err, status)


def _new_error():
    err = _Error()
    library().lds_error_init(ctypes.byref(err))
    return err


class Index:
    """A loaded index. Use as a context manager, or call close()."""

    def __init__(self, handle, info):
        self._h = handle
        self.info = info
        self._closed = False  # closed for the caller; the handle may outlive it (views)
        self._views = []  # weak references to the buffers under vectors views

    def _handle(self):
        if self._closed or not self._h:
            raise ValueError("index is closed")
        return self._h

    def _live_views(self):
        self._views = [r for r in self._views if r() is not None]
        return len(self._views)

    def _free(self):
        if self._h and _lib is not None:
            _lib.lds_index_free(self._h)
        self._h = None

    def _row(self, row):
        """`row` as a checked row number (IndexError, TypeError)."""
        import operator
        r = operator.index(row)
        n = self.rows
        if not 0 <= r < n:
            raise IndexError("row %d out of range (the index has %d rows)" % (r, n))
        return r

    @property
    def rows(self):
        return library().lds_index_rows(self._handle())

    @property
    def dim(self):
        return library().lds_index_dim(self._handle())

    @property
    def dtype(self):
        return {_F32: "f32", _F16: "f16", _BF16: "bf16", _I8: "i8"}[
            library().lds_index_dtype(self._handle())]

    def key(self, row):
        """The key of `row` (0 <= row < rows), or None if the index has no keys."""
        row = self._row(row)
        if not library().lds_index_has_keys(self._handle()):
            return None
        k, n = ctypes.c_char_p(), ctypes.c_size_t()
        st = library().lds_index_key(self._handle(), row, ctypes.byref(k), ctypes.byref(n))
        if st != 0:
            raise Error(library().lds_status_name(st).decode(), _new_error(), st)
        return ctypes.string_at(k, n.value).decode()

    def meta(self, key):
        v = library().lds_index_meta(self._handle(), _cstr(key, "metadata key"))
        return v.decode() if v is not None else None

    @property
    def vectors(self):
        """All rows as a read-only numpy array of shape (rows, dim), without a copy.

        f32 -> float32, f16 -> float16, i8 -> int8 (multiply by the scale yourself),
        bf16 -> uint16 (the raw bits: numpy has no bfloat16)."""
        import numpy as np
        lib = library()
        h = self._handle()
        rows, dim = self.rows, self.dim
        npdt = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i8": np.int8}[self.dtype]
        esize = np.dtype(npdt).itemsize
        stride = dim * esize
        if rows == 0:
            return np.empty((0, dim), dtype=npdt)
        base = lib.lds_index_row(h, 0)
        last = lib.lds_index_row(h, rows - 1)
        if last - base != (rows - 1) * stride:
            raise ValueError("rows are not contiguous in memory; cannot view them without a copy")
        buf = (ctypes.c_char * (rows * stride)).from_address(base)
        buf._lodestar_index = self  # the view keeps the index alive
        # numpy keeps `buf` as the base of the array and of every array derived from it;
        # when the last one goes, a deferred close (see __exit__) can happen.
        self._views.append(weakref.ref(buf, _view_collected(self)))
        arr = np.frombuffer(buf, dtype=npdt).reshape(rows, dim)
        arr.flags.writeable = False
        return arr

    @property
    def closed(self):
        return self._closed or not self._h

    def close(self):
        """Frees the index now. Raises RuntimeError if a vectors view is still alive
        (leave a `with` block instead to have the close wait for the views)."""
        if self._h and not self._closed:
            if self._live_views():
                raise RuntimeError("index still viewed by a numpy array; drop the arrays first")
            self._closed = True
            self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # Closed for the caller at once; the memory goes when the last view does.
        self._closed = True
        if not self._live_views():
            self._free()

    def __del__(self):
        if getattr(self, "_h", None):
            self._free()


def _view_collected(index):
    """A weakref callback freeing `index` once it is closed and its last view is gone."""
    ref = weakref.ref(index)

    def collected(_):
        idx = ref()
        if idx is not None and idx._closed and idx._h and not idx._live_views():
            idx._free()

    return collected


def load(path, mmap=False, populate=False, ownership=None, verify=True,
         hash_while_reading=True):
    """Loads the index at `path` (lds_load_path). ownership: None, "copy" or "adopt"."""
    lib = library()
    opts = _LoadOptions()
    lib.lds_load_options_default(ctypes.byref(opts))
    opts.size = ctypes.sizeof(_LoadOptions)
    opts.use_mmap = mmap
    opts.populate = populate
    opts.ownership = _OWNERSHIP[ownership]
    opts.verify_checksum = verify
    opts.hash_while_reading = hash_while_reading
    info = LoadInfo()
    lib.lds_load_info_init(ctypes.byref(info))
    err = _new_error()
    h = ctypes.c_void_p()
    st = lib.lds_load_path(_cstr(path, "path"), ctypes.byref(opts), ctypes.byref(h),
                           ctypes.byref(info), ctypes.byref(err))
    _check(st, err)
    return Index(h.value, info)


def write_index(path, vectors, keys=None, metric="cosine", meta=None):
    """Writes a float32 (rows, dim) array as an f32 index at `path` (atomically)."""
    import numpy as np
    lib = library()
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError("vectors must be 2-dimensional")
    opts = _WriterOptions()
    lib.lds_writer_options_default(ctypes.byref(opts))
    opts.size = ctypes.sizeof(_WriterOptions)
    opts.dim = v.shape[1]
    opts.dtype = _F32
    opts.metric = _METRICS[metric]
    opts.with_keys = keys is not None
    err = _new_error()
    w = ctypes.c_void_p()
    if keys is not None and len(keys) != v.shape[0]:
        raise ValueError("%d keys for %d rows" % (len(keys), v.shape[0]))
    # Checked before anything is written: a key is passed with its length, but metadata
    # is a C string, which a NUL would cut short.
    meta = [(_cstr(mk, "metadata key"), _cstr(mv, "metadata value"))
            for mk, mv in (meta or {}).items()]
    path = _cstr(path, "path")
    _check(lib.lds_writer_open_path(path, ctypes.byref(opts), ctypes.byref(w),
                                    ctypes.byref(err)), err)
    try:
        base = v.ctypes.data
        stride = v.strides[0]
        for i in range(v.shape[0]):
            k = keys[i].encode() if keys is not None else None
            _check(lib.lds_writer_add_row(w, base + i * stride, v.shape[1], i, k,
                                          len(k) if k else 0, ctypes.byref(err)), err)
        for mk, mv in meta:
            _check(lib.lds_writer_set_meta(w, mk, mv, ctypes.byref(err)), err)
        _check(lib.lds_writer_finish(w, ctypes.byref(err)), err)
    finally:
        lib.lds_writer_free(w)
