"""A split index searched by Dask workers: each shard held by one worker in a live index
(lodestar.Live, never shipped back), every query batch sent to every shard, the
per-shard top-k merged on the client into the exact global top-k.

    from distributed import Client
    import lodestar.dask
    with Client(cluster) as client:
        with lodestar.dask.DaskShards(client, "out/manifest.json") as shards:
            scores, rows = shards.search(queries, k=10)   # as the unsplit index's search
            shards.row("king"), shards.vector("king")     # through the shard holding it
            shards.reload("new/manifest.json")            # shard by shard, serving

Needs Debian python3-distributed (import fails without it). Shard i is placed on the
i-th worker in address order, round robin; its tasks are pinned there
(allow_other_workers=False). A manifest is a path every worker can read or an http(s)
URL (see lodestar.read_manifest).

Consistency (docs/adr/0024): every answer is computed at one *epoch*: all shards of the
manifest loaded at construction (epoch 0) or all shards of the manifest of the last
completed reload(), never a mix. reload() loads the new manifest's shards one by one
into their workers' live indexes while the old epoch keeps answering, then switches
the client to the new epoch at once, then releases the old generations; a query whose
task reaches a worker after its epoch was released is re-run once at the new epoch.
The price: from the moment a worker has loaded its new shard until the switch, it holds
both generations of that shard (at the end of a roll, old and new of every shard).

Failure: a worker that leaves the cluster (killed, lost) while it holds a shard of a
query is noticed within `poll` seconds and raised as lodestar.Error naming the shard
(shards[i] and its file) and the worker; a shard task that fails, likewise; nothing is
answered past `timeout` seconds; no partial answer is returned. The next call places
that worker's shards on the workers present then, where they are loaded again (the
nanny of a LocalCluster restarts a killed worker at a new address).
"""
import os
import threading
import time
import uuid

import distributed
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from ._errors import Error, StateError
from ._live import Live
from ._shard import _check_against, _need_keys, read_manifest, shard_of_row

__all__ = ["DaskShards", "EpochGone", "worker_loads"]


class EpochGone(Error):
    """A worker no longer holds the epoch a task asked for (a reload released it)."""


# ---- on the worker: the shards it holds, by (token, shard number)


class _Generation:
    """One shard at one epoch: a pinned Index of the shard's live index."""

    def __init__(self, index, first_row):
        self.index = index
        self.first_row = first_row
        self.users = 0        # tasks using it now
        self.retired = False  # closed when the last user leaves


class _ShardState:
    def __init__(self):
        self.live = Live()
        self.gens = {}     # epoch -> _Generation
        self.floor = 0     # epochs below it were released here
        self.load_lock = threading.Lock()


_cache = {}   # (token, shard number) -> _ShardState
_cache_lock = threading.Lock()
_loads = []   # (token, shard number, epoch) of every load this process did


def _state(token, i):
    with _cache_lock:
        st = _cache.get((token, i))
        if st is None:
            st = _cache[(token, i)] = _ShardState()
        return st


def _load_into(st, token, i, epoch, desc):
    """Loads desc's shard as `epoch` into st's live index and pins it (st.load_lock held)."""
    st.live.reload(desc["shard"]["path"])
    index = st.live.pin()
    try:
        _check_against(desc, desc["i"], desc["shard"], index)
    except BaseException:
        index.close()
        raise
    with _cache_lock:
        st.gens[epoch] = _Generation(index, desc["shard"]["first_row"])
        _loads.append((token, i, epoch))


def _acquire(token, i, epoch, desc):
    """The generation of shard i at `epoch`, its user count raised; loads it if this
    worker does not hold it (a fresh or restarted worker). EpochGone if released."""
    st = _state(token, i)
    while True:
        with _cache_lock:
            g = st.gens.get(epoch)
            if g is not None and not g.retired:
                g.users += 1
                return g
            if epoch < st.floor:
                raise EpochGone("shards[%d]: epoch %d was released by a reload" % (i, epoch))
        with st.load_lock:
            with _cache_lock:
                loaded = epoch in st.gens
            if not loaded:
                _load_into(st, token, i, epoch, desc)


def _release(g):
    with _cache_lock:
        g.users -= 1
        close = g.retired and g.users == 0
    if close:
        g.index.__exit__(None, None, None)  # frees after its last call


def _retire_locked(st, epoch):
    """Marks st's generation `epoch` retired; returns it if nobody uses it (to close)."""
    g = st.gens.pop(epoch, None)
    if g is None:
        return None
    g.retired = True
    return g if g.users == 0 else None


def _search_on(g, queries, k, threads):
    """The shard's own top-k, rows made global. (A function of its own so that tests
    can slow it down on one worker.)"""
    import numpy as np
    scores, rows = g.index.search(queries, k, threads=threads)
    return scores, np.where(rows >= 0, rows + g.first_row, -1)


