"""lodestar.load and lodestar.Index."""
import collections.abc
import ctypes
import io
import operator
import os
import threading
import weakref

import numpy as np

from . import _capi
from ._capi import library
from ._errors import check, from_status

_DTYPES = {1: "f32", 2: "f16", 3: "bf16", 4: "i8"}
_NUMPY_STORED = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "bf16": np.dtype("<u2"),
                 "i8": np.dtype("i1")}
_METRICS = {1: "cosine", 2: "dot", 3: "l2"}
_OWNERSHIP = {None: 0, "default": 0, "copy": 1, "adopt": 2}
_OWNERSHIP_NAMES = {0: "default", 1: "copy", 2: "adopt"}
_E_IO = 3


def _cstr(text, what):
    """`text` as the bytes of a C string; ValueError on an embedded NUL."""
    if isinstance(text, (str, bytes)) or (what == "path" and isinstance(text, os.PathLike)):
        b = os.fsencode(text) if what == "path" else (
            text if isinstance(text, bytes) else text.encode())
    else:
        raise TypeError("%s must be a str, not %s" % (what, type(text).__name__))
    if b"\0" in b:
        raise ValueError("%s holds an embedded NUL character" % what)
    return b


def _key_bytes(key):
    if not isinstance(key, str):
        raise TypeError("a key is a str, not %s" % type(key).__name__)
    return key.encode()


class Keys(collections.abc.Sequence):
    """The keys of an index as a lazy, read-only sequence of str (decoded on access)."""

    def __init__(self, index):
        self._index = index

    def __len__(self):
        return self._index.rows

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._index.key(r) for r in range(*i.indices(len(self)))]
        r = operator.index(i)
        if r < 0:
            r += len(self)
        return self._index.key(r)

    def __contains__(self, key):
        """Whether `key` (a str) is a key of the index; False for other types and for a
        keyless index. A broken key table (a key repeated under the unique flag) raises
        lodestar.DuplicateKeyError, as row() does, rather than answer False."""
        return key in self._index

    def __repr__(self):
        return "<lodestar.Keys of %d rows>" % len(self)


