#!/usr/bin/python3
"""Exact top-k search: lodestar against usearch's exactSearch, same rows, same queries.

lodestar runs in this process (the `lodestar` package of python/, Index.search, on the
library named by LODESTAR_LIB, default build/liblodestar.so); usearch runs in a long-lived
node child (bench/compare/usearch_child.cjs) that holds the same rows and queries. Each
round times every configuration (dtype x batch x threads) on both, one right after the
other, the first of the pair alternating from round to round (A B, B A, ...), so both see
the same machine.

What usearch's exactSearch computes (usearch 2.26, javascript/lib.cpp and
index_plugins.hpp's exact_search_t): for metric "ip" the distance 1 - dot(row, query) of
every (row, query) pair, through numkong's dynamically dispatched SIMD kernels (here
"turin" and "genoa" among those available), one call of the punned metric per pair,
written into a rows x queries array of (u32 row, f32 distance), copied transposed into a
second one (16 bytes per pair in all, allocated per call: 5.5 MB per GloVe query, 546 MB
per batch of 100, which glibc maps afresh each call, so every batch-100 call faults it in),
then std::partial_sort of each query's rows for the k smallest. Threads: executor_stl_t (the prebuilt addon has no OpenMP), T - 1 std::threads
started per call beside the calling thread, rows handed out dynamically. It takes f64, f32
and i8 rows (the queries the same type); no f16 or bf16. lodestar's exact search keeps a
fused top-k over blocks of rows (docs/adr/0032).

Rows: ms per query at batch 1 (--single queries, one call each) and at batch 100 (one call),
wall median (min-max) over the rounds and median CPU ms of each process (all its threads);
the ratio lodestar / usearch of the medians; recall@k of each against an exact float64
search over the f32 rows (ties with the k-th row count as hits). dtype i8: lodestar's i8
index (f32 queries against rows stored round(x / scale)) against usearch's Int8Array rows
and queries quantized with the same scale (its dot is over the integers).

Vectors: the index named by --index (a missing file, a directory or a file that is not an index
is a usage error, exit 2); without --index, GloVe
(/work/glove/glove-100d.ldsi, else .cache/glove/...) when present, else 341,479 x 100
generated; --rows/--dim generate that shape instead. The report names the source: the index
file's path, or "generated N x D".

usage: /usr/bin/python3 bench/compare/compare_usearch.py [--dry] [--rounds N] [--warmup N] [--threads LIST]
       [--dtypes f32,i8] [--batches 1,100] [--index F | --rows N --dim D] [--json FILE]
Needs node and usearch from npm in .cache/npm (scripts/lab-npm.sh; --usearch-dir DIR);
without them it says so and exits 0 with --dry (nothing measured), 1 otherwise.
"""
import argparse
import json
import os
import statistics
import subprocess
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, os.pardir, os.pardir))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)
os.environ.setdefault("LODESTAR_LIB", os.path.join(ROOT, "build", "liblodestar.so"))

import benchlib  # noqa: E402

GLOVE = [p for p in ("/work/glove/glove-100d.ldsi",
                     os.path.join(ROOT, ".cache", "glove", "glove-100d.ldsi")) if os.path.exists(p)]

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--dry", action="store_true",
                help="20,000 x 100 generated rows, 2 rounds, no warm-up")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--warmup", type=int, default=1,
                help="rounds run first and not counted (usearch's first calls fault in its "
                     "distance matrix; glibc then keeps buffers up to 32 MiB on its heap)")
ap.add_argument("--threads", default="1,2", help="thread counts, each a configuration")
ap.add_argument("--dtypes", default="f32,i8", help="f32 and/or i8")
ap.add_argument("--batches", default="1,100", help="1 and/or a batch size <= 100")
ap.add_argument("--k", type=int, default=10, help="neighbours per query, 1..rows")
ap.add_argument("--single", type=int, default=10, help="queries timed one call each at batch 1")
ap.add_argument("--index", help="an .ldsi index to read the rows from (must exist; default: "
                "GloVe when present, else generated rows)")
ap.add_argument("--rows", type=int, default=0,
                help="generate this many rows (with --dim), at least %d (the queries are "
                     "drawn from them)" % 100)
ap.add_argument("--dim", type=int, default=100, help="dimensions of generated rows, >= 1")
ap.add_argument("--usearch-dir", default=os.environ.get(
    "LDS_USEARCH_DIR", os.path.join(ROOT, ".cache", "npm", "node_modules", "usearch")))
