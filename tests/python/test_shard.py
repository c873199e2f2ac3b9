"""Sharded search (lodestar split + lodestar.search_shards) equals the unsplit index."""
import json
import os
import subprocess

import numpy as np
import pytest

import lodestar


def _split(cli, path, outdir, shards):
    subprocess.run([cli, "split", path, str(outdir), "--shards", str(shards)], check=True,
                   stdout=subprocess.PIPE)
    return os.path.join(str(outdir), "manifest.json")


def _data(rows, dim, seed):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((rows, dim)).astype(np.float32)
    v[7] = v[3]          # equal rows in different shards: ties broken by global row
    v[40] = v[3]
    v[12] = v[2]
    return v


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i8"])
@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_sharded_search_equals_the_unsplit_index(tmp_path, cli, metric, dtype):
    v = _data(53, 12, 5)
    if dtype == "i8":
        v = np.clip(v / 4, -1, 1)
    path = str(tmp_path / "whole.ldsi")
    lodestar.write(path, v, keys=["w%d" % i for i in range(len(v))], metric=metric,
                   dtype=dtype, metadata={"model": "m"})
    q = np.random.default_rng(6).standard_normal((9, 12)).astype(np.float32)
    q[0] = v[3]
    with lodestar.load(path) as whole:
        for shards in (1, 4, 7):
            man = _split(cli, path, tmp_path / ("s%d" % shards), shards)
            for k in (1, 5, 9, 60):   # 9 > the rows of every shard of 7; 60 > all rows
                want_s, want_r = whole.search(q, k)
                got_s, got_r = lodestar.search_shards(man, q, k)
                assert np.array_equal(got_r, want_r), (shards, k)
                assert np.array_equal(got_s, want_s), (shards, k)  # bit for bit, inf too
    # the tie: v[3], v[7], v[40] score alike and come out in global row order
    with lodestar.open_shards(man) as sh:
        _, r = sh.search(v[3], 3)
    assert list(r[0]) == [3, 7, 40]


def test_merge_puts_nan_last_and_breaks_ties_by_row():
    nan = np.float32("nan")
    a = (np.array([[0.9, 0.5, nan]], np.float32), np.array([[10, 11, 12]]))
    b = (np.array([[0.9, nan, -1]], np.float32), np.array([[2, 3, -1]]))
    s, r = lodestar.merge_topk([a, b], 6, "dot")
    assert list(r[0]) == [2, 10, 11, 3, 12, -1]
    assert s[0, 0] == np.float32(0.9) and np.isnan(s[0, 3]) and s[0, 5] == -np.inf
    s, r = lodestar.merge_topk([a, b], 3, "l2")
    assert list(r[0]) == [11, 2, 10]


def test_manifest_with_bad_ranges_is_refused_naming_the_field(tmp_path, cli, tiny):
    man = _split(cli, tiny, tmp_path / "s", 2)
    with open(man) as f:
        good = json.load(f)
    for i, key, value, field in ((1, "first_row", 1, "shards[1].first_row"),
                                 (1, "first_row", 3, "shards[1].first_row"),
                                 (1, "rows", 9, "shards[1].rows"),
                                 (0, "checksum", "zz", "shards[0].checksum")):
        bad = json.loads(json.dumps(good))
        bad["shards"][i][key] = value
        with open(man, "w") as f:
            json.dump(bad, f)
        with pytest.raises(lodestar.FormatError) as e:
            lodestar.read_manifest(man)
        assert e.value.field == field and field in str(e.value)
    bad = json.loads(json.dumps(good))
    bad["shards"][0]["checksum"] = "%016x" % (int(good["shards"][0]["checksum"], 16) ^ 1)
    with open(man, "w") as f:
        json.dump(bad, f)
    with pytest.raises(lodestar.FormatError) as e:
        lodestar.open_shards(man)
    assert e.value.field == "shards[0].checksum" and "shard-0000.ldsi" in str(e.value)


def test_manifest_shard_files_are_names_or_urls(tmp_path, cli, tiny):
    man = _split(cli, tiny, tmp_path / "s", 2)
    with open(man) as f:
        good = json.load(f)
    for name in ("sub/shard.ldsi", "..", "", "ftp://h/x", "/abs/x"):
        bad = json.loads(json.dumps(good))
        bad["shards"][1]["file"] = name
        with open(man, "w") as f:
            json.dump(bad, f)
        with pytest.raises(lodestar.FormatError) as e:
            lodestar.read_manifest(man)
        assert e.value.field == "shards[1].file", name
    good["shards"][1]["file"] = "https://example.invalid/b/shard%201.ldsi"
    with open(man, "w") as f:
        json.dump(good, f)
    got = lodestar.read_manifest(man)["shards"]
    assert got[0]["path"] == str(tmp_path / "s" / "shard-0000.ldsi")
    assert got[1]["path"] == "https://example.invalid/b/shard%201.ldsi"
    with open(man, "wb") as f:
        f.truncate((64 << 20) + 1)
    with pytest.raises(lodestar.LimitError, match="more than the manifest limit"):
        lodestar.read_manifest(man)


def test_local_shards_route_keys_and_rows(tmp_path, cli, random_index):
    path, v, keys = random_index
    man = _split(cli, path, tmp_path / "s", 7)
    with lodestar.load(path) as whole, lodestar.open_shards(man) as shards:
        for row in (0, 71, 72, 73, 499):
            assert shards.row(keys[row]) == row
            assert np.array_equal(shards.vector(row), whole.vector(row))
            assert np.array_equal(shards.vector(keys[row]), v[row])
        with pytest.raises(KeyError):
            shards.row("nope")
        with pytest.raises(IndexError):
            shards.vector(-1)
