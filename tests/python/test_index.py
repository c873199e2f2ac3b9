"""Index attributes and lookups, exact against numpy and against the C library."""
import json
import subprocess

import numpy as np
import pytest

import lodestar
from conftest import KEYS, VECTORS


def test_attributes(tiny):
    with lodestar.load(tiny) as index:
        assert (index.rows, len(index), index.dim) == (4, 4, 4)
        assert (index.dtype, index.metric, index.normalized) == ("f32", "cosine", False)
        assert index.i8_scale is None
        assert index.metadata == {"metric": "cosine", "normalized": "false", "model": "tiny"}
        assert index.meta("model") == "tiny" and index.meta("absent") is None
        assert index.checksum_verified and index.info["checksum_verified"]
        assert index.info["payload_bytes"] + 64 == index.info["stream_bytes"]
        assert repr(index) == "<lodestar.Index 4 x 4 f32 cosine>"


def test_keys_sequence_and_lookups(tiny):
    with lodestar.load(tiny) as index:
        keys = index.keys
        assert len(keys) == 4 and list(keys) == KEYS
        assert keys[-1] == "prince" and keys[1:3] == ["queen", "apple"]
        assert "queen" in keys and "queen" in index and "Queen" not in index
        assert 1 not in index  # only str keys are looked up
        assert [index.row(k) for k in KEYS] == [0, 1, 2, 3]
        with pytest.raises(KeyError):
            index.row("pear")
        with pytest.raises(TypeError):
            index.row(1)
        assert index.key(np.uint64(2)) == "apple"
        for bad in (4, 2**64, -1):
            with pytest.raises(IndexError, match="out of range.*4 rows"):
                index.key(bad)
        with pytest.raises(TypeError):
            index.key(1.0)
        assert index.ids.dtype == np.dtype("<u8")


def test_vector_matches_the_c_program(tiny, cli):
    with lodestar.load(tiny) as index:
        for key in KEYS:
            got = json.loads(subprocess.run([cli, "get", "--json", tiny, key], check=True,
                                            stdout=subprocess.PIPE).stdout)
            v = index.vector(key)
            assert v.dtype == np.float32
            assert v.tolist() == np.array(got["vector"], dtype=np.float32).tolist()
            assert index.vector(got["row"]).tolist() == v.tolist()


def test_without_keys_or_ids(tmp_path):
    path = str(tmp_path / "bare.ldsi")
    lodestar.write(path, VECTORS)
    with lodestar.load(path) as index:
        assert index.keys is None and index.ids is None and index.key(0) is None
        assert "king" not in index
        with pytest.raises(lodestar.UnsupportedError):
            index.row("king")
        assert index.most_similar(VECTORS[0], k=2) == [(0, 1.0), (1, pytest.approx(0.8))]


def _bf16_round(x):
    """float32 -> bfloat16 bits, round to nearest, ties to even (finite values)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i8"])
def test_every_dtype_as_float32_exactly(tmp_path, dtype):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (37, 9)).astype(np.float64)  # float64 input is converted
    path = str(tmp_path / ("%s.ldsi" % dtype))
    scale = 1 / 100 if dtype == "i8" else None
    lodestar.write(path, x, dtype=dtype, metric="dot", i8_scale=scale)
    x32 = x.astype(np.float32)
    stored = {"f32": lambda: x32, "f16": lambda: x32.astype(np.float16),
              "bf16": lambda: _bf16_round(x32),
              "i8": lambda: np.rint(x32 / np.float32(scale)).astype(np.int8)}[dtype]()
    widened = {"f32": lambda: x32, "f16": lambda: stored.astype(np.float32),
               "bf16": lambda: (stored.astype(np.uint32) << 16).view(np.float32),
               "i8": lambda: stored.astype(np.float32) * np.float32(scale)}[dtype]()
    with lodestar.load(path) as index:
        assert index.dtype == dtype and index.metric == "dot"
        v = index.vectors
        assert v.dtype == stored.dtype and np.array_equal(v, stored)
        f = index.as_float32()
        assert f.dtype == np.float32 and f.shape == (37, 9)
        assert np.array_equal(f, widened)
        # and exactly what the library's own conversion (lds_index_row_f32) gives
        c = np.stack([index.vector(r) for r in range(index.rows)])
        assert np.array_equal(f, c)
        if dtype == "i8":
            assert index.i8_scale == np.float32(scale)
        del v, f
