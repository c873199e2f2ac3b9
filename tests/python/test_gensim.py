"""gensim's KeyedVectors names on lodestar.Index, against gensim 4 itself (Debian
python3-gensim 4.2) on the shipped sample (20,000 GloVe words x 100): the same keys in the
same order, scores within 1e-5."""
import numpy as np
import pytest

import lodestar

gensim_models = pytest.importorskip("gensim.models")


@pytest.fixture(scope="module")
def both(glove_sample):
    path, text = glove_sample
    kv = gensim_models.KeyedVectors.load_word2vec_format(text, binary=False, no_header=True)
    with lodestar.load(path) as ix:
        yield ix, kv


def _same(ours, theirs):
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-5, rtol=0)


@pytest.mark.parametrize("positive,negative", [
    (["king", "woman"], ["man"]),
    (["paris", "germany"], ["france"]),
    ("computer", None),
    (["good"], None),
    (None, ["bad"]),
    ([("king", 2.0), "queen"], [("man", -0.5)]),
    (["run", "walked", "swim"], ["walk", "jump"]),
])
def test_most_similar_as_gensim(both, positive, negative):
    ix, kv = both
    for topn in (1, 5, 25):
        _same(ix.most_similar(positive=positive, negative=negative, topn=topn),
              kv.most_similar(positive=positive, negative=negative, topn=topn))


def test_most_similar_positional_vector_row_and_all(both):
    ix, kv = both
    _same(ix.most_similar("king", topn=10), kv.most_similar("king", topn=10))
    v = kv["river"] * 3 + kv["bank"]
    _same(ix.most_similar(v, topn=10), kv.most_similar(v, topn=10))
    _same(ix.most_similar([v, "water"], ["money"], topn=10),
          kv.most_similar([v, "water"], ["money"], topn=10))
    _same(ix.most_similar(positive=[17], topn=5), kv.most_similar(positive=[17], topn=5))
    np.testing.assert_allclose(ix.most_similar(["king", "woman"], ["man"], topn=None),
                               kv.most_similar(["king", "woman"], ["man"], topn=None),
                               atol=1e-5, rtol=0)
    assert ix.most_similar("king", topn=0) == [] == kv.most_similar("king", topn=0)
    assert ix.most_similar("king", k=3) == ix.most_similar("king", topn=3)  # the old name
    with pytest.raises(KeyError):
        ix.most_similar(["king", "notaword-xyz"])
    with pytest.raises(ValueError):
        ix.most_similar(positive=[], negative=[])


def test_keys_rows_and_vectors_as_gensim(both):
    ix, kv = both
    assert len(ix) == len(kv) == 20000
    assert list(ix.index_to_key) == kv.index_to_key
    k2i = ix.key_to_index
    assert len(k2i) == len(kv.key_to_index)
    for key in ("the", "king", kv.index_to_key[-1], "ŝ" if "ŝ" in kv else "zoo"):
        if key in kv:
            assert k2i[key] == kv.key_to_index[key] == ix.get_index(key)
    assert list(k2i)[:50] == list(kv.key_to_index)[:50]
    assert "king" in ix and "king" in k2i and "notaword-xyz" not in ix
    assert "notaword-xyz" not in k2i
    with pytest.raises(KeyError):
        k2i["notaword-xyz"]
    assert np.array_equal(ix["king"], kv["king"])
    assert np.array_equal(ix[3], kv[3]) and np.array_equal(ix[-1], kv.vectors[-1])
    assert np.array_equal(ix[["king", 3, "queen"]], kv[["king", 3, "queen"]])
    np.testing.assert_allclose(ix.get_vector("king", norm=True),
                               kv.get_vector("king", norm=True), atol=1e-7)
    with pytest.raises(KeyError):
        ix["notaword-xyz"]
    with pytest.raises(IndexError):
        ix[20000]
    # a negative row past the start is named as written, not as the -1 it becomes
    with pytest.raises(IndexError, match=r"row -20001 out of range \(the index has 20000"):
        ix[-20001]
    with pytest.raises(IndexError, match=r"row -20001 out of range"):
        ix.keys[-20001]
    assert ix.keys[-20000] == kv.index_to_key[0]
    with pytest.raises(TypeError):
        ix[1.5]


def test_most_similar_k_is_topn_old_name(both):
    ix, _ = both
    assert ix.most_similar("king", k=2) == ix.most_similar("king", topn=2)
    assert len(ix.most_similar("king")) == 10
    assert ix.most_similar("king", topn=3, k=3) == ix.most_similar("king", topn=3)
    # two different answers to one question: refused, not one silently taken
    with pytest.raises(TypeError, match="topn=3 and k=2"):
        ix.most_similar("king", k=2, topn=3)


def test_similarities_as_gensim(both):
    ix, kv = both
    for a, b in (("king", "queen"), ("apple", "car"), ("good", "bad")):
        assert ix.similarity(a, b) == pytest.approx(kv.similarity(a, b), abs=1e-5)
        assert ix.distance(a, b) == pytest.approx(kv.distance(a, b), abs=1e-5)
    for a, b in ((["king", "man"], ["queen", "woman"]), (["bread"], ["rice", "fish"])):
        assert ix.n_similarity(a, b) == pytest.approx(kv.n_similarity(a, b), abs=1e-5)
    with pytest.raises(ZeroDivisionError):
        ix.n_similarity([], ["king"])
    for words in (["breakfast", "cereal", "dinner", "lunch"], ["king", "queen", "car", "prince"],
                  ["paris", "london", "berlin", "banana", "rome"]):
        assert ix.doesnt_match(words) == kv.doesnt_match(words)
    with pytest.warns(UserWarning):
        assert ix.doesnt_match(["cat", "dog", "notaword-xyz", "car"]) == \
            kv.doesnt_match(["cat", "dog", "car"])
    np.testing.assert_allclose(ix.distances("king", ["queen", "car"]),
                               kv.distances("king", ["queen", "car"]), atol=1e-5)
    np.testing.assert_allclose(ix.distances("king"), kv.distances("king"), atol=1e-5)
    v = kv["water"]
    np.testing.assert_allclose(ix.distances(v, ["river", "fire"]),
                               kv.distances(v, ["river", "fire"]), atol=1e-5)


def test_gensim_arithmetic_needs_cosine(tmp_path):
    path = str(tmp_path / "dot.ldsi")
    lodestar.write(path, np.eye(3, dtype=np.float32), keys=["a", "b", "c"], metric="dot")
    with lodestar.load(path) as ix:
        assert ix.most_similar("a", topn=1)[0][0] in ("b", "c")  # one key: the dot search
        with pytest.raises(lodestar.UnsupportedError, match="cosine"):
            ix.most_similar(["a"], ["b"])
