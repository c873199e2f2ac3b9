"""numpy and torch: np.asarray(index), shape, iteration, and DLPack (Index.__dlpack__)
sharing the payload without a copy and keeping the index alive until the consumer's
deleter runs. torch is Debian's python3-torch (skipped where it is not installed)."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import lodestar
from lodestar import _dlpack

from conftest import KEYS, VECTORS


def test_numpy_view_shape_and_rows(tiny):
    with lodestar.load(tiny) as ix:
        a = np.asarray(ix)
        assert a.shape == ix.shape == (4, 4) and a.dtype == np.float32
        assert a.ctypes.data == ix.vectors.ctypes.data and not a.flags.writeable
        assert np.array_equal(a, VECTORS)
        assert np.asarray(ix, dtype=np.float64).dtype == np.float64
        rows = list(ix)
        assert len(rows) == 4 and all(np.array_equal(r, v) for r, v in zip(rows, VECTORS))
        assert not rows[0].flags.writeable
        del a, rows


def _capsule_name(cap):
    f = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi))
    return f(cap)


def test_capsule_versions_and_refusals(tiny):
    with lodestar.load(tiny) as ix:
        assert ix.__dlpack_device__() == (1, 0)
        before = _dlpack.exported()
        cap = ix.__dlpack__()
        assert _capsule_name(cap) == b"dltensor" and _dlpack.exported() == before + 1
        v = ix.__dlpack__(max_version=(1, 0))
        assert _capsule_name(v) == b"dltensor_versioned"
        pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
            ("PyCapsule_GetPointer", ctypes.pythonapi))
        m = _dlpack._ManagedVersioned.from_address(pointer(v, b"dltensor_versioned"))
        assert m.flags & _dlpack.READ_ONLY and (m.version.major, m.version.minor) == (1, 0)
        assert m.dl_tensor.data == ix.vectors.ctypes.data and m.dl_tensor.ndim == 2
        assert [m.dl_tensor.shape[0], m.dl_tensor.shape[1]] == [4, 4]
        del cap, v, m  # never consumed: the capsules' destructors call the deleters
        gc.collect()
        assert _dlpack.exported() == before
        with pytest.raises(BufferError):
            ix.__dlpack__(copy=True)
        with pytest.raises(BufferError):
            ix.__dlpack__(dl_device=(2, 0))


def test_numpy_from_dlpack_shares_the_payload(tiny):
    ix = lodestar.load(tiny)
    a = np.from_dlpack(ix)
    assert a.ctypes.data == ix.vectors.ctypes.data and np.array_equal(a, VECTORS)
    with pytest.raises(RuntimeError, match="DLPack"):
        ix.close()  # the tensor still views the payload
    ref = weakref.ref(ix)
    ix.__exit__(None, None, None)
    del ix
    gc.collect()
    assert ref() is not None and np.array_equal(a, VECTORS)  # alive until the deleter
    del a
    gc.collect()
    assert ref() is None


@pytest.mark.torch
def test_torch_from_dlpack_zero_copy(tmp_path):
    torch = pytest.importorskip("torch", reason="Debian's python3-torch is not installed")
    rng = np.random.default_rng(3)
    v = rng.uniform(-1, 1, (64, 8)).astype(np.float32)  # within i8's default range
    for dtype, tdtype in (("f32", torch.float32), ("f16", torch.float16),
                          ("bf16", torch.bfloat16), ("i8", torch.int8)):
        path = str(tmp_path / ("%s.ldsi" % dtype))
        lodestar.write(path, v, keys=["k%d" % i for i in range(64)], dtype=dtype)
        ix = lodestar.load(path)
        t = torch.from_dlpack(ix)
        assert t.dtype == tdtype and tuple(t.shape) == (64, 8) and t.device.type == "cpu"
        assert t.data_ptr() == ix.vectors.ctypes.data  # the payload itself, no copy
        assert np.array_equal(t.float().numpy(), ix.vectors.astype(np.float32)
                              if dtype != "bf16" else ix.as_float32())
        ref = weakref.ref(ix)
        with ix:
            pass  # closed for the caller; the tensor keeps the payload
        del ix
        gc.collect()
        assert ref() is not None
        first = t[0].float().clone()
        del t
        gc.collect()
        assert ref() is None  # the deleter ran: the index is freed
        assert first.shape == (8,)


def test_keys_survive(tiny):
    with lodestar.load(tiny) as ix:
        assert [ix.index_to_key[i] for i in range(4)] == KEYS
