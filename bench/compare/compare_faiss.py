#!/usr/bin/python3
"""Exact top-k search: lodestar against faiss's flat indexes and numpy, same vectors.

One process, interleaved rounds (the order of the contenders rotates each
round), the same vectors, queries and thread count for all:
- lodestar (lds_index_search / lds_index_search_batch through ctypes on
  build/liblodestar.so) on f32, f16, bf16 and i8 indexes of the vectors;
- faiss IndexFlatIP and IndexFlatL2 (f32), IndexScalarQuantizer fp16 (our f16's
  peer) and 8-bit (our i8's; bf16 has no faiss peer: compare it with our f32);
- numpy: matmul + argpartition (OpenBLAS sgemm).
Rows: ms per query at batch 1 (queries one call each) and batch 100, k = 10 and
k = 100, median/min/max over the rounds; recall@k against an exact double-
precision reference over the values each contender searches (lodestar's own
stored values; faiss's and numpy's against the f32 vectors). Then the machine's
read bandwidth (glibc memchr over 512 MiB, 1 and all threads) and the fraction a
single-query f32 scan reaches.

Vectors: the full GloVe index (.cache/glove/glove-100d.ldsi, see
tests/test_glove_slow.sh) when present, else 341,479 x 100 generated.
The machine is shared (2 vCPUs, other builds running): timings are noisy;
the rounds are interleaved so every contender sees the same noise.

usage: /usr/bin/python3 bench/compare/compare_faiss.py [--dry] [--rounds N] [--threads T] [--index F]
(it re-executes itself without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which may be set
on these machines and slow OpenBLAS: unset in the comparison's own process only)
Needs Debian python3-faiss, python3-numpy, libopenblas0-pthread (scripts/deps.sh).
"""
import argparse
import ctypes
import os
import platform
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, os.pardir, os.pardir)
sys.path.insert(0, os.path.join(ROOT, "python"))
# The package in a checkout has no bundled library: the build's (as compare_numpy.py does).
os.environ.setdefault("LODESTAR_LIB", os.path.join(ROOT, "build", "liblodestar.so"))

# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE may be set on these machines and slow
# OpenBLAS (numpy and faiss); this comparison runs without them, in its own process only.
if any(v in os.environ for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--dry", action="store_true", help="tiny sizes, 2 rounds")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--threads", type=int, default=0, help="0: every online core")
ap.add_argument("--index", default=os.path.join(ROOT, ".cache", "glove", "glove-100d.ldsi"))
ap.add_argument("--sections", default="main,extras",
                help="main: the comparison table; extras: cosine norms (first search vs later) "
                     "and single-query threads 1 vs all")
ap.add_argument("--single", type=int, default=10, help="queries timed one at a time")
ap.add_argument("--contenders", default="",
                help="main: only the contenders whose name, spaces as '-', contains one of these "
                     "comma-separated words (e.g. f32-dot,IndexFlatIP for adr-check); the others "
                     "are neither built nor timed")
ap.add_argument("--json", help="also write every row's per-round samples (wall ms per query) as "
                               "JSON to this file (scripts/adr-check.sh); rows are named "
                               "'CONTENDER @ batch B k K'")
args = ap.parse_args()
THREADS = args.threads or os.cpu_count()
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)

import numpy as np  # noqa: E402

import lodestar  # noqa: E402

try:
    import faiss  # noqa: E402
except ImportError:
    faiss = None

ROUNDS = 2 if args.dry else args.rounds
NQ = 100


class Hit(ctypes.Structure):
    _fields_ = [("row", ctypes.c_uint64), ("score", ctypes.c_float)]


class SearchOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("threads", ctypes.c_uint)]


lib = lodestar.library()
P, S = ctypes.c_void_p, ctypes.c_size_t
lib.lds_index_search.restype = ctypes.c_int
lib.lds_index_search.argtypes = [P, P, S, S, P, P, P]
lib.lds_index_search_batch.restype = ctypes.c_int
lib.lds_index_search_batch.argtypes = [P, P, S, S, S, P, P, P, P]


def vectors():
    if not args.dry and os.path.exists(args.index):
        with lodestar.load(args.index) as idx:
            return np.array(idx.vectors, dtype=np.float32), "GloVe " + args.index
    rng = np.random.default_rng(7)
    n = 20000 if args.dry else 341479
    return rng.standard_normal((n, 100), dtype=np.float32) * 0.4, "generated"


_DTYPES = {1: "f32", 2: "f16", 3: "bf16", 4: "i8"}


def write(path, x, dtype, metric, scale=0.0):
    lodestar.write(path, x, dtype=_DTYPES[dtype], metric=metric, i8_scale=scale or None)


