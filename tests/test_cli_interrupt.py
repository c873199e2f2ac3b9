#!/usr/bin/env python3
"""The `lodestar` program interrupted, and its progress line (issue 24 item 6, issue 28
item 4; docs/adr/0034).

usage: test_cli_interrupt.py LODESTAR FIXTURE_DIR

Signals: SIGINT, SIGTERM and SIGHUP are sent to pack (reading a pipe that stays silent
after some rows, its output a file or standard output), export and split, once a
temporary file of theirs exists; each must end with that signal's status (killed by it)
and leave no temporary file (.NAME.lds-tmp-PID-XXXXXX, the staging shards, pack's folder
under TMPDIR). A process killed by SIGKILL leaves a file of the documented pattern with its
pid. Progress: none when standard error is not a terminal or with --quiet; on a terminal
(a pty) a line appears for work that takes more than a second, and is erased at the end.
"""
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests  # noqa: E402

# A signal ignored by whoever started this test (nohup ignores SIGHUP, some CI runners
# SIGINT) stays ignored across exec, and lodestar rightly leaves an ignored signal alone
# (test_an_ignored_signal_stays_ignored): so the children here start with the default
# action, or the tests below would measure the runner, not the program.
for _sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.SIG_DFL)

LODESTAR = os.path.abspath(sys.argv[1])
FIXTURES = os.path.abspath(sys.argv[2])
WORK = tempfile.mkdtemp(prefix="lodestar-test-cli-interrupt-")
TMP_PATTERN = re.compile(r"^\..+\.lds-tmp-(\d+)-[A-Za-z0-9]+$")


def glove_lines(rows, dim, seed=1):
    import random
    rnd = random.Random(seed)
    return "".join("w%d " % r + " ".join("%.4f" % rnd.uniform(-1, 1) for _ in range(dim)) + "\n"
                   for r in range(rows))


BIG = None


def big_index():
    """60,000 x 100 f32 with keys (24 MB): export to GloVe text takes seconds."""
    global BIG
    if BIG is None:
        text = os.path.join(WORK, "big.txt")
        with open(text, "w") as f:
            f.write(glove_lines(60000, 100))
        BIG = os.path.join(WORK, "big.ldsi")
        p = subprocess.run([LODESTAR, "pack", "--quiet", text, BIG], capture_output=True)
        check(p.returncode == 0, p.stderr.decode())
        os.unlink(text)
    return BIG


def leftovers(folder):
    return [n for n in os.listdir(folder) if ".lds-tmp-" in n or n.endswith(".split-tmp")]


