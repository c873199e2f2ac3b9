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
