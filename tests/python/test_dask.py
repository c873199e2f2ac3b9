"""lodestar.dask on a real distributed.LocalCluster: 2 worker processes on 127.0.0.1,
started and stopped here. Skipped without Debian python3-distributed."""
import os
import subprocess

import numpy as np
import pytest

import lodestar

distributed = pytest.importorskip("distributed")
import lodestar.dask  # noqa: E402

pytestmark = pytest.mark.dask

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def client():
    # The worker processes import lodestar as this one does.
    os.environ.setdefault("PYTHONPATH", os.path.join(HERE, os.pardir, os.pardir, "python"))
    os.environ["LODESTAR_LIB"] = os.path.abspath(os.environ["LODESTAR_LIB"])
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       protocol="tcp://")
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_dask_search_equals_the_unsplit_index(tmp_path, cli, client, metric):
    rng = np.random.default_rng(21)
    v = rng.standard_normal((61, 10)).astype(np.float32)
    v[50] = v[4]   # a tie across shards
    path = str(tmp_path / "whole.ldsi")
    lodestar.write(path, v, metric=metric, dtype="f16")
    outdir = tmp_path / "s"
    subprocess.run([cli, "split", path, str(outdir), "--shards", "5"], check=True,
                   stdout=subprocess.PIPE)
    man = str(outdir / "manifest.json")
    q = rng.standard_normal((7, 10)).astype(np.float32)
    q[0] = v[4]
    with lodestar.load(path) as whole, lodestar.dask.DaskShards(client, man) as shards:
        assert len(set(shards.placement)) == 2   # both workers hold shards
        for k in (1, 4, 13, 70):                 # 13 > every shard's rows, 70 > all rows
            want_s, want_r = whole.search(q, k)
            got_s, got_r = shards.search(q, k)
            assert np.array_equal(got_r, want_r), k
            assert np.array_equal(got_s, want_s), k
        # each shard was loaded exactly once, on the worker it was placed on
        loads = lodestar.dask.worker_loads(client)
        mine = {w: sorted(i for t, i in ks if t == shards.token) for w, ks in loads.items()}
        want = {w: sorted(i for i, p in enumerate(shards.placement) if p == w)
                for w in loads}
        assert mine == want
        token = shards.token
    # closed: the workers hold none of its shards any more
    held = client.run(lambda: [key for key in lodestar.dask._cache if key[0] == token])
    assert all(v == [] for v in held.values())


def test_dask_shard_failure_names_the_shard(tmp_path, cli, client, tiny):
    outdir = tmp_path / "s"
    subprocess.run([cli, "split", tiny, str(outdir), "--shards", "2"], check=True,
                   stdout=subprocess.PIPE)
    shard = outdir / "shard-0001.ldsi"
    data = bytearray(shard.read_bytes())
    data[66] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(lodestar.Error) as e:
        lodestar.dask.DaskShards(client, str(outdir / "manifest.json"), timeout=30)
    assert e.value.field == "shards[1]" and "shard-0001.ldsi" in str(e.value)