class Index:
    """A loaded index (from lodestar.load). Use it as a context manager, or call close().

    Arrays it gives without a copy (vectors, ids, as_float32() of an f32 index) view the
    index's memory and keep it alive: leaving the `with` block closes the Index at once
    (its methods then raise ValueError) but frees the memory only when the last such
    array is gone. close() frees at once, and so refuses (RuntimeError) while an array
    views the index or another thread is inside a call on it. Every method may be called
    from several threads at once; the C calls release the GIL.
    """

    def __init__(self, handle, info, keepalive=None, release=None, generation=None):
        self._h = handle
        self._info = info
        self._keepalive = keepalive  # the caller's bytes, for a borrowed memory load
        self._release = release  # instead of lds_index_free (a Live's pin: its unpin)
        self._generation = generation
        self._closed = False  # closed for the caller; the handle may outlive it (views)
        self._views = []  # weak references to the buffers under zero-copy arrays
        self._busy = 0  # C calls in flight
        # Re-entrant: a view collected by the garbage collector while this thread holds the
        # lock runs _view_collected, which takes it again.
        self._lock = threading.RLock()

    # ---- lifetime

    def _enter(self):
        with self._lock:
            if self._closed or not self._h:
                raise ValueError("index is closed")
            self._busy += 1
            return self._h

    def _leave(self):
        with self._lock:
            self._busy -= 1
            free = self._closed and not self._busy and not self._live_views()
        if free:
            self._free()

    def _live_views(self):
        self._views = [r for r in self._views if r() is not None]
        return len(self._views)

    def _free(self):
        with self._lock:
            h, self._h = self._h, None
        if h and _capi._lib is not None:
            if self._release is not None:
                self._release()
            else:
                _capi._lib.lds_index_free(h)
        self._keepalive = None

    def _view(self, address, nbytes, dtype, shape):
        """A read-only numpy array over [address, address + nbytes) of the index."""
        buf = (ctypes.c_char * nbytes).from_address(address)
        buf._lodestar_index = self  # the buffer (numpy's base) keeps the index alive
        with self._lock:
            self._views.append(weakref.ref(buf, _view_collected(self)))
        arr = np.frombuffer(buf, dtype=dtype).reshape(shape)
        arr.flags.writeable = False
        return arr

    @property
    def closed(self):
        return self._closed or not self._h

    @property
    def generation(self):
        """The generation number of an Index from Live.pin() (1 for the first
        successful reload), None for one from lodestar.load."""
        return self._generation

    def close(self):
        """Frees the index now (RuntimeError while an array views it or a call runs)."""
        with self._lock:
            if self._closed or not self._h:
                self._closed = True
                return
            if self._busy:
                raise RuntimeError("index is in use by another thread")
            if self._live_views():
                raise RuntimeError("index still viewed by a numpy array; drop the arrays "
                                   "first, or leave a `with` block to free it after them")
            self._closed = True
        self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._closed = True
            free = not self._busy and not self._live_views()
        if free:
            self._free()

    def __del__(self):
        if getattr(self, "_h", None):
            self._free()

    def __repr__(self):
        if self.closed:
            return "<lodestar.Index (closed)>"
        return "<lodestar.Index %d x %d %s %s>" % (self.rows, self.dim, self.dtype, self.metric)

    # ---- shape and header

    def _get(self, fn):
        h = self._enter()
        try:
            return fn(h)
        finally:
            self._leave()

    @property
    def rows(self):
        """Number of rows (vectors)."""
        return self._get(library().lds_index_rows)

    def __len__(self):
        return self.rows

    @property
    def dim(self):
        """Elements per row."""
        return self._get(library().lds_index_dim)

    @property
    def dtype(self):
        """Stored element type: "f32", "f16", "bf16" or "i8"."""
        return _DTYPES[self._get(library().lds_index_dtype)]

    @property
    def metric(self):
        """"cosine", "dot" or "l2" (squared Euclidean distance, lower is nearer)."""
        return _METRICS[self._get(library().lds_index_metric)]

    @property
    def normalized(self):
        """Whether the writer L2-normalized every row."""
        return bool(self._get(library().lds_index_normalized))

    @property
    def i8_scale(self):
        """The scale of an i8 index (value = stored * scale), None for other dtypes."""
        return float(self._get(library().lds_index_i8_scale)) if self.dtype == "i8" else None

    @property
    def checksum_verified(self):
        return bool(self._get(library().lds_index_checksum_verified))

    @property
    def info(self):
        """What the load did (lds_load_info) as a dict: path ("pooled", "growable",
        "mapped", "memory"), ownership ("copy" or "adopt"), byte counts, elapsed_ns."""
        lib, i = library(), self._info
        d = {name: getattr(i, name) for name, _ in _capi.LoadInfo._fields_ if name != "size"}
        d["path"] = lib.lds_load_path_name(i.path).decode()
        d["ownership"] = _OWNERSHIP_NAMES.get(i.ownership, str(i.ownership))
        return d

    @property
    def metadata(self):
        """The metadata entries as a dict of str, in file order."""
        lib = library()
        h = self._enter()
        try:
            out = {}
            k, v = ctypes.c_char_p(), ctypes.c_char_p()
            for i in range(lib.lds_index_meta_count(h)):
                check(lib.lds_index_meta_at(h, i, ctypes.byref(k), ctypes.byref(v)))
                out[k.value.decode()] = v.value.decode()
            return out
        finally:
            self._leave()

    # ---- vectors, zero copy

    @property
    def vectors(self):
        """All rows as a read-only numpy array (rows, dim) over the index's memory, no copy:
        float32 (f32), float16 (f16), int8 (i8: multiply by i8_scale, or use as_float32),
        uint16 (bf16: the raw bits; as_float32 widens them). Little-endian dtypes."""
        lib = library()
        h = self._enter()
        try:
            rows, dim = lib.lds_index_rows(h), lib.lds_index_dim(h)
            npdt = _NUMPY_STORED[_DTYPES[lib.lds_index_dtype(h)]]
            if rows == 0:
                return np.empty((0, dim), dtype=npdt)
            base = lib.lds_index_row(h, 0)
            return self._view(base, rows * dim * npdt.itemsize, npdt, (rows, dim))
        finally:
            self._leave()

    def as_float32(self):
        """The rows as float32 (rows, dim), values exactly as lds_index_row_f32 gives
        them: f16 and bf16 widened exactly, i8 multiplied by i8_scale (in float32). An
        f32 index gives its `vectors` view itself (no copy, read-only); the other dtypes
        a new, writable array."""
        v = self.vectors
        dt = self.dtype
        if dt == "f32":
            return v
        if dt == "f16":
            return v.astype(np.float32)
        if dt == "bf16":
            return (v.astype(np.uint32) << 16).view(np.float32)
        return v.astype(np.float32) * np.float32(self.i8_scale)

    @property
    def ids(self):
        """The row ids as a read-only uint64 array (rows,) over the index, or None."""
        lib = library()
        h = self._enter()
        try:
            if not lib.lds_index_has_ids(h):
                return None
            rows = lib.lds_index_rows(h)
            if rows == 0:
                return np.empty((0,), dtype="<u8")
            return self._view(lib.lds_index_ids(h), rows * 8, np.dtype("<u8"), (rows,))
        finally:
            self._leave()

    @property
    def keys(self):
        """The keys as a lazy sequence of str (Keys), or None if the index has none."""
        return Keys(self) if self._get(library().lds_index_has_keys) else None

    # ---- rows and keys

    def _check_row(self, h, row):
        r = operator.index(row)
        n = library().lds_index_rows(h)
        if not 0 <= r < n:
            raise IndexError("row %d out of range (the index has %d rows)" % (r, n))
        return r

    def key(self, row):
        """The key of `row` (an int, 0 <= row < rows), or None if the index has no keys."""
        lib = library()
        h = self._enter()
        try:
            row = self._check_row(h, row)
            if not lib.lds_index_has_keys(h):
                return None
            k, n = ctypes.c_char_p(), ctypes.c_size_t()
            check(lib.lds_index_key(h, row, ctypes.byref(k), ctypes.byref(n)))
            return ctypes.string_at(k, n.value).decode()
        finally:
            self._leave()

    def row(self, key):
        """The row of `key` (the lowest if keys repeat). KeyError if absent;
        lodestar.UnsupportedError if the index has no keys."""
        b = _key_bytes(key)
        lib = library()
        h = self._enter()
        try:
            st, r = self._find_key(h, b)
            if st == 19:  # LDS_E_NOT_FOUND
                raise KeyError(key)
            return r
        finally:
            self._leave()

    @staticmethod
    def _find_key(h, b):
        """(status, row) of key bytes `b`; raises for any status but LDS_OK and
        LDS_E_NOT_FOUND (a keyless index: UnsupportedError). A repeated
        key under the unique flag (LDS_E_DUP_KEY, found at the first lookup, ADR 0010)
        raises DuplicateKeyError with field and offset, from lds_index_check_keys (the
        lookup itself has no error detail out-parameter)."""
        lib = library()
        r = ctypes.c_uint64()
        st = lib.lds_index_find_key(h, b, len(b), ctypes.byref(r))
        if st in (0, 19):
            return st, r.value
        err = _capi.new_error()
        if lib.lds_index_check_keys(h, ctypes.byref(err)) == st:
            check(st, err)
        check(st)

    def check_keys(self):
        """Checks the whole key table now, as `lodestar verify` does: a file that
        declares unique keys but repeats one raises lodestar.DuplicateKeyError
        naming both rows. The load itself checks offsets, lengths and UTF-8 only;
        repeats are found where the key table is built (the first key lookup, or
        this call; ADR 0010). A keyless index passes."""
        lib = library()
        h = self._enter()
        try:
            err = _capi.new_error()
            check(lib.lds_index_check_keys(h, ctypes.byref(err)), err)
        finally:
            self._leave()

    def __contains__(self, key):
        """Whether `key` (a str) is a key of the index; False for other types and for a
        keyless index. A broken key table (a key repeated under the unique flag) raises
        lodestar.DuplicateKeyError, as row() does, rather than answer False."""
        if not isinstance(key, str):
            return False
        b = key.encode()
        lib = library()
        h = self._enter()
        try:
            if not lib.lds_index_has_keys(h):
                return False  # a keyless index contains no key
            # Only LDS_E_NOT_FOUND is "not in": a broken key table raises (_find_key).
            return self._find_key(h, b)[0] == 0
        finally:
            self._leave()

    def vector(self, key_or_row):
        """One row as a new float32 array (dim,): `key_or_row` is a key (str) or a row."""
        row = self.row(key_or_row) if isinstance(key_or_row, str) else key_or_row
        lib = library()
        h = self._enter()
        try:
            row = self._check_row(h, row)
            out = np.empty(lib.lds_index_dim(h), dtype=np.float32)
            check(lib.lds_index_row_f32(h, row, out.ctypes.data, out.size))
            return out
        finally:
            self._leave()

    def meta(self, key):
        """The value of metadata `key`, or None."""
        b = _cstr(key, "metadata key")
        h = self._enter()
        try:
            v = library().lds_index_meta(h, b)
            return v.decode() if v is not None else None
        finally:
            self._leave()

    # ---- search

    def search(self, queries, k=10, *, threads=None):
        """Exact top-k of each query under the index's metric, as faiss's index.search:
        returns (scores, rows), float32 and int64 arrays shaped (nq, min(k, rows)), best
        first (for l2 the smallest distances): unlike faiss, an index with fewer than k
        rows gives fewer columns rather than a tail of rows -1, so that a large k costs
        no more than the index's size. `queries` is an array (nq, dim) or one query
        (dim,) of any real dtype (converted to float32). k: an integer >= 0
        (TypeError / ValueError otherwise). All queries go to one
        lds_index_search_batch call, which releases the GIL; its results are those of
        lds_index_search one query at a time. threads: None for the library's choice
        (lds_search_options.threads 0), or the most threads to split the rows over (the
        library caps it by the index's size; results are identical for every count).
        TypeError / ValueError for bad arguments; lodestar.BadValueError for a
        non-finite query or a zero query under cosine."""
        q = np.asarray(queries)
        if q.dtype.kind not in "biuf":
            raise TypeError("queries must be a real-valued array, not %s" % q.dtype)
        if q.ndim == 1:
            q = q[np.newaxis, :]
        if q.ndim != 2:
            raise ValueError("queries must be 1-D (one query) or 2-D (nq, dim), not %d-D"
                             % q.ndim)
        q = np.ascontiguousarray(q, dtype=np.float32)
        k = operator.index(k)
        if k < 0:
            raise ValueError("k must be >= 0, not %d" % k)
        if threads is not None:
            threads = operator.index(threads)
            if threads < 1:
                raise ValueError("threads must be None or >= 1, not %d" % threads)
        lib = library()
        h = self._enter()
        try:
            dim = lib.lds_index_dim(h)
            if q.shape[1] != dim:
                raise ValueError("queries have %d dims, the index %d" % (q.shape[1], dim))
            nq = q.shape[0]
            kk = min(k, lib.lds_index_rows(h))  # what the library can return
            scores = np.empty((nq, kk), dtype=np.float32)
            rows = np.empty((nq, kk), dtype=np.int64)
            if nq and kk:
                _search_batch(lib, h, q, kk, threads, scores, rows)
            return scores, rows
        finally:
            self._leave()

    def most_similar(self, key_or_vector, k=10):
        """The k nearest rows as [(key, score), ...], best first, as gensim's
        most_similar: `key_or_vector` is a key (str; that key itself is left out) or a
        vector (dim,). Rows stand in for keys when the index has none."""
        k = operator.index(k)
        if k < 0:
            raise ValueError("k must be >= 0, not %d" % k)
        own = None
        if isinstance(key_or_vector, str):
            own = self.row(key_or_vector)
            query = self.vector(own)
        else:
            query = np.asarray(key_or_vector)
            if query.ndim != 1:
                raise ValueError("most_similar takes one vector (dim,), not %d-D" % query.ndim)
        scores, rows = self.search(query, k + (own is not None))
        pairs = [(int(r), float(s)) for r, s in zip(rows[0], scores[0])
                 if r >= 0 and r != own][:k]
        has_keys = self._get(library().lds_index_has_keys)
        return [(self.key(r) if has_keys else r, s) for r, s in pairs]


