"""Shared fixtures of the pytest suite of the Python package (tests/python/).

Run by meson test (tests/python/meson.build sets PYTHONPATH to python/, LODESTAR_LIB to
the built library, LDS_LAYOUT_EXE and LDS_CLI); run by hand, `pytest tests/python` from
a checkout built in build/ finds the same things there.
"""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
BUILD = os.environ.get("LODESTAR_BUILD", os.path.join(ROOT, "build"))
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.setdefault("LODESTAR_LIB", os.path.join(BUILD, "liblodestar.so"))

import lodestar  # noqa: E402

VECTORS = np.array([[1, 0, 0, 0], [0.8, 0.6, 0, 0], [0, 0, 0, 1], [0.6, 0.8, 0, 0]],
                   dtype=np.float32)
KEYS = ["king", "queen", "apple", "prince"]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """A 4 x 4 f32 cosine index with keys, ids 100..103 and metadata model=tiny."""
    path = str(tmp_path_factory.mktemp("tiny") / "tiny.ldsi")
    lodestar.write(path, VECTORS, keys=KEYS, ids=[100, 101, 102, 103],
                   metadata={"model": "tiny"})
    return path


@pytest.fixture(scope="session")
def random_index(tmp_path_factory):
    """(path, vectors, keys): 500 random rows x 24 dims, f32 cosine, keys w0..w499."""
    rng = np.random.default_rng(13)
    v = rng.standard_normal((500, 24)).astype(np.float32)
    keys = ["w%d" % i for i in range(len(v))]
    path = str(tmp_path_factory.mktemp("random") / "random.ldsi")
    lodestar.write(path, v, keys=keys)
    return path, v, keys


@pytest.fixture(scope="session")
def cli():
    """The lodestar program of the build (C API end to end), or skip."""
    path = os.environ.get("LDS_CLI", os.path.join(BUILD, "cli", "lodestar"))
    if not os.access(path, os.X_OK):
        pytest.skip("no lodestar program at %s" % path)
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the install from a fresh clone (meson suite slow)")
    config.addinivalue_line("markers", "dask: a distributed.LocalCluster (meson test python-dask)")
    config.addinivalue_line("markers", "torch: imports torch (meson test python-torch)")


@pytest.fixture(scope="session")
def glove_sample(tmp_path_factory, cli):
    """(index path, GloVe text path) of the shipped sample data/glove-100d-20k.txt.zst
    (20,000 x 100): the text decompressed with the `zstd` program, the index packed by the
    build's `lodestar pack`; skip without either."""
    import shutil
    import subprocess
    src = os.path.join(ROOT, "data", "glove-100d-20k.txt.zst")
    zstd = shutil.which("zstd")
    if not os.path.exists(src) or zstd is None:
        pytest.skip("no shipped sample or no zstd program")
    d = tmp_path_factory.mktemp("glove")
    text, index = str(d / "glove.txt"), str(d / "glove.ldsi")
    with open(text, "wb") as out:
        subprocess.run([zstd, "-dc", src], stdout=out, check=True)
    subprocess.run([cli, "pack", "--format", "glove", text, index],
                   check=True, capture_output=True)
    return index, text
