"""Sharded indexes: a manifest written by `lodestar split`, its shards loaded, searched
one by one and their per-shard top-k merged into the exact global top-k.

    with lodestar.open_shards("out/manifest.json") as shards:
        scores, rows = shards.search(queries, k=10)     # global rows, as the unsplit index
        shards.row("king"), shards.vector("king")       # through the shard holding the key

A manifest is a local path or an http:// or https:// URL, read and checked by the
library's one manifest reader (lds_manifest_read, docs/format.md section 9: the same
rules and messages as `lodestar verify`; a URL is fetched through libcurl as
lodestar.load fetches one, user:password sent as HTTP authentication); a shard's
"file" is a name beside the manifest (so a split directory served over HTTP is loaded
from there) or an http(s) URL of its own, loaded with lds_load_url.

The merge ranks as lds_index_search does on one index: best score first (for l2 the
smallest distance), equal scores by global row, rows whose score is NaN last (by row).
A shard's row r is global row first_row + r; each shard's top-k holds every row of the
global top-k that lives in that shard, so the merge of the shards' top-k is exact.
"""
import bisect
import ctypes
import operator
import os

import numpy as np

from . import _capi, _interrupt
from ._errors import UnsupportedError, check, from_status
from ._index import Index, load

__all__ = ["read_manifest", "merge_topk", "open_shards", "search_shards", "Shards"]


def read_manifest(path, *, timeout=None):
    """Reads and checks a manifest (a path or an http(s) URL) with the library's reader
    (lds_manifest_read): returns a dict with "version", "rows", "dim", "dtype",
    "metric", "has_ids", "has_keys" and "shards", a list of dicts with "path" (the
    shard's file resolved beside the manifest, or its URL: what lodestar.load takes),
    "file", "first_row", "rows", "payload_bytes" (None when the entry has none) and
    "checksum" (int). Raises the lodestar.Error subclass of the refusal, naming the
    field (e.g. shards[1].first_row) as `lodestar verify` does: BadValueError (also a
    ValueError), VersionError, ParseError, LimitError (too long, too deep, a number
    too long), BadUTF8Error, IOError (also an OSError) when it cannot be read. A URL is
    read under `timeout` (seconds, or None: no deadline; lodestar.DeadlineError past it),
    and Ctrl-C stops it as it stops lodestar.load (KeyboardInterrupt, docs/adr/0034)."""
    lib = _capi.library()
    where = os.fsencode(os.fspath(path))
    if b"\0" in where:
        raise ValueError("manifest path contains a NUL character")
    err = _capi.new_error()
    handle = ctypes.c_void_p()
    lo = _capi.LoadOptions()
    lib.lds_load_options_default(ctypes.byref(lo))
    uo = _interrupt.url_options(timeout)
    lo.url = ctypes.cast(ctypes.byref(uo), ctypes.c_void_p).value
    call = _interrupt.Call()
    call.arm(lo)
    mo = _capi.ManifestOptions()
    lib.lds_manifest_options_default(ctypes.byref(mo))
    mo.load = ctypes.cast(ctypes.byref(lo), ctypes.c_void_p).value
    with call:
        st = lib.lds_manifest_read(where, ctypes.byref(mo), ctypes.byref(handle),
                                   ctypes.byref(err))
    call.finish(st, undo=lambda: lib.lds_manifest_free(handle))
    _check(st, err)
    try:
        return _manifest_dict(lib, handle)
    finally:
        lib.lds_manifest_free(handle)


def _check(code, err):
    """check(), with the entry's index put into a field such as "shards[].rows": the
    library's field names are static, and lds_error.line holds the entry's index + 1."""
    if code != 0:
        e = from_status(code, err)
        if e.field and "[]" in e.field and err.line:
            e.field = e.field.replace("[]", "[%d]" % (err.line - 1), 1)
        raise e


def _manifest_dict(lib, handle):
    info = _capi.ManifestInfo()
    lib.lds_manifest_info_init(ctypes.byref(info))
    check(lib.lds_manifest_get_info(handle, ctypes.byref(info)))
    shards = []
    for i in range(info.shards):
        s = _capi.ManifestShard()
        lib.lds_manifest_shard_init(ctypes.byref(s))
        check(lib.lds_manifest_get_shard(handle, i, ctypes.byref(s)))
        pb = None if s.payload_bytes == _capi.MANIFEST_NO_PAYLOAD_BYTES else s.payload_bytes
        shards.append({"path": os.fsdecode(s.location), "file": s.file.decode(),
                       "first_row": s.first_row, "rows": s.rows, "payload_bytes": pb,
                       "checksum": s.checksum})
    return {"version": info.version, "rows": info.rows, "dim": info.dim,
            "dtype": lib.lds_dtype_name(info.dtype).decode(),
            "metric": lib.lds_metric_name(info.metric).decode(),
            "has_ids": bool(info.has_ids), "has_keys": bool(info.has_keys), "shards": shards}