def stored_f32(idx):
    """The rows as lodestar decodes them (i8 with its scale, f16 and bf16 widened)."""
    return np.array(idx.as_float32(), dtype=np.float32)


class Lds:
    def __init__(self, name, path, x_stored):
        self.name, self.idx = name, lodestar.load(path)
        self.handle = self.idx._enter()  # the raw lds_index *, held until close()
        self.stored = x_stored
        self.opts = SearchOptions(ctypes.sizeof(SearchOptions), THREADS)

    def close(self):
        self.idx._leave()
        self.idx.close()

    def search(self, q, k):
        q = np.ascontiguousarray(q, dtype=np.float32)
        nq = q.shape[0]
        hits = (Hit * (nq * k))()
        n = (ctypes.c_size_t * nq)()
        st = lib.lds_index_search_batch(self.handle, q.ctypes.data, nq, q.shape[1], k,
                                        ctypes.byref(self.opts), hits, n, None)
        assert st == 0, st
        return np.frombuffer(hits, dtype=[("row", "<u8"), ("score", "<f4"), ("pad", "V4")]) \
            ["row"].reshape(nq, k)


class Faiss:
    def __init__(self, name, index):
        self.name, self.index = name, index

    def search(self, q, k):
        return self.index.search(np.ascontiguousarray(q, dtype=np.float32), k)[1]


class Numpy:
    name = "numpy matmul+argpartition"

    def __init__(self, x):
        self.x = x

    def search(self, q, k):
        s = q @ self.x.T  # nq x rows
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        order = np.take_along_axis(s, part, 1).argsort(axis=1)[:, ::-1]
        return np.take_along_axis(part, order, 1)


def reference(x, q, k, lower):
    """Exact top-k in double precision, ties by row (l2 as |x|^2 - 2 x.q: the |q|^2 term
    does not change the order)."""
    xd = x.astype(np.float64)
    xx = (xd * xd).sum(axis=1) if lower else None
    out = np.empty((q.shape[0], k), dtype=np.int64)
    for j0 in range(0, q.shape[0], 25):
        s = xd @ q[j0:j0 + 25].astype(np.float64).T  # rows x 25
        for jj in range(s.shape[1]):
            key = xx - 2 * s[:, jj] if lower else -s[:, jj]
            cand = np.argpartition(key, k - 1)[:k]
            kth = key[cand].max()
            cand = np.nonzero(key <= kth)[0]  # every row tied with the k-th too
            out[j0 + jj] = cand[np.lexsort((cand, key[cand]))][:k]
    return out


def recall(got, ref):
    k = ref.shape[1]
    return float(np.mean([len(set(g[:k]) & set(r)) / k for g, r in zip(got, ref)]))


