"""Sharded indexes: a manifest written by `lodestar split`, its shards loaded, searched
one by one and their per-shard top-k merged into the exact global top-k.

    with lodestar.open_shards("out/manifest.json") as shards:
        scores, rows = shards.search(queries, k=10)     # global rows, as the unsplit index
        shards.row("king"), shards.vector("king")       # through the shard holding the key

A manifest is a local path or an http:// or https:// URL (read with urllib, at most
64 MiB); a shard's "file" is a name beside the manifest (so a split directory served
over HTTP is loaded from there) or an http(s) URL of its own, loaded with lds_load_url.

The merge ranks as lds_index_search does on one index: best score first (for l2 the
smallest distance), equal scores by global row, rows whose score is NaN last (by row).
A shard's row r is global row first_row + r; each shard's top-k holds every row of the
global top-k that lives in that shard, so the merge of the shards' top-k is exact.
"""
import bisect
import json
import operator
import os
import urllib.parse
import urllib.request

import numpy as np

from ._errors import FormatError, UnsupportedError
from ._index import Index, load

__all__ = ["read_manifest", "merge_topk", "open_shards", "search_shards", "Shards"]

MANIFEST_FORMAT = "lodestar-shards"
MANIFEST_MAX_BYTES = 64 << 20  # as cli/split.c's verify


def _is_url(text):
    return isinstance(text, str) and text.lower().startswith(("http://", "https://"))


def _read_text(path):
    """The manifest's text from a path or a URL, refusing more than MANIFEST_MAX_BYTES."""
    if _is_url(path):
        with urllib.request.urlopen(path, timeout=60) as r:
            data = r.read(MANIFEST_MAX_BYTES + 1)
    else:
        with open(path, "rb") as f:
            data = f.read(MANIFEST_MAX_BYTES + 1)
    if len(data) > MANIFEST_MAX_BYTES:
        raise _bad(path, "manifest", "more than %d bytes: not a manifest" % MANIFEST_MAX_BYTES)
    return data.decode("utf-8")


def _bad(path, field, what):
    return FormatError("%s: %s: %s" % (path, field, what), field=field)


def _u64(path, obj, field, name):
    v = obj.get(name) if isinstance(obj, dict) else None
    if type(v) is not int or v < 0:
        raise _bad(path, field, "missing or not a non-negative integer")
    return v


def read_manifest(path):
    """Reads and checks a manifest (a path or an http(s) URL): returns a dict with
    "rows", "dim", "dtype", "metric", "has_ids", "has_keys" and "shards", a list of dicts
    with "path" (the shard's file resolved beside the manifest, or its URL: what
    lodestar.load takes), "file", "first_row", "rows" and "checksum" (int).
    The row ranges must follow each other from 0 to "rows" with no overlap and no gap.
    Raises lodestar.FormatError naming the field (e.g. shards[1].first_row), OSError if
    the file cannot be read, ValueError if it is not JSON."""
    path = os.fspath(path)
    m = json.loads(_read_text(path))
    if not isinstance(m, dict) or m.get("format") != MANIFEST_FORMAT:
        raise _bad(path, "format", "expected %r" % MANIFEST_FORMAT)
    total = _u64(path, m, "rows", "rows")
    dim = _u64(path, m, "dim", "dim")
    for name, kind in (("dtype", str), ("metric", str), ("has_ids", bool),
                       ("has_keys", bool), ("shards", list)):
        if not isinstance(m.get(name), kind):
            raise _bad(path, name, "missing or not a %s" % kind.__name__)
    if not m["shards"]:
        raise _bad(path, "shards", "empty")
    url = _is_url(path)
    base = path if url else os.path.dirname(path)
    shards, nxt = [], 0
    for i, s in enumerate(m["shards"]):
        field = "shards[%d]" % i
        first = _u64(path, s, field + ".first_row", "first_row")
        rows = _u64(path, s, field + ".rows", "rows")
        f = s.get("file")
        if not isinstance(f, str) or not (
                _is_url(f) or (f and "/" not in f and f not in (".", ".."))):
            raise _bad(path, field + ".file", "neither a file name in the manifest's "
                       "directory nor an http(s) URL")
        try:
            checksum = int(s.get("checksum"), 16)
        except (TypeError, ValueError):
            raise _bad(path, field + ".checksum", "not a hexadecimal checksum") from None
        if first < nxt:
            raise _bad(path, field + ".first_row", "%d overlaps the rows before it" % first)
        if first > nxt:
            raise _bad(path, field + ".first_row", "%d leaves rows %d .. %d in no shard"
                       % (first, nxt, first - 1))
        if rows > total - nxt:
            raise _bad(path, field + ".rows", "%d goes past the manifest's %d rows"
                       % (rows, total))
        nxt = first + rows
        where = f if _is_url(f) else (
            urllib.parse.urljoin(base, urllib.parse.quote(f)) if url else os.path.join(base, f))
        shards.append({"path": where, "file": f, "first_row": first,
                       "rows": rows, "checksum": checksum})
    if nxt != total:
        raise _bad(path, "rows", "%d, but the shards cover %d rows" % (total, nxt))
    return {"rows": total, "dim": dim, "dtype": m["dtype"], "metric": m["metric"],
            "has_ids": m["has_ids"], "has_keys": m["has_keys"], "shards": shards}


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
        self.manifest = read_manifest(manifest)
        self._indexes = []
        try:
            for i, s in enumerate(self.manifest["shards"]):
                index = load(s["path"], **load_options)
                self._indexes.append(index)
                _check_shard(self.manifest, i, index)
        except BaseException:
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
    """As _check_shard with shard entry `s` given (manifest: dim, metric, dtype)."""
    from ._capi import library
    got = index._get(library().lds_index_checksum)
    field = "shards[%d]" % i
    if got != s["checksum"]:
        raise FormatError("%s (%s): checksum %016x, the manifest says %016x"
                          % (field, s["file"], got, s["checksum"]), field=field)
    for name, have, want in (("rows", index.rows, s["rows"]),
                             ("dim", index.dim, manifest["dim"]),
                             ("metric", index.metric, manifest["metric"]),
                             ("dtype", index.dtype, manifest["dtype"])):
        if have != want:
            raise FormatError("%s (%s): %s is %r, the manifest says %r"
                              % (field, s["file"], name, have, want), field=field)


def open_shards(manifest, **load_options):
    """Shards(manifest, **load_options): every shard loaded (options as lodestar.load)."""
    return Shards(manifest, **load_options)


def search_shards(manifest, queries, k=10, *, threads=None, **load_options):
    """Loads every shard of `manifest`, searches `queries` (as Index.search) on each and
    returns the merged exact global top-k (scores, rows); the shards are closed after."""
    with Shards(manifest, **load_options) as shards:
        return shards.search(queries, k, threads=threads)
