"""Index.export: the bytes `lodestar export` writes, for every format, and text that packs
back to the same vectors bit for bit."""
import subprocess

import numpy as np
import pytest

import lodestar
from lodestar._export import format_f32

from conftest import KEYS, VECTORS


def test_sample_as_the_program_writes_it(glove_sample, cli, tmp_path):
    # The sample's first 2,000 rows (200,000 numbers; tests/test_format_f32.c covers all).
    with lodestar.load(glove_sample[0]) as whole:
        path = str(tmp_path / "part.ldsi")
        lodestar.write(path, whole.vectors[:2000], keys=list(whole.keys[:2000]))
    with lodestar.load(path) as ix:
        for fmt in ("glove", "word2vec", "npy", "fvecs", "word2vec-bin"):
            ours, theirs = tmp_path / ("py." + fmt), tmp_path / ("cli." + fmt)
            ix.export(ours, format=fmt)
            subprocess.run([cli, "export", "--format", fmt, path, str(theirs)], check=True,
                           capture_output=True)
            assert ours.read_bytes() == theirs.read_bytes(), fmt
        back = str(tmp_path / "back.ldsi")
        subprocess.run([cli, "pack", "--format", "glove", str(tmp_path / "py.glove"), back],
                       check=True, capture_output=True)
        with lodestar.load(back) as again:
            assert np.array_equal(again.vectors.view(np.uint32), ix.vectors.view(np.uint32))
            assert list(again.keys) == list(ix.keys)


def test_spellings_and_round_trip():
    cases = [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf"), (0.0, "0"), (-0.0, "-0"),
             (50.0, "50"), (100.0, "100"), (3e15, "3e+15"), (1e-45, "1e-45"), (0.5, "0.5"),
             (-0.038194, "-0.038194"), (1e-4, "0.0001"), (1.5e-5, "1.5e-05"),
             (123456.0, "123456"), (float(np.finfo(np.float32).max), "3.4028235e+38"),
             (16777216.0, "16777216"), (1e16, "1e+16")]
    for x, want in cases:
        assert format_f32(x) == want
    bits = np.random.default_rng(2).integers(0, 0x7F800000, 20000, dtype=np.uint32)
    for x in bits.view(np.float32):
        assert np.float32(format_f32(x)).view(np.uint32) == x.view(np.uint32)


def test_formats_and_refusals(tiny, tmp_path):
    with lodestar.load(tiny) as ix:
        ix.export(tmp_path / "a.npy")
        assert np.array_equal(np.load(tmp_path / "a.npy"), VECTORS)
        ix.export(tmp_path / "h.npy", dtype="f16", keys_out=tmp_path / "keys.txt")
        assert np.load(tmp_path / "h.npy").dtype == np.float16
        assert (tmp_path / "keys.txt").read_text().split("\n")[:-1] == KEYS
        ix.export(tmp_path / "a.fvecs")
        raw = np.fromfile(tmp_path / "a.fvecs", dtype="<i4").reshape(4, 5)
        assert (raw[:, 0] == 4).all() and np.array_equal(raw[:, 1:].view("<f4"), VECTORS)
        ix.export(tmp_path / "a.txt")
        assert (tmp_path / "a.txt").read_text().split("\n")[1] == "queen 0.8 0.6 0 0"
        with pytest.raises(ValueError, match="npy, fvecs, glove, word2vec, word2vec-bin"):
            ix.export(tmp_path / "a.out", format="foo")
        with pytest.raises(ValueError, match="extension"):
            ix.export(tmp_path / "a.out")
        with pytest.raises(ValueError, match="npy"):
            ix.export(tmp_path / "b.txt", dtype="f16")
    bare = str(tmp_path / "bare.ldsi")
    lodestar.write(bare, VECTORS)
    with lodestar.load(bare) as ix:
        with pytest.raises(ValueError, match="no keys"):
            ix.export(tmp_path / "b.txt")
    tabbed = str(tmp_path / "tab.ldsi")
    lodestar.write(tabbed, VECTORS, keys=["a", "b\tc", "d", "e 1"])
    with lodestar.load(tabbed) as ix:
        with pytest.raises(ValueError, match="row 1.*tab"):
            ix.export(tmp_path / "c.txt")
    assert not list(tmp_path.glob("*.tmp-*"))  # no temporary file left behind
