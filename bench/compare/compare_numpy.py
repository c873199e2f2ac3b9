#!/usr/bin/python3
"""Loading the same vectors into Python: lodestar against numpy, faiss and gensim.

In one process, interleaved (A B C ... A B C ...), each alternative loads the same
float32 vectors from its own file and then touches one element per 4 KiB page of the
array it got (so a mapped file pays for its page faults, as any use would):

  lodestar pooled verified   lodestar.load(ldsi): vectors, keys, checksum verified
  lodestar mapped verified   lodestar.load(ldsi, mmap=True): the same, the file mapped
  numpy.load                 np.load(npy): vectors only, no check
  numpy.load mmap_mode=r     np.load(npy, mmap_mode="r")
  faiss.read_index           an IndexFlat's vectors (python3-faiss), when installed
  gensim KeyedVectors.load   vectors and keys (python3-gensim), when installed

Then the search: nq queries, k=10, exact, lodestar Index.search against faiss
IndexFlatIP.search on the same vectors (row-normalized for a cosine index), each with one
thread and with one per cpu, with the share of top-1 rows on which each agrees with
lodestar's. (faiss's OpenMP threads spin while they wait: on a machine busy with other
work its multi-threaded row can be many times slower than its one-thread row.)

Before timing, each file is dropped from the page cache (posix_fadvise DONTNEED) and read
back with 1 MiB reads, so every alternative reads from a cache filled the same way.
(An earlier version also ran whole processes under hyperfine, `lodestar info` against
`python3 -c 'import numpy; numpy.load(...)'`; that measures interpreter start-up, not
loading, and is gone.)

The vectors: --index FILE.ldsi (e.g. .cache/glove/glove-100d.ldsi from
scripts/fetch-glove.sh) uses that index's vectors and keys; otherwise random rows of the
GloVe shape, 341,479 x 100, keys w0, w1, ... (--rows, --dim to change it).

usage: /usr/bin/python3 bench/compare/compare_numpy.py [--dry] [--index FILE] [--rows N] [--dim N]
       [--rounds N] [--queries N] [--dir DIR] [--json FILE]
  --json FILE  also write the load rows' per-round samples (ms) as JSON (scripts/adr-check.sh)
env:   LODESTAR_LIB (default build/liblodestar.so) when the package is not installed.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "python"))
os.environ.setdefault("LODESTAR_LIB", os.path.join(HERE, os.pardir, os.pardir, "build", "liblodestar.so"))

import numpy as np  # noqa: E402

import lodestar  # noqa: E402

PAGE = 4096


def optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


faiss = optional("faiss")
gensim_models = None
if optional("gensim"):
    from gensim.models import KeyedVectors as gensim_models  # noqa: N813


def warm_page_cache(path):
    """Drops `path` from the page cache, then reads it back with 1 MiB reads."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        while os.read(fd, 1 << 20):
            pass
    finally:
        os.close(fd)


def touch(a):
    """Reads one element per 4 KiB page of the float32 array `a`."""
    return float(a.reshape(-1)[:: PAGE // 4].sum())


def machine():
    model = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return model


def prepare(args):
    """Writes the vectors in every format; returns (vectors, keys, metric, files)."""
    os.makedirs(args.dir, exist_ok=True)
    if args.index:
        with lodestar.load(args.index) as index:
            v = np.array(index.as_float32())
            keys = list(index.keys) if index.keys is not None else [
                "r%d" % i for i in range(index.rows)]
            metric = index.metric
        tag = os.path.splitext(os.path.basename(args.index))[0]
    else:
        v = np.random.default_rng(13).standard_normal((args.rows, args.dim)).astype(np.float32)
        keys = ["w%d" % i for i in range(args.rows)]
        metric = "cosine"
        tag = "random-%dx%d" % v.shape
    files = {"ldsi": os.path.join(args.dir, tag + ".ldsi"),
             "npy": os.path.join(args.dir, tag + ".npy"),
             "faiss": os.path.join(args.dir, tag + ".faiss"),
             "gensim": os.path.join(args.dir, tag + ".kv")}
    if args.index:
        files["ldsi"] = args.index
    elif not os.path.exists(files["ldsi"]):
        lodestar.write(files["ldsi"], v, keys=keys, metric=metric,
                       metadata={"source": "bench/compare/compare_numpy.py"})
    if not os.path.exists(files["npy"]):
        np.save(files["npy"], v)
    if faiss and not os.path.exists(files["faiss"]):
        fi = faiss.IndexFlatIP(v.shape[1])
        fi.add(v)
        faiss.write_index(fi, files["faiss"])
    if gensim_models and not os.path.exists(files["gensim"]):
        kv = gensim_models(v.shape[1])
        kv.add_vectors(keys, v)
        kv.save(files["gensim"])
    for name, path in files.items():
        if os.path.exists(path):
            warm_page_cache(path)
            if name == "gensim" and os.path.exists(path + ".vectors.npy"):
                warm_page_cache(path + ".vectors.npy")
    return v, keys, metric, files


def load_alternatives(files, v):
    n, d = v.shape

    def lds(**kw):
        index = lodestar.load(files["ldsi"], **kw)
        a = index.vectors
        touch(a)
        return index, a

    def faiss_read():
        fi = faiss.read_index(files["faiss"])
        a = faiss.rev_swig_ptr(fi.get_xb(), n * d).reshape(n, d)
        touch(a)
        return fi, a

    def gensim_load():
        kv = gensim_models.load(files["gensim"])
        touch(kv.vectors)
        return kv, kv.vectors

    alts = [("lodestar pooled verified", lambda: lds(), "vectors, keys, checksum"),
            ("lodestar mapped verified", lambda: lds(mmap=True), "vectors, keys, checksum"),
            ("numpy.load", lambda: (None, np.load(files["npy"])), "vectors"),
            ("numpy.load mmap_mode=r", lambda: (None, np.load(files["npy"], mmap_mode="r")),
             "vectors")]
    if faiss:
        alts.append(("faiss.read_index", faiss_read, "vectors"))
    if gensim_models:
        alts.append(("gensim KeyedVectors.load", gensim_load, "vectors, keys"))
    return alts


def table(rows, header):
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(header)))
    for r in rows:
        print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)))


