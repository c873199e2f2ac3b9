"""bench/compare/compare_usearch.py on a small generated index: lodestar and usearch's
exactSearch (npm usearch in .cache/npm, scripts/lab-npm.sh) both exact, every row and ratio
present. Skipped when usearch or node is not installed."""
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
    assert "3000 x 24" in doc["source"]
