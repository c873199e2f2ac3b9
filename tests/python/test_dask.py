"""lodestar.dask on a real distributed.LocalCluster: 2 worker processes on 127.0.0.1,
started and stopped here. Skipped without Debian python3-distributed."""
import functools
import http.server
import os
import signal
import subprocess
import threading
import time

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
        mine = {w: sorted(i for t, i, e in ks if t == shards.token) for w, ks in loads.items()}
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


def test_dask_checks_shards_as_verify_does(tmp_path, cli, client, tiny):
    # The workers compared checksum, rows, dim, metric and dtype only: a manifest whose
    # has_keys or payload_bytes disagree with the shards was served (lds_manifest_check_index).
    import json
    outdir = tmp_path / "s"
    subprocess.run([cli, "split", tiny, str(outdir), "--shards", "2"], check=True,
                   stdout=subprocess.PIPE)
    man = outdir / "manifest.json"
    good = json.loads(man.read_text())
    for edit, words in (
            (lambda d: d.update(has_keys=False), "keys presence differs from the manifest's"),
            (lambda d: d["shards"][1].update(payload_bytes=d["shards"][1]["payload_bytes"] + 64),
             "shards[1] (shard-0001.ldsi): payload_bytes differs from the manifest's")):
        bad = json.loads(json.dumps(good))
        edit(bad)
        man.write_text(json.dumps(bad))
        with pytest.raises(lodestar.Error) as e:   # the worker's BadValueError, named
            lodestar.dask.DaskShards(client, str(man), timeout=30)
        assert e.value.field.startswith("shards[") and words in str(e.value), str(e.value)


def split(cli, src, outdir, *opts):
    subprocess.run([cli, "split", src, str(outdir), *opts], check=True, stdout=subprocess.PIPE)
    return str(outdir / "manifest.json")


def test_dask_key_routing(tmp_path, cli, client, random_index):
    path, v, keys = random_index
    man = split(cli, path, tmp_path / "s", "--shards", "3")
    with lodestar.load(path) as whole, lodestar.dask.DaskShards(client, man) as shards, \
            lodestar.open_shards(man) as local:
        for key in ("w0", "w166", "w167", "w333", "w334", "w499"):  # both ends of shards
            want = whole.row(key)
            assert shards.row(key) == want == local.row(key) == int(key[1:])
            assert np.array_equal(shards.vector(key), whole.vector(key))
            assert np.array_equal(local.vector(key), whole.vector(key))
            assert np.array_equal(shards.vector(want), whole.vector(want))
        with pytest.raises(KeyError):
            shards.row("w500")
        with pytest.raises(KeyError):
            local.row("absent")
        with pytest.raises(IndexError):
            shards.vector(500)
    plain = str(tmp_path / "nokeys.ldsi")
    lodestar.write(plain, v[:20])
    man = split(cli, plain, tmp_path / "n", "--shards", "2")
    with lodestar.dask.DaskShards(client, man) as shards:
        with pytest.raises(lodestar.UnsupportedError):
            shards.row("w1")
        assert np.array_equal(shards.vector(13), v[13])


def _on_worker(client, worker, fn):
    """Runs fn() in `worker`'s process (fn is a closure: pickled by value)."""
    client.run(fn, workers=[worker])


def test_dask_rolling_reload_under_query_load(tmp_path, cli, client):
    rng = np.random.default_rng(5)
    old_v = rng.standard_normal((90, 12)).astype(np.float32)
    new_v = rng.standard_normal((77, 12)).astype(np.float32)
    old_path, new_path = str(tmp_path / "old.ldsi"), str(tmp_path / "new.ldsi")
    lodestar.write(old_path, old_v, metric="dot")
    lodestar.write(new_path, new_v, metric="dot", dtype="f16")
    old_man = split(cli, old_path, tmp_path / "old", "--shards", "3")
    new_man = split(cli, new_path, tmp_path / "new", "--max-rows", "30")  # other ranges
    q = rng.standard_normal((4, 12)).astype(np.float32)
    with lodestar.load(old_path) as o, lodestar.load(new_path) as n:
        want = {0: o.search(q, 7), 1: n.search(q, 7)}

    def slow_loads():   # each shard's load takes 0.4 s longer, so the roll takes > 1 s
        import time as t
        import lodestar.dask as d
        orig = d._prepare_on
        d._prepare_on = lambda *a: (t.sleep(0.4), orig(*a))[1]

    client.run(slow_loads)
    answers, stop, errors = [], threading.Event(), []

    def load():
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                s, r, e = shards.search(q, 7, with_epoch=True)
                answers.append((t0, time.monotonic(), s, r, e))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    with lodestar.dask.DaskShards(client, old_man) as shards:
        readers = [threading.Thread(target=load) for _ in range(2)]
        for t in readers:
            t.start()
        time.sleep(0.3)
        start = time.monotonic()
        assert shards.reload(new_man) == 1
        end = time.monotonic()
        time.sleep(0.3)
        stop.set()
        for t in readers:
            t.join()
        assert not errors, errors
        assert end - start > 1.0
        during = [a for a in answers if a[0] > start and a[1] < end]
        assert len(during) >= 3, (len(during), end - start)   # answered while rolling
        for t0, t1, s, r, e in answers:
            # every answer is one epoch's answer, entirely: never a mix of shards
            assert np.array_equal(r, want[e][1]) and np.array_equal(s, want[e][0]), e
            if t0 > end:
                assert e == 1
        assert all(e == 0 for _, t1, _, _, e in answers if t1 < start)
        assert {e for *_, e in answers} == {0, 1}
        # the old generations were released on the workers: only epoch 1 is held
        token = shards.token
        held = client.run(lambda: sorted({e for (t, i), st in lodestar.dask._cache.items()
                                          if t == token for e in st.gens}))
        assert all(h == [1] for h in held.values()), held

    def fast_loads():
        import importlib
        import lodestar.dask as d
        d._prepare_on = importlib.reload(d)._prepare_on

    client.run(fast_loads)


