"""Zero-copy views, their lifetime, and the pool rentals behind them."""
import ctypes
import gc

import numpy as np
import pytest

import lodestar
from conftest import VECTORS


def _base_buffer(arr):
    """The ctypes buffer at the bottom of arr's base chain."""
    b = arr
    while isinstance(b, np.ndarray):
        b = b.base
    return b


def test_vectors_are_a_view_of_the_index_memory(tiny):
    lib = lodestar.library()
    with lodestar.load(tiny) as index:
        v = index.vectors
        w = index.vectors
        assert v.dtype == np.float32 and v.shape == (4, 4)
        assert np.array_equal(v, VECTORS)
        assert not v.flags.writeable and not v.flags.owndata
        assert np.shares_memory(v, w)  # two accesses, one memory
        buf = _base_buffer(v)
        assert isinstance(buf, ctypes.Array) and buf._lodestar_index is index
        assert ctypes.addressof(buf) == lib.lds_index_row(index._h, 0) == v.ctypes.data
        assert index.as_float32() .ctypes.data == v.ctypes.data  # f32: the view itself
        ids = index.ids
        assert ids.tolist() == [100, 101, 102, 103] and not ids.flags.owndata
        assert ids.ctypes.data == lib.lds_index_ids(index._h)
        with pytest.raises(ValueError):
            v[0, 0] = 2.0


def test_pooled_load_rents_once_and_returns_at_close(tiny):
    gc.collect()  # no index of an earlier test may be freed while this one counts
    before = lodestar.pool_stats()
    index = lodestar.load(tiny)
    during = lodestar.pool_stats()
    v = index.vectors
    assert during["rents"] == before["rents"] + 1
    assert during["leases_current"] == before["leases_current"] + 1
    assert index.info["path"] == "pooled" and index.info["ownership"] == "adopt"
    assert lodestar.pool_stats()["rents"] == during["rents"]  # viewing rents nothing
    del v
    gc.collect()
    index.close()
    after = lodestar.pool_stats()
    assert after["returns"] == during["returns"] + 1
    assert after["leases_current"] == before["leases_current"]


def test_memory_and_mapped_loads_rent_nothing(tiny):
    data = open(tiny, "rb").read()
    gc.collect()
    before = lodestar.pool_stats()["rents"]
    with lodestar.load(data) as index:
        assert index.info["path"] == "memory" and index.info["ownership"] == "adopt"
        v = index.vectors
        # bytes are borrowed: the view lies inside the caller's bytes object
        src = np.frombuffer(data, dtype=np.uint8)
        assert np.shares_memory(v, src)
        del v, src
    with lodestar.load(tiny, mmap=True) as index:
        assert index.info["path"] == "mapped"
        assert np.array_equal(index.vectors, VECTORS)
    assert lodestar.pool_stats()["rents"] == before


def test_array_outlives_its_with_block(tiny):
    with lodestar.load(tiny) as index:
        v = index.vectors
        assert (index.rows, index.dim, index.key(0)) == (4, 4, "king")
    assert index.closed
    with pytest.raises(ValueError, match="closed"):
        index.rows
    assert v[1].tolist() == [np.float32(0.8), np.float32(0.6), 0.0, 0.0]
    assert index._h is not None  # the memory stays while the view lives
    row = v[1]  # a derived array keeps the memory too
    del v
    gc.collect()
    assert index._h is not None and row[0] == np.float32(0.8)
    del row
    gc.collect()
    assert index._h is None  # freed when the last view went


def test_exit_without_views_frees_at_once(tiny):
    with lodestar.load(tiny) as index:
        assert index.key(1) == "queen"
    assert index._h is None and index.closed


def test_close_refuses_while_viewed(tiny):
    index = lodestar.load(tiny)
    v = index.vectors
    with pytest.raises(RuntimeError, match="viewed"):
        index.close()
    assert not index.closed
    del v
    gc.collect()
    index.close()
    assert index.closed
    index.close()  # twice is fine


def test_borrowed_bytes_stay_alive_with_the_index(tiny):
    data = bytes(open(tiny, "rb").read())
    index = lodestar.load(data)
    del data
    gc.collect()
    assert index.key(3) == "prince" and np.array_equal(index.vectors, VECTORS)
    index.close()


def test_a_view_freed_while_the_index_lock_is_held_does_not_deadlock(tiny):
    """The garbage collector may free a view while this thread holds the index's lock (in
    any allocation inside it); the view's callback then takes the lock again."""
    import threading

    index = lodestar.load(tiny)
    done = []

    def drop_under_lock():
        v = index.vectors
        with index._lock:
            del v  # refcount 0: the weakref callback runs here
        done.append(True)

    t = threading.Thread(target=drop_under_lock, daemon=True)
    t.start()
    t.join(10)
    assert done, "deadlocked: the index lock is not re-entrant"
    index.close()
    assert index._h is None
