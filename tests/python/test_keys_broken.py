"""A key table that repeats a key under the unique flag (tests/bad/keys-duplicate: keys
alpha, beta, alpha) is reported as such by every lookup, never as a missing key."""
import os

import pytest

import lodestar

BAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "bad",
                   "keys-duplicate.E_DUP_KEY.ldsi")


@pytest.mark.parametrize("key", ["beta", "gamma", "alpha"])
def test_in_raises_rather_than_answer_false(key):
    with lodestar.load(BAD) as index:
        with pytest.raises(lodestar.DuplicateKeyError) as e:
            key in index
        assert (e.value.field, e.value.offset) == ("keys.bytes", 217)


def test_row_names_field_and_offset():
    with lodestar.load(BAD) as index:
        with pytest.raises(lodestar.DuplicateKeyError) as e:
            index.row("beta")
        assert (e.value.field, e.value.offset) == ("keys.bytes", 217)
        assert "the key of row 2 repeats the key of row 0" in e.value.message