def _search_batch(lib, h, q, k, threads, scores, rows):
    """All queries in one lds_index_search_batch call (the GIL is released during it):
    threads None leaves lds_search_options_default's 0, the library's choice."""
    nq = q.shape[0]
    opts = _capi.SearchOptions()
    lib.lds_search_options_default(ctypes.byref(opts))
    if threads is not None:
        opts.threads = min(threads, 0xFFFFFFFF)  # unsigned; the library caps it far lower
    hits = np.zeros(nq * k, dtype=_capi.hit_dtype())
    n_hits = np.zeros(nq, dtype=np.uintp)  # room for a count per query; every query has min(k, rows)
    err = _capi.new_error()
    check(lib.lds_index_search_batch(h, q.ctypes.data, nq, q.shape[1], k, ctypes.byref(opts),
                                     hits.ctypes.data, n_hits.ctypes.data_as(_capi._PSZ),
                                     ctypes.byref(err)), err)
    n = int(n_hits[0])
    hits = hits.reshape(nq, k)
    rows[:, :n] = hits["row"][:, :n]
    scores[:, :n] = hits["score"][:, :n]


def _view_collected(index):
    """A weakref callback freeing `index` once it is closed and its last view is gone."""
    ref = weakref.ref(index)

    def collected(_):
        idx = ref()
        if idx is None:
            return
        with idx._lock:
            free = idx._closed and idx._h and not idx._busy and not idx._live_views()
        if free:
            idx._free()

    return collected


