"""lodestar.load and lodestar.Index."""
import collections.abc
import ctypes
import io
import operator
import os
import threading
import weakref

import numpy as np

from . import _capi, _interrupt
from ._capi import library
from ._errors import UnsupportedError, check, from_status

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


class _TopnDefault:
    """most_similar's topn when the caller gave none: 10, told apart from an explicit 10 so
    that a conflicting k (its old name) is refused rather than silently preferred."""

    def __repr__(self):
        return "10"


_TOPN_DEFAULT = _TopnDefault()


class Keys(collections.abc.Sequence):
    """The keys of an index as a lazy, read-only sequence of str (decoded on access)."""

    def __init__(self, index):
        self._index = index

    def __len__(self):
        return self._index.rows

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._index.key(r) for r in range(*i.indices(len(self)))]
        asked = operator.index(i)
        n = len(self)
        r = asked + n if asked < 0 else asked
        if not 0 <= r < n:
            raise IndexError("row %d out of range (the index has %d rows)" % (asked, n))
        return self._index.key(r)

    def __contains__(self, key):
        """Whether `key` (a str) is a key of the index; False for other types and for a
        keyless index. A broken key table (a key repeated under the unique flag) raises
        lodestar.DuplicateKeyError, as row() does, rather than answer False."""
        return key in self._index

    def __repr__(self):
        return "<lodestar.Keys of %d rows>" % len(self)


class KeyToIndex(collections.abc.Mapping):
    """gensim's key_to_index over an index: key -> row, looked up in the key table (the
    lowest row of a repeated key, as Index.row); iterates the keys in row order."""

    def __init__(self, index):
        self._index = index

    def __getitem__(self, key):
        if not isinstance(key, str) or self._index.keys is None:
            raise KeyError(key)
        return self._index.row(key)

    def __contains__(self, key):
        return key in self._index

    def __iter__(self):
        keys = self._index.keys
        return iter(keys) if keys is not None else iter(())

    def __len__(self):
        return len(self._index) if self._index.keys is not None else 0

    def __repr__(self):
        return "<lodestar.KeyToIndex of %d keys>" % len(self)