def memchr_bandwidth(nthreads, nbytes=512 << 20):
    """Best read rate of glibc memchr (AVX2) over nbytes split across threads: bytes per
    wall second, and bytes per CPU second of the process."""
    libc = ctypes.CDLL(None)
    libc.memchr.restype = P
    libc.memchr.argtypes = [P, ctypes.c_int, S]
    bufs = [np.empty(nbytes // nthreads, dtype=np.uint8) for _ in range(nthreads)]
    for b in bufs:
        b.fill(0)  # touched: np.zeros' untouched pages all map one zero page
    best = best_cpu = 0.0
    for _ in range(5):
        ts = [threading.Thread(target=libc.memchr, args=(b.ctypes.data, 1, b.size)) for b in bufs]
        t0, u0 = time.perf_counter(), time.process_time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best = max(best, nbytes / (time.perf_counter() - t0))
        best_cpu = max(best_cpu, nbytes / max(time.process_time() - u0, 1e-9))
    return best, best_cpu


def extras(x, q, tmp):
    """The first cosine search of a freshly loaded index (it builds the row norms) against
    the later ones, and single-query scans with 1 thread against all, interleaved."""
    n, d = x.shape
    path = os.path.join(tmp, "f32-cosine.ldsi")
    write(path, x, 1, "cosine")
    firsts, laters = [], []
    for rnd in range(3 if not args.dry else 1):
        c = Lds("cosine", path, x)
        c.opts.threads = 1
        t = time.perf_counter()
        c.search(q[rnd:rnd + 1], 10)
        firsts.append((time.perf_counter() - t) * 1e3)
        for j in range(5):
            t = time.perf_counter()
            c.search(q[j:j + 1], 10)
            laters.append((time.perf_counter() - t) * 1e3)
        c.close()
    print("cosine, 1 thread: first search of a fresh load (builds the norms) median %.1f ms "
          "(%.1f-%.1f), later searches median %.1f ms (%.1f-%.1f)" % (
              statistics.median(firsts), min(firsts), max(firsts), statistics.median(laters),
              min(laters), max(laters)))
    f32 = Lds("f32", path, x)
    walls = {1: [], THREADS: []}
    for j in range(40 if not args.dry else 4):
        for th in walls:
            f32.opts.threads = th
            t = time.perf_counter()
            f32.search(q[j % NQ:j % NQ + 1], 10)
            walls[th].append((time.perf_counter() - t) * 1e3)
    for th, v in walls.items():
        print("single query f32 (cosine index), threads %d: median %.2f ms (%.2f-%.2f), %d "
              "queries interleaved" % (th, statistics.median(v), min(v), max(v), len(v)))
    f32.close()
    os.unlink(path)


def wanted(name):
    """Whether --contenders keeps the contender of this name (all when it is empty)."""
    words = [w for w in args.contenders.split(",") if w]
    return not words or any(w in name.replace(" ", "-") for w in words)


def main():
    x, source = vectors()
    n, d = x.shape
    rng = np.random.default_rng(11)
    q = x[rng.choice(n, NQ, replace=False)] + rng.standard_normal((NQ, d)).astype(np.float32) * 0.05
    q = np.ascontiguousarray(q, dtype=np.float32)
    tmp = tempfile.mkdtemp(prefix="lds-faiss-")
    sections = args.sections.split(",")
    if "extras" in sections:
        print("# extras: %s, %d x %d, machine %s, load average %s" % (
            source, n, d, cpu_model(), " ".join("%.2f" % a for a in os.getloadavg())))
        extras(x, q, tmp)
    if "main" not in sections:
        return
    scale = float(np.abs(x).max()) / 127.0
    specs = [("f32", 1, "dot"), ("f32", 1, "l2"), ("f16", 2, "dot"), ("bf16", 3, "dot"),
             ("i8", 4, "dot")]
    contenders, refset = [], {}
    t0 = time.perf_counter()
    for name, dt, metric in specs:
        if not wanted("lodestar %s %s" % (name, metric)):
            continue
        path = os.path.join(tmp, "%s-%s.ldsi" % (name, metric))
        write(path, x, dt, metric, scale if dt == 4 else 0.0)
        c = Lds("lodestar %s %s" % (name, metric), path, None)
        c.stored = stored_f32(c.idx) if dt != 1 else x
        c.lower = metric == "l2"
        contenders.append(c)
        os.unlink(path)
    setup_s = time.perf_counter() - t0
    if faiss is not None and any(wanted(n) for n in ("faiss IndexFlatIP", "faiss IndexFlatL2",
                                                      "faiss SQ fp16 IP", "faiss SQ 8bit IP")):
        faiss.omp_set_num_threads(THREADS)
        ip, l2 = faiss.IndexFlatIP(d), faiss.IndexFlatL2(d)
        ip.add(x)
        l2.add(x)
        sq16 = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_fp16,
                                          faiss.METRIC_INNER_PRODUCT)
        sq8 = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_8bit,
                                         faiss.METRIC_INNER_PRODUCT)
        for sq, sqname in ((sq16, "faiss SQ fp16 IP"), (sq8, "faiss SQ 8bit IP")):
            if wanted(sqname):
                sq.train(x)
                sq.add(x)
        for name, index, lower in [("faiss IndexFlatIP", ip, False),
                                   ("faiss IndexFlatL2", l2, True),
                                   ("faiss SQ fp16 IP", sq16, False),
                                   ("faiss SQ 8bit IP", sq8, False)]:
            if not wanted(name):
                continue
            f = Faiss(name, index)
            f.stored, f.lower = x, lower
            contenders.append(f)
    if wanted("numpy"):
        npc = Numpy(x)
        npc.stored, npc.lower = x, False
        contenders.append(npc)

    ks = [10, 100]
    times = {}  # (name, batch, k) -> [wall ms per query]
    cpu = {}  # the same in CPU time of the process (all threads): steadier on a loaded machine
    recalls = {}
    single = q[: (5 if args.dry else args.single)]
    for rnd in range(ROUNDS):
        print("round %d of %d" % (rnd + 1, ROUNDS), file=sys.stderr, flush=True)
        order = contenders[rnd % len(contenders):] + contenders[: rnd % len(contenders)]
        for c in order:
            for k in ks:
                t, u = time.perf_counter(), time.process_time()
                for j in range(single.shape[0]):
                    c.search(single[j:j + 1], k)
                times.setdefault((c.name, 1, k), []).append(
                    (time.perf_counter() - t) * 1e3 / single.shape[0])
                cpu.setdefault((c.name, 1, k), []).append(
                    (time.process_time() - u) * 1e3 / single.shape[0])
                t, u = time.perf_counter(), time.process_time()
                got = c.search(q, k)
                times.setdefault((c.name, NQ, k), []).append((time.perf_counter() - t) * 1e3 / NQ)
                cpu.setdefault((c.name, NQ, k), []).append((time.process_time() - u) * 1e3 / NQ)
                if rnd == 0:
                    key = (id(c.stored), c.lower, k)
                    if key not in refset:
                        refset[key] = reference(c.stored, q, k, c.lower)
                    recalls[(c.name, k)] = recall(got, refset[key])

    print("# compare_faiss: exact top-k, %s, %d x %d, %d queries, %d threads, %d rounds "
          "(interleaved)" % (source, n, d, NQ, THREADS, ROUNDS))
    print("# machine: %s; load average %s; numpy %s; faiss %s" % (
        cpu_model(), " ".join("%.2f" % a for a in os.getloadavg()), np.__version__,
        faiss.__version__ if faiss else "absent"))
    print("# batch 1: %d queries one call each; ms per query, median (min-max) of wall time, "
          "then median CPU ms per query (all threads)" % single.shape[0])
    print("%-28s %5s %5s %26s %8s %8s" % ("contender", "batch", "k", "wall ms/query", "cpu ms",
                                          "recall"))
    for c in contenders:
        for b in (1, NQ):
            for k in ks:
                v = times[(c.name, b, k)]
                print("%-28s %5d %5d %10.3f (%6.3f-%7.3f) %8.3f %8.4f" % (
                    c.name, b, k, statistics.median(v), min(v), max(v),
                    statistics.median(cpu[(c.name, b, k)]), recalls[(c.name, k)]))
    if args.json:
        import json
        rows = [{"table": "batch %d k %d" % (b, k), "name": c.name, "unit": "ms/query",
                 "median": statistics.median(times[(c.name, b, k)]),
                 "min": min(times[(c.name, b, k)]), "max": max(times[(c.name, b, k)]),
                 "samples": times[(c.name, b, k)], "cpu_samples": cpu[(c.name, b, k)],
                 "recall": recalls[(c.name, k)]}
                for c in contenders for b in (1, NQ) for k in ks]
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"subcommand": "compare-faiss", "dry": args.dry,
                       "machine": "%s, %d cpus | numpy %s | faiss %s" % (
                           cpu_model(), os.cpu_count(), np.__version__,
                           faiss.__version__ if faiss else "absent"),
                       "rows": rows}, f, indent=1)
    med = {key: statistics.median(v) for key, v in times.items()}
    cmed = {key: statistics.median(v) for key, v in cpu.items()}

    def ratio(a, b, batch, k):
        if (a, batch, k) in med and (b, batch, k) in med:
            print("ratio %-24s / %-26s batch %3d k %3d: wall %.2f  cpu %.2f" % (
                a, b, batch, k, med[(a, batch, k)] / med[(b, batch, k)],
                cmed[(a, batch, k)] / max(cmed[(b, batch, k)], 1e-9)))

    print("# ratios of medians (below 1: lodestar faster)")
    for b in (1, NQ):
        for k in ks:
            ratio("lodestar f32 dot", "faiss IndexFlatIP", b, k)
            ratio("lodestar f32 l2", "faiss IndexFlatL2", b, k)
            ratio("lodestar f16 dot", "faiss SQ fp16 IP", b, k)
            ratio("lodestar i8 dot", "faiss SQ 8bit IP", b, k)
            ratio("lodestar f32 dot", "numpy matmul+argpartition", b, k)
    for k in ks:
        for name in ("f16", "bf16", "i8"):
            ratio("lodestar %s dot" % name, "lodestar f32 dot", 1, k)
    # Bandwidth: glibc memchr over 512 MiB, against a single-query f32 scan (k 10), both
    # with 1 thread and with THREADS; best of several, wall time and (1 thread) CPU time.
    f32 = contenders[0] if contenders and contenders[0].name == "lodestar f32 dot" else None
    for th in (1, THREADS) if f32 is not None and not args.contenders else ():
        bw, bw_cpu = memchr_bandwidth(th)
        f32.opts.threads = th
        walls, cpus = [], []
        for j in range(single.shape[0]):
            t, u = time.perf_counter(), time.process_time()
            f32.search(q[j:j + 1], 10)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - u)
        rate, rate_cpu = n * d * 4 / min(walls), n * d * 4 / min(cpus)
        print("read bandwidth, %d thread(s): memchr %.1f GB/s wall (%.1f GB/s per CPU second); "
              "single-query f32 scan %.1f GB/s wall (%.1f per CPU second) = %.0f%% (%.0f%%)" % (
                  th, bw / 1e9, bw_cpu / 1e9, rate / 1e9, rate_cpu / 1e9, 100 * rate / bw,
                  100 * rate_cpu / bw_cpu))
    if f32 is not None:
        f32.opts.threads = THREADS
    print("# setup (write + load lodestar indexes): %.1f s" % setup_s)


def timeit(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