def _options(mmap, populate, verify, ownership, max_payload, read_threads=0):
    lib = library()
    opts = _capi.LoadOptions()
    lib.lds_load_options_default(ctypes.byref(opts))
    if ownership not in _OWNERSHIP:
        raise ValueError("ownership must be None, 'copy' or 'adopt', not %r" % (ownership,))
    opts.use_mmap = bool(mmap)
    opts.populate = bool(populate)
    opts.verify_checksum = bool(verify)
    opts.ownership = _OWNERSHIP[ownership]
    if max_payload is not None:
        m = operator.index(max_payload)
        if m < 0:
            raise ValueError("max_payload must be >= 0 bytes, not %d" % m)
        opts.max_payload_bytes = m
    t = operator.index(read_threads)
    if t < 0:
        raise ValueError("read_threads must be >= 0 (0: automatic), not %d" % t)
    opts.read_threads = min(t, 0xFFFFFFFF)
    return opts


def _readinto_callback(f, failure):
    """An lds_read_fn reading from file object `f` (readinto, else read)."""
    readinto = getattr(f, "readinto", None)

    def read(_ctx, buf, cap, got):
        try:
            if readinto is not None:
                n = readinto(memoryview((ctypes.c_char * cap).from_address(buf)).cast("B"))
                got[0] = _capi.READ_RETRY if n is None else n
            else:
                data = f.read(cap)
                if data is None:
                    got[0] = _capi.READ_RETRY
                else:
                    if len(data) > cap:
                        raise ValueError("read(%d) returned %d bytes" % (cap, len(data)))
                    ctypes.memmove(buf, data, len(data))
                    got[0] = len(data)
            return 0
        except BaseException as e:  # stopped here, raised again by load
            failure.append(e)
            return _E_IO

    return _capi.READ_FN(read)