def _as_items(value):
    """most_similar's positive / negative as a list (gensim's _ensure_list): None -> [],
    one key, row or 1-D vector -> [it]; anything else is a list of items, each an item
    or an (item, weight) pair."""
    if value is None:
        return []
    if isinstance(value, np.ndarray) and value.ndim != 1:
        raise ValueError("most_similar takes vectors of shape (dim,), not %d-D" % value.ndim)
    if isinstance(value, (str, int, np.integer)) or (
            isinstance(value, np.ndarray) and value.ndim == 1):
        return [value]
    return list(value)


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
                raise RuntimeError("index still viewed by a numpy array or DLPack tensor; drop "
                                   "them first, or leave a `with` block to free it after them")
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

    def search(self, queries, k=10, *, threads=None, pad=False):
        """Exact top-k of each query under the index's metric, as faiss's index.search:
        returns (scores, rows), float32 and int64 arrays shaped (nq, min(k, rows)), best
        first (for l2 the smallest distances): unlike faiss, an index with fewer than k
        rows gives fewer columns rather than a tail of rows -1, so that a large k costs
        no more than the index's size (docs/adr/0035). pad=True gives faiss's shape
        (nq, k) instead: the columns past the rows hold row -1 and score -FLT_MAX
        (-3.4028235e38; cosine, dot) or +FLT_MAX (l2), the values faiss 1.7 pads with.
        `queries` is an array (nq, dim) or one query (dim,) of any real dtype (converted
        to float32). k: an integer >= 0 (TypeError / ValueError otherwise). All queries
        go to one
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
            cols = k if pad else kk
            scores = np.empty((nq, cols), dtype=np.float32)
            rows = np.empty((nq, cols), dtype=np.int64)
            if nq and kk:
                _search_batch(lib, h, q, kk, threads, scores, rows)
            if cols > kk:
                big = np.finfo(np.float32).max
                scores[:, kk:] = big if lib.lds_index_metric(h) == 3 else -big
                rows[:, kk:] = -1
            return scores, rows
        finally:
            self._leave()

    def most_similar(self, positive=None, negative=None, topn=_TOPN_DEFAULT, *, k=None):
        """The topn nearest rows as [(key, score), ...], best first, as gensim 4's
        KeyedVectors.most_similar. positive / negative: a key (str), a row (int), a vector
        (dim,), or a list of them, each optionally paired with a weight as (item, weight);
        the defaults weigh positive items +1 and negative ones -1. topn: 10 unless given. k: the
        old name of topn (TypeError when both are given and differ).

        One positive key or vector and nothing else (`most_similar("king")`,
        `most_similar(v)`): the index's exact search under its own metric, the key itself
        left out. Otherwise gensim's arithmetic, as `lodestar similar --positive/--negative`
        (cli/similar.c): every key's row divided by its norm (a vector is taken as given),
        the weighted mean divided by its norm, rows ranked by cosine similarity to it, the
        given keys' rows left out; only for a cosine index (UnsupportedError otherwise).
        topn=None gives gensim's array of the cosine similarity of every row instead.
        Rows stand in for keys when the index has none. KeyError for an absent key,
        IndexError for a row out of range, ValueError for no input or a zero mean."""
        if k is not None:
            if topn is not _TOPN_DEFAULT and topn != k:
                raise TypeError("most_similar got topn=%r and k=%r: k is the old name of "
                                "topn, pass one of them" % (topn, k))
            topn = k
        elif topn is _TOPN_DEFAULT:
            topn = 10
        pos, neg = _as_items(positive), _as_items(negative)
        if topn is not None:
            topn = operator.index(topn)
            if topn < 0:
                raise ValueError("topn must be >= 0, not %d" % topn)
        if (topn is not None and not neg and len(pos) == 1
                and not isinstance(pos[0], tuple)):
            return self._most_similar_one(pos[0], topn)
        items = [it if isinstance(it, tuple) else (it, 1.0) for it in pos]
        items += [it if isinstance(it, tuple) else (it, -1.0) for it in neg]
        if not items:
            raise ValueError("most_similar needs at least one positive or negative item")
        if self.metric != "cosine":
            raise UnsupportedError(
                "most_similar with several items or weights ranks by cosine similarity "
                "(gensim's rule), but the index's metric is %s" % self.metric)
        dim = self.dim
        acc = np.zeros(dim, dtype=np.float64)
        own = set()
        for item, weight in items:
            if isinstance(item, (str, int, np.integer)) and not isinstance(item, bool):
                r = self._row_of(item)
                v = self.vector(r).astype(np.float64)
                n = np.sqrt(np.dot(v, v))
                if not np.isfinite(n) or n == 0:
                    raise ValueError("%r (row %d) %s" % (item, r, "is a zero vector, which "
                                     "has no direction" if n == 0 else
                                     "holds a non-finite element"))
                acc += float(weight) * v / n
                own.add(r)
            else:
                v = np.asarray(item, dtype=np.float64)
                if v.shape != (dim,):
                    raise ValueError("a vector item must have shape (%d,), not %s"
                                     % (dim, v.shape))
                acc += float(weight) * v
        norm = np.sqrt(np.dot(acc, acc))
        if norm == 0 or not np.isfinite(norm):
            raise ValueError("the items' weighted mean is the zero vector (or not finite), "
                             "which has no cosine similarity")
        query = (acc / norm).astype(np.float32)
        if topn is None:
            return self._cosines(query)
        scores, rows = self.search(query, topn + len(own))
        pairs = [(int(r), float(s)) for r, s in zip(rows[0], scores[0])
                 if r >= 0 and int(r) not in own][:topn]
        return self._named(pairs)

    def _most_similar_one(self, key_or_vector, k):
        """most_similar of one key or vector: the search under the index's metric."""
        own = None
        if isinstance(key_or_vector, str) or (
                isinstance(key_or_vector, (int, np.integer))
                and not isinstance(key_or_vector, bool)):
            own = self._row_of(key_or_vector)
            query = self.vector(own)
        else:
            query = np.asarray(key_or_vector)
            if query.ndim != 1:
                raise ValueError("most_similar takes one vector (dim,), not %d-D" % query.ndim)
        scores, rows = self.search(query, k + (own is not None))
        pairs = [(int(r), float(s)) for r, s in zip(rows[0], scores[0])
                 if r >= 0 and r != own][:k]
        return self._named(pairs)

    def _named(self, pairs):
        has_keys = self._get(library().lds_index_has_keys)
        return [(self.key(r) if has_keys else r, s) for r, s in pairs]

    def _row_of(self, key_or_row):
        """The row of a key (str) or a row number (int, negative counts from the end)."""
        if isinstance(key_or_row, str):
            return self.row(key_or_row)
        asked = operator.index(key_or_row)
        n = self.rows
        r = asked + n if asked < 0 else asked
        if not 0 <= r < n:
            # name the row as the caller wrote it: ix[-20001] of 20,000 rows is row -20001
            raise IndexError("row %d out of range (the index has %d rows)" % (asked, n))
        return r

    def _cosines(self, query):
        """The cosine similarity of every row to `query` (dim,), float32 (rows,), in the
        arithmetic of gensim (float32 dot products over the rows' norms)."""
        v = self.as_float32()
        q = np.asarray(query, dtype=np.float32)
        norms = np.linalg.norm(v, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (v @ q) / (norms * np.float32(np.linalg.norm(q)))

    # ---- gensim's KeyedVectors names

    def __getitem__(self, key):
        """A row as a new float32 array (dim,) from a key (str) or a row number (int,
        negative counts from the end); a list, tuple or 1-D array of them gives an array
        (n, dim), as gensim's kv[key] and kv[[k1, k2]]. KeyError / IndexError if absent."""
        if isinstance(key, (list, tuple, np.ndarray)):
            out = np.empty((len(key), self.dim), dtype=np.float32)
            for i, item in enumerate(key):
                out[i] = self.vector(self._row_of(item))
            return out
        if isinstance(key, bool) or not isinstance(key, (str, int, np.integer)):
            raise TypeError("an index is subscripted by a key (str), a row (int) or a list "
                            "of them, not %s" % type(key).__name__)
        return self.vector(self._row_of(key))

    def get_vector(self, key, norm=False):
        """gensim's get_vector: the row of `key` (str) or row number as float32 (dim,),
        divided by its L2 norm when norm is true (a zero row stays zero)."""
        v = self[key]
        if norm:
            n = np.linalg.norm(v)
            if n > 0:
                v = v / n
        return v

    def get_index(self, key, default=None):
        """gensim's get_index: the row of `key`; an int in range is its own row;
        `default` (when not None) instead of KeyError for an absent key."""
        try:
            return self._row_of(key)
        except (KeyError, IndexError):
            if default is not None:
                return default
            raise KeyError("key %r not present" % (key,)) from None

    @property
    def key_to_index(self):
        """gensim's key_to_index: a read-only mapping key -> row, looked up in the
        index's key table (nothing is built in Python). Empty for a keyless index."""
        return KeyToIndex(self)

    @property
    def index_to_key(self):
        """gensim's index_to_key: the keys in row order (the lazy Keys sequence); for a
        keyless index, the row numbers (range(rows)), as gensim numbers keyless vectors."""
        keys = self.keys
        return keys if keys is not None else range(self.rows)

    def similarity(self, key1, key2):
        """gensim's similarity: the cosine similarity of two keys' (or rows') vectors."""
        a, b = self.get_vector(key1, norm=True), self.get_vector(key2, norm=True)
        return float(np.dot(a, b))

    def distance(self, key1, key2):
        """gensim's distance: 1 - similarity(key1, key2)."""
        return 1.0 - self.similarity(key1, key2)

    def n_similarity(self, keys1, keys2):
        """gensim's n_similarity: the cosine similarity of the means of two lists of
        keys' vectors (raw rows, not unit vectors). ZeroDivisionError for an empty list,
        as gensim."""
        if not len(keys1) or not len(keys2):
            raise ZeroDivisionError("at least one of the passed lists is empty")
        a, b = self[list(keys1)].mean(axis=0), self[list(keys2)].mean(axis=0)
        return float(np.dot(a / np.linalg.norm(a), b / np.linalg.norm(b)))

    def doesnt_match(self, keys):
        """gensim's doesnt_match: the key farthest (by cosine) from the mean of the keys'
        unit vectors. Keys not in the index are left out with a warning, as gensim;
        ValueError when none is left."""
        import warnings
        used = [k for k in keys if k in self]
        if len(used) != len(keys):
            warnings.warn("vectors for keys %s are not present in the index; ignoring them"
                          % sorted(set(keys) - set(used)), stacklevel=2)
        if not used:
            raise ValueError("cannot select a key from an empty list")
        v = np.vstack([self.get_vector(k, norm=True) for k in used]).astype(np.float32)
        mean = v.mean(axis=0)
        mean = mean / np.linalg.norm(mean)
        return sorted(zip((v @ mean).tolist(), used))[0][1]

    def distances(self, key_or_vector, other_keys=()):
        """gensim's distances: 1 - cosine similarity from a key (or row, or vector) to
        each of `other_keys`, or to every row when other_keys is empty; float32 array."""
        if isinstance(key_or_vector, (str, int, np.integer)):
            q = self[key_or_vector]
        else:
            q = np.asarray(key_or_vector, dtype=np.float32)
        if not len(other_keys):
            return 1 - self._cosines(q)
        others = self[list(other_keys)]
        with np.errstate(divide="ignore", invalid="ignore"):
            sims = (others @ q) / (np.linalg.norm(others, axis=1) * np.linalg.norm(q))
        return 1 - sims

    # ---- faiss's Index names

    @property
    def ntotal(self):
        """faiss's ntotal: the number of rows."""
        return self.rows

    @property
    def d(self):
        """faiss's d: the dimension."""
        return self.dim

    @property
    def metric_type(self):
        """faiss's metric_type: 0 (faiss.METRIC_INNER_PRODUCT) for dot and cosine (faiss
        searches cosine as the inner product of unit vectors), 1 (faiss.METRIC_L2) for l2
        (squared distances, as faiss's)."""
        return 1 if self.metric == "l2" else 0

    def reconstruct(self, key):
        """faiss's reconstruct: row `key` (0 <= key < ntotal) as float32 (d,)."""
        return self.vector(operator.index(key))

    def reconstruct_n(self, i0, n):
        """faiss's reconstruct_n: rows [i0, i0 + n) as a new float32 array (n, d);
        IndexError unless 0 <= i0 and i0 + n <= ntotal."""
        i0, n = operator.index(i0), operator.index(n)
        rows = self.rows
        if n < 0 or i0 < 0 or i0 + n > rows:
            raise IndexError("rows [%d, %d) are not within the index's %d rows"
                             % (i0, i0 + n, rows))
        return np.array(self.as_float32()[i0:i0 + n], dtype=np.float32)

    # ---- numpy

    @property
    def shape(self):
        """(rows, dim), the shape of `vectors` and of np.asarray(index)."""
        return (self.rows, self.dim)

    def __array__(self, dtype=None, copy=None):
        """np.asarray(index): the `vectors` view (read-only, no copy, the stored dtype:
        uint16 bits for bf16); a copy converted to `dtype` when one is asked for, or when
        copy is true (numpy 2 passes it)."""
        v = self.vectors
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        return v.copy() if copy else v

    def __iter__(self):
        """The rows in order, each a read-only view (dim,) of `vectors` (no copy)."""
        return iter(self.vectors)

    def export(self, path, format=None, *, dtype="f32", keys_out=None):
        """Writes the index to `path` in a format other tools read, as `lodestar export`:
        format "npy", "fvecs", "glove", "word2vec" or "word2vec-bin" (None: from the
        extension .npy, .fvecs, .bin, .vec, .txt); text formats print each float in the
        shortest decimal that reads back as the same float32 (the program's bytes).
        dtype "f16": npy only. keys_out: npy and fvecs, the keys one per line. See
        lodestar._export.export for the errors."""
        from ._export import export
        export(self, path, format, dtype=dtype, keys_out=keys_out)

    # ---- DLPack (torch.from_dlpack, numpy.from_dlpack, ...)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over the rows (rows, dim) in the stored dtype (f32, f16,
        bf16 as DLPack bfloat16, i8 as int8: multiply by i8_scale), on the CPU, without a
        copy: torch.from_dlpack(index) shares the index's payload, which is immutable:
        never write through the tensor (a mapped index's pages are read-only). The index
        stays alive (close() refuses, a `with` block's end defers the free) until the
        consumer's deleter runs. With max_version >= (1, 0) the tensor is DLPack 1.0's
        versioned one, flagged read-only; else the unversioned one numpy 1.24 and torch
        1.13 take, which has no such flag. BufferError for copy=True or another device."""
        from . import _dlpack
        if copy:
            raise BufferError("lodestar exports its rows without a copy only; copy with "
                              "np.array(index) instead")
        if dl_device is not None and tuple(dl_device) != (_dlpack.KDL_CPU, 0):
            raise BufferError("the index is in CPU memory (device (1, 0)), not %r"
                              % (tuple(dl_device),))
        if stream is not None and stream != -1:
            raise BufferError("a CPU tensor takes no stream, not %r" % (stream,))
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _dlpack.capsule(self.vectors, self.dtype, versioned)

    def __dlpack_device__(self):
        """(1, 0): DLPack's kDLCPU, device 0."""
        return (1, 0)


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


def _options(mmap, populate, verify, ownership, max_payload, read_threads=0,
             url_connections=0):
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
    k = operator.index(url_connections)
    if k < 0:
        raise ValueError("url_connections must be >= 0 (0: automatic), not %d" % k)
    opts.url_connections = min(k, 0xFFFFFFFF)
    return opts


def _readinto_callback(f, failure, call=None):
    """An lds_read_fn reading from file object `f` (readinto, else read); `call`: the
    _interrupt.Call whose SIGINT handler may stop a read that blocks."""
    readinto = getattr(f, "readinto", None)

    def read(_ctx, buf, cap, got):
        try:
            if call is not None:
                if call.interrupted:
                    raise KeyboardInterrupt
                call.in_python_read = True
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
        finally:
            if call is not None:
                call.in_python_read = False

    return _capi.READ_FN(read)


def load(source, *, mmap=False, verify=True, ownership=None, max_payload=None, populate=False,
         timeout=None, progress=None, read_threads=0, url_connections=0):
    """Loads an index and returns an Index.

    source: a path (str or os.PathLike); an "http://", "https://" or "s3://" URL (str, loaded
    with lds_load_url: Content-Length cross-checked, dropped transfers resumed); a bytes-like object (the memory path, never
    pooled: a `bytes` object is borrowed, anything else is copied since it could change
    under the index); or a binary file object, read from its current position: through
    its fd when it has one that is seekable or unbuffered (lds_load_fd; left positioned
    after the index), else through readinto (lds_load_callback; pooled).
    mmap: map the file instead of reading it (path or fd; a file that cannot be mapped
    is read). verify: check the payload checksum. ownership: None (the library's
    default), "copy" or "adopt" (docs/adr/0004). max_payload: the largest payload
    accepted, bytes (LimitError beyond). timeout: a URL only, the deadline of the whole
    transfer in seconds (None: none); past it lodestar.DeadlineError (a TimeoutError)
    naming the URL and the bytes received. progress: None or a callable of (bytes done,
    bytes total, or None when the length is unknown), called from this thread as the
    payload arrives (about every MiB) and ending at the total; what it raises stops the
    load and is raised here. Ctrl-C (SIGINT, main thread, with Python's default handler)
    stops the load within about 50 ms and raises KeyboardInterrupt, the rental returned
    (docs/adr/0034). read_threads: threads that read a regular file's payload in
    parallel (path or fd; 0, the default: automatic, see lds_load_options; 1: one reader).
    url_connections: a URL only, concurrent Range requests that fetch the payload (0, the
    default: automatic; 1: one stream; at most 16; docs/adr/0041).
    Raises lodestar.Error subclasses (TruncatedError, ChecksumError,
    IOError, ...), TypeError for a source of another kind.
    """
    lib = library()
    opts = _options(mmap, populate, verify, ownership, max_payload, read_threads,
                    url_connections)
    uo = _interrupt.url_options(timeout)
    opts.url = ctypes.cast(ctypes.byref(uo), ctypes.c_void_p).value
    info = _capi.LoadInfo()
    lib.lds_load_info_init(ctypes.byref(info))
    err = _capi.new_error()
    h = ctypes.c_void_p()
    tail = (ctypes.byref(opts), ctypes.byref(h), ctypes.byref(info), ctypes.byref(err))
    call = _interrupt.Call(progress)
    call.arm(opts)
    with call:
        st, keep = from_source(
            source, mmap, info, True,
            path=lambda p: lib.lds_load_path(p, *tail),
            url=lambda u: lib.lds_load_url(u, *tail),
            fd=lambda fd: lib.lds_load_fd(fd, *tail),
            memory=lambda address, n, copy: lib.lds_load_memory(address, n, copy, *tail),
            callback=lambda cb: lib.lds_load_callback(cb, None, *tail), call=call)
    call.finish(st, undo=lambda: lib.lds_index_free(h))
    if st in (_E_BAD_MAGIC, _E_TRUNCATED):
        explain_source(source, from_status(st, err))
    check(st, err)
    index = Index(h.value, info, keep)
    call.complete(info.payload_bytes)
    return index


_E_BAD_MAGIC, _E_TRUNCATED = 4, 7


def sniff(head):
    """(what the bytes `head` are, the lodestar pack format that reads them) from
    lds_import_sniff: ("an .npy file", "npy"), ("a GloVe text file", "glove"), ...;
    (None, None) when nothing is recognised; the format is None for kinds pack decides on
    itself (compressed files) or does not read (an index, a manifest)."""
    lib = library()
    fmt = ctypes.c_int()
    buf = ctypes.create_string_buffer(bytes(head), len(head))
    kind = lib.lds_import_sniff(buf, len(head), ctypes.byref(fmt))
    if kind is None:
        return None, None
    name = lib.lds_import_format_name(fmt.value) if fmt.value else None
    return kind.decode(), (name.decode() if name else None)


def explain_source(source, exc):
    """Raises `exc` (a BadMagicError or TruncatedError of loading `source`) with what
    the file is and what to do with it, when `source` is a path or bytes of a kind
    lds_import_sniff knows; returns (leaving the caller to raise) otherwise."""
    if isinstance(source, str) and source.lower().startswith(("http://", "https://", "s3://")):
        return
    name = None
    try:
        if isinstance(source, (str, os.PathLike)):
            name = os.fspath(source)
            with open(name, "rb") as f:
                head = f.read(1024)
        else:
            head = bytes(memoryview(source)[:1024])
    except (OSError, TypeError, ValueError):
        return
    kind, fmt = sniff(head)
    if kind is None or kind == "a lodestar index":
        return
    what = repr(name) if name is not None else "the source"
    if "manifest" in kind:
        hint = ("%s is %s, written by `lodestar split`: load it with "
                "lodestar.open_shards(%s) or search it with lodestar.search_shards(%s, "
                "queries, k=10)" % (what, kind, what, what))
    else:
        out = "index.ldsi"
        if name is not None:
            base = os.path.basename(name)
            for z in (".gz", ".zst", ".xz"):
                if base.endswith(z):
                    base = base[:-len(z)]
            out = (os.path.splitext(base)[0] or base) + ".ldsi"
        cmd = "lodestar pack %s%s %s" % ("--format %s " % fmt if fmt in ("npz", "hdf5") else "",
                                         name if name is not None else "FILE", out)
        hint = "%s is %s, not a lodestar index: convert it with `%s`" % (what, kind, cmd)
        if fmt == "npy":
            hint += " or, from Python, lodestar.write(%r, numpy.load(%s))" % (
                out, what if name is not None else "io.BytesIO(source)")
        elif fmt is None:
            hint += " (pack reads through the compression)"
    raise type(exc)("%s; %s" % (exc.message, hint), code=exc.code, status=exc.status,
                    field=exc.field, offset=exc.offset, line=exc.line,
                    sys_errno=exc.errno) from None


def from_source(source, mmap, info, borrow_bytes, *, path, url, fd, memory, callback,
                call=None):
    """Runs the load (or reload) call that fits `source`, as lodestar.load describes:
    url(c_url) for an http:// or https:// str, path(c_path), fd(fd),
    memory(address, n, copy) or callback(read_fn), each returning
    a status. `info` is the lds_load_info the call fills (a file object is left
    positioned after what the load took). A `bytes` source is borrowed (copy false)
    when borrow_bytes, else every memory source is copied. Returns (status, what to
    keep alive: the borrowed array, or None); an exception raised by a file object's
    read is raised again here."""
    if isinstance(source, str) and source.lower().startswith(("http://", "https://", "s3://")):
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
        st = callback(_readinto_callback(source, failure, call))
        if failure:
            if call is not None and isinstance(failure[0], KeyboardInterrupt):
                call.interrupted = True
                return st, None  # call.finish raises it
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
