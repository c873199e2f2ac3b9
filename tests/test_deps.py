#!/usr/bin/env python3
"""scripts/deps.sh against a fake apt: its two sets, the dpkg lock, apt's errors.

usage: test_deps.py SOURCE_ROOT

Runs scripts/deps.sh with fake `id` (root), `dpkg-query` (every package installed but
those in FAKE_MISSING) and `apt-get` (records its arguments; FAKE_APT says how it behaves:
ok, a held lock on the first `update`, or a failure) first on PATH, so nothing is installed.
Checks that the default (core) set leaves out the lab (faiss, gensim, dask, nginx, spin,
allocators), that --lab adds it, that --check lists what is missing, that apt-get is asked
to wait for the dpkg lock, that a held lock is waited for with a message, and that a
failing apt-get ends with exit 1 and a message naming the command.
"""
import os
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests  # noqa: E402

ROOT = os.path.abspath(sys.argv[1])
DEPS = os.path.join(ROOT, "scripts", "deps.sh")
WORK = tempfile.mkdtemp(prefix="lodestar-test-deps-")
FAKES = os.path.join(WORK, "bin")
LAB = ("python3-faiss", "python3-gensim", "python3-distributed", "nginx-light", "spin",
       "libjemalloc2")

FAKE = {
    "id": "#!/bin/sh\necho 0\n",
    "dpkg-query": """#!/bin/sh
for last; do :; done
for p in $FAKE_MISSING; do [ "$p" = "$last" ] && exit 1; done
printf installed
""",
    "apt-get": """#!/bin/sh
echo "$*" >>"$FAKE_LOG"
case "$FAKE_APT:$*" in
*lock-once:*update*)
    if [ ! -e "$FAKE_LOG.locked" ]; then
        : >"$FAKE_LOG.locked"
        echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
        exit 100
    fi ;;
*fail:*install*)
    echo "E: Unable to locate package zstd" >&2
    exit 100 ;;
esac
exit 0
""",
}
os.makedirs(FAKES)
for name, text in FAKE.items():
    path = os.path.join(FAKES, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, stat.S_IRWXU)


def deps(*args, missing=(), apt="ok", lock_timeout=None):
    """Runs deps.sh ARGS; (exit status, stdout, stderr, apt-get command lines)."""
    log = tempfile.mktemp(dir=WORK)
    env = dict(os.environ, PATH=FAKES + os.pathsep + os.environ["PATH"],
               FAKE_MISSING=" ".join(missing), FAKE_APT=apt, FAKE_LOG=log)
    env.pop("LDS_DPKG_LOCK_TIMEOUT", None)
    if lock_timeout is not None:
        env["LDS_DPKG_LOCK_TIMEOUT"] = str(lock_timeout)
    r = subprocess.run(["bash", DEPS] + list(args), capture_output=True, text=True, env=env,
                       timeout=120)
    calls = open(log).read().splitlines() if os.path.exists(log) else []
    return r.returncode, r.stdout, r.stderr, calls


def test_all_present_installs_nothing():
    rc, out, _, calls = deps()
    check(rc == 0 and "all present (core)" in out and calls == [], (rc, out, calls))
    rc, out, _, calls = deps("--lab")
    check(rc == 0 and "all present (core and lab)" in out and calls == [], (rc, out, calls))


def test_core_set_leaves_the_lab_out():
    rc, out, err, calls = deps(missing=("zstd",) + LAB)
    check(rc == 0, "exit %d: %s" % (rc, err))
    check(len(calls) == 2 and " update" in calls[0] and " install " in calls[1], calls)
    installed = calls[1].split()
    check("zstd" in installed, calls[1])
    for p in LAB:
        check(p not in installed, "%s is in the core set: %s" % (p, calls[1]))


def test_lab_set_adds_the_lab():
    rc, _, err, calls = deps("--lab", missing=("zstd",) + LAB)
    check(rc == 0 and len(calls) == 2, (rc, err, calls))
    installed = calls[1].split()
    for p in ("zstd",) + LAB:
        check(p in installed, "%s not installed by --lab: %s" % (p, calls[1]))


def test_check_lists_what_is_missing():
    rc, out, _, calls = deps("--check", missing=("zstd", "spin"))
    check(rc == 1 and out.split() == ["zstd"] and calls == [], (rc, out, calls))
    rc, out, _, calls = deps("--check", "--lab", missing=("zstd", "spin"))
    check(rc == 1 and out.split() == ["zstd", "spin"] and calls == [], (rc, out, calls))
    rc, out, _, _ = deps("--check", "--lab")
    check(rc == 0 and out == "", (rc, out))


def test_apt_waits_for_the_dpkg_lock():
    rc, out, _, calls = deps(missing=("zstd",))
    check(rc == 0 and all("-o DPkg::Lock::Timeout=600" in c for c in calls), calls)
    check("waits for it up to 600 s" in out, out)
    rc, _, _, calls = deps(missing=("zstd",), lock_timeout=30)
    check(all("-o DPkg::Lock::Timeout=30" in c for c in calls), calls)


def test_a_held_lists_lock_is_waited_for():
    rc, _, err, calls = deps(missing=("zstd",), apt="lock-once", lock_timeout=60)
    check(rc == 0, "exit %d: %s" % (rc, err))
    check("waiting for the package manager's lock" in err, err)
    check([c.split()[-2:] for c in calls[:2]] == [["update", "-qq"]] * 2
          and "install" in calls[2], calls)


def test_a_held_lock_past_the_timeout_is_a_clear_error():
    rc, _, err, calls = deps(missing=("zstd",), apt="lock-once", lock_timeout=0)
    check(rc == 1 and len(calls) == 1, (rc, calls))
    check("deps: 'apt-get update -qq' failed (exit 100)" in err
          and "still held the package manager's lock" in err, err)


def test_apt_failure_is_a_clear_error():
    rc, _, err, calls = deps(missing=("zstd",), apt="fail")
    check(rc == 1, "exit %d" % rc)
    check("deps: 'apt-get install -y -qq zstd' failed (exit 100)" in err
          and "Unable to locate package" in err and "install by hand" in err, err)


def test_usage_errors():
    rc, _, err, _ = deps("--nope")
    check(rc == 2 and "unknown option" in err, (rc, err))
    rc, _, err, _ = deps(lock_timeout="soon")
    check(rc == 2 and "LDS_DPKG_LOCK_TIMEOUT" in err, (rc, err))


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