ap.add_argument("--node", default=os.environ.get("LDS_NODE", "node"))
ap.add_argument("--json", help="also write the rows (per-round samples) as JSON here")
args = ap.parse_args()

NQ = 100

# Every argument is checked before anything is loaded or measured: argparse's error (exit 2)
# states the allowed range instead of a traceback from numpy later.
if args.k < 1:
    ap.error("--k must be >= 1 (and at most the number of rows), got %d" % args.k)
if args.rows and args.rows < NQ:
    ap.error("--rows must be 0 (not generated) or >= %d (the %d queries are drawn from the "
             "rows), got %d" % (NQ, NQ, args.rows))
if args.rows and args.k > args.rows:
    ap.error("--k must be at most --rows (%d), got %d" % (args.rows, args.k))
if args.dim < 1:
    ap.error("--dim must be >= 1, got %d" % args.dim)
if args.rounds < 1 or args.warmup < 0:
    ap.error("--rounds must be >= 1 and --warmup >= 0, got %d and %d" % (args.rounds, args.warmup))
if args.index is not None and os.path.isdir(args.index):
    ap.error("--index %s: is a directory, not an index file" % args.index)
if args.index is not None and not os.path.exists(args.index):
    ap.error("--index %s: no such file" % args.index)
if args.index is not None and not os.path.isfile(args.index):
    ap.error("--index %s: not a regular file" % args.index)
if args.index is not None and (args.rows or args.dry):
    ap.error("--index reads its rows; --rows/--dim and --dry generate them: give one or the other")
_dtypes = [d for d in args.dtypes.split(",") if d]
try:
    _batches = [int(b) for b in args.batches.split(",") if b]
    _threads = [int(t) for t in args.threads.split(",") if t]
except ValueError:
    _batches = _threads = None
if not _dtypes or any(d not in ("f32", "i8") for d in _dtypes) or not _batches \
        or any(not 1 <= b <= NQ for b in _batches) or not _threads or any(t < 1 for t in _threads) \
        or not (1 <= args.single <= NQ):
    ap.error("--dtypes takes f32,i8; --batches 1..%d; --threads >= 1; --single 1..%d" % (NQ, NQ))
if args.index is None and GLOVE and not args.rows and not args.dry:
    args.index = GLOVE[0]


def fail(msg):
    print("compare_usearch: " + msg, file=sys.stderr)
    if args.dry:
        print("compare_usearch: --dry: nothing measured")
        sys.exit(0)
    sys.exit(1)


