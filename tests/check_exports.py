#!/usr/bin/env python3
"""liblodestar's exported symbols are its declared API, and nothing internal.

Reads `nm -D --defined-only` of the built shared library and checks that:
- no exported symbol starts with `lds__` (the internal prefix; docs/adr/0037 took the
  pool's inline experiment and its two variables out of the installed API);
- every exported `lds_` symbol is declared with LDS_API in an installed header (include/);
- every LDS_API function declared in include/ is exported.

usage: check_exports.py --source-root DIR --lib PATH/liblodestar.so
Exits 77 (skipped) when the library is not a shared one or nm is missing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

DECL = re.compile(r"LDS_API\b[^;{]*?\b(lds_[A-Za-z0-9_]+)\s*[\(\[;]", re.S)


def declared(root):
    names = set()
    inc = os.path.join(root, "include")
    for h in sorted(os.listdir(inc)):
        if h.endswith(".h"):
            with open(os.path.join(inc, h), encoding="utf-8") as f:
                text = f.read()
            text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
            names.update(DECL.findall(text))
    return names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--lib", required=True)
    a = ap.parse_args()
    if ".so" not in os.path.basename(a.lib) or not os.path.exists(a.lib) or not shutil.which("nm"):
        print("skip: no shared library or no nm")
        return 77
    syms = {s for s in exported(a.lib) if s.startswith("lds")}
    decl = declared(a.source_root)
    fails = []
    for s in sorted(syms):
        if s.startswith("lds__"):
            fails.append("internal symbol exported: " + s)
        elif s not in decl:
            fails.append("exported but declared LDS_API in no include/ header: " + s)
    for d in sorted(decl - syms):
        fails.append("declared LDS_API but not exported: " + d)
    for f in fails:
        print("FAIL " + f)
    print("%d lds symbols exported, %d declared: %s" % (len(syms), len(decl),
                                                        "FAILED" if fails else "ok"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
