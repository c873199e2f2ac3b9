"""faiss's Index names on lodestar.Index (ntotal, d, metric_type, reconstruct,
reconstruct_n, search with pad=True), against faiss itself (Debian python3-faiss 1.7)."""
import numpy as np
import pytest

import lodestar

faiss = pytest.importorskip("faiss")


@pytest.mark.parametrize("metric", ["dot", "l2", "cosine"])
def test_search_and_reconstruct_as_faiss(tmp_path, metric):
    rng = np.random.default_rng(5)
    v = rng.standard_normal((50, 16)).astype(np.float32)
    if metric == "cosine":
        v /= np.linalg.norm(v, axis=1, keepdims=True)
    path = str(tmp_path / "ix.ldsi")
    lodestar.write(path, v, metric=metric)
    ref = faiss.IndexFlatL2(16) if metric == "l2" else faiss.IndexFlatIP(16)
    ref.add(v)
    q = rng.standard_normal((7, 16)).astype(np.float32)
    if metric == "cosine":
        q /= np.linalg.norm(q, axis=1, keepdims=True)
    with lodestar.load(path) as ix:
        assert (ix.ntotal, ix.d, ix.metric_type) == (ref.ntotal, ref.d, ref.metric_type)
        assert np.array_equal(ix.reconstruct(7), ref.reconstruct(7))
        assert np.array_equal(ix.reconstruct_n(3, 10), ref.reconstruct_n(3, 10))
        assert ix.reconstruct_n(50, 0).shape == (0, 16)
        for k in (5, 50, 64):  # 64: more than the rows, faiss's padding
            ds, ls = ix.search(q, k, pad=True)
            dr, lr = ref.search(q, k)
            assert ds.shape == dr.shape == (7, k) and ds.dtype == dr.dtype
            assert ls.dtype == lr.dtype
            assert np.array_equal(ls, lr)
            np.testing.assert_allclose(ds, dr, rtol=1e-5, atol=1e-4)
        assert np.array_equal(ix.search(q, 64, pad=True)[0][:, 50:], ref.search(q, 64)[0][:, 50:])
        assert ix.search(q, 64)[0].shape == (7, 50)  # the default: no padding
        with pytest.raises(IndexError):
            ix.reconstruct(50)
        with pytest.raises(IndexError):
            ix.reconstruct_n(45, 6)
        with pytest.raises(IndexError):
            ix.reconstruct_n(-1, 2)