def merge_topk(parts, k, metric):
    """Merges per-shard answers into the global top-k. parts: a list of (scores, rows)
    pairs, each (nq, k_i) with *global* rows (-1 for padding, which is dropped).
    metric: "cosine", "dot" or "l2". Returns (scores, rows) shaped
    (nq, min(k, columns of all parts)) as Index.search does (it returns
    min(k, rows) columns); a part's -1 rows, if any, leave rows -1 and scores
    -inf (+inf for l2) at the end."""
    k = operator.index(k)
    l2 = metric == "l2"
    worst = np.float32(np.inf if l2 else -np.inf)
    if not parts:
        raise ValueError("merge_topk needs at least one part")
    nq = parts[0][0].shape[0]
    s = np.concatenate([np.asarray(p[0], dtype=np.float32) for p in parts], axis=1)
    r = np.concatenate([np.asarray(p[1], dtype=np.int64) for p in parts], axis=1)
    width = min(k, s.shape[1])
    out_s = np.full((nq, width), worst, dtype=np.float32)
    out_r = np.full((nq, width), -1, dtype=np.int64)
    for q in range(nq):
        keep = r[q] >= 0
        sq, rq = s[q][keep], r[q][keep]
        nan = np.isnan(sq)
        primary = np.where(nan, np.float32(0), sq if l2 else -sq)
        # lexsort: the last key is the most significant: NaN last, then score, then row.
        order = np.lexsort((rq, primary, nan))[:width]
        out_s[q, :len(order)] = sq[order]
        out_r[q, :len(order)] = rq[order]
    return out_s, out_r


class Shards:
    """The shards of a manifest, each loaded once (lodestar.load, checksum verified and
    compared with the manifest's) and kept until close(). search() sends the whole query
    batch to every shard in turn and merges. Not for use from several threads at once
    during close(); search itself only reads."""

    def __init__(self, manifest, **load_options):
        self.manifest = read_manifest(manifest, timeout=load_options.get("timeout"))
        self._indexes = []
        loaded = {}  # a location named by several entries is loaded once (MF17)
        try:
            for i, s in enumerate(self.manifest["shards"]):
                index = loaded.get(s["path"])
                if index is None:
                    index = loaded[s["path"]] = load(s["path"], **load_options)
                self._indexes.append(index)
                _check_shard(self.manifest, i, index)
        except BaseException:
            self._indexes = list(loaded.values())
            self.close()
            raise

    @property
    def rows(self):
        return self.manifest["rows"]

    def search(self, queries, k=10, *, threads=None):
        """As Index.search on the unsplit index: (scores, rows), rows global."""
        parts = []
        for s, index in zip(self.manifest["shards"], self._indexes):
            sc, r = index.search(queries, k, threads=threads)
            parts.append((sc, np.where(r >= 0, r + s["first_row"], -1)))
        return merge_topk(parts, k, self.manifest["metric"])

    def row(self, key):
        """The global row of `key` (the lowest if keys repeat), asking every shard (a
        row-ordered split routes keys by no rule). KeyError if no shard has it;
        lodestar.UnsupportedError if the shards have no keys."""
        _need_keys(self.manifest)
        for s, index in zip(self.manifest["shards"], self._indexes):
            if key in index:
                return s["first_row"] + index.row(key)
        raise KeyError(key)

    def vector(self, key_or_row):
        """One row as a new float32 array (dim,), by key (str) or global row (int), from
        the shard holding it (IndexError for a row out of range)."""
        row = self.row(key_or_row) if isinstance(key_or_row, str) else key_or_row
        i, local = shard_of_row(self.manifest, row)
        return self._indexes[i].vector(local)

    def close(self):
        for index in self._indexes:
            index.close()
        self._indexes = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the names Index has (issue 28): repr, most_similar, shards[key]

    def __repr__(self):
        return _describe(self, "lodestar.Shards", "" if self._indexes else " (closed)")

    def __len__(self):
        return self.rows

    @property
    def dim(self):
        return self.manifest["dim"]

    @property
    def metric(self):
        return self.manifest["metric"]

    def key(self, row):
        """The key of global `row`, from the shard holding it; None without keys."""
        i, local = shard_of_row(self.manifest, row)
        return self._indexes[i].key(local)

    most_similar = Index.most_similar
    __getitem__ = Index.__getitem__
    _most_similar_one = Index._most_similar_one
    _row_of = Index._row_of

    def _named(self, pairs):
        return named_rows(self, pairs)

    def _cosines(self, query):
        return all_cosines(self, query)


