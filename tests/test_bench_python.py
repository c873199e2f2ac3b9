#!/usr/bin/env python3
"""lodestar-bench load-scale's numpy child is /usr/bin/python3 whatever python3 PATH finds first.

A python3 found first on PATH (pyenv's, a virtual environment's) used to become the child's
interpreter prefix: the child was exec'd as "python3", and CPython looks a bare argv[0] up on
PATH to find its prefix, so under pyenv the child lost the system's numpy and load-scale's
numpy rows failed (found running scripts/adr-check.sh under pyenv's python3).

Here PATH starts with a directory holding a fake python3, and the child script (given by
LDS_BENCH_NUMPY_SCRIPT) writes sys.executable and sys.prefix to a file: both must be the
system's.

usage: test_bench_python.py BUILD_ROOT
"""
import os
import subprocess
import sys
import tempfile


def main():
    build = sys.argv[1]
    bench = os.path.join(build, "bench", "lodestar-bench")
    with tempfile.TemporaryDirectory(prefix="lds-bench-python-") as tmp:
        fake = os.path.join(tmp, "bin")
        os.mkdir(fake)
        with open(os.path.join(fake, "python3"), "w") as f:
            f.write("#!/bin/sh\nexit 99\n")
        os.chmod(os.path.join(fake, "python3"), 0o755)
        out = os.path.join(tmp, "exe.txt")
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write("import sys\n"
                    "open(%r, 'a').write('%%s %%s\\n' %% (sys.executable, sys.prefix))\n"
                    "n = int(sys.argv[2]) if len(sys.argv) > 2 else 1\n"
                    "print('\\n'.join('1.0 1.0 1 30.0' for _ in range(n)), flush=True)\n"
                    % out)
        env = dict(os.environ)
        env["PATH"] = fake + os.pathsep + env.get("PATH", "")
        env["LDS_BENCH_NUMPY_SCRIPT"] = script
        env["TMPDIR"] = tmp
        p = subprocess.run([bench, "load-scale", "--dry", "--iterations", "1"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=300)
        if not os.path.exists(out):
            # The bench skips numpy rows when /usr/bin/python3 lacks numpy: nothing to test.
            if "numpy.load rows skipped" in p.stdout:
                print("SKIP: /usr/bin/python3 has no numpy, load-scale runs no numpy child")
                return 77
            print(p.stdout[-3000:])
            print("FAIL: the numpy child never ran (exit %d)" % p.returncode)
            return 1
        lines = open(out).read().split("\n")
        bad = [ln for ln in lines if ln and ln.split(" ")[0] != "/usr/bin/python3"]
        if bad:
            print("FAIL: the numpy child ran as %r, not /usr/bin/python3" % bad[0])
            return 1
        print("ok: %d numpy children ran as /usr/bin/python3 (prefix %s) with %s first on PATH"
              % (len([ln for ln in lines if ln]), lines[0].split(" ")[1], fake))
    return 0


if __name__ == "__main__":
    sys.exit(main())
