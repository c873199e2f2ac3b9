"""lodestar.write through the C writer: values, options, refusals, atomic replace."""
import os

import numpy as np
import pytest

import lodestar
from conftest import KEYS, VECTORS


def test_round_trip_with_everything(tmp_path):
    path = tmp_path / "all.ldsi"  # os.PathLike
    ids = np.array([7, 2**64 - 1, 0, 12345678901234], dtype=np.uint64)
    lodestar.write(path, VECTORS.astype(np.float64), keys=KEYS, ids=ids, metric="dot",
                   metadata={"model": "m", "source": "ü"})
    with lodestar.load(path) as index:
        assert np.array_equal(index.vectors, VECTORS)
        assert index.ids.tolist() == ids.tolist() and list(index.keys) == KEYS
        assert index.metric == "dot" and not index.normalized
        assert index.metadata == {"metric": "dot", "normalized": "false", "model": "m",
                                  "source": "ü"}


def test_normalize(tmp_path):
    path = str(tmp_path / "n.ldsi")
    x = np.array([[3.0, 4.0], [0.0, -2.0]])
    lodestar.write(path, x, normalize=True)
    with lodestar.load(path) as index:
        assert index.normalized
        want = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
        np.testing.assert_array_max_ulp(index.vectors, want, maxulp=1)
    with pytest.raises(lodestar.BadValueError, match="row 1"):
        lodestar.write(path, [[1.0, 0.0], [0.0, 0.0]], normalize=True)


def test_duplicate_keys_are_refused_naming_the_row(tmp_path):
    path = str(tmp_path / "dup.ldsi")
    with pytest.raises(lodestar.DuplicateKeyError) as e:
        lodestar.write(path, np.ones((3, 2)), keys=["a", "b", "a"])
    assert "row 2" in str(e.value) and isinstance(e.value, ValueError)
    assert not os.path.exists(path) and os.listdir(tmp_path) == []  # no temporary file left


def test_a_failed_write_leaves_the_old_index(tmp_path, tiny):
    path = str(tmp_path / "keep.ldsi")
    lodestar.write(path, VECTORS, keys=KEYS)
    before = open(path, "rb").read()
    bad = VECTORS.copy()
    bad[2, 1] = np.nan
    with pytest.raises(lodestar.BadValueError) as e:
        lodestar.write(path, bad, keys=KEYS)
    assert "row 2" in str(e.value)
    assert open(path, "rb").read() == before and os.listdir(tmp_path) == ["keep.ldsi"]
    lodestar.write(path, VECTORS[:2])  # a successful write replaces it
    with lodestar.load(path) as index:
        assert index.rows == 2 and index.keys is None


def test_values_a_dtype_cannot_hold(tmp_path):
    path = str(tmp_path / "x.ldsi")
    with pytest.raises(lodestar.BadValueError, match="i8_scale"):
        lodestar.write(path, [[2.0]], dtype="i8")  # beyond 127 / 127
    lodestar.write(path, [[2.0]], dtype="i8", i8_scale=2 / 127)
    with lodestar.load(path) as index:
        assert index.as_float32().tolist() == [[np.float32(127) * np.float32(2 / 127)]]
    with pytest.raises(lodestar.BadValueError, match="range of f16") as e:
        lodestar.write(path, [[70000.0]], dtype="f16")
    assert e.value.field == "dtype"
    with pytest.raises(lodestar.BadValueError):
        lodestar.write(path, [[1e300]])  # float64 beyond float32 becomes inf


def test_bad_arguments(tmp_path):
    path = str(tmp_path / "x.ldsi")
    v = np.ones((2, 3))
    for kwargs, exc in [
        (dict(dtype="f64"), ValueError), (dict(metric="cos"), ValueError),
        (dict(dtype=4), TypeError), (dict(i8_scale=0.5), ValueError),
        (dict(keys=["a"]), ValueError), (dict(keys="ab"), TypeError),
        (dict(keys=["a", 2]), TypeError), (dict(ids=[1]), ValueError),
        (dict(ids=[1, -1]), ValueError), (dict(ids=[1.0, 2.0]), TypeError),
        (dict(metadata={"k": "a\0b"}), ValueError), (dict(metadata={"k": 1}), TypeError),
    ]:
        with pytest.raises(exc):
            lodestar.write(path, v, **kwargs)
    with pytest.raises(ValueError):
        lodestar.write(path, np.ones(3))
    with pytest.raises(TypeError):
        lodestar.write(path, np.array([["a"]]))
    with pytest.raises(ValueError, match="NUL"):
        lodestar.write(path + "\0x", v)
    with pytest.raises(lodestar.InvalidArgumentError):
        lodestar.write(path, v, metadata={"metric": "l2"})  # written from the options
    with pytest.raises(lodestar.InvalidArgumentError):
        lodestar.write(str(tmp_path), v)  # a directory
    assert not os.path.exists(path)


def test_layout(tmp_path):
    """write(layout=): "chunks" writes format 1.2 (sections and key bytes on chunk
    boundaries, docs/format.md 4.4), "packed" 1.1, "auto" 1.1 for an index this small
    (its vectors fill fewer than 256 chunks); each loads to the same rows and keys."""
    import struct
    v = np.arange(40 * 8, dtype=np.float32).reshape(40, 8)
    keys = ["k%d" % i for i in range(40)]
    got = {}
    for layout in ("chunks", "packed", "auto"):
        p = str(tmp_path / ("%s.ldsi" % layout))
        lodestar.write(p, v, keys=keys, ids=list(range(40)), chunk_bytes=1024, layout=layout)
        with open(p, "rb") as f:
            got[layout] = struct.unpack_from("<HI", f.read(16), 10)
        with lodestar.load(p) as index:
            assert np.array_equal(index.vectors, v)
            assert list(index.keys) == keys and index.ids.tolist() == list(range(40))
    assert got == {"chunks": (2, 3), "packed": (1, 1), "auto": (1, 1)}
    # no chunk table: packed whatever was asked
    p = str(tmp_path / "plain.ldsi")
    lodestar.write(p, v, chunk_bytes=0, layout="chunks")
    with open(p, "rb") as f:
        assert struct.unpack_from("<HI", f.read(16), 10) == (0, 0)
    with pytest.raises(ValueError, match="layout"):
        lodestar.write(str(tmp_path / "bad.ldsi"), v, layout="tight")