def _describe(shards, name, tail):
    m = shards.manifest
    return "<%s %d x %d %s %s in %d shards%s>" % (name, m["rows"], m["dim"], m["dtype"],
                                                  m["metric"], len(m["shards"]), tail)


def named_rows(shards, pairs):
    """[(key, score)] of [(global row, score)]: rows stand in for keys without keys."""
    if not shards.manifest["has_keys"]:
        return pairs
    return [(shards.key(r), s) for r, s in pairs]


def all_cosines(shards, query):
    """The cosine similarity of every global row to `query`, float32 (rows,), from one
    search of all rows (most_similar with topn=None)."""
    scores, rows = shards.search(np.asarray(query, dtype=np.float32), shards.rows)
    out = np.full(shards.rows, np.nan, dtype=np.float32)
    out[rows[0][rows[0] >= 0]] = scores[0][rows[0] >= 0]
    return out


def shard_of_row(manifest, row):
    """(shard number, row within it) of global `row`; IndexError out of range."""
    r = operator.index(row)
    if not 0 <= r < manifest["rows"]:
        raise IndexError("row %d out of range (the shards hold %d rows)" % (r, manifest["rows"]))
    firsts = [s["first_row"] for s in manifest["shards"]]
    i = bisect.bisect_right(firsts, r) - 1
    while manifest["shards"][i]["rows"] == 0:   # shards of no rows share a first_row
        i -= 1
    return i, r - firsts[i]


def _need_keys(manifest):
    if not manifest["has_keys"]:
        raise UnsupportedError("the shards have no keys (manifest has_keys is false)")


def _check_shard(manifest, i, index):
    """Raises lodestar.FormatError naming shards[i] where the loaded shard differs."""
    _check_against(manifest, i, manifest["shards"][i], index)


def _check_against(manifest, i, s, index):
    """As _check_shard with shard entry `s` given (manifest: a dict with dim, dtype,
    metric, has_ids and has_keys): lds_manifest_check_index, the check `lodestar verify`
    makes (checksum verified and equal, rows, dim, dtype, metric, ids and keys presence,
    payload_bytes). Raises the lodestar.Error subclass naming shards[i]."""
    lib = _capi.library()
    info = _capi.ManifestInfo()
    lib.lds_manifest_info_init(ctypes.byref(info))
    dtype, metric = ctypes.c_int(), ctypes.c_int()
    check(lib.lds_dtype_from_name(manifest["dtype"].encode(), ctypes.byref(dtype)))
    check(lib.lds_metric_from_name(manifest["metric"].encode(), ctypes.byref(metric)))
    info.version, info.dim, info.rows = 1, manifest["dim"], 0
    info.dtype, info.metric = dtype.value, metric.value
    info.has_ids, info.has_keys = manifest["has_ids"], manifest["has_keys"]
    sh = _capi.ManifestShard()
    lib.lds_manifest_shard_init(ctypes.byref(sh))
    sh.file = s["file"].encode()
    sh.first_row, sh.rows, sh.checksum = s["first_row"], s["rows"], s["checksum"]
    pb = s.get("payload_bytes")
    sh.payload_bytes = _capi.MANIFEST_NO_PAYLOAD_BYTES if pb is None else pb
    err = _capi.new_error()
    _check(index._get(lambda h: lib.lds_manifest_check_index(
        ctypes.byref(info), ctypes.byref(sh), i, h, ctypes.byref(err))), err)


def open_shards(manifest, **load_options):
    """Shards(manifest, **load_options): every shard loaded (options as lodestar.load)."""
    return Shards(manifest, **load_options)


def search_shards(manifest, queries, k=10, *, threads=None, **load_options):
    """Loads every shard of `manifest`, searches `queries` (as Index.search) on each and
    returns the merged exact global top-k (scores, rows); the shards are closed after."""
    with Shards(manifest, **load_options) as shards:
        return shards.search(queries, k, threads=threads)
