#!/usr/bin/env python3
"""Recall@10 of i8 indexes against float64 search over the float32 rows they came from.

usage: i8_scale_recall.py [--dry] [--queries N] [--index F]
       i8_scale_recall.py REF.npy I8.npy [I8.npy ...] [--queries N]

Without files (bench-map.json's 'i8-scale-recall'): the rows of --index (default
/work/glove/glove-100d.ldsi, else .cache/glove/glove-100d.ldsi; with --dry, or when neither
exists, 20,000 x 100 generated rows), L2-normalized as `lodestar pack --normalize`, are
written by the lodestar package as i8 with the default scale 1/127 and with max |x| / 127
(what `--i8-scale auto` stores) and read back widened exactly to float32 (as_float32).

With files: REF.npy, the float32 rows (`lodestar export` of the f32 index); each I8.npy,
the same rows packed as i8 with some --i8-scale and exported (widened exactly to float32).

The queries are N rows of REF spread evenly (default 1000; 200 with --dry); the truth is the
top 10 by dot product in float64 over REF; each i8 set is ranked by float64 dot products over
its own widened values (the exact search of that index, before the query's own rounding).
Prints recall@10 and the mean |stored - original| per set. Needs numpy (and, without files,
the lodestar package of python/ with LODESTAR_LIB, default build/liblodestar.so).
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, os.pardir, os.pardir))


def topk(m, q, k):
    s = q @ m.T
    idx = np.argpartition(-s, k, axis=1)[:, :k]
    return idx


def report(name, ref, m, q, truth, nq):
    got = topk(m.astype(np.float64), q, 10)
    hits = sum(len(set(a) & set(b)) for a, b in zip(truth, got))
    err = np.abs(m.astype(np.float64) - ref.astype(np.float64)).mean()
    print(f"{name:40s} recall@10 {hits / (10 * nq):.4f}  mean |stored - x| {err:.2e}")
    return hits / (10 * nq)


def generated_sets(dry, index):
    """(source, f32 rows, [(name, widened i8 rows), ...]) written through the lodestar package."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.setdefault("LODESTAR_LIB", os.path.join(ROOT, "build", "liblodestar.so"))
    import lodestar
    paths = [index] if index else ["/work/glove/glove-100d.ldsi",
                                    os.path.join(ROOT, ".cache", "glove", "glove-100d.ldsi")]
    found = [p for p in paths if os.path.exists(p)]
    if not dry and found:
        with lodestar.load(found[0]) as idx:
            x = np.array(idx.as_float32(), dtype=np.float32)
        source = found[0]
    else:
        x = np.random.default_rng(5).standard_normal((20000, 100)).astype(np.float32)
        source = "generated 20000 x 100"
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(1e-30))
    sets = []
    with tempfile.TemporaryDirectory(prefix="lds-i8-scale-") as tmp:
        for name, scale in (("i8 default 1/127", None),
                            ("i8 auto max|x|/127", float(np.abs(x).max()) / 127.0)):
            path = os.path.join(tmp, "i8.ldsi")
            lodestar.write(path, x, dtype="i8", metric="dot", i8_scale=scale)
            with lodestar.load(path) as idx:
                sets.append(("%s (scale %.6g)" % (name, scale or 1 / 127.0),
                             np.array(idx.as_float32(), dtype=np.float32)))
    return source + ", normalized", x, sets


def main():
    argv = sys.argv[1:]
    dry = "--dry" in argv
    nq = 200 if dry else 1000
    index = None
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--queries":
            nq = int(argv[i + 1])
            i += 2
        elif argv[i] == "--index":
            index = argv[i + 1]
            i += 2
        elif argv[i] == "--dry":
            i += 1
        elif argv[i].startswith("--"):
            sys.exit(__doc__)
        else:
            args.append(argv[i])
            i += 1
    if len(args) == 1:
        sys.exit(__doc__)
    if args:
        source, ref = args[0], np.load(args[0]).astype(np.float32)
        sets = [(p, np.load(p).astype(np.float32)) for p in args[1:]]
    else:
        source, ref, sets = generated_sets(dry, index)
    refd = ref.astype(np.float64)
    sel = np.linspace(0, ref.shape[0] - 1, nq).astype(np.int64)
    q = refd[sel]
    truth = topk(refd, q, 10)
    print(f"# {source}: {ref.shape[0]} x {ref.shape[1]} rows, {nq} queries, "
          f"max |x| {np.abs(ref).max():.4f}")
    for name, m in sets:
        report(name, ref, m, q, truth, nq)


if __name__ == "__main__":
    main()
