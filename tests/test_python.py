#!/usr/bin/env python3
"""Tests of the ctypes binding python/lodestar.py.

usage: test_python.py LIBLODESTAR PYTHON_DIR

Loads LIBLODESTAR (the built liblodestar.so) through the binding in PYTHON_DIR.
Skips (exit 77) under LDS_SANITIZE, since a sanitizer-built library cannot be
loaded into an uninstrumented python, and when numpy is missing. Prints one line
per test and "N passed, N failed, N skipped"; exits 0 only if no test failed.
"""

import gc
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests  # noqa: E402

if os.environ.get("LDS_SANITIZE"):
    print("skipped: LDS_SANITIZE is set (a sanitizer-built library cannot load into python)")
    sys.exit(77)
try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not installed")
    sys.exit(77)

os.environ["LODESTAR_LIB"] = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.abspath(sys.argv[2]))
import lodestar  # noqa: E402

WORK = tempfile.mkdtemp(prefix="lodestar-test-python-")
VECTORS = np.array([[1, 0, 0, 0], [0.8, 0.6, 0, 0], [0, 0, 0, 1]], dtype=np.float32)
KEYS = ["king", "queen", "apple"]


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc as e:
        return e
    raise AssertionError(f"{fn.__name__}{args} did not raise {exc.__name__}")


def index_path(name="tiny.ldsi", keys=KEYS):
    path = os.path.join(WORK, name)
    if not os.path.exists(path):
        lodestar.write_index(path, VECTORS, keys=keys, meta={"model": "tiny"})
    return path


def test_docstring_example_works():
    # The module docstring's pattern: the view outlives the block.
    with lodestar.load(index_path()) as idx:
        v = idx.vectors
        check((idx.rows, idx.dim, idx.key(0)) == (3, 4, "king"), (idx.rows, idx.dim))
    check(idx.closed, "closed on leaving the block")
    raises(ValueError, lambda: idx.rows)
    check(v.shape == (3, 4) and v[1].tolist() == [0.800000011920929, 0.6000000238418579, 0, 0],
          v)
    check(idx._h is not None, "the memory stays while the view lives")
    row = v[1]  # a derived array keeps the memory too
    del v
    gc.collect()
    check(idx._h is not None and float(row[0]) == np.float32(0.8), "still viewed through row")
    del row
    gc.collect()
    check(idx._h is None, "freed when the last view went")


def test_exit_without_views_frees_at_once():
    with lodestar.load(index_path()) as idx:
        check(idx.key(1) == "queen", idx.key(1))
    check(idx._h is None and idx.closed, "freed at once")


def test_close_refuses_while_viewed():
    idx = lodestar.load(index_path())
    v = idx.vectors
    raises(RuntimeError, idx.close)
    check(not idx.closed, "still open")
    del v
    gc.collect()
    idx.close()
    check(idx.closed, "closed")
    idx.close()  # twice is fine


def test_row_arguments_are_checked():
    with lodestar.load(index_path()) as idx:
        for bad in (3, 2**64, 2**64 + 1, -1, -(2**63)):
            e = raises(IndexError, idx.key, bad)
            check("out of range" in str(e) and "3 rows" in str(e), e)
        raises(TypeError, idx.key, 1.0)
        raises(TypeError, idx.key, "1")
        check(idx.key(np.uint64(2)) == "apple", "numpy integers are fine")


def test_errors_carry_a_message():
    missing = os.path.join(WORK, "missing.ldsi")
    e = raises(lodestar.Error, lodestar.load, missing)
    check(e.status == "E_IO" and "No such file" in str(e), e)
    # A status with no detail from the library still says what it means.
    err = lodestar._new_error()
    e = lodestar.Error("E_INVALID_ARG", err, 2)
    check(str(e).startswith("E_INVALID_ARG: ") and len(str(e)) > len("E_INVALID_ARG: "), str(e))


def test_embedded_nul_is_refused():
    path = index_path()
    e = raises(ValueError, lodestar.load, path + "\0ignored")
    check("NUL" in str(e), e)
    raises(ValueError, lodestar.load, os.fsencode(path) + b"\0x")
    with lodestar.load(path) as idx:
        check(idx.meta("model") == "tiny", idx.meta("model"))
        raises(ValueError, idx.meta, "model\0x")
    out = os.path.join(WORK, "nul.ldsi")
    raises(ValueError, lodestar.write_index, out, VECTORS, KEYS, "cosine", {"model": "a\0b"})
    raises(ValueError, lodestar.write_index, out, VECTORS, KEYS, "cosine", {"mo\0del": "a"})
    raises(ValueError, lodestar.write_index, out + "\0x", VECTORS)
    check(not os.path.exists(out), "nothing written")


def test_index_without_keys():
    with lodestar.load(index_path("nokeys.ldsi", keys=None)) as idx:
        check(idx.key(0) is None, "no key")
        raises(IndexError, idx.key, 3)


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
