#!/usr/bin/env python3
"""The header graph (docs/design.md, "The parts"), checked on what the preprocessor sees.

1. No source or internal header of format/ (the parser, the index, the writer) includes,
   directly or through any header, lodestar_pool.h, lodestar_load.h or the umbrella
   lodestar.h: the parser depends on lodestar_core.h and lodestar_index.h only. The same
   holds for common/, for search/ (which may use format/ and common/) and for the importers
   in import/, which may add lodestar_import.h. No part below search/ (common/, format/,
   import/, pool/, loader/, live/) includes search/'s internal headers.
2. Every file of a part opens internal headers (the .h files of a part's folder) of its own
   part and of the parts below it only, as docs/design.md's table says (ALLOWED below):
   common/ none, format/ common/, import/ format/ and common/, pool/ common/, loader/
   format/, pool/ and common/, live/ those and loader/, search/ format/ and common/, cli/ none (the public API only),
   bench/ pool/ and common/ (the inline pair's experiment reads the pool's layout). So
   import/ reaches the hash table in common/, not in format/, and no part of the library
   opens bench/pool_inline.h. A "../PART/FILE" include names a part's *_internal.h only.
3. Every public header in include/ compiles alone, as C11 and as C++11, warning-free, and
   names no internal (`lds__`) identifier: the pool's inline layout is not installed.

Usage: check_includes.py --source-root DIR --cc CC... [--cxx CXX] [--self-test]
--self-test also proves that check 1 fails on a source that includes the pool's header.
"""
import argparse
import os
import re
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


# Part -> the parts whose internal headers its files may open (besides its own).
ALLOWED = {
    "common": set(),
    "format": {"common"},
    "import": {"format", "common"},
    "pool": {"common"},
    "loader": {"format", "pool", "common"},
    "live": {"loader", "format", "pool", "common"},
    "search": {"format", "common"},
    "cli": set(),
    "bench": {"pool", "common"},
}


def internal_headers(root):
    """Basename of every internal header -> the part (folder) that holds it."""
    owner = {}
    for part in ALLOWED:
        d = os.path.join(root, part)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(".h"):
                owner[name] = part
    return owner


LIBRARY_PARTS = ("common", "format", "search", "import", "pool", "loader", "live", "cli")
# A part reaches another part's files only through its *_internal.h header (as search/ does
# with "../format/format_internal.h"), never another of its files (as import/ once did with
# "../format/hashtab.h"); shared helpers live in common/, on the include path.
RELATIVE_INCLUDE = re.compile(r'^\s*#\s*include\s*"\.\./(?![a-z]+/[a-z_]+_internal\.h")', re.M)


def check_file(cc, root, part, path, owner):
    """The layer violations of one file of `part` (a list of messages)."""
    bad = []
    label = f"{part}/{os.path.basename(path)}"
    allowed = ALLOWED[part]
    for h in sorted(deps(cc, root, path)):
        other = owner.get(h)
        if other and other != part and other not in allowed:
            bad.append(f"{label} opens {other}/{h}: {part}/ may use "
                       f"{', '.join(sorted(allowed)) or 'no other part'}")
    if part in LIBRARY_PARTS:
        with open(path, encoding="utf-8", errors="replace") as f:
            if RELATIVE_INCLUDE.search(f.read()):
                bad.append(f'{label} includes "../PART/FILE" other than a part\'s *_internal.h: '
                           "shared helpers belong in common/ (on the include path)")
    return bad


def check_layers(cc, root):
    owner = internal_headers(root)
    bad = []
    checked = 0
    for part in ALLOWED:
        d = os.path.join(root, part)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith((".c", ".h")):
                checked += 1
                bad += check_file(cc, root, part, os.path.join(d, name), owner)
    return checked, bad


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
        with open(os.path.join(inc, h), encoding="utf-8") as f:
            if "lds__" in f.read():
                bad.append(f"{h} names an internal (lds__) identifier")
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
    layered, bad_layers = check_layers(cc, root)
    bad += bad_layers
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
            # a file of common/ that opens format/'s header, and an importer that reaches a
            # helper of format/ as "../format/NAME.h" (as import/ did with the hash table
            # before it moved to common/)
            owner = internal_headers(root)
            os.makedirs(os.path.join(tmp, "part"))
            f = os.path.join(tmp, "part", "probe.c")
            with open(f, "w") as fh:
                fh.write('#include "../format/format_helpers.h"\n')
            os.makedirs(os.path.join(tmp, "format"))
            with open(os.path.join(tmp, "format", "format_helpers.h"), "w") as fh:
                fh.write(f'#include "{os.path.join(root, "format", "format_internal.h")}"\n')
            for part, want in (("common", 2), ("import", 1), ("bench", 1)):
                got = check_file(cc, root, part, f, owner)
                if len(got) != want:
                    print(f"FAIL: self-test: a probe in {part}/ gave {got}, not {want} findings")
                    bad.append("self-test")
            if "self-test" not in bad:
                print("self-test: common/ opening format/'s header and a \"../\" include in a "
                      "part are caught")
    print(f"{layered} files checked against the layers of docs/design.md")
    print(f"{checked} part files checked, {nh} public headers compiled alone "
          f"({'C and C++' if cxx else 'C only'}): {len(bad) + len(bad_pub)} failures")
    return 1 if bad or bad_pub else 0


if __name__ == "__main__":
    sys.exit(main())
