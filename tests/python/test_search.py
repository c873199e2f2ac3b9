"""search and most_similar: against numpy brute force and the C program, threads too."""
import ctypes
import json
import subprocess
import threading

import numpy as np
import pytest

import lodestar
from lodestar import _capi


def _numpy_topk(v, q, k, metric):
    v64, q64 = v.astype(np.float64), q.astype(np.float64)
    if metric == "l2":
        s = ((q64[:, None, :] - v64[None, :, :]) ** 2).sum(-1)
        order = np.argsort(s, axis=1, kind="stable")
    else:
        s = q64 @ v64.T
        if metric == "cosine":
            s = s / np.linalg.norm(q64, axis=1)[:, None] / np.linalg.norm(v64, axis=1)[None, :]
        order = np.argsort(-s, axis=1, kind="stable")
    order = order[:, :k]
    return np.take_along_axis(s, order, 1).astype(np.float32), order


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_search_matches_numpy(tmp_path, random_index, metric):
    _, v, keys = random_index
    path = str(tmp_path / ("%s.ldsi" % metric))
    lodestar.write(path, v, keys=keys, metric=metric)
    q = np.random.default_rng(1).standard_normal((17, v.shape[1]))  # float64 queries
    with lodestar.load(path) as index:
        scores, rows = index.search(q, k=8)
        assert scores.shape == rows.shape == (17, 8)
        assert scores.dtype == np.float32 and rows.dtype == np.int64
        want_s, want_r = _numpy_topk(v, q.astype(np.float32), 8, metric)
        assert np.array_equal(rows, want_r)
        np.testing.assert_allclose(scores, want_s, rtol=2e-6, atol=1e-6)
        # one query as a 1-D array is one row of the answer
        s1, r1 = index.search(q[3], k=8)
        assert s1.shape == (1, 8) and np.array_equal(r1[0], rows[3])
        assert np.array_equal(s1[0], scores[3])


def test_most_similar_matches_the_c_program(random_index, cli):
    path, v, keys = random_index
    with lodestar.load(path) as index:
        for key in ("w0", "w123", "w499"):
            got = json.loads(subprocess.run([cli, "similar", "--json", "-k", "6", path, key],
                                            check=True, stdout=subprocess.PIPE).stdout)
            want = [(n["key"], np.float32(n["score"])) for n in got["neighbours"]]
            ours = index.most_similar(key, k=6)
            assert [k for k, _ in ours] == [k for k, _ in want]
            assert [np.float32(s) for _, s in ours] == [s for _, s in want]
            assert key not in [k for k, _ in ours]
        by_vector = index.most_similar(v[5], k=3)
        assert by_vector[0][0] == "w5" and by_vector[0][1] == pytest.approx(1.0, abs=1e-6)


def test_edges_of_k_and_padding(tiny):
    with lodestar.load(tiny) as index:
        # k past the 4 rows: 4 columns, however large k is (10**8 once took 34 s, 1.2 GB).
        for k in (6, 10**8, 2**62):
            s, r = index.search([1, 0, 0, 0], k=k)
            assert r.tolist() == [[0, 1, 3, 2]] and r.dtype == np.int64
            assert s.tolist() == [[1.0, np.float32(0.8), np.float32(0.6), 0.0]]
            assert s.dtype == np.float32
        s, r = index.search(np.ones((2, 4)), k=10**8)
        assert s.shape == r.shape == (2, 4)
        s, r = index.search(np.ones((3, 4)), k=0)
        assert s.shape == r.shape == (3, 0)
        s, r = index.search(np.empty((0, 4)), k=2)
        assert s.shape == (0, 2)
        with pytest.raises(TypeError):
            index.search(np.ones(4), k="3")
        with pytest.raises(ValueError):
            index.search(np.ones(4), k=-10**8)
        assert [k for k, _ in index.most_similar("king", k=10)] == ["queen", "prince", "apple"]


def test_l2_k_past_the_rows_gives_the_rows(tmp_path):
    path = str(tmp_path / "l2.ldsi")
    lodestar.write(path, [[0, 0], [3, 4]], metric="l2")
    with lodestar.load(path) as index:
        s, r = index.search([0, 0], k=3)
        assert r.tolist() == [[0, 1]] and s.tolist() == [[0.0, 25.0]]