def run_loads(alts, rounds, warmup, v, jrows):
    samples = {name: [] for name, _, _ in alts}
    for i in range(warmup + rounds):
        for name, fn, _ in alts:
            t0 = time.perf_counter_ns()
            owner, a = fn()
            t1 = time.perf_counter_ns()
            if i == 0 and not np.array_equal(a[:3], v[:3]):
                raise SystemExit("compare_numpy: %s loaded other vectors" % name)
            del a
            if isinstance(owner, lodestar.Index):
                owner.close()
            del owner
            if i >= warmup:
                samples[name].append((t1 - t0) / 1e6)
    base = statistics.median(samples["numpy.load"])
    rows = []
    for name, _, what in alts:
        s = samples[name]
        m = statistics.median(s)
        rows.append((name, "%.2f" % m, "%.2f" % min(s), "%.2f" % max(s), "%.3fx" % (m / base),
                     what))
        jrows.append({"table": "load + touch one element per page", "name": name, "unit": "ms",
                      "median": m, "min": min(s), "max": max(s), "samples": s})
    table(rows, ("load + touch one element per page", "median ms", "min", "max",
                 "/ numpy.load", "what it gives"))


def run_search(files, v, metric, queries, rounds, k=10):
    rng = np.random.default_rng(5)
    q = v[rng.choice(len(v), queries, replace=False)] + np.float32(0.01)
    q = np.ascontiguousarray(q, dtype=np.float32)
    index = lodestar.load(files["ldsi"])
    counts = sorted({1, os.cpu_count() or 1})
    alts = [("lodestar Index.search, threads=%d" % t,
             lambda t=t: index.search(q, k, threads=t)) for t in counts]
    if faiss:
        base = v
        fq = q
        if metric == "cosine":
            base = v / np.linalg.norm(v, axis=1, keepdims=True)
            fq = q / np.linalg.norm(q, axis=1, keepdims=True)
        fi = faiss.IndexFlatIP(v.shape[1])
        fi.add(np.ascontiguousarray(base, dtype=np.float32))
        fq = np.ascontiguousarray(fq, dtype=np.float32)

        def faiss_search(t):
            faiss.omp_set_num_threads(t)
            return fi.search(fq, k)

        alts += [("faiss IndexFlatIP.search, omp threads=%d" % t,
                  lambda t=t: faiss_search(t)) for t in counts]
    samples = {name: [] for name, _ in alts}
    answers = {}
    for _ in range(rounds):
        for name, fn in alts:
            t0 = time.perf_counter_ns()
            answers[name] = fn()
            samples[name].append((time.perf_counter_ns() - t0) / 1e6)
    index.close()
    first = statistics.median(samples[alts[0][0]])
    rows = []
    for name, _ in alts:
        s = samples[name]
        m = statistics.median(s)
        agree = np.mean(answers[name][1][:, 0] == answers[alts[0][0]][1][:, 0])
        rows.append((name, "%.2f" % m, "%.2f" % min(s), "%.2f" % max(s), "%.2fx" % (m / first),
                     "%.0f%%" % (100 * agree)))
    table(rows, ("search %d queries, k=%d, %s" % (queries, k, metric), "median ms", "min", "max",
                 "/ lodestar 1 thread", "top-1 agrees"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry", action="store_true", help="tiny sizes, 2 rounds")
    ap.add_argument("--index", help="use this index's vectors and keys")
    ap.add_argument("--rows", type=int, default=341479)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--json", help="also write the load rows' samples (ms) as JSON to this file")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                  "lodestar-compare-numpy"))
    args = ap.parse_args()
    warmup = 2
    if args.dry:
        args.rows, args.dim, args.rounds, args.queries, warmup = 2000, 16, 2, 2, 1
    v, keys, metric, files = prepare(args)
    print("compare_numpy: loading %d x %d float32 (%.1f MB) in one process, interleaved%s" % (
        v.shape[0], v.shape[1], v.nbytes / 1e6, " (dry run)" if args.dry else ""))
    print("machine: %s, %d cpus | load average %s | Linux %s | Python %s | numpy %s | "
          "faiss %s | gensim %s | lodestar %s" % (
              machine(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg()),
              platform.release(), platform.python_version(), np.__version__,
              getattr(faiss, "__version__", "absent"),
              getattr(sys.modules.get("gensim"), "__version__", "absent"), lodestar.__version__))
    print("vectors: %s; page cache filled the same way for every file; %d warm-up + %d "
          "measured rounds" % (args.index or "random, keys w0..", warmup, args.rounds))
    print()
    jrows = []
    run_loads(load_alternatives(files, v), args.rounds, warmup, v, jrows)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"subcommand": "compare-numpy", "lodestar_version": lodestar.__version__,
                       "dry": args.dry, "machine": "%s, %d cpus | Linux %s | numpy %s" % (
                           machine(), os.cpu_count(), platform.release(), np.__version__),
                       "rows": jrows}, f, indent=1)
    print()
    run_search(files, v, metric, args.queries, max(2, args.rounds // 2) if not args.dry else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
