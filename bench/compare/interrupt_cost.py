#!/usr/bin/env python3
"""What making Python loads interruptible costs, and how fast Ctrl-C stops one (ADR 0034).

usage: python3 bench/compare/interrupt_cost.py [--dry] [--rounds N] [--mib M] [--json FILE]

Table "python load": one index of M MiB (default 256; --dry 8) loaded by path, interleaved
round by round: "load, no hooks" calls lds_load_path through ctypes with no cancel or
progress callback (what lodestar.load did before), "load, hooks" is lodestar.load (a
ctypes cancel callback per 1 MiB chunk and the SIGINT handler swapped in and out),
"load, hooks + progress" adds progress=. Table "ctrl-c latency": a child process loads
from a pipe that goes silent after the header (and, with libcurl, from a server sending 2
bytes a second), sends itself SIGINT from a timer thread and measures the time from the
kill to the KeyboardInterrupt (ms). The rows' samples are ms; page_faults is 0 (not
counted here). Uses LODESTAR_LIB / the package on PYTHONPATH like the tests.
"""
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    build = os.environ.get("LODESTAR_BUILD", os.path.join(ROOT, "build"))
    os.environ.setdefault("LODESTAR_LIB", os.path.join(build, "liblodestar.so"))

import numpy as np  # noqa: E402

import lodestar  # noqa: E402
import lodestar._interrupt  # noqa: E402
from lodestar import _capi  # noqa: E402
from benchlib import cpu_model, loadavg, write_summary  # noqa: E402

CHILD = r'''
import os, signal, sys, threading, time
# A program whose Ctrl-C is live, whatever this child inherited: a shell without job
# control starts a background job (`cmd &`, CI scripts) with SIGINT ignored, the
# ignored disposition survives exec, Python then installs no handler, and the signal
# below would do nothing (the load would wait on the silent pipe for ever).
signal.signal(signal.SIGINT, signal.default_int_handler)
import lodestar
kind, arg = sys.argv[1], sys.argv[2]
if kind == "pipe":
    data = open(arg, "rb").read(64 + 32768)
    r, w = os.pipe()
    os.write(w, data)
    source = os.fdopen(r, "rb", buffering=0)
else:
    source = arg
sent = []
def fire():
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
threading.Timer(0.3, fire).start()
try:
    lodestar.load(source)
    print("none")
except KeyboardInterrupt:
    print("%.6f" % ((time.monotonic() - sent[0]) * 1e3))
'''


def bare_load(path):
    """lds_load_path with the library's defaults and no callbacks."""
    lib = _capi.library()
    opts = _capi.LoadOptions()
    lib.lds_load_options_default(ctypes.byref(opts))
    h = ctypes.c_void_p()
    err = _capi.new_error()
    st = lib.lds_load_path(path.encode(), ctypes.byref(opts), ctypes.byref(h), None,
                           ctypes.byref(err))
    assert st == 0, err.message
    lib.lds_index_free(h)


def latency(kind, arg, timeout=60):
    """ms from the child's SIGINT to its KeyboardInterrupt, loading `arg` (kind "pipe": the
    first 32,832 bytes of the index file `arg` through a pipe that then goes silent; "url":
    the URL `arg`). Raises RuntimeError when the child raised nothing or ran past
    `timeout` seconds (it then never stopped: the signal was lost or not acted on)."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(lodestar.__file__)),
               LODESTAR_LIB=_capi.library_path())
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, kind, arg], capture_output=True,
                           text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError("%s: the child did not stop within %d s of starting (SIGINT at "
                           "0.3 s); its stderr: %s" % (kind, timeout, (e.stderr or b"")[-400:].decode(errors="replace")))
    out = p.stdout.strip()
    if p.returncode != 0 or out == "none":
        raise RuntimeError("%s: no KeyboardInterrupt: %s %s" % (kind, out, p.stderr))
    return float(out)


def row(table, name, xs):
    return {"table": table, "name": name, "unit": "ms", "median": statistics.median(xs),
            "min": min(xs), "max": max(xs), "samples": xs, "page_faults": 0}


def main(argv):
    dry = "--dry" in argv
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else (3 if dry else 9)
    mib = int(argv[argv.index("--mib") + 1]) if "--mib" in argv else (8 if dry else 256)
    work = tempfile.mkdtemp(prefix="lodestar-interrupt-cost-")
    server = None
    try:
        path = os.path.join(work, "i.ldsi")
        rows_n = mib * 1024 * 1024 // (512 * 4)
        lodestar.write(path, np.random.default_rng(3).standard_normal((rows_n, 512))
                       .astype(np.float32))
        kinds = {"load, no hooks": lambda: bare_load(path),
                 "load, hooks": lambda: lodestar.load(path).close(),
                 "load, hooks + progress": lambda: lodestar.load(
                     path, progress=lambda d, t: None).close()}
        times = {k: [] for k in kinds}
        # One cancel callback as the C side pays it: through the ctypes trampoline into
        # Python and back (called here through a function pointer, the same trampoline).
        call = lodestar._interrupt.Call(None)
        fn = ctypes.cast(call._cancel_fn, _capi.CANCEL_FN)
        per_call = []
        lat = {"pipe": []}
        url = None
        if lodestar.library().lds_url_supported():
            server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests",
                                                                    "http_fault_server.py"),
                                       work], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL)
            port = int(server.stdout.readline().split()[1])
            url = "http://127.0.0.1:%d/trickle/i.ldsi" % port
            lat["url"] = []
        for r in range(rounds):
            names = list(kinds)
            names = names[r % len(names):] + names[:r % len(names)]
            for k in names:
                t0 = time.perf_counter()
                kinds[k]()
                times[k].append((time.perf_counter() - t0) * 1e3)
            n = 20000 if dry else 200000
            t0 = time.perf_counter()
            for _ in range(n):
                fn(None)
            per_call.append((time.perf_counter() - t0) / n * 1e6)
            lat["pipe"].append(latency("pipe", path))
            if url:
                lat["url"].append(latency("url", url))
        print("machine: %s, %d cpus, load average %s" % (cpu_model(), os.cpu_count(), loadavg()))
        print("python load of %d MiB by path, %d interleaved rounds (ms: median min max, "
              "ratio of medians)" % (mib, rounds))
        base = statistics.median(times["load, no hooks"])
        rows = []
        for k, xs in times.items():
            print("  %-24s %9.2f %9.2f %9.2f  x%.3f" % (k, statistics.median(xs), min(xs),
                                                       max(xs), statistics.median(xs) / base))
            rows.append(row("python load", k, xs))
        m = statistics.median(per_call)
        print("one cancel callback through ctypes: %.2f us (min %.2f max %.2f); a load makes "
              "one per MiB: %d calls, %.3f ms of the %.0f ms load" % (
                  m, min(per_call), max(per_call), mib, m * mib / 1e3, base))
        rows.append({"table": "cancel callback", "name": "one cancel callback (us)", "unit": "us",
                     "median": m, "min": min(per_call), "max": max(per_call),
                     "samples": per_call, "page_faults": 0})
        print("ctrl-c latency: SIGINT to KeyboardInterrupt (ms: median min max)")
        for k, xs in lat.items():
            print("  %-24s %9.2f %9.2f %9.2f" % (k, statistics.median(xs), min(xs), max(xs)))
            rows.append(row("ctrl-c latency", k, xs))
        return write_summary(argv, "interrupt_cost.py", "interrupt-cost", dry, rows)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
