#!/usr/bin/env python3
"""scripts/adr_check.py's repeats, bounds and superseded records, against a fake benchmark.

A temporary source tree holds three records and a bench-map.json whose commands are a small
Python script writing adr-check's JSON shape. Checks that:
- a condition that is too noisy on its first run is run again and decided on the pooled
  rounds ("holds", 2 runs);
- a condition that stays noisy stops when its runs reach --bound, and the line says so;
- a superseded record is listed, not run and not counted, and --superseded runs it;
- every command runs once whatever the budget, and no repeat starts that would end past
  --budget (the 10-minute bound of issue 30: repeats come after the first pass);
- the summary line counts only current records and the machine line names THP and DAMON;
- no check leaves its temporary folder behind, also one a run's exception ends.

usage: test_adr_check_repeat.py SOURCE_ROOT
"""
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stdout

FAKE = r'''
import json, os, sys, time
mode, out = sys.argv[1], sys.argv[sys.argv.index("--json") + 1]
state = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls-" + mode)
n = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(n + 1))
if mode == "settles":  # run 1 noisy (ratios 0.5, 1.5, ...), later runs clearly above 1
    a = [0.5, 1.5, 0.5, 1.5] if n == 0 else [2.0] * 8
elif mode == "noisy":  # always half above, half below
    time.sleep(0.6)
    a = [0.5, 1.5, 0.5, 1.5]
else:
    a = [3.0] * 4
rows = [{"table": "t", "name": "a", "samples": a}, {"table": "t", "name": "b", "samples": [1.0] * len(a)}]
json.dump({"subcommand": mode, "machine": "fake", "rows": rows}, open(out, "w"))
'''


def record(num, status, mode):
    return ("# %s. Fake %s\n\n- Status: %s\n- Date: 2026-12-02\n"
            "- Holds-if: %s | \"a @ t\" / \"b @ t\" >= 1.0\n\n## Context\nx\n" % (
                num, mode, status, mode))


def main():
    sys.path.insert(0, os.path.join(os.path.abspath(sys.argv[1]), "scripts"))
    import adr_check
    fails = []
    with tempfile.TemporaryDirectory(prefix="lds-adr-repeat-") as tmp:
        os.makedirs(os.path.join(tmp, "docs", "adr"))
        fake = os.path.join(tmp, "fake.py")
        with open(fake, "w") as f:
            f.write(FAKE)
        for num, status, mode in (("0001", "accepted", "settles"), ("0002", "accepted", "noisy"),
                                  ("0003", "superseded by 0001", "old")):
            with open(os.path.join(tmp, "docs", "adr", "%s-fake.md" % num), "w") as f:
                f.write(record(num, status, mode))
        with open(os.path.join(tmp, "bench-map.json"), "w") as f:
            json.dump({"nightly": [{"name": m, "command": "%s %s %s" % (sys.executable, fake, m)}
                                   for m in ("settles", "noisy", "old")]}, f)
        buf = io.StringIO()
        with redirect_stdout(buf):
            rc = adr_check.main(["--source-root", tmp, "--build", tmp, "--bound", "1"])
        out = buf.getvalue()
        print(out)

        def check(ok, what):
            print("%s %s" % ("ok  " if ok else "FAIL", what))
            if not ok:
                fails.append(what)

        calls = {m: (int(open(os.path.join(tmp, "calls-" + m)).read())
                     if os.path.exists(os.path.join(tmp, "calls-" + m)) else 0)
                 for m in ("settles", "noisy", "old")}
        check(rc == 0, "exit status 0")
        check(calls["settles"] == 2 and "over 12 rounds, 2 runs" in out and "-> holds" in out,
              "a noisy first run is repeated and decided on the pooled rounds (2 runs, 12 rounds)")
        check(1 <= calls["noisy"] <= 3 and "too noisy to say (bound of 1 s reached)" in out
              and ("%d run%s, " % (calls["noisy"], "" if calls["noisy"] == 1 else "s")) in out,
              "a condition that stays noisy stops at its bound (0.6 s a run, bound 1 s), and "
              "says so and how many runs it took")
        check(calls["old"] == 0 and "superseded by 0001: not run, not counted" in out
              and "superseded, not run: 0003" in out, "a superseded record is not run")
        check("1 of 2 decisions hold on this machine (1 too noisy to say;" in out,
              "the summary counts current records only")
        check("THP " in out and "DAMON " in out, "the machine line names THP and DAMON")
        buf = io.StringIO()
        with redirect_stdout(buf):
            adr_check.main(["--source-root", tmp, "--build", tmp, "--bound", "1", "--only",
                            "0003", "--superseded"])
        check("superseded, run and not counted: 1 of 1 hold" in buf.getvalue(),
              "--superseded runs it, counted apart")
        for m in ("settles", "noisy"):
            os.unlink(os.path.join(tmp, "calls-" + m))
        buf = io.StringIO()
        with redirect_stdout(buf):
            adr_check.main(["--source-root", tmp, "--build", tmp, "--bound", "30", "--budget",
                            "0.5"])
        out = buf.getvalue()
        calls = {m: int(open(os.path.join(tmp, "calls-" + m)).read())
                 for m in ("settles", "noisy")}
        check(calls == {"settles": 1, "noisy": 1}
              and out.count("too noisy to say (the check's budget of 0.5 s spent)") == 2,
              "a budget the first pass has spent: each command once, no repeat (%s)" % calls)
        # No run leaves its temporary folder behind, also when a run raises (found by a tester:
        # every check left a lodestar-adr-check-* folder in /tmp).
        tmpdir = os.path.join(tmp, "tmpdir")
        os.makedirs(tmpdir)
        saved_tempdir, tempfile.tempdir = tempfile.tempdir, tmpdir
        saved_run = adr_check.run_command
        try:
            with redirect_stdout(io.StringIO()):
                adr_check.main(["--source-root", tmp, "--build", tmp, "--only", "0001"])
            left = os.listdir(tmpdir)

            def interrupted(*args):
                raise KeyboardInterrupt
            adr_check.run_command = interrupted
            raised = False
            try:
                with redirect_stdout(io.StringIO()):
                    adr_check.main(["--source-root", tmp, "--build", tmp, "--only", "0001"])
            except KeyboardInterrupt:
                raised = True
            left_raised = os.listdir(tmpdir)
        finally:
            tempfile.tempdir = saved_tempdir
            adr_check.run_command = saved_run
        check(left == [], "a finished check removes its temporary folder (left: %s)" % left)
        check(raised and left_raised == [],
              "an interrupted check removes its temporary folder (left: %s)" % left_raised)
    print("FAILED" if fails else "all ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
