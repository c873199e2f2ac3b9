"""lodestar: load embedding indexes into numpy without copies, search them, write them.

    import lodestar
    with lodestar.load("glove-100d.ldsi") as index:
        v = index.vectors                      # (rows, dim) numpy view, no copy, read-only
        scores, rows = index.search(v[:2], k=5)   # like faiss: (nq, k) arrays
        print(index.most_similar("king", k=3))    # like gensim: [(key, score), ...]

    live = lodestar.Live("glove-100d.ldsi")      # a service's index, reloaded in place
    with live.pin() as index: ...              # the current generation, never freed while pinned
    live.reload("glove-100d.ldsi")             # swapped in once loaded and verified
    lodestar.search_shards("out/manifest.json", q, k=5)  # `lodestar split`'s shards, merged

The package's own liblodestar is loaded from beside this file (docs/adr/0016).
Loads and searches release the GIL, so threads can share one Index.

The API at a glance (each name's own docstring has the details):

- `lodestar.load(source, *, mmap=False, verify=True, ownership=None, max_payload=None)`:
  `source` is a path, a bytes-like object (the memory path, never pooled; `bytes` are
  borrowed, other buffers copied) or a binary file object (its fd when it has a usable
  one, else `readinto`: the stream path, pooled). `timeout=` (seconds, URLs: the whole
  transfer's deadline, `lodestar.DeadlineError` past it) and `progress=` (a callable of
  bytes done, bytes total) are taken by `load`, `Live.reload` and `write`; Ctrl-C stops any
  of them with `KeyboardInterrupt`, the buffer returned (ADR 0034).
- `Index`: `rows`, `dim`, `dtype` (`"f32"`, `"f16"`, `"bf16"`, `"i8"`), `metric`,
  `normalized`, `metadata` (dict), `info` (how it was loaded), `vectors` (the stored
  elements as a read-only view: float32, float16, int8, or uint16 for bf16),
  `as_float32()` (every dtype as float32, exactly as the C library converts: i8 times
  `i8_scale`, bf16 widened), `keys` (a lazy sequence) and `ids` (a uint64 view), or
  None; `key(row)`, `row(key)`, `key in index`, `vector(key_or_row)`;
  `search(queries, k=10, *, threads=None, pad=False)` returning `(scores, rows)` shaped
  `(nq, min(k, rows))` (a small index gives fewer columns; `pad=True`: faiss's -1 padding);
  `most_similar(positive=None, negative=None, topn=10)` (gensim's; `k=` is topn's old
  name); `export(path, format=None)`; and the peers' names listed at the top.
  `with` closes it, and arrays taken from it keep its memory until they go;
  `close()` frees at once and refuses while an array views it.
- `lodestar.write(path, vectors, *, keys=None, ids=None, dtype="f32", metric="cosine",
  normalize=False, metadata=None, i8_scale=None)`: through the C writer, atomically.
- `lodestar.Live(source=None, *, max_retired=None, max_retained_bytes=None, mmap=False,
  verify=True, ownership=None, max_payload=None)`: the live index (lodestar_live.h).
  `with live.pin() as index:` gives the current generation as an `Index` (with its
  `generation`); it stays pinned, and so is never freed, until it is closed *and* the
  last array taken from it is gone. `live.reload(source)` (sources as `load`'s; bytes
  are copied) swaps a new generation in once it has loaded and verified, and returns
  its number; a failed load raises its error and the current generation keeps
  serving; a reload while another runs raises `StateError`, one while `max_retired`
  retired generations are still pinned raises `LimitError`, both at once, loading
  nothing. `live.stats()` (a dict: generation, reloads done/failed/refused, retired
  generations still pinned, bytes...), `live.generation`, `close()` (refuses while a
  pin is held) or `with` (frees after the last pin). Generations come from a private
  pool without thread caches, as lodestar_live.h advises, retaining by default the
  larger of 256 MiB and (2 + max_retired) times the first source's size class.
- `lodestar.pool_stats()` (a dict), `lodestar.__version__` (the library's, which is
  meson.build's project version).
- Errors: `lodestar.Error` (`status`, `field`, `offset`, `message`, `errno`) with a
  subclass per status: `FormatError` and its `TruncatedError`, `ChecksumError`,
  `BadMagicError`, ...; `IOError` (also an `OSError`), `LimitError`,
  `InvalidArgumentError`, ... Bad arguments raise `TypeError` or `ValueError`.
- Loads, searches (one `lds_index_search_batch` call for all queries), pins and reloads
  release the GIL (ctypes), so threads can share one index.
- Shards written by `lodestar split`: `lodestar.search_shards(manifest, queries, k)`
  loads every shard (checksum compared with the manifest's), searches each and merges
  the per-shard top-k into the global top-k, equal bit for bit to `Index.search` on the
  unsplit index (rows global: a shard's `first_row` plus its own row; ties by global
  row; NaN scores last). `lodestar.open_shards(manifest)` keeps them loaded for many
  searches; `read_manifest` is the library's one manifest reader (`lds_manifest_read`,
  docs/format.md §9): it refuses what `lodestar verify` refuses, with the same message
  (`lodestar.BadValueError`, `VersionError`, `LimitError`...; `.field` such as
  `shards[1].first_row`).
  `Shards.row(key)` and `Shards.vector(key_or_row)` answer through the shard holding it.
  A manifest may be an http(s) URL, fetched by libcurl as `load` fetches one (its
  `user:password` sent as HTTP authentication; its shards then load from beside it over
  HTTP), and a shard's `file` an http(s) URL of its own.
- `lodestar.dask.DaskShards(client, manifest)` (Debian python3-distributed): shard i is
  held in a `lodestar.Live` on the i-th worker (round robin), its tasks pinned there;
  `search(queries, k)` sends the batch to every shard (one graph per query) and merges
  on the client, equal to the unsplit index. `row(key)` asks every shard's worker in one
  round, `vector(key_or_row)` the one shard holding it. `reload(new_manifest)` loads the
  new shards one by one while queries go on, then switches all queries at once: every
  answer is all-old or all-new, never a mix of shards (docs/adr/0024; it costs holding
  both generations of each shard until the switch). A failed shard, or a worker that
  leaves mid-query (noticed within `poll` seconds, 0.25 by default), is a
  `lodestar.Error` naming `shards[i]`, its file and its worker, within `timeout`; the
  next call places that worker's shards on the workers present and loads them there.
  Tested on a `LocalCluster` of 2 worker processes on 127.0.0.1 (meson test
  python-dask): exact equality, a rolling reload under query load, a worker killed
  mid-query, shards over HTTP. Figures: `bench/compare/compare_sharded.py`.

The names numpy, faiss, gensim and torch users know (gensim's scores within 1e-5 of gensim
4.2's on the sample, tests/python/test_gensim.py; faiss's in test_faiss.py):
`ix.most_similar(positive=["king", "woman"], negative=["man"], topn=5)`, `ix["king"]`,
`ix[0]`, `ix[["a", "b"]]`, `len(ix)`, `ix.key_to_index`, `ix.index_to_key`,
`get_vector(key, norm=)`, `similarity`, `n_similarity`, `doesnt_match`, `distances`;
`ntotal`, `d`, `metric_type`, `reconstruct(i)`, `reconstruct_n(i0, n)`,
`search(q, k, pad=True)` (faiss's shape: row -1, score -/+FLT_MAX past the rows);
`np.asarray(ix)` (the read-only view), `shape`, `for row in ix`;
`torch.from_dlpack(ix)` / `np.from_dlpack(ix)`: the tensor **shares the index's immutable
payload** (no copy; never write through it), and the index stays alive until the tensor is
gone. `ix.export("out.txt", format="glove")` writes the bytes `lodestar export` writes.
`Shards` and `DaskShards` have `repr`, `most_similar` and `shards[key]` too. Loading a file
that is not an index says what it is and how to convert it (`lodestar pack ...`).

In a checkout without installing, put `python/` on `PYTHONPATH` and name the built
library with `LODESTAR_LIB=build/liblodestar.so` (an installed package ignores it);
the tests run this way (`meson test -C build python`). Why ctypes and how the
library is found: [docs/adr/0016](docs/adr/0016-python-binding.md).
"""
from ._capi import library, library_path
from ._errors import *  # noqa: F401,F403 (lodestar.Error and its subclasses)
from ._errors import __all__ as _error_names
from ._index import Index, Keys, load
from ._live import Live
from ._shard import Shards, merge_topk, open_shards, read_manifest, search_shards
from ._write import pool_stats, write

__version__ = library().lds_version().decode()

__all__ = ["Index", "Keys", "Live", "load", "write", "pool_stats", "library", "library_path",
           "__version__", "Shards", "open_shards", "search_shards", "read_manifest",
           "merge_topk"] + _error_names