def load(source, *, mmap=False, verify=True, ownership=None, max_payload=None, populate=False,
         read_threads=0):
    """Loads an index and returns an Index.

    source: a path (str or os.PathLike); an "http://" or "https://" URL (str, loaded
    with lds_load_url: Content-Length cross-checked, dropped transfers resumed); a bytes-like object (the memory path, never
    pooled: a `bytes` object is borrowed, anything else is copied since it could change
    under the index); or a binary file object, read from its current position: through
    its fd when it has one that is seekable or unbuffered (lds_load_fd; left positioned
    after the index), else through readinto (lds_load_callback; pooled).
    mmap: map the file instead of reading it (path or fd; a file that cannot be mapped
    is read). verify: check the payload checksum. ownership: None (the library's
    default), "copy" or "adopt" (docs/adr/0004). max_payload: the largest payload
    accepted, bytes (LimitError beyond). read_threads: threads that read a regular file's
    payload in parallel (path or fd; 0, the default: automatic, see lds_load_options;
    1: one reader). Raises lodestar.Error subclasses (TruncatedError,
    ChecksumError, IOError, ...), TypeError for a source of another kind.
    """
    lib = library()
    opts = _options(mmap, populate, verify, ownership, max_payload, read_threads)
    info = _capi.LoadInfo()
    lib.lds_load_info_init(ctypes.byref(info))
    err = _capi.new_error()
    h = ctypes.c_void_p()
    tail = (ctypes.byref(opts), ctypes.byref(h), ctypes.byref(info), ctypes.byref(err))
    st, keep = from_source(
        source, mmap, info, True,
        path=lambda p: lib.lds_load_path(p, *tail),
        url=lambda u: lib.lds_load_url(u, *tail),
        fd=lambda fd: lib.lds_load_fd(fd, *tail),
        memory=lambda address, n, copy: lib.lds_load_memory(address, n, copy, *tail),
        callback=lambda cb: lib.lds_load_callback(cb, None, *tail))
    check(st, err)
    return Index(h.value, info, keep)


