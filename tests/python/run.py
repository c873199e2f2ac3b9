#!/usr/bin/env python3
"""Runs the pytest suite of tests/python for meson test: `run.py PYTEST_ARGS...`.

Exits 77 (meson's "skipped") under LDS_SANITIZE, since a sanitizer-built library cannot
be loaded into an uninstrumented python, and when numpy or pytest is missing (or the
module named by a leading `--require MODULE`); otherwise
pytest's own exit status, after pytest's closing line ("N passed in S s").
"""
import os
import sys


def main():
    if os.environ.get("LDS_SANITIZE"):
        print("skipped: LDS_SANITIZE is set (a sanitizer-built library cannot load into python)")
        sys.exit(77)
    try:
        import numpy  # noqa: F401
        import pytest
    except ImportError as e:
        print("skipped: %s (Debian python3-numpy, python3-pytest)" % e)
        sys.exit(77)

    args = sys.argv[1:]
    # --require MODULE (first): skip (77) the whole run when MODULE cannot be imported.
    if args[:1] == ["--require"]:
        module, args = args[1], args[2:]
        try:
            __import__(module)
        except ImportError as e:
            print("skipped: %s (see scripts/deps.sh)" % e)
            sys.exit(77)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(pytest.main(["-p", "no:cacheprovider", "-q", "-rs", here] + args))


# A guard: a worker process started with multiprocessing's spawn (distributed's
# LocalCluster) imports this file again as __mp_main__ and must not run the suite.
if __name__ == "__main__":
    main()
