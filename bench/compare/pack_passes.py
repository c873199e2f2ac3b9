#!/usr/bin/env python3
"""What the extra input pass of `pack --on-duplicate last` costs, and HDF5 input against the
same array as .npy (docs/adr/0023). Whole `lodestar pack` processes, alternatives
interleaved round by round (A B C D, A B C D, ...), so a slow spell of the shared machine
hits each alike; each row's median, min and max are over the rounds.

usage: bench/compare/pack_passes.py [--rounds N] [--dry] [--json FILE] [-h]
Run from the repository's top after building build/; needs numpy (and h5py for the HDF5
rows, skipped without it). Input: the GloVe sample, data/glove-100d-20k.txt.zst (20,000 x
100). --dry: 500 rows, 1 round. --json FILE: the rows as JSON ("ROW", unit seconds) for
scripts/adr-check.sh. env: LODESTAR_BUILD (default build/) for the lodestar program.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchlib import cpu_model, loadavg, write_summary

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
BUILD = os.environ.get("LODESTAR_BUILD", os.path.join(TOP, "build"))
LODESTAR = os.path.join(BUILD, "cli", "lodestar")


def main():
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__.strip())
        return 0
    dry = "--dry" in sys.argv
    rounds = 1 if dry else 7
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
    text = subprocess.run(["zstd", "-q", "-d", "-c", os.path.join(TOP, "data",
                           "glove-100d-20k.txt.zst")], stdout=subprocess.PIPE, check=True).stdout
    if dry:
        text = b"".join(text.splitlines(keepends=True)[:500])
    lines = text.decode().splitlines()
    a = np.array([[float(x) for x in ln.split(" ")[1:]] for ln in lines], dtype=np.float32)
    tmp = tempfile.mkdtemp(prefix="lodestar-pack-passes-")
    txt = os.path.join(tmp, "in.txt")
    with open(txt, "wb") as f:
        f.write(text)
    npy = os.path.join(tmp, "in.npy")
    np.save(npy, a)
    alts = [("pack text, --on-duplicate error", [txt]),
            ("pack text, --on-duplicate last", [txt, "--on-duplicate", "last"]),
            ("pack .npy", [npy])]
    try:
        import h5py
        h5 = os.path.join(tmp, "in.hdf5")
        with h5py.File(h5, "w") as f:
            f.create_dataset("train", data=a)
            f.attrs["distance"] = "angular"
        alts.append(("pack .hdf5 (libhdf5)", [h5]))
    except ImportError:
        print("h5py missing: no HDF5 row")
    samples = {name: [] for name, _ in alts}
    out = os.path.join(tmp, "out.ldsi")
    for _ in range(rounds):
        for name, args in alts:
            t = time.perf_counter()
            subprocess.run([LODESTAR, "pack", args[0], out, *args[1:]], check=True,
                           stdout=subprocess.DEVNULL)
            samples[name].append(time.perf_counter() - t)
    print(f"{len(a)} rows x {a.shape[1]} dims, {rounds} interleaved rounds, seconds per pack")
    print(f"{'alternative':36s} {'median':>8s} {'min':>8s} {'max':>8s}")
    jrows = []
    for name, s in samples.items():
        med = statistics.median(s)
        print(f"{name:36s} {med:8.3f} {min(s):8.3f} {max(s):8.3f}")
        jrows.append({"table": "pack", "name": name, "unit": "s", "median": med, "min": min(s),
                      "max": max(s), "samples": s})
    print(f"machine: {cpu_model()}, {os.cpu_count()} cpus | load average {loadavg()}")
    if write_summary(sys.argv, "pack_passes.py", "pack-passes", dry, jrows):
        return 2
    for p in os.listdir(tmp):
        os.unlink(os.path.join(tmp, p))
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
