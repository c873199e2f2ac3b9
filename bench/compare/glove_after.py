#!/usr/bin/python3
"""GloVe's pooled verified load after other large allocations in the same process (issue 25's
third target, issue 30's "anomaly 2"), interleaved with a clean process and numpy.load.

Each round runs every case in a fresh process (this script again, --case), in turn:
- clean:        lodestar.load(GloVe) 5 times; the 2nd.. reuse the pool's retained buffer;
- after:        2 loads, then numpy.load of the same vectors (.npy) and faiss.read_index of a
                flat index of them, both kept alive, then 3 loads;
- after, freed: the same, the numpy array and the faiss index deleted before the 3 loads;
- idle:         2 loads, then time.sleep() as long as numpy.load + faiss.read_index took in
                the case before, then 3 loads (the same gap, no allocation);
- the same "after" and "idle" with 4 KiB pages (LDS_POOL_HUGE_PAGES=off);
- numpy.load:   5 loads of the .npy.
Rows: the loads after the gap (or the 2nd..5th of a clean case), wall median/min/max, CPU
split into user and kernel ms (median, and the kernel's max), minor faults, the kernel's CPU
per MiB loaded, and "runq wait": the median ms the loading thread waited for a CPU
(/proc/thread-self/schedstat). Wall = CPU + run-queue wait (+ the host's steal): the two
columns say which of them a slow load paid; "elsewhere" (median, max) is the rest: wall less
CPU less run-queue wait, time the thread neither ran nor waited for a guest CPU (the host's
steal and its own faults, or blocking) (docs/measurements/glove-after-allocations.md).

usage: /usr/bin/python3 bench/compare/glove_after.py [--rounds N] [--index F] [--dir D] [--dry]
(the .npy and the faiss index are written once into --dir from the index's vectors)
Needs python3-numpy; python3-faiss for the faiss step (skipped, and said, without it).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, os.pardir, os.pardir)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("LODESTAR_LIB", os.path.join(ROOT, "build", "liblodestar.so"))

CASES = [
    ("clean", "pooled verified, clean process (2nd-5th load)", "on"),
    ("after", "pooled verified, after numpy.load + faiss.read_index", "on"),
    ("after-freed", "pooled verified, after numpy.load + faiss.read_index, both freed", "on"),
    ("idle", "pooled verified, after an idle gap as long", "on"),
    ("after", "pooled verified, 4 KiB pages, after numpy.load + faiss.read_index", "off"),
    ("idle", "pooled verified, 4 KiB pages, after an idle gap as long", "off"),
    ("numpy", "numpy.load (same vectors)", "on"),
]


def run_delay_ms():
    """Time this thread waited on a run queue (/proc/thread-self/schedstat, 2nd field), ms."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0


def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime * 1e3, r.ru_stime * 1e3, r.ru_minflt, run_delay_ms()


def timed(fn):
    u0, s0, f0, q0 = usage()
    t0 = time.perf_counter_ns()
    out = fn()
    t1 = time.perf_counter_ns()
    u1, s1, f1, q1 = usage()
    return out, ((t1 - t0) / 1e6, u1 - u0, s1 - s0, f1 - f0, q1 - q0)