def test_dask_reload_failure_keeps_the_old_epoch(tmp_path, cli, client, random_index):
    path, v, keys = random_index
    old_man = split(cli, path, tmp_path / "old", "--shards", "3")
    new_man = split(cli, path, tmp_path / "new", "--shards", "3")
    shard = tmp_path / "new" / "shard-0002.ldsi"
    data = bytearray(shard.read_bytes())
    data[70] ^= 1
    shard.write_bytes(bytes(data))
    q = v[:3]
    with lodestar.load(path) as whole, lodestar.dask.DaskShards(client, old_man) as shards:
        with pytest.raises(lodestar.Error) as e:
            shards.reload(new_man)
        assert e.value.field == "shards[2]" and "shard-0002.ldsi" in str(e.value)
        s, r, epoch = shards.search(q, 5, with_epoch=True)
        assert epoch == 0 and np.array_equal(r, whole.search(q, 5)[1])
        few = split(cli, path, tmp_path / "two", "--shards", "2")
        with pytest.raises(lodestar.Error, match="2 shards, the serving manifest has 3"):
            shards.reload(few)
        # nothing of the failed roll is held: only epoch 0
        token = shards.token
        held = client.run(lambda: sorted({e for (t, i), st in lodestar.dask._cache.items()
                                          if t == token for e in st.gens}))
        assert all(h in ([0], []) for h in held.values()), held


def test_dask_worker_killed_mid_query(tmp_path, cli, client, random_index):
    path, v, keys = random_index
    man = split(cli, path, tmp_path / "s", "--shards", "4")
    q = v[10:14]
    with lodestar.load(path) as whole, \
            lodestar.dask.DaskShards(client, man, timeout=30, poll=0.1) as shards:
        want = whole.search(q, 6)
        victim = shards.placement[1]
        pid = client.run(os.getpid, workers=[victim])[victim]

        def stall():   # the victim's shard searches now take a minute
            import time as t
            import lodestar.dask as d
            orig = d._search_on
            d._search_on = lambda *a: (t.sleep(60), orig(*a))[1]

        _on_worker(client, victim, stall)
        threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with pytest.raises(lodestar.Error) as e:
            shards.search(q, 6)
        elapsed = time.monotonic() - t0
        assert 0.9 < elapsed < 10, elapsed             # killed at 1 s, noticed soon after
        assert e.value.field in ("shards[1]", "shards[3]"), e.value   # the victim's shards
        assert victim in str(e.value) and "left the cluster" in str(e.value)
        client.wait_for_workers(2, timeout=60)          # the nanny restarted it
        got = shards.search(q, 6)                       # the victim's shards loaded again
        assert np.array_equal(got[1], want[1]) and np.array_equal(got[0], want[0])
        assert shards.replaced == 2 and victim not in shards.placement
        assert np.array_equal(shards.vector("w7"), v[7])


def test_dask_shards_over_http(tmp_path, cli, client, random_index):
    if not lodestar.library().lds_url_supported():
        pytest.skip("built without libcurl (lds_load_url)")
    path, v, keys = random_index
    outdir = tmp_path / "served"
    split(cli, path, outdir, "--max-rows", "200")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(outdir))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/manifest.json" % server.server_address[1]
    try:
        q = v[[3, 250, 499]]
        with lodestar.load(path) as whole, lodestar.dask.DaskShards(client, url) as shards:
            assert [s["path"] for s in shards.manifest["shards"]] == [
                url.replace("manifest.json", "shard-%04d.ldsi" % i) for i in range(3)]
            want = whole.search(q, 9)
            got = shards.search(q, 9)
            assert np.array_equal(got[1], want[1]) and np.array_equal(got[0], want[0])
            local = lodestar.search_shards(url, q, 9)
            assert np.array_equal(local[1], want[1])
            assert shards.row("w321") == 321
    finally:
        server.shutdown()
        server.server_close()


def test_dask_shards_have_the_names_index_has(tmp_path, cli, client, random_index):
    """repr, most_similar and shards[key] of DaskShards answer as the unsplit index."""
    path, v, keys = random_index
    outdir = tmp_path / "s"
    subprocess.run([cli, "split", path, str(outdir), "--shards", "3"], check=True,
                   stdout=subprocess.PIPE)
    man = str(outdir / "manifest.json")
    with lodestar.load(path) as whole, lodestar.dask.DaskShards(client, man) as shards:
        assert repr(shards) == ("<lodestar.dask.DaskShards 500 x 24 f32 cosine in 3 shards "
                                "on 2 workers, epoch 0>")
        for pos, neg in ((["w1", "w2"], ["w3"]), ("w7", None)):
            ours, theirs = shards.most_similar(pos, neg, topn=6), whole.most_similar(pos, neg,
                                                                                     topn=6)
            assert [k for k, _ in ours] == [k for k, _ in theirs]
            np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-6)
        assert np.array_equal(shards["w400"], v[400]) and np.array_equal(shards[3], v[3])
        assert np.array_equal(shards[["w1", 499]], v[[1, 499]])
        assert shards.key(250) == "w250"
