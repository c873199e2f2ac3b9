#!/usr/bin/python3
"""ctypes against cffi (ABI mode) as the Python binding's way into liblodestar.

In one process, interleaved (ctypes, cffi, ctypes, cffi, ...), the same calls into the
same library: a trivial accessor (lds_index_rows), a key lookup (lds_index_find_key),
one query's exact search (lds_index_search, 10 nearest of ROWS x DIM f32 rows), and
lds_index_key of a row. Prints per-call median, min and max (ns) per binding and the
ratio cffi / ctypes of the medians. The index is written by the package itself.

usage: /usr/bin/python3 bench/compare/python_binding.py [--dry] [--rounds N] [--rows N] [--dim N]
                                                [--json FILE]
  --json FILE  also write the samples (ns per call, per round) as JSON: one row per call and
               binding, in a table named after the call (scripts/adr-check.sh reads it)
env:   LODESTAR_LIB (default build/liblodestar.so) when the package is not installed.
Needs numpy and cffi (Debian python3-numpy, python3-cffi).
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, "python"))
os.environ.setdefault("LODESTAR_LIB", os.path.join(HERE, os.pardir, os.pardir, "build", "liblodestar.so"))

import numpy as np  # noqa: E402

import lodestar  # noqa: E402

CDEF = """
typedef struct lds_index lds_index;
typedef struct { uint64_t row; float score; } lds_hit;
uint64_t lds_index_rows(const lds_index *idx);
int lds_index_find_key(const lds_index *idx, const char *key, size_t len, uint64_t *row);
int lds_index_key(const lds_index *idx, uint64_t row, const char **key, size_t *len);
int lds_index_search(const lds_index *idx, const float *query, size_t dim, size_t k,
                     lds_hit *hits, size_t *n_hits, void *err);
"""


def machine():
    model = platform.processor() or "unknown cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return "%s, %d cpus | load average %.2f | Python %s | lodestar %s" % (
        model, os.cpu_count(), os.getloadavg()[0], platform.python_version(),
        lodestar.__version__)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry", action="store_true", help="tiny sizes, one round")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--json", help="write the samples as JSON to this file")
    a = ap.parse_args()
    if a.dry:
        a.rounds, a.rows, a.dim = 1, 200, 8
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    cl = ffi.dlopen(lodestar.library_path())
    lib = lodestar.library()

    rng = np.random.default_rng(16)
    v = rng.standard_normal((a.rows, a.dim)).astype(np.float32)
    keys = ["k%d" % i for i in range(a.rows)]
    work = tempfile.mkdtemp(prefix="lodestar-binding-")
    path = os.path.join(work, "b.ldsi")
    lodestar.write(path, v, keys=keys)
    index = lodestar.load(path)
    h = index._h
    ch = ffi.cast("lds_index *", h)
    q = np.ascontiguousarray(v[7] + 0.01)
    k = 10
    key = b"k12345"[: 6 if a.rows > 12345 else 2]

    hits_c = np.zeros(k, dtype=lodestar._capi.hit_dtype())
    n_c = ctypes.c_size_t()
    row_c = ctypes.c_uint64()
    kp, kl = ctypes.c_char_p(), ctypes.c_size_t()
    hits_f = ffi.new("lds_hit[]", k)
    n_f = ffi.new("size_t *")
    row_f = ffi.new("uint64_t *")
    kp_f, kl_f = ffi.new("const char **"), ffi.new("size_t *")
    qf = ffi.cast("float *", q.ctypes.data)

    cases = [
        ("lds_index_rows", 20000,
         lambda: lib.lds_index_rows(h), lambda: cl.lds_index_rows(ch)),
        ("lds_index_find_key", 20000,
         lambda: lib.lds_index_find_key(h, key, len(key), ctypes.byref(row_c)),
         lambda: cl.lds_index_find_key(ch, key, len(key), row_f)),
        ("lds_index_key", 20000,
         lambda: lib.lds_index_key(h, 5, ctypes.byref(kp), ctypes.byref(kl)),
         lambda: cl.lds_index_key(ch, 5, kp_f, kl_f)),
        ("lds_index_search k=10", 20 if not a.dry else 2,
         lambda: lib.lds_index_search(h, q.ctypes.data, a.dim, k, hits_c.ctypes.data,
                                      ctypes.byref(n_c), None),
         lambda: cl.lds_index_search(ch, qf, a.dim, k, hits_f, n_f, ffi.NULL)),
    ]
    print("python_binding: ctypes vs cffi %s (ABI mode), %d rows x %d dims f32, %d rounds "
          "interleaved" % (cffi.__version__, a.rows, a.dim, a.rounds))
    print("machine: " + machine())
    print("%-24s %-7s %10s %10s %10s %8s" % ("call", "binding", "median ns", "min ns", "max ns",
                                             "cffi/ct"))
    jrows = []
    for name, reps, fc, ff in cases:
        fc(), ff()
        times = {"ctypes": [], "cffi": []}
        for _ in range(a.rounds):
            for b, fn in (("ctypes", fc), ("cffi", ff)):
                t0 = time.perf_counter_ns()
                for _ in range(reps):
                    fn()
                times[b].append((time.perf_counter_ns() - t0) / reps)
        med = {b: statistics.median(t) for b, t in times.items()}
        for b in ("ctypes", "cffi"):
            print("%-24s %-7s %10.0f %10.0f %10.0f %8s" % (
                name, b, med[b], min(times[b]), max(times[b]),
                "%.2fx" % (med["cffi"] / med["ctypes"]) if b == "cffi" else ""))
            jrows.append({"table": name, "name": b, "unit": "ns/call", "median": med[b],
                          "min": min(times[b]), "max": max(times[b]), "samples": times[b]})
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"subcommand": "python-binding", "lodestar_version": lodestar.__version__,
                       "dry": a.dry, "machine": machine(), "rows": jrows}, f, indent=1)
    index.close()
    os.remove(path)
    os.rmdir(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