def child(case, index, npy, flat, gap):
    import numpy as np

    import lodestar

    def one():
        idx, s = timed(lambda: lodestar.load(index))
        mib = idx.info["payload_bytes"] / 1048576.0
        idx.close()
        return s + (mib,)

    if case == "numpy":
        for _ in range(5):
            a, s = timed(lambda: np.load(npy))
            print("%.3f %.3f %.3f %d %.3f %.3f 0" % (s + (a.nbytes / 1048576.0,)), flush=True)
            del a
        return
    first = 5 if case == "clean" else 2
    samples = [one() for _ in range(first)]
    took = 0.0
    keep = []
    if case.startswith("after"):
        t0 = time.perf_counter()
        keep.append(np.load(npy))
        try:
            import faiss

            keep.append(faiss.read_index(flat))
        except ImportError:
            pass
        took = time.perf_counter() - t0
        if case == "after-freed":
            keep.clear()
    elif case == "idle":
        time.sleep(gap)  # --dry passes a short gap
        took = gap
    if case != "clean":
        samples += [one() for _ in range(3)]
    # clean: the 2nd-5th (the first faults its buffer in: not the question here); else the
    # loads after the gap
    for s in samples[1:] if case == "clean" else samples[first:]:
        print("%.3f %.3f %.3f %d %.3f %.3f %.3f" % (s + (took,)), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--index", default=os.path.join(ROOT, ".cache", "glove", "glove-100d.ldsi"))
    ap.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--dry", action="store_true", help="a small generated index, 1 round")
    ap.add_argument("--case")
    ap.add_argument("--gap", type=float, default=1.0)
    ap.add_argument("--npy")
    ap.add_argument("--flat")
    a = ap.parse_args()
    if a.case:
        child(a.case, a.index, a.npy, a.flat, a.gap)
        return 0
    import numpy as np

    import lodestar

    index = a.index
    if a.dry or not os.path.exists(index):
        if not a.dry:
            print("# %s not found (scripts/fetch-glove.sh makes it): a generated 341479 x 100 "
                  "index instead" % index)
        rows = 2000 if a.dry else 341479
        index = os.path.join(a.dir, "glove-after-%d.ldsi" % rows)
        if not os.path.exists(index):
            v = np.random.default_rng(1).standard_normal((rows, 100), dtype=np.float32)
            lodestar.write(index, v)
        a.rounds = 1 if a.dry else a.rounds
    stem = os.path.join(a.dir, os.path.basename(index).rsplit(".", 1)[0])
    npy, flat = stem + ".npy", stem + ".faiss"
    if not os.path.exists(npy) or not os.path.exists(flat):
        with lodestar.load(index) as idx:
            v = np.array(idx.vectors, dtype=np.float32)
        np.save(npy, v)
        try:
            import faiss

            f = faiss.IndexFlatL2(v.shape[1])
            f.add(v)
            faiss.write_index(f, flat)
        except ImportError:
            print("# faiss not importable: the 'after' cases run numpy.load only")
        del v
    print("machine: %s | %s" % (os.uname().machine, " ".join(os.uname()[2:3])))
    with open("/proc/loadavg") as f:
        print("load average: %s (at the start)" % " ".join(f.read().split()[:3]))
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        print("transparent huge pages: %s" % f.read().strip())
    rows = {i: [] for i in range(len(CASES))}
    gap = 1.0
    for _ in range(a.rounds):
        for i, (case, _, huge) in enumerate(CASES):
            env = dict(os.environ, LDS_POOL_HUGE_PAGES=huge)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--case", case,
                                  "--index", index, "--npy", npy, "--flat", flat,
                                  "--gap", "%.3f" % (0.1 if a.dry else gap)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            for line in out.strip().split("\n"):
                w, u, s, f, q, mib, took = (float(x) for x in line.split())
                if case == "after" and took > 0:
                    gap = took
                rows[i].append((w, u, s, f, mib, q))
    print("GloVe %s: %d rounds, each case a fresh process; rows: loads after the gap "
          "(clean, numpy: the 2nd-5th)" % (os.path.basename(index), a.rounds))
    print("%-68s | %7s %7s %7s | %7s %7s %8s | %7s | %11s | %9s | %9s %9s | %8s" % (
        "name", "median", "min", "max", "user ms", "kern ms", "kern max", "faults", "kern ms/MiB",
        "runq wait", "elsewhere", "max", "vs numpy"))
    npm = statistics.median(r[0] for r in rows[len(CASES) - 1]) if rows[len(CASES) - 1] else 0
    for i, (case, name, huge) in enumerate(CASES):
        r = rows[i]
        if not r:
            continue
        w = sorted(x[0] for x in r)
        med = statistics.median(w)
        kern = statistics.median(x[2] for x in r)
        mib = r[0][4]
        # elsewhere: wall - user - kernel - run-queue wait: time the loading thread neither ran
        # nor waited for a guest CPU (the host's: steal, its own faults; or blocked)
        gone = sorted(max(0.0, x[0] - x[1] - x[2] - x[5]) for x in r)
        print("%-68s | %7.1f %7.1f %7.1f | %7.1f %7.1f %8.1f | %7d | %11.3f | %9.1f | %9.1f %9.1f | "
              "%7.2fx" % (
                  name, med, w[0], w[-1], statistics.median(x[1] for x in r), kern,
                  max(x[2] for x in r), statistics.median(x[3] for x in r), kern / mib if mib else 0,
                  statistics.median(x[5] for x in r), statistics.median(gone), gone[-1],
                  med / npm if npm else 0))
    print("(gap: numpy.load + faiss.read_index took %.2f s in the last 'after' case)" % gap)
    return 0


if __name__ == "__main__":
    sys.exit(main())
