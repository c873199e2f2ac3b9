"""Progress reports, Ctrl-C and deadlines of load, Live.reload and write (issue 24 item 3,
issue 28 item 4; docs/adr/0034).

The Ctrl-C cases run in a child process that sends itself SIGINT from a timer thread
while the call is blocked (a pipe whose writer stays silent, a server sending 2 bytes a
second, a Python file object whose read sleeps), so that a KeyboardInterrupt never
reaches pytest itself. The child prints how long after the signal the KeyboardInterrupt
came and the pool's rents and returns.
"""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lodestar
from conftest import ROOT

FAULT_SERVER = os.path.join(ROOT, "tests", "http_fault_server.py")
# The target is 100 ms (measured in the child, printed by the tests); the bound asserted
# is looser because up to 8 processes share 2 vCPUs when the suite runs.
LATENCY_BOUND_S = 1.0


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """An index of 4096 x 512 f32 (8 MiB of payload: several 1 MiB chunks)."""
    d = tmp_path_factory.mktemp("big")
    path = str(d / "big.ldsi")
    v = np.random.default_rng(5).standard_normal((4096, 512)).astype(np.float32)
    lodestar.write(path, v)
    return path


@pytest.fixture(scope="module")
def fault_server(big):
    if not lodestar.library().lds_url_supported():
        pytest.skip("built without libcurl")
    p = subprocess.Popen([sys.executable, FAULT_SERVER, os.path.dirname(big)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    assert line.startswith("port "), line
    yield "http://127.0.0.1:%d" % int(line.split()[1])
    p.terminate()
    p.wait(10)


def test_load_progress_increases_to_the_total(big):
    seen = []
    with lodestar.load(big, progress=lambda done, total: seen.append((done, total))) as ix:
        payload = ix.info["payload_bytes"]
    assert len(seen) >= 8, seen
    dones = [d for d, _ in seen]
    assert dones == sorted(dones) and len(set(dones)) == len(dones), dones
    assert all(t == payload for _, t in seen), seen
    assert seen[-1] == (payload, payload)


def test_load_progress_from_memory_and_mapped_ends_at_the_total(big):
    data = open(big, "rb").read()
    for source, kw in ((data, {}), (big, {"mmap": True})):
        seen = []
        with lodestar.load(source, progress=lambda d, t: seen.append((d, t)), **kw) as ix:
            n = ix.info["payload_bytes"]
        assert seen == [(n, n)], (kw, seen)


def test_load_progress_from_a_pipe(big):
    data = open(big, "rb").read()
    seen = []
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: the whole file, then closes
        os.close(r)
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb", buffering=0) as f:
        with lodestar.load(f, progress=lambda done, total: seen.append((done, total))) as ix:
            payload = ix.info["payload_bytes"]
    os.waitpid(pid, 0)
    assert seen and seen[-1][0] == payload
    # The header declares the length, so a pipe still knows the total.
    assert all(t == payload for _, t in seen), seen


def test_progress_that_raises_stops_the_load(big):
    before = lodestar.pool_stats()

    def stop(done, total):
        if done > 2 << 20:
            raise ValueError("enough")

    with pytest.raises(ValueError, match="enough"):
        lodestar.load(big, progress=stop)
    after = lodestar.pool_stats()
    assert after["rents"] - before["rents"] == after["returns"] - before["returns"] == 1
    with pytest.raises(TypeError):
        lodestar.load(big, progress=42)


def test_reload_progress(big, tiny):
    live = lodestar.Live(tiny)
    seen = []
    gen = live.reload(big, progress=lambda d, t: seen.append((d, t)))
    assert gen == 2 and seen[-1][0] == seen[-1][1] == os.path.getsize(big) - 64
    live.close()


def test_write_progress(tmp_path):
    v = np.ones((3000, 256), np.float32)
    seen = []
    lodestar.write(str(tmp_path / "w.ldsi"), v, progress=lambda d, t: seen.append((d, t)))
    total = v.nbytes
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)

    def stop(d, t):
        if d > 0:
            raise RuntimeError("stop writing")

    with pytest.raises(RuntimeError):
        lodestar.write(str(tmp_path / "x.ldsi"), v, progress=stop)
    assert sorted(os.listdir(tmp_path)) == ["w.ldsi"]  # no x.ldsi, no temporary file


def test_url_timeout(fault_server, big):
    url = fault_server + "/trickle/" + os.path.basename(big)
    before = lodestar.pool_stats()
    t0 = time.monotonic()
    with pytest.raises(lodestar.DeadlineError) as e:
        lodestar.load(url, timeout=1.0)
    secs = time.monotonic() - t0
    assert isinstance(e.value, TimeoutError)
    assert 0.9 < secs < 10, secs
    msg = str(e.value)
    assert url in msg and "deadline of 1000 ms passed after" in msg and "bytes" in msg, msg
    assert e.value.field == "http.timeout"
    after = lodestar.pool_stats()
    assert after["rents"] - before["rents"] == after["returns"] - before["returns"]
    with pytest.raises(ValueError):
        lodestar.load(url, timeout=0)


CHILD = r'''
import os, signal, sys, threading, time, json
# Ctrl-C live whatever this child inherited (a background job of a shell without job
# control starts with SIGINT ignored; see test_bench_ctrl_c_child_with_sigint_ignored).
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import lodestar
kind, arg = sys.argv[1], sys.argv[2]
sent = []
def fire():
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
out = {}
live = None
keep = []
if kind == "pipe" or kind == "reload-pipe":
    data = open(arg, "rb").read()
    r, w = os.pipe()
    os.write(w, data[:64 + 32768])  # the header and some payload (within a pipe's 64 KiB), then silence
    keep.append(w)
    source = os.fdopen(r, "rb", buffering=0)
elif kind == "pyread":
    class Slow:
        def __init__(self, data):
            self.data, self.pos = data, 0
        def readinto(self, b):
            if self.pos >= 64 + 65536:
                time.sleep(30)
            n = min(len(b), 4096, len(self.data) - self.pos)
            b[:n] = self.data[self.pos:self.pos + n]
            self.pos += n
            return n
    source = Slow(open(arg, "rb").read())
else:
    source = arg
if kind == "reload-pipe":
    live = lodestar.Live(sys.argv[3])
if kind != "write":
    threading.Timer(0.5, fire).start()
t0 = time.monotonic()
try:
    if kind == "write":
        # The signal comes 0.2 s into the row loop (a write of 1,000,000 rows takes
        # seconds), not during the array's conversion or the final fsync.
        started = []
        def progress(done, total):
            if done > 0 and not started:
                started.append(1)
                threading.Timer(0.2, fire).start()
        v = np.ones((1000000, 16), np.float32)
        lodestar.write(arg, v, progress=progress)
    elif kind == "manifest":
        lodestar.read_manifest(source)
    elif live is not None:
        live.reload(source)
    else:
        lodestar.load(source)
    out["raised"] = None
except KeyboardInterrupt:
    out["raised"] = "KeyboardInterrupt"
except BaseException as e:
    out["raised"] = repr(e)
t1 = time.monotonic()
out["latency"] = t1 - sent[0] if sent else None
out["elapsed"] = t1 - t0
pool = live._pool if live is not None else None
stats = lodestar.pool_stats(pool)
out["rents"], out["returns"] = stats["rents"], stats["returns"]
if live is not None:
    out["generation"] = live.generation
    live.close()
print(json.dumps(out))
'''


def run_child(*args, held=0):
    """Runs CHILD; `held`: leases the child still holds on purpose (a live generation)."""
    p = subprocess.run([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    print(args[0], "KeyboardInterrupt latency %.1f ms" % (1000 * out["latency"]))
    assert out["raised"] == "KeyboardInterrupt", out
    assert out["latency"] < LATENCY_BOUND_S, out
    assert out["rents"] == out["returns"] + held, out
    return out


def test_ctrl_c_stops_a_load_from_a_silent_pipe(big):
    out = run_child("pipe", big)
    assert out["rents"] == 1, out  # the payload's buffer was rented, and returned


def test_ctrl_c_stops_a_load_from_a_slow_url(fault_server, big):
    run_child("url", fault_server + "/trickle/" + os.path.basename(big))


def test_ctrl_c_stops_a_manifest_download(fault_server, big):
    """read_manifest of a trickling URL stops on Ctrl-C (found in review: it ran until
    libcurl's 30 s low-speed abort); it rents nothing."""
    man = os.path.join(os.path.dirname(big), "slow-manifest.json")
    with open(man, "w") as f:
        f.write('{"format": "lodestar-shards", ' + " " * 8192 + "}")
    out = run_child("manifest", fault_server + "/trickle/slow-manifest.json")
    assert out["rents"] == 0, out


def test_ctrl_c_stops_a_load_through_a_python_read(big):
    run_child("pyread", big)


def test_ctrl_c_stops_a_reload_and_the_old_generation_serves(big, tiny):
    out = run_child("reload-pipe", big, tiny, held=1)  # generation 1's buffer serves on
    assert out["generation"] == 1 and out["rents"] == 2, out


def test_ctrl_c_stops_a_write_and_leaves_no_file(tmp_path):
    target = str(tmp_path / "w.ldsi")
    run_child("write", target)
    assert os.listdir(tmp_path) == []


def test_bench_ctrl_c_child_with_sigint_ignored(big):
    """bench/compare/interrupt_cost.py's latency child stops on its SIGINT even when the
    bench was started with SIGINT ignored (`scripts/adr-check.sh &` from a script: a shell
    without job control ignores SIGINT in background jobs, and exec keeps it ignored).
    Before the fix the child inherited SIG_IGN, Python installed no handler, the signal did
    nothing and the child waited on its silent pipe until the bench's timeout (ADR 0034's
    condition could not be evaluated in CI, issue 30)."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "compare"))
    try:
        import interrupt_cost
    finally:
        sys.path.pop(0)
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the child
    try:  # the bench's own child, as its latency() runs it (before the fix: ran past 30 s)
        p = subprocess.run([sys.executable, "-c", interrupt_cost.CHILD, "pipe", big],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    finally:
        signal.signal(signal.SIGINT, old)
    assert p.returncode == 0, p.stderr.decode()
    ms = float(p.stdout.decode().strip())  # "none" if the load ended without the signal
    assert 0 <= ms < LATENCY_BOUND_S * 1000, ms


def test_a_foreign_sigint_handler_is_left_alone(big):
    """A program's own SIGINT handler stays in place during a load."""
    calls = []
    old = signal.signal(signal.SIGINT, lambda s, f: calls.append(s))
    try:
        seen = []

        def progress(done, total):
            seen.append(signal.getsignal(signal.SIGINT))

        lodestar.load(big, progress=progress).close()
        assert seen and all(h is not signal.default_int_handler for h in seen)
        assert all(getattr(h, "__self__", None) is None for h in seen)
    finally:
        signal.signal(signal.SIGINT, old)
