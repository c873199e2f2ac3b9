#!/usr/bin/env python3
"""find_package(lodestar) works for a CMake project, from an installed tree anywhere.

Installs the build into a scratch DESTDIR (meson install --destdir), moves the installed
prefix elsewhere (so nothing can come from the configured prefix), packs the shipped GloVe
sample with the installed `lodestar` (no LD_LIBRARY_PATH: its $ORIGIN run path), configures
and builds tests/cmake-consumer/ with CMAKE_PREFIX_PATH at the moved prefix, runs it on the
index, and compares what it prints (rows, dim, row and vector of "king") with the sample's
own text, parsed as float32. Checks the pkg-config file's URL and the CMake version file too
(0.1 is accepted; 0.2, which a 0.x minor version may break, is refused by find_package).

usage: test_cmake_consumer.py MESON BUILD_ROOT PREFIX BINDIR SOURCE_ROOT
Exit 77 (skipped) without cmake or zstd.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

meson, build, prefix, bindir, src = sys.argv[1:6]
for tool in ("cmake", "zstd"):
    if not shutil.which(tool):
        print(f"skip: {tool} is not installed (scripts/deps.sh installs it)")
        sys.exit(77)

env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, env=kw.pop("env", env), **kw)
    if p.returncode != 0:
        print(f"FAIL {' '.join(cmd)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        sys.exit(1)
    return p.stdout


sample = os.path.join(src, "data", "glove-100d-20k.txt.zst")
text = subprocess.run(["zstd", "-dc", sample], capture_output=True, check=True).stdout
lines = text.decode("utf-8").splitlines()
want_row = next(i for i, l in enumerate(lines) if l.split(" ", 1)[0] == "king")
want_vec = np.array(lines[want_row].split(" ")[1:], dtype=np.float32)

with tempfile.TemporaryDirectory() as work:
    run([meson, "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", work + "/stage"])
    moved = os.path.join(work, "elsewhere", "prefix")
    os.makedirs(os.path.dirname(moved))
    shutil.move(work + "/stage" + prefix, moved)

    cfgs = []
    for root, _, files in os.walk(moved):
        cfgs += [os.path.join(root, f) for f in files if f.startswith("lodestarConfig")]
    check(sorted(os.path.basename(c) for c in cfgs) == ["lodestarConfig.cmake",
                                                         "lodestarConfigVersion.cmake"],
          f"CMake package files installed: {sorted(os.path.relpath(c, moved) for c in cfgs)}")
    pcs = [os.path.join(r, f) for r, _, fs in os.walk(moved) for f in fs if f == "lodestar.pc"]
    url = [l for l in open(pcs[0]).read().splitlines() if l.startswith("URL: ")] if pcs else []
    check(len(url) == 1 and url[0].startswith("URL: https://"), f"lodestar.pc has a URL: {url}")

    # The man pages, when the build made them (help2man): one per command, in man1.
    if os.path.exists(os.path.join(build, "cli", "lodestar.1")):
        built = sorted(f for f in os.listdir(os.path.join(build, "cli")) if f.endswith(".1"))
        mans = [os.path.relpath(os.path.join(r, f), moved) for r, _, fs in os.walk(moved)
                for f in fs if f.endswith(".1")]
        check(sorted(os.path.basename(m) for m in mans) == built
              and all(os.path.dirname(m).endswith("man/man1") for m in mans),
              f"man pages installed in man1: {sorted(mans)}")

    # The installed program, from a prefix it was not configured for.
    lodestar = os.path.join(moved, bindir, "lodestar")
    index = os.path.join(work, "sample.ldsi")
    run([lodestar, "pack", sample, index])

    cc_env = dict(env)
    sanitize = os.environ.get("LDS_SANITIZE")
    cmake_args = []
    if sanitize:
        # A sanitized liblodestar needs the sanitizer's runtime in the program (clang's).
        cc_env["CC"] = "clang"
        cmake_args = [f"-DCMAKE_C_FLAGS=-fsanitize={sanitize}",
                      f"-DCMAKE_EXE_LINKER_FLAGS=-fsanitize={sanitize}"]
    bdir = os.path.join(work, "consumer-build")
    run(["cmake", "-S", os.path.join(src, "tests", "cmake-consumer"), "-B", bdir,
         f"-DCMAKE_PREFIX_PATH={moved}", "-DCMAKE_BUILD_TYPE=Debug"] + cmake_args, env=cc_env)
    run(["cmake", "--build", bdir], env=cc_env)
    out = run([os.path.join(bdir, "consumer"), index, "king"])
    got = dict(l.split(" ", 1) for l in out.splitlines())
    version = open(os.path.join(src, "meson.build")).read().split("version: '", 1)[1].split("'")[0]
    check(got.get("version") == version, f"consumer: version {got.get('version')} == {version}")
    check(got.get("rows") == str(len(lines)), f"consumer: rows {got.get('rows')} == {len(lines)}")
    check(got.get("dim") == str(want_vec.size), f"consumer: dim {got.get('dim')} == {want_vec.size}")
    check(got.get("row") == str(want_row), f"consumer: row of king {got.get('row')} == {want_row}")
    vec = np.array(got.get("vector", "").split(), dtype=np.float32)
    check(vec.shape == want_vec.shape and np.array_equal(vec, want_vec),
          f"consumer: king's vector equals the sample's line, bit for bit ({vec[:3]}...)")

    # The version file: 0.2 may break 0.1's API (SameMinorVersion), so asking for it fails.
    bad = os.path.join(work, "too-new")
    os.makedirs(bad)
    with open(os.path.join(bad, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.16)\nproject(too_new C)\n"
                "find_package(lodestar 0.2 REQUIRED)\n")
    p = subprocess.run(["cmake", "-S", bad, "-B", bad + "/b", f"-DCMAKE_PREFIX_PATH={moved}"],
                       capture_output=True, text=True, env=env)
    said = " ".join((p.stderr + p.stdout).split())
    check(p.returncode != 0 and 'compatible with requested version "0.2"' in said
          and f"version: {version}" in said,
          f"find_package(lodestar 0.2) refused by the version file (exit {p.returncode})")

sys.exit(1 if failures else 0)
