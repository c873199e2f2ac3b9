#!/usr/bin/env python3
"""Recall@10 of i8 indexes against float64 search over the float32 rows they came from.

usage: i8_scale_recall.py REF.npy I8.npy [I8.npy ...] [--queries N]

REF.npy: the float32 rows (`lodestar export` of the f32 index); each I8.npy: the same
rows packed as i8 with some --i8-scale and exported (widened exactly to float32). The
queries are N rows of REF spread evenly (default 1000); the truth is the top 10 by dot
product in float64 over REF; each I8 is ranked by float64 dot products over its own
widened values (the exact search of that index, before the query's own rounding).
Prints recall@10 and the mean |stored - original| per file. Needs numpy.
"""
import sys

import numpy as np


def topk(m, q, k):
    s = q @ m.T
    idx = np.argpartition(-s, k, axis=1)[:, :k]
    return idx


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    nq = 1000
    if "--queries" in sys.argv:
        nq = int(sys.argv[sys.argv.index("--queries") + 1])
        args = [a for a in args if a != str(nq)]
    if len(args) < 2:
        sys.exit(__doc__)
    ref = np.load(args[0]).astype(np.float64)
    sel = np.linspace(0, ref.shape[0] - 1, nq).astype(np.int64)
    q = ref[sel]
    truth = topk(ref, q, 10)
    print(f"# {ref.shape[0]} x {ref.shape[1]} rows, {nq} queries, max |x| {np.abs(ref).max():.4f}")
    for path in args[1:]:
        m = np.load(path).astype(np.float64)
        got = topk(m, q, 10)
        hits = sum(len(set(a) & set(b)) for a, b in zip(truth, got))
        err = np.abs(m - ref).mean()
        print(f"{path:40s} recall@10 {hits / (10 * nq):.4f}  mean |stored - x| {err:.2e}")


if __name__ == "__main__":
    main()