def usearch_present():
    pkg = os.path.join(args.usearch_dir, "package.json")
    if not os.path.exists(pkg):
        return "usearch is not installed in %s (scripts/lab-npm.sh installs it)" % args.usearch_dir
    try:
        subprocess.run([args.node, "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "node (%s) does not run" % args.node
    return None


import numpy as np  # noqa: E402

import lodestar  # noqa: E402


def vectors():
    if args.index is not None:
        # A file that is not an index (or cannot be read) is a usage error naming the file and
        # lodestar's reason, before usearch is looked for (it was a traceback).
        try:
            with lodestar.load(args.index) as idx:
                x = np.array(idx.as_float32(), dtype=np.float32)
        except (lodestar.Error, OSError) as e:
            ap.error("--index %s: not a readable lodestar index: %s" % (args.index, e))
        if x.shape[0] < max(NQ, args.k):
            fail("--index %s: %d rows, fewer than the %d queries or --k %d" % (
                args.index, x.shape[0], NQ, args.k))
        return x, "index %s (%d x %d)" % (args.index, x.shape[0], x.shape[1])
    n, d = (args.rows or 20000, args.dim) if (args.dry or args.rows) else (341479, 100)
    rng = np.random.default_rng(7)
    return rng.standard_normal((n, d), dtype=np.float32) * 0.4, "generated %d x %d" % (n, d)


def reference(x, q, k):
    """Exact top-k by dot product in float64; every row tied with the k-th is kept (a hit
    on any of them counts)."""
    xd = x.astype(np.float64)
    out = []
    for j in range(q.shape[0]):
        s = xd @ q[j].astype(np.float64)
        cand = np.argpartition(-s, k - 1)[:k]
        kth = s[cand].min()
        out.append(set(np.nonzero(s >= kth)[0].tolist()))
    return out


def recall(got, ref, k):
    return float(np.mean([len(set(int(r) for r in g[:k]) & t) / k for g, t in zip(got, ref)]))


class Usearch:
    def __init__(self, x, q, tmp):
        rp, qp = os.path.join(tmp, "rows.f32"), os.path.join(tmp, "queries.f32")
        x.tofile(rp)
        q.tofile(qp)
        self.p = subprocess.Popen([args.node, os.path.join(HERE, "usearch_child.cjs"),
                                   args.usearch_dir, rp, qp, str(x.shape[1])],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            self.info = self.ask({"op": "info"})
            if self.info.get("rows") != x.shape[0] or self.info.get("queries") != q.shape[0]:
                raise RuntimeError("usearch child read %r" % self.info)
            os.unlink(rp)  # the child holds them now; main's finally removes them otherwise
            os.unlink(qp)
        except BaseException:
            self.close()
            raise

    def ask(self, req):
        try:
            self.p.stdin.write(json.dumps(req) + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            # ended before reading the request (the suite's fake child, at times): the same
            # one line as an end after it, no traceback
            raise RuntimeError("usearch child ended (exit %s)" % self.p.wait()) from None
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("usearch child ended (exit %s)" % self.p.wait())
        try:
            out = json.loads(line)
        except ValueError:
            raise RuntimeError("usearch child wrote %r, not JSON" % line[:200])
        if "error" in out:
            raise RuntimeError("usearch child: " + out["error"])
        return out

    def run(self, dtype, batch, threads, keys):
        r = self.ask({"op": "run", "dtype": dtype, "batch": batch, "threads": threads,
                      "k": args.k, "single": args.single, "keys": keys})
        return r["wall_ms"], r["cpu_ms"], r.get("keys")

    def close(self):
        """Ends the child: EOF on its input, then a kill if it has not ended within 10 s."""
        try:
            self.p.stdin.close()
        except OSError:  # a child that has ended: the pipe is broken
            pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


class Lodestar:
    def __init__(self, path, q):
        self.idx = lodestar.load(path)
        self.q = q

    def run(self, batch, threads, keys):
        calls = args.single if batch == 1 else 1
        per = 1 if batch == 1 else batch
        qs = [np.ascontiguousarray(self.q[c * per:(c + 1) * per]) for c in range(calls)]
        got = []
        t, u = time.perf_counter(), time.process_time()
        for c in range(calls):
            rows = self.idx.search(qs[c], args.k, threads=threads)[1]
            if keys:
                got.extend(rows.tolist())
        n = calls * per
        return ((time.perf_counter() - t) * 1e3 / n, (time.process_time() - u) * 1e3 / n,
                got if keys else None)

    def close(self):
        self.idx.close()


def main():
    x, source = vectors()
    missing = usearch_present()
    if missing:
        fail(missing)
    dtypes, batches, threads = _dtypes, _batches, _threads
    rounds = 2 if args.dry else args.rounds
    if args.dry:
        args.warmup = 0
    n, d = x.shape
    rng = np.random.default_rng(11)
    q = x[rng.choice(n, NQ, replace=False)] + rng.standard_normal((NQ, d)).astype(np.float32) * 0.05
    q = np.ascontiguousarray(q, dtype=np.float32)
    scale = float(np.abs(x).max()) / 127.0
    # The temporary folder (the rows and queries handed to the child, each index while it is
    # loaded) is removed however the run ends: a failed child, a failed write, Ctrl-C.
    tmp = tempfile.mkdtemp(prefix="lds-usearch-")
    lds, us = {}, None
    try:
        for dt in dtypes:
            path = os.path.join(tmp, "%s.ldsi" % dt)
            lodestar.write(path, x, dtype=dt, metric="dot", i8_scale=scale if dt == "i8" else None)
            lds[dt] = Lodestar(path, q)
            os.unlink(path)
        us = Usearch(x, q, tmp)
        if "i8" in dtypes:
            us.ask({"op": "i8", "scale": scale})
        ref = reference(x, q, args.k)
        configs = [(dt, b, t) for dt in dtypes for b in batches for t in threads]
        wall, cpu, rec = {}, {}, {}
        for rnd in range(args.warmup + rounds):
            print("round %d of %d (%d warm-up)" % (rnd + 1, args.warmup + rounds, args.warmup),
                  file=sys.stderr, flush=True)
            for dt, b, t in configs:
                first = rnd == args.warmup
                pair = [("lodestar", lambda: lds[dt].run(b, t, first)),
                        ("usearch", lambda: us.run(dt, b, t, first))]
                if rnd % 2:
                    pair.reverse()
                for who, fn in pair:
                    w, c, keys = fn()
                    if rnd < args.warmup:
                        continue
                    wall.setdefault((who, dt, b, t), []).append(w)
                    cpu.setdefault((who, dt, b, t), []).append(c)
                    if keys is not None:
                        rec[(who, dt, b, t)] = recall(keys, ref[:len(keys)], args.k)
    except RuntimeError as e:  # the child failed: said in one line, not a traceback
        print("compare_usearch: %s" % e, file=sys.stderr)
        sys.exit(1)
    finally:
        for c in lds.values():
            c.close()
        if us is not None:
            us.close()
        shutil.rmtree(tmp, ignore_errors=True)

    print("# compare_usearch: exact top-%d, dot product, %s, %d queries (batch 1: "
          "the first %d, one call each), %d rounds after %d warm-up, lodestar and usearch "
          "interleaved (A B, B A, ...)" % (args.k, source, NQ, args.single, rounds,
                                           args.warmup))
    print("# machine: %s, %d cpus; load average %s" % (benchlib.cpu_model(), os.cpu_count(),
                                                      benchlib.loadavg()))
    print("# lodestar: python package (Index.search), %s; usearch %s exactSearch (metric ip: "
          "1 - dot per pair, numkong SIMD, rows x queries distance matrix + partial_sort, "
          "threads: T - 1 std::threads per call) on node %s; numkong targets available: %s" % (
              os.environ["LODESTAR_LIB"], us.info["usearch"], us.info["node"],
              us.info.get("isa", "?")))
    if "i8" in dtypes:
        print("# i8: lodestar f32 queries over rows round(x / %.6g); usearch rows and queries "
              "both round(x / %.6g), integer dot" % (scale, scale))
    print("%-9s %-4s %5s %3s %28s %9s %8s" % ("who", "type", "batch", "thr",
                                              "wall ms/query med (min-max)", "cpu ms/q", "recall"))
    for dt, b, t in configs:
        for who in ("lodestar", "usearch"):
            v = wall[(who, dt, b, t)]
            print("%-9s %-4s %5d %3d %28s %9.3f %8.4f" % (
                who, dt, b, t, "%.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v)),
                statistics.median(cpu[(who, dt, b, t)]), rec[(who, dt, b, t)]))
    print("# ratios lodestar / usearch of the medians (below 1: lodestar faster)")
    ratios = {}
    for dt, b, t in configs:
        rw = statistics.median(wall[("lodestar", dt, b, t)]) / \
            statistics.median(wall[("usearch", dt, b, t)])
        rc = statistics.median(cpu[("lodestar", dt, b, t)]) / \
            max(statistics.median(cpu[("usearch", dt, b, t)]), 1e-9)
        ratios[(dt, b, t)] = (rw, rc)
        print("ratio lodestar / usearch %-4s batch %3d threads %d: wall %.2f  cpu %.2f" % (
            dt, b, t, rw, rc))
    if args.json:
        rows = []
        for dt, b, t in configs:
            for who in ("lodestar", "usearch"):
                key = (who, dt, b, t)
                rows.append({"table": "%s batch %d threads %d" % (dt, b, t),
                             "name": "%s %s @ batch %d threads %d" % (who, dt, b, t),
                             "unit": "ms/query", "median": statistics.median(wall[key]),
                             "min": min(wall[key]), "max": max(wall[key]),
                             "samples": wall[key], "cpu_samples": cpu[key],
                             "recall": rec[key]})
            rows.append({"table": "%s batch %d threads %d" % (dt, b, t),
                         "name": "ratio lodestar / usearch %s @ batch %d threads %d" % (dt, b, t),
                         "unit": "ratio", "wall": ratios[(dt, b, t)][0],
                         "cpu": ratios[(dt, b, t)][1]})
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"subcommand": "compare-usearch", "dry": args.dry,
                       "machine": "%s, %d cpus | usearch %s | node %s" % (
                           benchlib.cpu_model(), os.cpu_count(), us.info["usearch"],
                           us.info["node"]),
                       "source": source, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