def wait_for_temp(proc, folder, timeout=30.0):
    """Polls `folder` until a temporary file of `proc` appears; returns its name."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for n in os.listdir(folder):
            m = TMP_PATTERN.match(n)
            if m and int(m.group(1)) == proc.pid:
                return n
        if proc.poll() is not None:
            check(False, f"exited {proc.returncode} before a temporary file appeared: "
                         f"{proc.stderr.read().decode() if proc.stderr else ''}")
        time.sleep(0.001)
    check(False, "no temporary file appeared")


def interrupted(sig, argv, folder, stdin=None, env=None, feed=None):
    proc = subprocess.Popen([LODESTAR, *argv], stdin=stdin, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    if feed:
        feed()
    name = wait_for_temp(proc, folder)
    proc.send_signal(sig)
    rc = proc.wait(30)
    err = proc.stderr.read().decode()
    check(rc == -sig, f"{argv}: {signal.Signals(sig).name}: exit {rc}, expected -{sig}: {err}")
    left = leftovers(folder)
    check(not left, f"{argv}: {signal.Signals(sig).name} left {left} (saw {name})")
    return name


def slow_pack(sig, to_stdout=False):
    folder = os.path.join(WORK, "pack-%d-%d" % (sig, to_stdout))
    os.mkdir(folder)
    tmpdir = os.path.join(WORK, "tmpdir-%d" % sig)
    os.makedirs(tmpdir, exist_ok=True)
    r, w = os.pipe()
    out = "-" if to_stdout else os.path.join(folder, "out.ldsi")
    env = dict(os.environ, TMPDIR=tmpdir)
    lines = glove_lines(300, 50).encode()

    def feed():
        os.write(w, lines)  # rows, then silence: pack waits on the pipe with its file open

    watch = os.path.join(tmpdir) if to_stdout else folder
    try:
        if to_stdout:
            # pack - to standard output writes into TMPDIR/lodestar-pack-XXXXXX first.
            proc = subprocess.Popen([LODESTAR, "pack", "--format", "glove", "-", "-"],
                                    stdin=r, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env)
            feed()
            end = time.monotonic() + 30
            inner = None
            while time.monotonic() < end and inner is None:
                for d in os.listdir(tmpdir):
                    sub = os.path.join(tmpdir, d)
                    if os.path.isdir(sub) and any(TMP_PATTERN.match(n) for n in os.listdir(sub)):
                        inner = sub
                time.sleep(0.001)
            check(inner is not None, "pack to stdout made no temporary file")
            proc.send_signal(sig)
            rc = proc.wait(30)
            check(rc == -sig, f"pack - -: exit {rc}: {proc.stderr.read().decode()}")
            check(os.listdir(tmpdir) == [], f"pack - - left {os.listdir(tmpdir)} in TMPDIR")
        else:
            interrupted(sig, ["pack", "--format", "glove", "-", out], watch, stdin=r, env=env,
                        feed=feed)
            check(not os.path.exists(out), "no OUT either")
    finally:
        os.close(r)
        os.close(w)


def test_pack_interrupted_by_each_signal_leaves_nothing():
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        slow_pack(sig)


def test_pack_to_stdout_interrupted_leaves_nothing_in_tmpdir():
    for sig in (signal.SIGINT, signal.SIGTERM):
        slow_pack(sig, to_stdout=True)


def test_export_interrupted_by_each_signal_leaves_nothing():
    src = big_index()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        folder = os.path.join(WORK, "export-%d" % sig)
        os.mkdir(folder)
        out = os.path.join(folder, "out.txt")
        interrupted(sig, ["export", "--format", "glove", src, out], folder)
        check(not os.path.exists(out), "no OUT")


def test_split_interrupted_by_each_signal_leaves_nothing():
    src = big_index()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        folder = os.path.join(WORK, "split-%d" % sig)
        os.mkdir(folder)
        interrupted(sig, ["split", src, folder, "--shards", "16"], folder)
        check(not [n for n in os.listdir(folder) if n.startswith("shard-")],
              os.listdir(folder))


def test_sigkill_leaves_a_recognisable_file():
    folder = os.path.join(WORK, "killed")
    os.mkdir(folder)
    r, w = os.pipe()
    proc = subprocess.Popen([LODESTAR, "pack", "--format", "glove", "-",
                             os.path.join(folder, "out.ldsi")], stdin=r,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.write(w, glove_lines(50, 10).encode())
    name = wait_for_temp(proc, folder)
    proc.kill()
    proc.wait(30)
    os.close(r)
    os.close(w)
    check(name.startswith(".out.ldsi.lds-tmp-%d-" % proc.pid), name)
    check(os.listdir(folder) == [name], os.listdir(folder))


def test_an_ignored_signal_stays_ignored():
    """nohup: SIGHUP ignored before the program starts is not turned into a removal."""
    folder = os.path.join(WORK, "nohup")
    os.mkdir(folder)
    r, w = os.pipe()
    proc = subprocess.Popen([LODESTAR, "pack", "--format", "glove", "-",
                             os.path.join(folder, "out.ldsi")], stdin=r,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    os.write(w, glove_lines(50, 10).encode())
    wait_for_temp(proc, folder)
    proc.send_signal(signal.SIGHUP)
    time.sleep(0.2)
    check(proc.poll() is None, "still running after an ignored SIGHUP")
    os.close(w)  # end of input: the pack completes
    rc = proc.wait(30)
    os.close(r)
    check(rc == 0, proc.stderr.read().decode())
    check(os.listdir(folder) == ["out.ldsi"], os.listdir(folder))


# ---- progress -------------------------------------------------------------------------------


def on_pty(argv, stdin_data=None, delay=0.0):
    """Runs the program with standard error on a pty (stdin from a pipe fed after `delay`
    seconds); returns (exit status, what stderr showed)."""
    master, slave = pty.openpty()
    r, w = os.pipe()
    proc = subprocess.Popen([LODESTAR, *argv], stdin=r, stdout=subprocess.DEVNULL,
                            stderr=slave)
    os.close(slave)
    os.close(r)
    out = b""
    start = time.monotonic()
    fed = False
    while True:
        if not fed and time.monotonic() - start >= delay:
            if stdin_data:
                os.write(w, stdin_data)
            os.close(w)
            fed = True
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None and fed:
            break
    rc = proc.wait(30)
    os.close(master)
    on_pty.seconds = time.monotonic() - start - delay
    return rc, out.decode(errors="replace")


def test_progress_on_a_terminal_for_slow_work():
    """Standard input that trickles for 2.5 s: pack shows its line, then erases it."""
    folder = os.path.join(WORK, "progress")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, "p.ldsi")
    master, slave = pty.openpty()
    r, w = os.pipe()
    proc = subprocess.Popen([LODESTAR, "pack", "--format", "glove", "-", out], stdin=r,
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    os.close(r)
    text = glove_lines(3000, 50).encode()
    seen = b""
    step = len(text) // 25
    for i in range(0, len(text), step):
        os.write(w, text[i:i + step])
        time.sleep(0.1)
        while select.select([master], [], [], 0)[0]:
            seen += os.read(master, 65536)
    os.close(w)
    rc = proc.wait(30)
    while select.select([master], [], [], 0.1)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    s = seen.decode(errors="replace")
    check(rc == 0, s)
    check("lodestar pack: " in s and "\r" in s, f"no progress line: {s!r}")
    check(s.rstrip("\n").endswith("\x1b[K") or "\r\x1b[K" in s, f"the line is erased: {s!r}")


def test_quiet_and_not_a_terminal_show_nothing():
    folder = os.path.join(WORK, "quiet")
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, "q.ldsi")
    text = glove_lines(300, 20).encode()
    rc, s = on_pty(["pack", "--quiet", "--format", "glove", "-", out], text, delay=1.5)
    check(rc == 0 and "lodestar pack:" not in s and "\r" not in s, repr(s))
    # Standard error not a terminal: no line however long the work.
    r, w = os.pipe()
    proc = subprocess.Popen([LODESTAR, "pack", "--format", "glove", "-", out], stdin=r,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(r)
    time.sleep(1.5)
    os.write(w, text)
    os.close(w)
    err = proc.stderr.read().decode()
    check(proc.wait(30) == 0 and err == "", repr(err))
    # Work under a second on a terminal: no line either (judged only when the run did take
    # under 0.8 s: a loaded machine or a sanitizer may make it slower).
    rc, s = on_pty(["pack", "--format", "glove", "-", out], text, delay=0)
    check(rc == 0, repr(s))
    if on_pty.seconds < 0.8:
        check("lodestar pack:" not in s, repr(s))


def test_progress_of_a_slow_load_on_a_terminal():
    """info reading a slow pipe (the index arrives over 2 s) shows 'loading'."""
    src = big_index()
    data = open(src, "rb").read()
    master, slave = pty.openpty()
    r, w = os.pipe()
    proc = subprocess.Popen([LODESTAR, "info", "-"], stdin=r, stdout=subprocess.DEVNULL,
                            stderr=slave)
    os.close(slave)
    os.close(r)
    seen = b""
    step = len(data) // 20
    for i in range(0, len(data), step):
        os.write(w, data[i:i + step])
        time.sleep(0.1)
        while select.select([master], [], [], 0)[0]:
            seen += os.read(master, 65536)
    os.close(w)
    rc = proc.wait(30)
    while select.select([master], [], [], 0.1)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    s = seen.decode(errors="replace")
    check(rc == 0, s)
    check("lodestar: loading -: " in s and "%" in s, f"no progress line: {s!r}")


def test_timeout_option_is_checked():
    p = subprocess.run([LODESTAR, "info", "--timeout", "x", "f"], capture_output=True)
    check(p.returncode == 2 and b"--timeout wants a whole number of seconds" in p.stderr,
          p.stderr)
    p = subprocess.run([LODESTAR, "--help"], capture_output=True)
    check(b"--timeout SECONDS" in p.stdout and b".NAME.lds-tmp-PID-XXXXXX" in p.stdout,
          p.stdout)


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
