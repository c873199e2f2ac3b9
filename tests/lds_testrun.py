"""The small runner of lodestar's Python test scripts (test_cli.py; the package has pytest).

Each script defines test_* functions and ends with `sys.exit(run_tests(globals(), WORK))`.
The closing line is the plain 'N passed, N failed' that CI reads.
"""
import shutil
import sys
import traceback


def check(cond, what):
    """Fails the current test with `what` unless `cond` holds."""
    if not cond:
        raise AssertionError(what)


def run_tests(namespace, workdir):
    """Runs every test_* function of `namespace` in definition order, removes `workdir`,
    prints one line per test and the totals; returns the process exit status."""
    tests = [(name, fn) for name, fn in namespace.items() if name.startswith("test_")]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc(file=sys.stdout)
        else:
            passed += 1
            print(f"ok   {name}")
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
