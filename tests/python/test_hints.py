"""Errors that say what to do: lodestar.load of a file that is not an index names what it
is (lds_import_sniff) and how to convert it; Live().pin() before any load says to load."""
import gzip
import io
import lzma
import zipfile

import numpy as np
import pytest

import lodestar
from lodestar._index import sniff

from conftest import VECTORS


@pytest.fixture()
def foreign(tmp_path):
    files = {}
    np.save(tmp_path / "a.npy", VECTORS)
    files["npy"] = tmp_path / "a.npy"
    np.savez(tmp_path / "a.npz", x=VECTORS)
    files["npz"] = tmp_path / "a.npz"
    files["glove"] = tmp_path / "glove.txt"
    files["glove"].write_text("king 1 0 0 0\nqueen 0.8 0.6 0 0\n")
    files["w2v"] = tmp_path / "w.vec"
    files["w2v"].write_text("2 4\nking 1 0 0 0\nqueen 0.8 0.6 0 0\n")
    files["gz"] = tmp_path / "g.txt.gz"
    files["gz"].write_bytes(gzip.compress(b"king 1 0 0 0\n" * 10))
    files["xz"] = tmp_path / "g.txt.xz"
    files["xz"].write_bytes(lzma.compress(b"king 1 0 0 0\n" * 10))
    files["hdf5"] = tmp_path / "a.hdf5"
    files["hdf5"].write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(120))
    return files


def test_load_names_the_kind_and_the_command(foreign):
    want = {
        "npy": ("an .npy file", "`lodestar pack %s a.ldsi` or, from Python, "
                "lodestar.write('a.ldsi', numpy.load('%s'))"),
        "npz": ("a zip file (.npz)", "`lodestar pack --format npz %s a.ldsi`"),
        "glove": ("a GloVe text file", "`lodestar pack %s glove.ldsi`"),
        "w2v": ("a word2vec text file", "`lodestar pack %s w.ldsi`"),
        "gz": ("a gzip-compressed file", "`lodestar pack %s g.ldsi` (pack reads through"),
        "xz": ("an xz-compressed file", "`lodestar pack %s g.ldsi`"),
        "hdf5": ("an HDF5 file", "`lodestar pack --format hdf5 %s a.ldsi`"),
    }
    for name, (kind, cmd) in want.items():
        path = str(foreign[name])
        with pytest.raises((lodestar.BadMagicError, lodestar.TruncatedError)) as e:
            lodestar.load(path)
        msg = str(e.value)
        assert "%r is %s, not a lodestar index: convert it with " % (path, kind) in msg, msg
        assert cmd.replace("%s", path) in msg, msg
        assert e.value.field == "header.magic" or e.value.status == "E_TRUNCATED"
    with pytest.raises(lodestar.BadMagicError, match="the source is an .npy file"):
        lodestar.load(foreign["npy"].read_bytes())


def test_load_of_a_manifest_points_to_shards(tmp_path, tiny):
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{\n  "format": "lodestar-shards",\n  "rows": 4,\n  "dim": 4,\n'
                        '  "shards": []\n}\n')
    with pytest.raises(lodestar.BadMagicError) as e:
        lodestar.load(str(manifest))
    assert "lodestar.search_shards(%r, queries, k=10)" % str(manifest) in str(e.value)
    with pytest.raises(lodestar.BadMagicError) as e:  # a file of no known kind: as before
        lodestar.load(io.BytesIO(b"\x00\x01" * 40))
    assert "is a" not in str(e.value).split("(at byte")[-1]


def test_sniff_kinds():
    assert sniff(b"\x93NUMPY\x01\x00") == ("an .npy file", "npy")
    assert sniff(b"\x28\xb5\x2f\xfd\x00") == ("a zstd-compressed file", None)
    assert sniff(b"2 3\n") == ("a word2vec text file", "word2vec")
    assert sniff(b"the 0.1 -2e-3 4\n") == ("a GloVe text file", "glove")
    assert sniff(b"the 0.1 -0.2 0.3")[0] == "a GloVe text file"  # cut off: complete tokens
    assert sniff(b"hello world\n") == (None, None)
    assert sniff(b"") == (None, None)
    assert sniff(b"\x89LDS\r\n\x1a\n") == ("a lodestar index", None)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("x.npy", b"")
    assert sniff(zbuf.getvalue()[:64]) == ("a zip file (.npz)", "npz")


def test_pin_before_any_load_says_what_to_do():
    with lodestar.Live() as live:
        with pytest.raises(lodestar.StateError, match=r"call live.reload\(source\) first"):
            live.pin()
