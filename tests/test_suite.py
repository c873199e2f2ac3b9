#!/usr/bin/env python3
"""The suite itself, for a slow runner: what runs in 'unit', and how timeouts and fuzzing scale.

usage: test_suite.py SOURCE_ROOT BUILD_ROOT

Checks, from the build's meson-info/intro-tests.json and the scripts:
- no test of suite 'unit' has a timeout above 300 s, and the heavy checks (every
  bench-map.json command and every ADR condition in --dry mode, the Dask cluster) are in
  suite 'slow', their quick structural parts (bench-map --quick, adr without a build) in 'unit';
- scripts/test.sh passes --timeout-multiplier to every `meson test`, and the multiplier is
  LDS_TIMEOUT_MULTIPLIER when set, else the load average over the CPUs rounded up, 1 to 10;
- scripts/fuzz.sh -T TOTAL shares TOTAL seconds among the targets (rounds of -j at a time),
  10 to 60 s each, so that more targets do not lengthen the fuzz stage.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests  # noqa: E402

ROOT = os.path.abspath(sys.argv[1])
BUILD = os.path.abspath(sys.argv[2])
WORK = tempfile.mkdtemp(prefix="lodestar-test-suite-")


def tests():
    with open(os.path.join(BUILD, "meson-info", "intro-tests.json"), encoding="utf-8") as f:
        return {t["name"]: t for t in json.load(f)}


def suites(t):
    return {s.split(":", 1)[-1] for s in t["suite"]}


def test_unit_tests_are_quick():
    for name, t in tests().items():
        if "unit" in suites(t):
            check(0 < t["timeout"] <= 300, "%s: timeout %s s in suite unit" % (name, t["timeout"]))


def test_heavy_checks_are_slow():
    ts = tests()
    for name in ("bench-map-full", "adr-conditions", "python-dask"):
        if name in ts:
            check(suites(ts[name]) == {"slow"}, "%s is in %s, not slow" % (name, suites(ts[name])))
    if "bench-map" in ts:
        check("--quick" in ts["bench-map"]["cmd"] and "bench-map-full" in ts,
              "bench-map in unit runs --quick: %s" % ts["bench-map"]["cmd"])
    check("adr" in ts and "--build-root" not in ts["adr"]["cmd"],
          "adr in unit evaluates no condition: %s" % ts.get("adr", {}).get("cmd"))


def multiplier(env_value=None, loadavg=None):
    env = dict(os.environ)
    env.pop("LDS_TIMEOUT_MULTIPLIER", None)
    if env_value is not None:
        env["LDS_TIMEOUT_MULTIPLIER"] = env_value
    if loadavg is not None:
        path = os.path.join(WORK, "loadavg")
        with open(path, "w") as f:
            f.write(loadavg)
        env["LDS_LOADAVG_FILE"] = path
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test.sh"), "--timeout-multiplier"],
                       capture_output=True, text=True, env=env, timeout=60)
    check(r.returncode == 0, "test.sh --timeout-multiplier: exit %d %s" % (r.returncode, r.stderr))
    return r.stdout.strip()


def test_timeouts_scale_with_the_load():
    n = os.cpu_count() or 1
    check(multiplier("3") == "3", "LDS_TIMEOUT_MULTIPLIER=3")
    check(multiplier("0") == "0", "LDS_TIMEOUT_MULTIPLIER=0 (no timeouts)")
    check(multiplier(loadavg="0.30 0.20 0.10 1/100 42\n") == "1", "an idle machine")
    for load in (2.0, 10.5, 21.0, 99.0):
        want = str(min(10, max(1, math.ceil(load / n))))
        got = multiplier(loadavg="%.2f 1.00 1.00 1/100 42\n" % load)
        check(got == want, "load %.1f on %d CPUs: %s, not %s" % (load, n, got, want))


def test_every_meson_test_gets_the_multiplier():
    with open(os.path.join(ROOT, "scripts", "test.sh"), encoding="utf-8") as f:
        text = f.read()
    calls = re.findall(r"meson test -C (?:(?!\n\s*\n).)*?(?<!\\)\n", text, re.S)
    runs = [c for c in calls if "--list" not in c]
    check(len(runs) >= 2, "found the meson test calls: %r" % runs)
    for c in runs:
        check("--timeout-multiplier" in c, "a meson test without the multiplier: %r" % c)


def fuzz_plan(*args):
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fuzz.sh"), "-n"] + list(args),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    check(r.returncode == 0, "fuzz.sh -n %s: exit %d %s" % (args, r.returncode, r.stderr))
    m = re.search(r"plan: (\d+) targets, (\d+) at a time, (\d+) s each", r.stdout)
    check(m is not None, r.stdout)
    return tuple(int(x) for x in m.groups())


def test_fuzz_stage_has_a_total_budget():
    names = ["t%d" % i for i in range(14)]
    check(fuzz_plan("-T", "300", "-j", "2", *names) == (14, 2, 42), "14 targets in 300 s")
    check(fuzz_plan("-T", "300", "-j", "2", *names[:9]) == (9, 2, 60), "9 targets: capped at 60")
    check(fuzz_plan("-T", "40", "-j", "2", *names) == (14, 2, 10), "at least 10 s each")
    check(fuzz_plan("-t", "7", "-j", "2", *names) == (14, 2, 7), "-t alone: seconds each")
    with open(os.path.join(ROOT, "scripts", "test.sh"), encoding="utf-8") as f:
        check('scripts/fuzz.sh -T "${FUZZ_BUDGET:-300}"' in f.read(),
              "test.sh's fuzz stage runs within FUZZ_BUDGET")


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
