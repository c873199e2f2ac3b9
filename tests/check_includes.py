#!/usr/bin/env python3
"""The header graph (docs/design.md, "The parts"), checked on what the preprocessor sees.

1. No source or internal header of format/ (the parser, the index, the writer) includes,
   directly or through any header, lodestar_pool.h, lodestar_load.h or the umbrella
   lodestar.h: the parser depends on lodestar_core.h and lodestar_index.h only. The same
   holds for common/, for search/ (which may use format/ and common/) and for the importers
   in import/, which may add lodestar_import.h. No part below search/ (common/, format/,
   import/, pool/, loader/, live/) includes search/'s internal headers.
2. Every public header in include/ compiles alone, as C11 and as C++11, warning-free.

Usage: check_includes.py --source-root DIR --cc CC... [--cxx CXX] [--self-test]
--self-test also proves that check 1 fails on a source that includes the pool's header.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile

FORBIDDEN = {
    "format": {"lodestar_pool.h", "lodestar_load.h", "lodestar.h"},
    "common": {"lodestar_pool.h", "lodestar_load.h", "lodestar.h", "lodestar_index.h",
               "lodestar_import.h"},
    "import": {"lodestar_pool.h", "lodestar_load.h", "lodestar.h"},
    "search": {"lodestar_pool.h", "lodestar_load.h", "lodestar.h", "lodestar_import.h"},
}
# search/'s internal headers: nothing below search/ sees them (design.md, "The parts").
SEARCH_INTERNAL = {"search_internal.h", "kernels_impl.h"}
for _part in ("common", "format", "import", "pool", "loader", "live"):
    FORBIDDEN[_part] = FORBIDDEN.get(_part, set()) | SEARCH_INTERNAL


def deps(cc, root, path):
    """Every header the preprocessor opens for `path` (basenames)."""
    args = cc + ["-MM", "-MG", "-std=c11", "-D_GNU_SOURCE", "-DLDS_BUILDING_LIBRARY",
                 "-I", os.path.join(root, "include"), "-I", os.path.join(root, "common")]
    if path.endswith(".h"):
        args += ["-x", "c"]
    out = subprocess.run(args + [path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} {path}: {out.stderr.strip()}")
    text = out.stdout.replace("\\\n", " ")
    names = text.split(":", 1)[1].split()
    return {os.path.basename(n) for n in names if n.endswith(".h")}


def check_parts(cc, root):
    bad = []
    checked = 0
    for part, forbidden in FORBIDDEN.items():
        d = os.path.join(root, part)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(d, name)
            hit = deps(cc, root, path) & forbidden
            checked += 1
            if hit:
                bad.append(f"{part}/{name} includes {', '.join(sorted(hit))}")
    return checked, bad


def check_public(cc, cxx, root):
    bad = []
    inc = os.path.join(root, "include")
    headers = sorted(h for h in os.listdir(inc) if h.endswith(".h"))
    compilers = [(cc, "c", "-std=c11")] + ([(cxx, "c++", "-std=c++11")] if cxx else [])
    for h in headers:
        for comp, lang, std in compilers:
            src = f'#include "{h}"\n#include "{h}"\nint lds_header_check_{lang == "c"};\n'
            args = comp + ["-fsyntax-only", "-x", lang, std, "-Wall", "-Wextra", "-Wpedantic",
                           "-Werror", "-I", inc, "-"]
            out = subprocess.run(args, input=src, capture_output=True, text=True)
            if out.returncode != 0:
                bad.append(f"{h} alone as {lang}: {out.stderr.strip()[:400]}")
    return len(headers), bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--cc", required=True, help="the C compiler command (shell words)")
    ap.add_argument("--cxx", default="", help="a C++ compiler command; empty: C only")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    cc = shlex.split(a.cc)
    cxx = shlex.split(a.cxx) if a.cxx else None
    root = a.source_root

    checked, bad = check_parts(cc, root)
    nh, bad_pub = check_public(cc, cxx, root)
    for b in bad + bad_pub:
        print("FAIL:", b)
    if a.self_test:
        with tempfile.TemporaryDirectory() as tmp:
            f = os.path.join(tmp, "probe.c")
            with open(f, "w") as fh:
                fh.write(f'#include "{os.path.join(root, "format", "format_internal.h")}"\n'
                         '#include "lodestar_pool.h"\n')
            if "lodestar_pool.h" not in deps(cc, root, f):
                print("FAIL: self-test: the checker did not see lodestar_pool.h in a probe")
                bad.append("self-test")
            else:
                print("self-test: a probe that includes lodestar_pool.h is caught")
            with open(f, "w") as fh:
                fh.write(f'#include "{os.path.join(root, "search", "search_internal.h")}"\n')
            if "search_internal.h" not in deps(cc, root, f) & FORBIDDEN["format"]:
                print("FAIL: self-test: format/ may include search_internal.h")
                bad.append("self-test")
            else:
                print("self-test: a format/ probe that includes search/'s header is caught")
    print(f"{checked} part files checked, {nh} public headers compiled alone "
          f"({'C and C++' if cxx else 'C only'}): {len(bad) + len(bad_pub)} failures")
    return 1 if bad or bad_pub else 0


if __name__ == "__main__":
    sys.exit(main())
