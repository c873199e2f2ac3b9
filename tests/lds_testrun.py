"""The small runner of lodestar's Python test scripts (test_cli.py; the package has pytest).

Each script defines test_* functions and ends with `sys.exit(run_tests(globals(), WORK))`.
A test that cannot run here calls skip(reason): it is counted and named as skipped, never
as passed. The closing line is the plain 'N passed, N failed, N skipped' that CI reads;
the exit status is 1 if any test failed, 77 (meson's "skipped") if every test skipped,
else 0.
"""
import shutil
import sys
import traceback


class Skipped(Exception):
    """Raised by skip(): the current test did not run."""


def check(cond, what):
    """Fails the current test with `what` unless `cond` holds."""
    if not cond:
        raise AssertionError(what)


def skip(reason):
    """Ends the current test as skipped, saying why."""
    raise Skipped(reason)


def run_tests(namespace, workdir):
    """Runs every test_* function of `namespace` in definition order, removes `workdir`,
    prints one line per test and the totals; returns the process exit status."""
    tests = [(name, fn) for name, fn in namespace.items() if name.startswith("test_")]
    passed = failed = skipped = 0
    for name, fn in tests:
        try:
            fn()
        except Skipped as why:
            skipped += 1
            print(f"skip {name}: {why}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc(file=sys.stdout)
        else:
            passed += 1
            print(f"ok   {name}")
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    if failed:
        return 1
    return 77 if skipped and not passed else 0
