"""bench/compare/compare_usearch.py on a small generated index: lodestar and usearch's
exactSearch (npm usearch in .cache/npm, scripts/lab-npm.sh) both exact, every row and ratio
present. Skipped when usearch or node is not installed; the argument checks run without
them (they are made before the script looks for usearch), and a failed child with a fake
node."""
import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
SCRIPT = os.path.join(ROOT, "bench", "compare", "compare_usearch.py")


def _usearch_missing():
    try:
        r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "lab-npm.sh"), "--check"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if r.returncode == 0 else "usearch not installed (scripts/lab-npm.sh): " + \
        (r.stdout + r.stderr).strip()


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    why = _usearch_missing()
    if why:
        pytest.skip(why)
    out = str(tmp_path_factory.mktemp("usearch") / "u.json")
    r = subprocess.run([sys.executable, SCRIPT, "--rows", "3000", "--dim", "24", "--rounds", "2",
                        "--single", "5", "--threads", "1,2", "--json", out],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out, encoding="utf-8") as f:
        return json.load(f), r.stdout


def test_both_exact_on_f32(result):
    doc, _ = result
    rows = {r["name"]: r for r in doc["rows"]}
    for who in ("lodestar", "usearch"):
        for b in (1, 100):
            for t in (1, 2):
                row = rows["%s f32 @ batch %d threads %d" % (who, b, t)]
                # Every query's top 10 by dot product equals float64's (batch 1: five distinct
                # queries, each in its own call; usearch's addon read a subarray's buffer from
                # its start, so a child passing views searched query 0 five times).
                assert row["recall"] == 1.0, row
                assert len(row["samples"]) == 2 and all(v > 0 for v in row["samples"]), row
                assert row["min"] <= row["median"] <= row["max"], row


def test_i8_rows_and_ratios(result):
    doc, out = result
    rows = {r["name"]: r for r in doc["rows"]}
    for who in ("lodestar", "usearch"):
        for b in (1, 100):
            # i8 rows lose bits against the f32 truth, but most of the top 10 stays
            assert 0.5 <= rows["%s i8 @ batch %d threads 1" % (who, b)]["recall"] <= 1.0
    for dt in ("f32", "i8"):
        for b in (1, 100):
            for t in (1, 2):
                name = "ratio lodestar / usearch %s @ batch %d threads %d" % (dt, b, t)
                r = rows[name]
                lo, us = (rows["%s %s @ batch %d threads %d" % (w, dt, b, t)]
                          for w in ("lodestar", "usearch"))
                assert math.isclose(r["wall"], lo["median"] / us["median"], rel_tol=1e-9), r
                assert r["cpu"] > 0, r
                assert ("ratio lodestar / usearch %-4s batch %3d threads %d: wall %.2f"
                        % (dt, b, t, r["wall"])) in out
    assert "usearch 2.26.2" in doc["machine"]
    assert doc["source"] == "generated 3000 x 24"
    assert "GloVe" not in out


def _run(*argv):
    return subprocess.run([sys.executable, SCRIPT, *argv], capture_output=True, text=True,
                          timeout=60)


def test_missing_index_is_refused_by_name():
    # An --index that does not exist was silently replaced by generated rows (exit 0).
    r = _run("--index", "/nonexistent/rows.ldsi")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--index /nonexistent/rows.ldsi: no such file" in r.stderr


@pytest.mark.parametrize("argv,msg", [
    (["--k", "0"], "--k must be >= 1"),
    (["--rows", "1"], "--rows must be 0 (not generated) or >= 100"),
    (["--rows", "100", "--k", "101"], "--k must be at most --rows (100), got 101"),
    (["--dim", "0"], "--dim must be >= 1, got 0"),
    (["--rows", "200", "--dim", "-3"], "--dim must be >= 1, got -3"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--batches", "1,x"], "--batches 1..100"),
    (["--index", SCRIPT, "--rows", "500"], "give one or the other"),
])
def test_bad_arguments_are_argparse_errors(argv, msg):
    # These gave tracebacks from numpy (--k 0, --rows 1, --dim 0) once usearch was found;
    # now argparse refuses them first, usearch or not.
    r = _run(*argv)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "compare_usearch.py: error: " in r.stderr and msg in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_index_that_is_a_directory_or_not_an_index_is_refused():
    # Found by a tester: a directory said "no such file", and a file that is not an index
    # ended in lodestar's traceback (after usearch was found).
    r = _run("--index", ROOT)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--index %s: is a directory, not an index file" % ROOT in r.stderr, r.stderr
    r = _run("--index", SCRIPT)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--index %s: not a readable lodestar index: E_BAD_MAGIC" % SCRIPT in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_failed_child_says_so_and_removes_its_temporary_folder(tmp_path):
    # Found by a tester: a usearch child that ended at once left lds-usearch-* (the rows and
    # queries written for it) behind, under a traceback. A fake node: --version works, the
    # child exits 3 without a word.
    usearch = tmp_path / "usearch"
    usearch.mkdir()
    (usearch / "package.json").write_text("{}")
    node = tmp_path / "node"
    node.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo v0; exit 0; }\nexit 3\n')
    node.chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = subprocess.run([sys.executable, SCRIPT, "--rows", "200", "--dim", "4", "--rounds", "1",
                        "--warmup", "0", "--dtypes", "f32", "--usearch-dir", str(usearch),
                        "--node", str(node)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, TMPDIR=str(tmp)))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "compare_usearch: usearch child ended (exit 3)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert os.listdir(tmp) == []


def test_a_child_gone_before_the_request_is_one_line(monkeypatch):
    # Found by edges2 in the quick suite (1 run in 4): when the fake child of the test above
    # had ended before the first request was flushed, the write raised BrokenPipeError and
    # the run ended in a traceback. Here the child has surely ended before ask() writes.
    import importlib.util

    monkeypatch.setattr(sys, "argv", [SCRIPT])
    spec = importlib.util.spec_from_file_location("compare_usearch_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    us = mod.Usearch.__new__(mod.Usearch)
    us.p = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    us.p.wait()
    with pytest.raises(RuntimeError, match=r"^usearch child ended \(exit 3\)$"):
        us.ask({"op": "info"})
    us.close()
