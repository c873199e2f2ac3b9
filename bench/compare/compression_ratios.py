#!/usr/bin/env python3
"""Expansion ratios (decoded bytes / compressed bytes) of embedding files and of bombs under
gzip -9, xz -1 and zstd -3: the evidence for the importer's 4096:1 cap (docs/adr/0018).

usage: bench/compare/compression_ratios.py [--dry] [--inputs LIST] [--json FILE] [-h]
Run from the repository's top; needs numpy and the zstd program. --dry: the first 500
lines of the GloVe sample and 1 MiB bombs (for tests/test_bench_map.py). --inputs: only
these of glove,f32,f64,i8,zeros,newlines (default all; ADR 0051: the conditions of 0018 and
0036 need glove and newlines). --json FILE: the ratios also as JSON rows named "INPUT @
CODER" (scripts/adr-check.sh).
"""
import gzip
import io
import lzma
import os
import subprocess
import sys

import numpy as np

from benchlib import cpu_model, loadavg, write_summary


def main():
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__.strip())
        return 0
    dry = "--dry" in sys.argv
    keys = ["glove", "f32", "f64", "i8", "zeros", "newlines"]
    want = keys
    if "--inputs" in sys.argv:
        i = sys.argv.index("--inputs")
        want = sys.argv[i + 1].split(",") if i + 1 < len(sys.argv) else []
        if not want or any(k not in keys for k in want):
            print("compression_ratios.py: --inputs takes a list of %s" % ",".join(keys),
                  file=sys.stderr)
            return 2
    text = subprocess.run(["zstd", "-q", "-d", "-c", "data/glove-100d-20k.txt.zst"],
                          stdout=subprocess.PIPE, check=True).stdout
    if dry:
        text = b"".join(text.splitlines(keepends=True)[:500])
    a = None
    if any(k in want for k in ("f32", "f64", "i8")):
        a = np.array([[float(x) for x in line.split(" ")[1:]]
                      for line in text.decode().splitlines()], dtype=np.float32)

    def npy(x):
        b = io.BytesIO()
        np.save(b, x)
        return b.getvalue()

    def zst(d):
        return subprocess.run(["zstd", "-q", "-c", "-3", "-"], input=d, stdout=subprocess.PIPE,
                              check=True).stdout

    bomb = (1 if dry else 64) << 20
    make = {"glove": ("GloVe 20k text", lambda: text), "f32": ("npy f32", lambda: npy(a)),
            "f64": ("npy f64", lambda: npy(a.astype(np.float64))),
            "i8": ("npy i8 (x*40)", lambda: npy(np.rint(a * 40).clip(-127, 127).astype(np.int8))),
            "zeros": ("zeros", lambda: bytes(bomb)), "newlines": ("newlines", lambda: b"\n" * bomb)}
    rows = [(make[k][0], make[k][1]()) for k in keys if k in want]
    # The bombs' names carry no size (the bytes column has it: 64 MiB, 1 MiB with --dry), so
    # a record's condition names the same row in a full run and a dry one (ADR 0036).
    print(f"{'input':24s} {'bytes':>10s} {'gzip -9':>9s} {'xz -1':>9s} {'zstd -3':>9s}")
    jrows = []
    for name, d in rows:
        coders = (lambda x: gzip.compress(x, 9), lambda x: lzma.compress(x, preset=1), zst)
        r = [len(d) / len(f(d)) for f in coders]
        print(f"{name:24s} {len(d):>10d} {r[0]:>8.1f}x {r[1]:>8.1f}x {r[2]:>8.1f}x")
        for coder, ratio in zip(("gzip -9", "xz -1", "zstd -3"), r):
            jrows.append({"table": coder, "name": name, "unit": "decoded/compressed",
                          "median": ratio, "min": ratio, "max": ratio, "samples": [ratio]})
    print(f"machine: {cpu_model()}, {os.cpu_count()} cpus | load average {loadavg()}")
    if write_summary(sys.argv, "compression_ratios.py", "compression-ratios", dry, jrows):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
