#!/usr/bin/env python3
"""Queries by key as gensim users ask them, and what `info` says about keys.

- `lodestar similar --positive K1,K2 --negative K3` against gensim's
  KeyedVectors.most_similar on the shipped 20k GloVe sample: the same top-k keys in the
  same order, scores within 1e-5 (skipped without python3-gensim);
- its refusals: unknown keys (all named), empty keys, a key in both lists, an index
  without keys, a non-cosine index, and another query source beside it;
- `lodestar info`'s keys line: "yes (unique)" only once checked (format.md K7), so a file
  declaring unique keys that repeat is reported, naming both rows, with exit status 1.

usage: test_key_queries.py LODESTAR SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests, skip  # noqa: E402

LODESTAR = os.path.abspath(sys.argv[1])
SRC = os.path.abspath(sys.argv[2])
WORK = tempfile.mkdtemp(prefix="lodestar-test-key-queries-")
SAMPLE_TXT = os.path.join(WORK, "glove-100d-20k.txt")
SAMPLE = os.path.join(WORK, "glove-100d-20k.ldsi")
DUP = os.path.join(SRC, "tests", "bad", "keys-duplicate.E_DUP_KEY.ldsi")
NOT_PROMISED = os.path.join(SRC, "tests", "bad", "keys-duplicate-not-promised.OK.ldsi")


def run(*args):
    p = subprocess.run([LODESTAR, *args], capture_output=True, timeout=120)
    return p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace")


def ok(*args):
    rc, out, err = run(*args)
    check(rc == 0, f"lodestar {' '.join(args)}: exit {rc}\n{out}{err}")
    return out


def refused(code, needle, *args):
    rc, out, err = run(*args)
    check(rc == code, f"lodestar {' '.join(args)}: exit {rc}, want {code}\n{out}{err}")
    check(needle in err, f"{needle!r} not in stderr: {err}")
    return err


def sample():
    """The shipped sample as text and as an index (made once)."""
    if not os.path.exists(SAMPLE):
        with open(SAMPLE_TXT, "wb") as f:
            subprocess.run(["zstd", "-dc", os.path.join(SRC, "data", "glove-100d-20k.txt.zst")],
                           stdout=f, check=True)
        ok("pack", SAMPLE_TXT, SAMPLE)
    return SAMPLE


# (positive, negative, k): analogies, a plain mean, a negative alone, a repeated key.
QUERIES = [
    (["king", "woman"], ["man"], 10),
    (["paris", "germany"], ["france"], 10),
    (["good", "better"], ["bad"], 25),
    (["computer", "software", "internet"], [], 10),
    ([], ["king"], 5),
    (["walking", "swam"], ["walked"], 10),
    (["king", "king", "woman"], ["man"], 10),
]


def lodestar_similar(pos, neg, k):
    args = ["similar", "--json", "-k", str(k)]
    if pos:
        args += ["--positive", ",".join(pos)]
    if neg:
        args += ["--negative", ",".join(neg)]
    return json.loads(ok(*args, sample()))


def test_similar_matches_gensim():
    try:
        from gensim.models import KeyedVectors
    except ImportError:
        skip("python3-gensim is not installed (scripts/deps.sh installs it)")
    sample()
    kv = KeyedVectors.load_word2vec_format(SAMPLE_TXT, no_header=True)
    for pos, neg, k in QUERIES:
        want = kv.most_similar(positive=pos, negative=neg, topn=k)
        got = lodestar_similar(pos, neg, k)
        check(got["positive"] == pos and got["negative"] == neg, f"lists echoed: {got}")
        keys = [h["key"] for h in got["neighbours"]]
        check(keys == [w for w, _ in want],
              f"+{pos} -{neg}: lodestar {keys} != gensim {[w for w, _ in want]}")
        worst = max(abs(h["score"] - s) for h, (_, s) in zip(got["neighbours"], want))
        check(worst <= 1e-5, f"+{pos} -{neg}: scores differ by {worst} (> 1e-5)")
        rows = [h["row"] for h in got["neighbours"]]
        check(rows == [kv.key_to_index[w] for w in keys], f"rows {rows} are the keys' rows")
        check(not set(keys) & set(pos + neg), f"query keys left out: {keys}")
    # Text output: the same ranking in similar's table.
    out = ok("similar", "-k", "3", "--positive", "king,woman", "--negative", "man", sample())
    lines = out.splitlines()
    check(lines[0].split() == ["rank", "cosine", "row", "key"], f"header: {lines[0]}")
    check([l.split()[3] for l in lines[1:]] == [w for w, _ in kv.most_similar(
        positive=["king", "woman"], negative=["man"], topn=3)], f"table: {out}")


def test_similar_positive_by_hand():
    """Without gensim too: the arithmetic recomputed with numpy over the index's rows."""
    sample()
    vecs = {}
    for line in open(SAMPLE_TXT, encoding="utf-8"):
        w, rest = line.split(" ", 1)
        vecs[w] = np.array(rest.split(), dtype=np.float64)
    words = list(vecs)
    m = np.stack([vecs[w] for w in words])
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    q = unit[words.index("king")] + unit[words.index("woman")] - unit[words.index("man")]
    q /= np.linalg.norm(q)
    scores = unit @ q
    order = [i for i in np.argsort(-scores, kind="stable")
             if words[i] not in ("king", "woman", "man")][:10]
    got = lodestar_similar(["king", "woman"], ["man"], 10)
    check([h["row"] for h in got["neighbours"]] == order,
          f"{[h['key'] for h in got['neighbours']]} != {[words[i] for i in order]}")
    worst = max(abs(h["score"] - scores[i]) for h, i in zip(got["neighbours"], order))
    check(worst <= 1e-5, f"scores differ from float64's by {worst}")
    # Repeated options add to their list.
    two = lodestar_similar(["king"], ["man"], 10)
    rc, out, err = run("similar", "--json", "--positive", "king", "--negative", "man", sample())
    check(json.loads(out) == two, "one key per option is the same query")
    rep = json.loads(ok("similar", "--json", "--positive", "king", "--positive", "woman",
                        "--negative", "man", sample()))
    check(rep == got, "--positive king --positive woman == --positive king,woman")