def from_source(source, mmap, info, borrow_bytes, *, path, url, fd, memory, callback):
    """Runs the load (or reload) call that fits `source`, as lodestar.load describes:
    url(c_url) for an http:// or https:// str, path(c_path), fd(fd),
    memory(address, n, copy) or callback(read_fn), each returning
    a status. `info` is the lds_load_info the call fills (a file object is left
    positioned after what the load took). A `bytes` source is borrowed (copy false)
    when borrow_bytes, else every memory source is copied. Returns (status, what to
    keep alive: the borrowed array, or None); an exception raised by a file object's
    read is raised again here."""
    if isinstance(source, str) and source.lower().startswith(("http://", "https://")):
        return url(_cstr(source, "url")), None
    if isinstance(source, (str, os.PathLike)):
        return path(_cstr(source, "path")), None
    if hasattr(source, "read") or hasattr(source, "readinto"):
        fdn = _usable_fd(source)
        if fdn is not None:
            start = source.tell() if source.seekable() else None
            if start is not None:  # the fd may be ahead of a buffered reader's position
                os.lseek(fdn, start, os.SEEK_SET)
            st = fd(fdn)
            if start is not None:  # after what the load took (a mapped load moves no fd)
                source.seek(start + info.stream_bytes if st == 0 else
                            os.lseek(fdn, 0, os.SEEK_CUR))
            return st, None
        failure = []
        st = callback(_readinto_callback(source, failure))
        if failure:
            raise failure[0]
        return st, None
    try:
        view = memoryview(source)
    except TypeError:
        raise TypeError("source must be a path, a bytes-like object or a binary file "
                        "object, not %s" % type(source).__name__) from None
    if mmap:
        raise ValueError("mmap applies to a path or a file, not to bytes in memory")
    arr = np.frombuffer(view, dtype=np.uint8) if view.nbytes else np.zeros(1, np.uint8)
    borrow = borrow_bytes and type(source) is bytes
    st = memory(arr.ctypes.data, view.nbytes, not borrow)
    return st, (arr if borrow else None)


def _usable_fd(f):
    """The fd of file object `f` if the loader may read it directly, else None."""
    try:
        fd = f.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None
    try:
        if f.seekable():
            return fd
    except (AttributeError, OSError, ValueError):
        return None
    # Not seekable: only an unbuffered (raw) file has nothing read ahead of the fd.
    return fd if isinstance(f, io.RawIOBase) else None
