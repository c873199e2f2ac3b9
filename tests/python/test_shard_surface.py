"""Shards get the names Index has (issue 28): repr, most_similar (gensim's rule), shards[key],
answering as the unsplit index does."""
import subprocess

import numpy as np
import pytest

import lodestar


@pytest.fixture(scope="module")
def split_sample(glove_sample, cli, tmp_path_factory):
    path, _ = glove_sample
    out = tmp_path_factory.mktemp("split") / "s"
    subprocess.run([cli, "split", path, str(out), "--shards", "3"], check=True,
                   stdout=subprocess.PIPE)
    return path, str(out / "manifest.json")


def _same(ours, theirs):
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    np.testing.assert_allclose([s for _, s in ours], [s for _, s in theirs], atol=1e-6)


def test_shards_answer_as_the_unsplit_index(split_sample):
    path, manifest = split_sample
    with lodestar.load(path) as whole, lodestar.open_shards(manifest) as shards:
        assert repr(shards) == "<lodestar.Shards 20000 x 100 f32 cosine in 3 shards>"
        assert len(shards) == 20000 and shards.dim == 100 and shards.metric == "cosine"
        for pos, neg in ((["king", "woman"], ["man"]), ("computer", None),
                         ([("paris", 1.0), "germany"], ["france"])):
            _same(shards.most_similar(pos, neg, topn=10), whole.most_similar(pos, neg, topn=10))
        river = whole["river"]
        _same(shards.most_similar(river, topn=5), whole.most_similar(river, topn=5))
        np.testing.assert_allclose(shards.most_similar(["king"], ["man"], topn=None),
                                   whole.most_similar(["king"], ["man"], topn=None), atol=1e-5)
        assert np.array_equal(shards["king"], whole["king"])
        assert np.array_equal(shards[19999], whole[19999])  # in the last shard
        assert np.array_equal(shards[-1], whole[-1])
        assert np.array_equal(shards[["the", 7000, "zoo"]], whole[["the", 7000, "zoo"]])
        assert shards.key(13333) == whole.key(13333)
        with pytest.raises(KeyError):
            shards["notaword-xyz"]
        with pytest.raises(IndexError):
            shards[20000]
    assert repr(shards).endswith("in 3 shards (closed)>")