def test_similar_positive_refusals():
    idx = sample()
    err = refused(1, "not in the index: 'nosuchword1', 'nosuchword2' (2 of 4 keys)",
                  "similar", "--positive", "king,nosuchword1", "--negative", "man,nosuchword2",
                  idx)
    check("king" not in err.split("index:")[1], f"known keys are not named: {err}")
    refused(2, "key 1 of '' is empty", "similar", "--positive", "", idx)
    refused(2, "--negative: key 2 of 'man,,woman' is empty", "similar", "--positive", "king",
            "--negative", "man,,woman", idx)
    refused(2, "key 3 of 'a,b,' is empty", "similar", "--positive", "a,b,", idx)
    refused(2, "key 'man' is in both --positive and --negative", "similar", "--positive",
            "king,man", "--negative", "woman,man", idx)
    refused(2, "give one of --row, --vector", "similar", "--positive", "king", "--row", "3", idx)
    refused(2, "expected FILE (with --positive/--negative)", "similar", "--positive", "king",
            idx, "queen")
    refused(2, "unrecognized option '--positive'", "get", "--positive", "king", idx)
    # Escaped in the message like every key the program echoes.
    refused(1, "not in the index: '\\x1b[31m'", "similar", "--positive", "\x1b[31m", idx)
    # An index without keys, and a non-cosine one.
    npy = os.path.join(WORK, "nokeys.npy")
    np.save(npy, np.eye(4, dtype=np.float32))
    nokeys = os.path.join(WORK, "nokeys.ldsi")
    ok("pack", npy, nokeys)
    refused(1, "the index has no keys", "similar", "--positive", "a", nokeys)
    dot = os.path.join(WORK, "dot.ldsi")
    ok("pack", "--metric", "dot", os.path.join(SRC, "tests", "fixtures", "cli", "tiny.glove.txt"),
       dot)
    refused(1, "rank by cosine similarity (gensim's most_similar), but the index's metric is dot",
            "similar", "--positive", "king", dot)
    # A zero row has no direction; a mean of zero has no cosine.
    zero = os.path.join(WORK, "zero.txt")
    with open(zero, "w") as f:
        f.write("a 1 0\nb 0 0\nc -1 0\nd 0 1\n")
    zidx = os.path.join(WORK, "zero.ldsi")
    ok("pack", zero, zidx)
    refused(1, "key 'b' (row 1) is a zero vector", "similar", "--positive", "a,b", zidx)
    refused(1, "weighted mean is the zero vector", "similar", "--positive", "a,c", zidx)
    got = json.loads(ok("similar", "--json", "-k", "5", "--positive", "a", "--negative", "c",
                        zidx))
    # d is orthogonal to a - c; the zero row b scores 0 in the index's cosine search (the tie
    # goes to the lower row). a and c, the query keys, are left out.
    check([(h["key"], h["score"]) for h in got["neighbours"]] == [("b", 0), ("d", 0)],
          f"a - c: b and d at cosine 0: {got}")


def test_info_keys_line_is_checked():
    out = ok("info", sample())
    check("keys:       yes (unique)\n" in out, f"a sound index: {out}")
    rc, out, err = run("info", DUP)
    check(rc == 1, f"info on repeated keys declared unique: exit {rc}, want 1\n{out}{err}")
    check("keys:       yes (declared unique, but a key repeats)\n" in out, out)
    check("rows:       3\n" in out, f"the description is printed in full: {out}")
    check("keys.bytes: the key of row 2 repeats the key of row 0 (at byte 217)" in err, err)
    rc, out, err = run("info", "--json", DUP)
    check(rc == 1, f"info --json: exit {rc}")
    o = json.loads(out)
    check(o["keys_unique"] is False and o["keys_declared_unique"] is True, f"{out}")
    o = json.loads(ok("info", "--json", sample()))
    check(o["keys_unique"] is True and o["keys_declared_unique"] is True, f"{o}")
    # Repeats without the promise are no fault: "yes", exit 0.
    out = ok("info", NOT_PROMISED)
    check("keys:       yes\n" in out, out)


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