def test_bad_arguments(tiny):
    with lodestar.load(tiny) as index:
        with pytest.raises(ValueError, match="3 dims, the index 4"):
            index.search(np.ones(3), k=1)
        with pytest.raises(ValueError):
            index.search(np.ones((2, 2, 4)), k=1)
        with pytest.raises(TypeError):
            index.search(["a", "b", "c", "d"])
        with pytest.raises(TypeError):
            index.search(np.ones(4), k=1.5)
        with pytest.raises(ValueError):
            index.search(np.ones(4), k=-1)
        with pytest.raises(ValueError):
            index.search(np.ones(4), threads=0)
        with pytest.raises(lodestar.BadValueError) as e:
            index.search([np.nan, 0, 0, 0])
        assert isinstance(e.value, ValueError) and e.value.status == "E_BAD_VALUE"
        with pytest.raises(lodestar.BadValueError):
            index.search(np.zeros(4))  # a zero query has no cosine
        with pytest.raises(ValueError):
            index.most_similar(np.ones((2, 4)))
        with pytest.raises(KeyError):
            index.most_similar("pear")


def test_threads_give_the_same_answer(random_index):
    path, v, _ = random_index
    q = v[:40] + 0.01
    with lodestar.load(path) as index:
        one = index.search(q, k=5, threads=1)
        four = index.search(q, k=5, threads=4)
        assert np.array_equal(one[0], four[0]) and np.array_equal(one[1], four[1])
        assert np.array_equal(one[1][:, 0], np.arange(40))


def test_two_threads_search_one_index_at_once(random_index):
    path, v, _ = random_index
    with lodestar.load(path) as index:
        want = {t: index.search(v[t::2] * 1.5, k=4) for t in (0, 1)}
        start = threading.Barrier(2)
        got, errors = {}, []

        def work(t):
            try:
                start.wait()
                for _ in range(20):
                    got[t] = index.search(v[t::2] * 1.5, k=4)
                    assert np.array_equal(got[t][1], want[t][1])
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(t,)) for t in (0, 1)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
        for t in (0, 1):
            assert np.array_equal(got[t][0], want[t][0])
            assert np.array_equal(got[t][1][:, 0], np.arange(t, 500, 2))


def test_close_refuses_while_another_thread_searches(random_index):
    path, v, _ = random_index
    index = lodestar.load(path)
    index._enter()  # as a search in flight does
    with pytest.raises(RuntimeError, match="in use"):
        index.close()
    index.__exit__(None, None, None)  # closed for callers, freed once the call ends
    assert index.closed and index._h is not None
    index._leave()
    assert index._h is None


def _one_at_a_time(index, q, k):
    """lds_index_search for each query separately (the C call, not the package's path)."""
    lib = lodestar.library()
    hits = np.zeros(k, dtype=_capi.hit_dtype())
    n = ctypes.c_size_t()
    scores, rows = np.zeros((len(q), k), np.float32), np.zeros((len(q), k), np.int64)
    for i, one in enumerate(np.ascontiguousarray(q, dtype=np.float32)):
        err = _capi.new_error()
        st = lib.lds_index_search(index._h, one.ctypes.data, len(one), k, hits.ctypes.data,
                                  ctypes.byref(n), ctypes.byref(err))
        assert st == 0 and n.value == k, err.message
        scores[i], rows[i] = hits["score"], hits["row"]
    return scores, rows


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_batch_search_equals_one_query_at_a_time(tmp_path, random_index, metric):
    _, v, _ = random_index
    path = str(tmp_path / ("%s.ldsi" % metric))
    lodestar.write(path, v, metric=metric)
    q = np.random.default_rng(7).standard_normal((70, v.shape[1]))  # more than one chunk of 64
    with lodestar.load(path) as index:
        want = _one_at_a_time(index, q, 9)
        for threads in (None, 1, 2, 3):
            got = index.search(q, k=9, threads=threads)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), threads


def test_threads_one_and_two_are_identical(random_index):
    path, v, _ = random_index
    q = np.random.default_rng(8).standard_normal((33, v.shape[1])).astype(np.float32)
    with lodestar.load(path) as index:
        one = index.search(q, k=7, threads=1)
        two = index.search(q, k=7, threads=2)
        assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
        big = index.search(q, k=7, threads=2 ** 40)  # capped, not wrapped to 0 or refused
        assert np.array_equal(one[1], big[1])


def test_search_releases_the_gil():
    """ctypes releases the GIL around a call of a CDLL function, never of a PyDLL one
    (_FUNCFLAG_PYTHONAPI): the search and load calls must be the former."""
    lib = lodestar.library()
    assert isinstance(lib, ctypes.CDLL) and not isinstance(lib, ctypes.PyDLL)
    for name in ("lds_index_search_batch", "lds_index_search", "lds_load_path",
                 "lds_live_pin", "lds_live_reload_path"):
        assert not getattr(lib, name)._flags_ & ctypes._FUNCFLAG_PYTHONAPI, name
