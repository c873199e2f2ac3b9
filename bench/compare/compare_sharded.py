#!/usr/bin/python3
"""Sharded search on Dask workers against the single index in this process (a diagnostic).

One process, interleaved rounds (the order of the contenders rotates each round), the
same index, queries and k for all. The index (generated, --rows x --dim f32, cosine)
is split with `lodestar split --shards S` for S = 1, 2, 4. Contenders:
- single: lodestar.load + Index.search in this process, threads=1 and threads=all;
- local S: lodestar.open_shards (every shard searched in turn in this process, then
  merge_topk), threads=1: the split and merge without Dask;
- dask S/W: lodestar.dask.DaskShards on a LocalCluster of W worker processes (one
  thread each, 127.0.0.1), W = 1 and 2, search threads=1 on each worker.
Rows: ms per batch of --batch queries and queries/s, median/min/max over the rounds,
the ratio of medians to single threads=1, and the CPU time of this process (all its
threads: the client's event loop included, the workers not) per call, which a loaded
machine disturbs far less than the wall time. Then what the total is made of:
- merge: merge_topk alone over the S parts of one batch (the client's own cost);
- scheduler: one no-op task per shard pinned to its worker, submitted one
  Client.submit each, or as one graph of a layer per task as DaskShards does (the
  round trip a query pays however small the index), and client.scheduler_info() (one
  RPC DaskShards makes per query to place shards);
- dask S/W at batch 1: a single query, where that overhead is everything.
The answers of every contender are checked equal to the single index's first.

usage: /usr/bin/python3 bench/compare/compare_sharded.py [--dry] [--rounds N] [--rows N] [--dim D]
       [--batch B] [--k K] [--build DIR] [--json FILE]
Needs Debian python3-distributed (scripts/deps.sh); without it, says so and exits 0.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, os.pardir, os.pardir))
# --build DIR, else $LODESTAR_BUILD (what tests/test_bench_map.py and adr-check hand every
# entry), else build/.
BUILD = os.path.join(ROOT, sys.argv[sys.argv.index("--build") + 1]
                     if "--build" in sys.argv[:-1]
                     else os.environ.get("LODESTAR_BUILD", "build"))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("LODESTAR_LIB", os.path.join(BUILD, "liblodestar.so"))
os.environ["LODESTAR_LIB"] = os.path.abspath(os.environ["LODESTAR_LIB"])
# The worker processes import lodestar as this one does.
os.environ["PYTHONPATH"] = os.path.join(ROOT, "python") + (
    os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")

from benchlib import cpu_model, loadavg  # noqa: E402


def noop(x):
    return x


def machine():
    return "%s, %d cpus, load average %s" % (cpu_model(), os.cpu_count(), loadavg())


def stats(xs):
    return statistics.median(xs), min(xs), max(xs)


def rolling(args, client, manifest, whole_path, cli, work, q1, k, want1):
    """Rolling reloads of 4 shards on 2 workers (the same rows split again, so every
    answer must stay equal) under a thread of single queries: query latency during a
    roll and outside, roll time, queries re-run after the switch, bytes held twice."""
    import threading
    import numpy as np
    import lodestar
    import lodestar.dask
    other = os.path.join(work, "s4-again")
    subprocess.run([cli, "split", whole_path, other, "--shards", "4"], check=True,
                   stdout=subprocess.PIPE)
    mans = [manifest, os.path.join(other, "manifest.json")]
    lat, rolls, stop, wrong = [], [], threading.Event(), [0]
    with lodestar.dask.DaskShards(client, manifest) as ds:
        def reader():
            while not stop.is_set():
                t0 = time.perf_counter()
                s, r = ds.search(q1, k, threads=1)
                lat.append((t0, time.perf_counter()))
                if not (np.array_equal(r, want1[1]) and np.array_equal(s, want1[0])):
                    wrong[0] += 1
        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.5)
        for i in range(max(2, args.rounds)):
            t0 = time.perf_counter()
            ds.reload(mans[(i + 1) % 2])
            rolls.append((t0, time.perf_counter()))
            time.sleep(0.3)
        stop.set()
        t.join()
        reruns = ds.reruns
    during = [(b - a) * 1e3 for a, b in lat if any(a < r1 and b > r0 for r0, r1 in rolls)]
    outside = [(b - a) * 1e3 for a, b in lat if not any(a < r1 and b > r0 for r0, r1 in rolls)]
    roll_ms = [(b - a) * 1e3 for a, b in rolls]
    shards = lodestar.read_manifest(manifest)["shards"]
    sizes = [os.path.getsize(s["path"]) for s in shards]
    print("%-34s %10s %10s %10s %8s" % ("rolling reload, 4 shards / 2 workers", "median ms",
                                         "min ms", "max ms", "count"))
    for name, xs in (("reload() of 4 shards", roll_ms), ("single query during a roll", during),
                     ("single query outside rolls", outside)):
        if xs:
            m, lo, hi = stats(xs)
            print("%-34s %10.2f %10.2f %10.2f %8d" % (name, m, lo, hi, len(xs)))
    print("queries re-run after a switch: %d; wrong answers: %d of %d" % (
        reruns, wrong[0], len(lat)))
    print("held twice at the end of a roll: %d bytes (every shard's file); a shard-by-shard "
          "swap would hold at most %d (the largest shard) twice" % (sum(sizes), max(sizes)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry", action="store_true", help="tiny sizes, 2 rounds")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--json", help="also write every row's per-round samples (ms) as JSON "
                    "(scripts/adr-check.sh)")
    ap.add_argument("--build", default=BUILD, help="the build directory (default "
                    "$LODESTAR_BUILD, else build; configure it with -Dbuildtype=release for "
                    "figures)")
    args = ap.parse_args()
    if args.dry:
        args.rounds, args.rows, args.dim, args.batch = 2, 2000, 16, 8
    try:
        import distributed
    except ImportError as e:
        print("compare_sharded: skipped: %s (Debian python3-distributed)" % e)
        return 0
    import numpy as np
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
    import lodestar
    import lodestar.dask

    cli = os.path.join(BUILD, "cli", "lodestar")
    work = tempfile.mkdtemp(prefix="lodestar-compare-sharded-")
    rng = np.random.default_rng(3)
    v = rng.standard_normal((args.rows, args.dim)).astype(np.float32)
    whole_path = os.path.join(work, "whole.ldsi")
    lodestar.write(whole_path, v)
    manifests = {}
    for s in (1, 2, 4):
        out = os.path.join(work, "s%d" % s)
        subprocess.run([cli, "split", whole_path, out, "--shards", str(s)], check=True,
                       stdout=subprocess.PIPE)
        manifests[s] = os.path.join(out, "manifest.json")
    q = rng.standard_normal((args.batch, args.dim)).astype(np.float32)
    q1 = q[:1]
    k = args.k
    ncpu = os.cpu_count() or 1

    print("# compare_sharded: %s" % " ".join(["bench/compare/compare_sharded.py"] + sys.argv[1:]))
    print("# machine: %s" % machine())
    print("# index %d x %d f32 cosine (%.1f MiB), batch %d queries, k %d, %d rounds; "
          "the machine is shared: interleaved rounds, medians" %
          (args.rows, args.dim, v.nbytes / 2**20, args.batch, k, args.rounds))

    clusters, clients = {}, {}
    for w in (1, 2):
        clusters[w] = distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address=None,
                                               protocol="tcp://")
        clients[w] = distributed.Client(clusters[w])
    whole = lodestar.load(whole_path)
    opened = []
    try:
        want = whole.search(q, k)
        contenders = {
            "single threads=1": lambda: whole.search(q, k, threads=1),
            "single threads=%d" % ncpu: lambda: whole.search(q, k, threads=ncpu),
        }
        for s in (1, 2, 4):
            local = lodestar.open_shards(manifests[s])
            opened.append(local)
            contenders["local %d shards" % s] = (lambda sh: lambda: sh.search(q, k, threads=1))(
                local)
        dask_shards = {}
        for w in (1, 2):
            for s in (1, 2, 4):
                ds = lodestar.dask.DaskShards(clients[w], manifests[s])
                opened.append(ds)
                dask_shards[(s, w)] = ds
                contenders["dask %d shards / %d workers" % (s, w)] = (
                    lambda d: lambda: d.search(q, k, threads=1))(ds)
        for name, fn in contenders.items():  # warm, and every answer equal to the single's
            s, r = fn()
            assert np.array_equal(r, want[1]) and np.array_equal(s, want[0]), name
        single_q = {"dask %d shards / %d workers, batch 1" % sw: (
            lambda d: lambda: d.search(q1, k, threads=1))(d) for sw, d in dask_shards.items()}
        single_q["single threads=1, batch 1"] = lambda: whole.search(q1, k, threads=1)

        # the parts of one batch, for the merge alone
        parts = {}
        for s in (2, 4):
            ps = []
            for sh, index in zip(opened[[1, 2, 4].index(s)].manifest["shards"],
                                 opened[[1, 2, 4].index(s)]._indexes):
                sc, r = index.search(q, k, threads=1)
                ps.append((sc, np.where(r >= 0, r + sh["first_row"], -1)))
            parts[s] = ps
        overheads = {}
        for s in (2, 4):
            overheads["merge_topk of %d parts" % s] = (
                lambda p: lambda: lodestar.merge_topk(p, k, "cosine"))(parts[s])
        for w in (1, 2):
            c = clients[w]
            workers = sorted(c.scheduler_info()["workers"])
            for s in (1, 4):
                def rt(c=c, workers=workers, s=s):
                    fs = [c.submit(noop, i, workers=[workers[i % len(workers)]],
                                   allow_other_workers=False, pure=False) for i in range(s)]
                    c.gather(fs)
                overheads["no-op tasks: %d on %d workers" % (s, w)] = rt

                def graph(c=c, workers=workers, s=s):
                    layers, deps, keys = {}, {}, []
                    tag = time.perf_counter_ns()
                    for i in range(s):
                        key = "noop-%d-%d" % (i, tag)
                        layers[key] = MaterializedLayer({key: (noop, i)}, annotations={
                            "workers": [workers[i % len(workers)]],
                            "allow_other_workers": False})
                        deps[key] = set()
                        keys.append(key)
                    c.gather(c.get(HighLevelGraph(layers, deps), keys, sync=False))
                overheads["no-op graph: %d on %d workers" % (s, w)] = graph
            overheads["client.scheduler_info(), %d workers" % w] = c.scheduler_info

        timed, cpu = {}, {}   # wall ms and this process's CPU ms (all its threads) per call
        names = list(contenders) + list(single_q) + list(overheads)
        fns = dict(contenders, **single_q, **overheads)
        for rnd in range(args.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for name in order:
                reps = 20 if name in overheads or "batch 1" in name else 1
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(reps):
                    fns[name]()
                timed.setdefault(name, []).append((time.perf_counter() - t0) * 1e3 / reps)
                cpu.setdefault(name, []).append((time.process_time() - c0) * 1e3 / reps)

        base = statistics.median(timed["single threads=1"])
        print()
        print("%-34s %10s %10s %10s %12s %10s %12s" % (
            "search, batch %d" % args.batch, "median ms", "min ms", "max ms", "queries/s",
            "vs single1", "client cpu ms"))
        for name in contenders:
            m, lo, hi = stats(timed[name])
            print("%-34s %10.2f %10.2f %10.2f %12.0f %9.2fx %12.2f" % (
                name, m, lo, hi, args.batch / m * 1e3, base / m,
                statistics.median(cpu[name])))
        print()
        print("%-34s %10s %10s %10s %12s" % ("what it is made of", "median ms", "min ms",
                                             "max ms", "client cpu ms"))
        for name in list(single_q) + list(overheads):
            m, lo, hi = stats(timed[name])
            print("%-34s %10.3f %10.3f %10.3f %12.3f" % (name, m, lo, hi,
                                                         statistics.median(cpu[name])))
        print()
        rolling(args, clients[2], manifests[4], whole_path, cli, work, q1, k, want1=whole.search(
            q1, k))
        print()
        print("# load average at the end: %.2f %.2f %.2f" % os.getloadavg())
        if args.json:
            rows = []
            for name in names:
                table = "search, batch %d" % args.batch if name in contenders \
                    else "what it is made of"
                for label, xs in ((name, timed[name]), ("client cpu: " + name, cpu[name])):
                    rows.append({"table": table, "name": label, "unit": "ms",
                                 "median": statistics.median(xs), "min": min(xs),
                                 "max": max(xs), "samples": xs})
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"subcommand": "compare-sharded", "dry": args.dry,
                           "lodestar_version": lodestar.__version__,
                           "machine": machine(), "rows": rows}, f, indent=1)
    finally:
        for o in opened:
            o.close()
        whole.close()
        for w in (1, 2):
            clients[w].close()
            clusters[w].close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
