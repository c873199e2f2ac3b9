"""A split index searched by Dask workers: each shard loaded once on one worker and kept
there (a worker-local cache, never shipped back), every query batch sent to every shard,
the per-shard top-k merged on the client into the exact global top-k.

    from distributed import Client
    import lodestar.dask
    with Client(cluster) as client:
        with lodestar.dask.DaskShards(client, "out/manifest.json") as shards:
            scores, rows = shards.search(queries, k=10)   # as the unsplit index's search

Needs Debian python3-distributed (import fails without it). Shard i is placed on the
i-th worker in address order, round robin; its tasks are pinned there
(allow_other_workers=False). A worker that lost its cache (restarted) loads the shard
again on the next search. A failed shard task is raised as lodestar.Error naming the
shard (shards[i] and its file) and its worker; no partial answer is returned.
"""
import os
import threading
import uuid

import distributed

from ._errors import Error
from ._index import load
from ._shard import merge_topk, read_manifest, _check_shard

__all__ = ["DaskShards", "worker_loads"]

# ---- on the worker: the shards it holds, by (token, shard number)

_cache = {}
_cache_lock = threading.Lock()
_loads = []   # (token, shard number) of every load this process did, for tests and stats


def _shard(token, i, manifest_path):
    key = (token, i)
    with _cache_lock:
        index = _cache.get(key)
        if index is None:
            manifest = read_manifest(manifest_path)
            index = load(manifest["shards"][i]["path"])
            try:
                _check_shard(manifest, i, index)
            except BaseException:
                index.close()
                raise
            _cache[key] = index
            _loads.append(key)
        return index


def _load_task(token, i, manifest_path):
    return _shard(token, i, manifest_path).rows


def _search_task(token, i, manifest_path, first_row, queries, k, threads):
    import numpy as np
    scores, rows = _shard(token, i, manifest_path).search(queries, k, threads=threads)
    return scores, np.where(rows >= 0, rows + first_row, -1)


def _drop_task(token):
    with _cache_lock:
        for key in [key for key in _cache if key[0] == token]:
            _cache.pop(key).close()


def _loads_task():
    return list(_loads)


# ---- on the client


class DaskShards:
    """The shards of `manifest` (a path every worker can read) held by the workers of
    `client`, loaded at construction. search() is exact (see lodestar.merge_topk).
    timeout: seconds to wait for the workers' answers before raising lodestar.Error."""

    def __init__(self, client, manifest, *, timeout=60):
        self.client = client
        self.manifest_path = os.path.abspath(os.fspath(manifest))
        self.manifest = read_manifest(self.manifest_path)
        self.timeout = timeout
        self.token = uuid.uuid4().hex
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise Error("the Dask cluster has no workers")
        self.placement = [workers[i % len(workers)]
                          for i in range(len(self.manifest["shards"]))]
        futures = [client.submit(_load_task, self.token, i, self.manifest_path,
                                 workers=[w], allow_other_workers=False, pure=False)
                   for i, w in enumerate(self.placement)]
        self._gather(futures)

    def _gather(self, futures):
        results = []
        try:
            for i, f in enumerate(futures):
                try:
                    results.append(f.result(timeout=self.timeout))
                except Exception as e:
                    s = self.manifest["shards"][i]
                    raise Error("shards[%d] (%s) on worker %s: %s: %s"
                                % (i, s["file"], self.placement[i], type(e).__name__, e),
                                field="shards[%d]" % i) from e
        finally:
            for f in futures:
                f.release()
        return results

    def search(self, queries, k=10, *, threads=None):
        """As Index.search on the unsplit index: (scores, rows), rows global."""
        import numpy as np
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        if q.ndim == 1:
            q = q[np.newaxis, :]
        [qf] = self.client.scatter([q], broadcast=True, hash=False)
        futures = [self.client.submit(_search_task, self.token, i, self.manifest_path,
                                      s["first_row"], qf, k, threads, workers=[w],
                                      allow_other_workers=False, pure=False)
                   for i, (s, w) in enumerate(zip(self.manifest["shards"], self.placement))]
        try:
            parts = self._gather(futures)
        finally:
            qf.release()
        return merge_topk(parts, k, self.manifest["metric"])

    def close(self):
        """Closes the shards on every worker."""
        if self.token:
            self.client.run(_drop_task, self.token)
            self.token = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def worker_loads(client):
    """{worker address: [(token, shard number), ...]}: every shard load each worker did."""
    return client.run(_loads_task)