def _search_task(token, i, epoch, desc, queries, k, threads):
    g = _acquire(token, i, epoch, desc)
    try:
        return _search_on(g, queries, k, threads)
    finally:
        _release(g)


def _load_task(token, i, epoch, desc):
    g = _acquire(token, i, epoch, desc)
    _release(g)
    return g.index.rows


def _row_task(token, i, epoch, desc, key):
    """Global row of `key` in shard i, or None."""
    g = _acquire(token, i, epoch, desc)
    try:
        return g.first_row + g.index.row(key) if key in g.index else None
    finally:
        _release(g)


def _vector_task(token, i, epoch, desc, local_row):
    g = _acquire(token, i, epoch, desc)
    try:
        return g.index.vector(local_row)
    finally:
        _release(g)


def _key_vector_task(token, i, epoch, desc, key):
    """(global row, vector) of `key` in shard i, or None: one round, one epoch."""
    g = _acquire(token, i, epoch, desc)
    try:
        if key not in g.index:
            return None
        r = g.index.row(key)
        return g.first_row + r, g.index.vector(r)
    finally:
        _release(g)


def _prepare_on(st, token, i, epoch, desc):
    """Loads the new epoch's shard (a function of its own for the tests' delays)."""
    with st.load_lock:
        with _cache_lock:
            if epoch in st.gens:
                return
        _load_into(st, token, i, epoch, desc)


def _prepare_task(token, i, epoch, desc):
    # Leave the worker's thread pool, so that searches queued behind this load run on.
    distributed.secede()
    st = _state(token, i)
    _prepare_on(st, token, i, epoch, desc)
    return st.live.generation


def _retire_task(token, keep):
    """Releases every epoch of `token`'s shards on this worker but `keep`."""
    close = []
    with _cache_lock:
        for key, st in _cache.items():
            if key[0] != token:
                continue
            st.floor = max(st.floor, keep)
            for e in [e for e in st.gens if e != keep]:
                g = _retire_locked(st, e)
                if g is not None:
                    close.append(g)
    for g in close:
        g.index.__exit__(None, None, None)  # frees after its last call


def _abort_task(token, epoch):
    """Drops a reload's epoch that will not be switched to."""
    close = []
    with _cache_lock:
        for key, st in _cache.items():
            if key[0] == token:
                g = _retire_locked(st, epoch)
                if g is not None:
                    close.append(g)
    for g in close:
        g.index.__exit__(None, None, None)  # frees after its last call


def _drop_task(token):
    with _cache_lock:
        states = [_cache.pop(key) for key in [key for key in _cache if key[0] == token]]
    for st in states:
        for g in st.gens.values():
            g.index.__exit__(None, None, None)  # frees after its last call
        st.live.__exit__(None, None, None)   # frees after any pin still held


def _loads_task():
    return list(_loads)


