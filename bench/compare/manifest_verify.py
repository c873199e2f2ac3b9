#!/usr/bin/env python3
"""`lodestar verify MANIFEST` on manifests of many entries naming one small shard (as the
format allows: docs/format.md MF17), at two sizes interleaved, to show the work is linear in
the entries (docs/adr/0033): before, each entry loaded its shard again.

usage: bench/compare/manifest_verify.py [--dry] [--rounds N] [--lodestar PATH] [--json FILE] [-h]

Run from the repository's top with the build in build/ (or $LODESTAR_BUILD). Sizes: 10,000 and 100,000 entries
(--dry: 100 and 1,000, 2 rounds); each round runs both, smaller first. Prints ms per run
and us per entry (median, min, max); --json FILE: rows "verify, base entries" and "verify, 10x the
entries" (ms) for scripts/adr-check.sh. --lodestar PATH: another build's program (default build/cli/lodestar),
to price an older verify.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import cpu_model, loadavg, write_summary

def main():
    # LODESTAR_BUILD: the build folder, as for the other scripts (scripts/adr_check.py sets it)
    lodestar = os.path.join(os.environ.get("LODESTAR_BUILD", "build"), "cli", "lodestar")
    if "--lodestar" in sys.argv:
        lodestar = sys.argv[sys.argv.index("--lodestar") + 1]
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__.strip())
        return 0
    dry = "--dry" in sys.argv
    rounds = 2 if dry else 5
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
    sizes = (100, 1000) if dry else (10000, 100000)
    work = tempfile.mkdtemp(prefix="lds-bench-manifest-")
    src = os.path.join(work, "tiny.txt")
    with open(src, "w") as f:
        f.write("a 1 2 3\nb 4 5 6\nc 7 8 9\nd 1 0 1\n")
    one = os.path.join(work, "tiny.ldsi")
    subprocess.run([lodestar, "pack", src, one], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([lodestar, "split", one, work, "--shards", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(work, "manifest.json")) as f:
        doc = json.load(f)
    entry, rows = doc["shards"][0], doc["shards"][0]["rows"]
    paths = {}
    for n in sizes:
        doc["shards"] = [dict(entry, first_row=rows * i) for i in range(n)]
        doc["rows"] = rows * n
        paths[n] = os.path.join(work, "m%d.json" % n)
        with open(paths[n], "w") as f:
            json.dump(doc, f)
    samples = {n: [] for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            t = time.perf_counter()
            p = subprocess.run([lodestar, "verify", paths[n]], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
            ms = (time.perf_counter() - t) * 1e3
            if p.returncode != 0:
                print(p.stderr.decode(), file=sys.stderr)
                return 1
            samples[n].append(ms)
    print("lodestar verify, one %d-row shard named by every entry (%d rounds)" % (rows, rounds))
    print(f"{'row':26s} {'entries':>8s} {'bytes':>10s} {'median ms':>10s} {'min':>8s} "
          f"{'max':>8s} {'us/entry':>9s}")
    jrows = []
    for n, name in zip(sizes, ("verify, base entries", "verify, 10x the entries")):
        s = samples[n]
        med = statistics.median(s)
        print(f"{name:26s} {n:>8d} {os.path.getsize(paths[n]):>10d} {med:>10.1f} "
              f"{min(s):>8.1f} {max(s):>8.1f} {med * 1e3 / n:>9.2f}")
        jrows.append({"table": "verify", "name": name, "unit": "ms", "median": med,
                      "min": min(s), "max": max(s), "samples": s})
    print(f"machine: {cpu_model()}, {os.cpu_count()} cpus | load average {loadavg()}")
    shutil.rmtree(work)
    if write_summary(sys.argv, "manifest_verify.py", "manifest-verify", dry, jrows):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
