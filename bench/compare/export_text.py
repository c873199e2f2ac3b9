#!/usr/bin/env python3
"""What text export costs: `lodestar export --format glove` (every float printed in its
shortest round-trip decimal, std::to_chars since docs/adr/0035) against `--format npy` (the
same rows as raw float32) of the GloVe sample, whole processes, alternatives interleaved
round by round; with --old BINARY another lodestar build's glove export joins the rounds
(before/after). Each row's samples are the child's CPU time (user + system, from
getrusage), less noisy than wall time on a shared machine; wall time is printed beside.

usage: bench/compare/export_text.py [--rounds N] [--old BINARY] [--dry] [--json FILE] [-h]
Run from the repository's top after building build/. Input: data/glove-100d-20k.txt.zst
(20,000 x 100, 2,000,000 numbers) packed once. --dry: 500 rows, 1 round. --json FILE: the
rows as JSON ("ROW", unit seconds) for scripts/adr-check.sh. env: LODESTAR_BUILD (default
build/) for the lodestar program.
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import cpu_model, loadavg, write_summary

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
BUILD = os.environ.get("LODESTAR_BUILD", os.path.join(TOP, "build"))
LODESTAR = os.path.join(BUILD, "cli", "lodestar")


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__.strip())
        return 0
    dry = "--dry" in sys.argv
    rounds = 1 if dry else 7
    if "--rounds" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1])
    old = sys.argv[sys.argv.index("--old") + 1] if "--old" in sys.argv else None
    text = subprocess.run(["zstd", "-q", "-d", "-c", os.path.join(TOP, "data",
                           "glove-100d-20k.txt.zst")], stdout=subprocess.PIPE, check=True).stdout
    if dry:
        text = b"".join(text.splitlines(keepends=True)[:500])
    tmp = tempfile.mkdtemp(prefix="lodestar-export-text-")
    txt, index = os.path.join(tmp, "in.txt"), os.path.join(tmp, "in.ldsi")
    with open(txt, "wb") as f:
        f.write(text)
    subprocess.run([LODESTAR, "pack", "--format", "glove", txt, index], check=True,
                   stdout=subprocess.DEVNULL)
    alts = [("export glove", LODESTAR, "glove", "out.txt"),
            ("export npy", LODESTAR, "npy", "out.npy")]
    if old:
        alts.append(("export glove (--old)", old, "glove", "old.txt"))
    samples = {name: [] for name, *_ in alts}
    walls = {name: [] for name, *_ in alts}
    for _ in range(rounds):
        for name, prog, fmt, out in alts:
            c, t = child_cpu(), time.perf_counter()
            subprocess.run([prog, "export", "--format", fmt, index, os.path.join(tmp, out)],
                           check=True, stdout=subprocess.DEVNULL)
            walls[name].append(time.perf_counter() - t)
            samples[name].append(child_cpu() - c)
    if old:
        with open(os.path.join(tmp, "out.txt"), "rb") as a, \
                open(os.path.join(tmp, "old.txt"), "rb") as b:
            print("glove output identical to --old's:", a.read() == b.read())
    rows = len(text.splitlines())
    print(f"{rows} rows x 100 dims, {rounds} interleaved rounds, CPU seconds per export "
          "(user + system), wall median beside")
    print(f"{'alternative':24s} {'median':>8s} {'min':>8s} {'max':>8s} {'wall':>8s}")
    jrows = []
    for name, s in samples.items():
        med = statistics.median(s)
        print(f"{name:24s} {med:8.3f} {min(s):8.3f} {max(s):8.3f} "
              f"{statistics.median(walls[name]):8.3f}")
        jrows.append({"table": "export", "name": name, "unit": "s", "median": med,
                      "min": min(s), "max": max(s), "samples": s})
    print(f"machine: {cpu_model()}, {os.cpu_count()} cpus | load average {loadavg()}")
    if write_summary(sys.argv, "export_text.py", "export-text", dry, jrows):
        return 2
    for p in os.listdir(tmp):
        os.unlink(os.path.join(tmp, p))
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