class _Job:
    """A task's function and arguments, opaque to dask's graph (which would otherwise
    look into tuples and strings of the arguments for tasks and keys)."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args


def _call(job):
    return job.fn(*job.args)


# ---- on the client


def _descs(manifest):
    return [{"i": i, "shard": s, "dim": manifest["dim"], "metric": manifest["metric"],
             "dtype": manifest["dtype"], "has_ids": manifest["has_ids"],
             "has_keys": manifest["has_keys"]} for i, s in enumerate(manifest["shards"])]


class DaskShards:
    """The shards of `manifest` held by the workers of `client`, loaded at construction.
    search() is exact (see lodestar.merge_topk) and consistent (see the module).
    timeout: seconds to wait for the workers' answers before raising lodestar.Error;
    poll: how often (seconds) a wait checks that the shards' workers are still there.
    search, row, vector and reload may be called from several client threads at once;
    a second reload while one runs is refused (lodestar.StateError)."""

    def __init__(self, client, manifest, *, timeout=60, poll=0.25):
        self.client = client
        self.timeout = timeout
        self.poll = poll
        m = os.fspath(manifest)
        self.manifest_path = m if m.lower().startswith(("http://", "https://", "s3://")) \
            else os.path.abspath(m)
        self.manifest = read_manifest(self.manifest_path)
        self.epoch = 0
        self._descs = _descs(self.manifest)
        self._lock = threading.Lock()          # epoch, manifest, placement
        self._reloading = threading.Lock()
        self.token = uuid.uuid4().hex
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise Error("the Dask cluster has no workers")
        self.placement = [workers[i % len(workers)]
                          for i in range(len(self.manifest["shards"]))]
        self.replaced = 0   # shards placed again after their worker left
        self.reruns = 0     # calls re-run because a reload released their epoch
        self._gather([(i, w, _load_task, (self.token, i, 0, d))
                      for i, (w, d) in enumerate(zip(self.placement, self._descs))])

    # ---- tasks, placement, failure

    def _place(self):
        """Moves the shards of workers that left to the workers present (fewest first)."""
        workers = sorted(self.client.scheduler_info()["workers"])
        if not workers:
            raise Error("the Dask cluster has no workers")
        with self._lock:
            held = {w: 0 for w in workers}
            for w in self.placement:
                if w in held:
                    held[w] += 1
            for i, w in enumerate(self.placement):
                if w not in held:
                    to = min(workers, key=lambda x: (held[x], x))
                    held[to] += 1
                    self.placement[i] = to
                    self.replaced += 1
            return list(self.placement)

    def _submit(self, jobs):
        """One graph of one layer per job, each annotated with its worker: one
        update-graph message for all shards. (Client.submit per shard costs the client
        one stack walk and inspect.getsource each, ~3.5 ms here: see
        docs/measurements/compare-sharded.txt.)"""
        layers, deps, keys = {}, {}, []
        tag = uuid.uuid4().hex
        for i, w, fn, args in jobs:
            key = "lodestar-%s-%d-%s" % (fn.__name__.strip("_"), i, tag)
            layers[key] = MaterializedLayer({key: (_call, _Job(fn, args))}, annotations={
                "workers": [w], "allow_other_workers": False})
            deps[key] = set()
            keys.append(key)
        return self.client.get(HighLevelGraph(layers, deps), keys, sync=False)

    def _gather(self, jobs):
        """Runs jobs [(shard, worker, fn, args)] pinned to their workers; returns their
        results in order, or raises lodestar.Error naming the first shard that failed,
        whose worker left, or that did not answer within the timeout."""
        futures = self._submit(jobs)
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                left = deadline - time.monotonic()
                # One wait for all (a failed task counts as finished): the common case
                # is one call; the poll bounds how long a lost worker goes unnoticed.
                try:
                    distributed.wait(futures, timeout=max(0.001, min(self.poll, left)))
                except distributed.TimeoutError:
                    pass
                pending = {f for f in futures if f.status == "pending"}
                for (i, w, fn, args), f in zip(jobs, futures):
                    if f.status == "error":
                        e = f.exception()
                        if isinstance(e, EpochGone):
                            raise e
                        self._fail(i, w, "%s: %s" % (type(e).__name__, e), e)
                if not pending:
                    return self.client.gather(futures)
                present = self.client.scheduler_info()["workers"]
                for (i, w, fn, args), f in zip(jobs, futures):
                    if f in pending and w not in present:
                        self._fail(i, w, "the worker left the cluster (killed or lost) "
                                   "before answering")
                if time.monotonic() >= deadline:
                    i, w = next((i, w) for (i, w, _, _), f in zip(jobs, futures)
                                if f in pending)
                    self._fail(i, w, "no answer within %g s" % self.timeout)
        finally:
            for f in futures:
                f.cancel() if f.status == "pending" else f.release()

    def _fail(self, i, w, what, cause=None):
        s = self.manifest["shards"][i]
        raise Error("shards[%d] (%s) on worker %s: %s" % (i, s["file"], w, what),
                    field="shards[%d]" % i) from cause

    def _at_epoch(self, make):
        """make(epoch, descs, placement) -> jobs; runs them at the current epoch, once
        again at the next if a reload released it meanwhile."""
        for attempt in range(3):
            placement = self._place()
            with self._lock:
                epoch, descs = self.epoch, self._descs
            try:
                return self._gather(make(epoch, descs, placement)), epoch
            except EpochGone:
                with self._lock:
                    self.reruns += 1
                continue
        raise Error("three reloads overtook one query")

    # ---- queries

    def search(self, queries, k=10, *, threads=None, with_epoch=False):
        """As Index.search on the unsplit index: (scores, rows), rows global; with
        with_epoch, (scores, rows, epoch): the epoch every shard answered at (0 for the
        construction's manifest, then one more per completed reload)."""
        import numpy as np
        from ._shard import merge_topk
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        if q.ndim == 1:
            q = q[np.newaxis, :]
        parts, epoch = self._at_epoch(lambda e, descs, place: [
            (i, w, _search_task, (self.token, i, e, d, q, k, threads))
            for i, (w, d) in enumerate(zip(place, descs))])
        scores, rows = merge_topk(parts, k, self.manifest["metric"])  # fixed by reloads
        return (scores, rows, epoch) if with_epoch else (scores, rows)

    def row(self, key):
        """The global row of `key` (the lowest if keys repeat): every shard's worker
        looks it up in its shard, in one round (a row-ordered split routes keys by no
        rule; see docs/adr/0024). KeyError if no shard holds it; lodestar.UnsupportedError
        without keys."""
        _need_keys(self.manifest)
        found, _ = self._at_epoch(lambda e, descs, place: [
            (i, w, _row_task, (self.token, i, e, d, key))
            for i, (w, d) in enumerate(zip(place, descs))])
        rows = [r for r in found if r is not None]
        if not rows:
            raise KeyError(key)
        return min(rows)

    def vector(self, key_or_row):
        """One row as a new float32 array (dim,): by key (str: every shard asked in one
        round, as row(); KeyError if none has it) or by global row (int: the one shard
        whose range holds it, at the epoch the call runs at; IndexError outside)."""
        if isinstance(key_or_row, str):
            key = key_or_row
            _need_keys(self.manifest)
            found, _ = self._at_epoch(lambda e, descs, place: [
                (i, w, _key_vector_task, (self.token, i, e, d, key))
                for i, (w, d) in enumerate(zip(place, descs))])
            found = [f for f in found if f is not None]
            if not found:
                raise KeyError(key)
            return min(found, key=lambda f: f[0])[1]

        def job(e, descs, place):
            shards = [d["shard"] for d in descs]   # this epoch's ranges
            i, local = shard_of_row({"rows": sum(s["rows"] for s in shards),
                                     "shards": shards}, key_or_row)
            return [(i, place[i], _vector_task, (self.token, i, e, descs[i], local))]
        [v], _ = self._at_epoch(job)
        return v

    # ---- the rolling reload

    def reload(self, new_manifest):
        """Replaces every shard by the new manifest's, shard by shard, while searches go
        on at the old epoch; then switches to the new epoch at once (see the module).
        The new manifest must have as many shards and the same dim and metric (row
        counts, first rows, dtype and files may differ). Returns the new epoch. On a
        shard's failure the loaded new shards are dropped, the old epoch keeps serving,
        and lodestar.Error names the shard. lodestar.StateError while another reload of
        this object runs (refused at once)."""
        if not self._reloading.acquire(blocking=False):
            raise StateError("a reload of these shards is running", field="shards.reload")
        try:
            new = read_manifest(new_manifest)
            old = self.manifest
            for name in ("dim", "metric"):
                if new[name] != old[name]:
                    raise Error("%s: %s is %r, the serving shards' is %r"
                                % (new_manifest, name, new[name], old[name]), field=name)
            if len(new["shards"]) != len(old["shards"]):
                raise Error("%s: %d shards, the serving manifest has %d: a rolling reload "
                            "replaces shard by shard" % (new_manifest, len(new["shards"]),
                                                         len(old["shards"])), field="shards")
            epoch = self.epoch + 1
            descs = _descs(new)
            placement = self._place()
            try:
                for i, (w, d) in enumerate(zip(placement, descs)):
                    self._gather([(i, w, _prepare_task, (self.token, i, epoch, d))])
            except BaseException:
                self.client.run(_abort_task, self.token, epoch)
                raise
            with self._lock:
                self.epoch, self.manifest, self._descs = epoch, new, descs
            self.client.run(_retire_task, self.token, epoch)
            return epoch
        finally:
            self._reloading.release()

    def close(self):
        """Closes the shards on every worker."""
        if self.token:
            self.client.run(_drop_task, self.token)
            self.token = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the names Index has (issue 28): repr, most_similar, shards[key]

    def __repr__(self):
        from ._shard import _describe
        return _describe(self, "lodestar.dask.DaskShards", " on %d workers, epoch %d%s" % (
            len(set(self.placement)), self.epoch, "" if self.token else " (closed)"))

    @property
    def rows(self):
        return self.manifest["rows"]

    def __len__(self):
        return self.rows

    @property
    def dim(self):
        return self.manifest["dim"]

    @property
    def metric(self):
        return self.manifest["metric"]

    def key(self, row):
        """The key of global `row`, from the worker holding its shard; None without
        keys; IndexError outside."""
        def job(e, descs, place):
            shards = [d["shard"] for d in descs]
            i, local = shard_of_row({"rows": sum(s["rows"] for s in shards),
                                     "shards": shards}, row)
            return [(i, place[i], _key_task, (self.token, i, e, descs[i], local))]
        [k], _ = self._at_epoch(job)
        return k

    from ._index import Index as _Index
    most_similar = _Index.most_similar
    __getitem__ = _Index.__getitem__
    _most_similar_one = _Index._most_similar_one
    _row_of = _Index._row_of
    del _Index

    def _named(self, pairs):
        from ._shard import named_rows
        return named_rows(self, pairs)

    def _cosines(self, query):
        from ._shard import all_cosines
        return all_cosines(self, query)


def _key_task(token, i, epoch, desc, local_row):
    g = _acquire(token, i, epoch, desc)
    try:
        return g.index.key(local_row)
    finally:
        _release(g)


def worker_loads(client):
    """{worker address: [(token, shard number, epoch), ...]}: every shard load each
    worker did."""
    return client.run(_loads_task)
