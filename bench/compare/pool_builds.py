#!/usr/bin/env python3
"""Builds side by side: the warm rent+return pair of two (or more) builds of lodestar against
the malloc+free of the process, under glibc and under mimalloc and jemalloc by LD_PRELOAD,
in several fresh processes per build, the builds alternating. A process on this shared
machine can run its whole life at about twice the time of another (the vCPU's neighbour, the
address layout), so one process per build says little: the per-round ratio pool/malloc
within each process is the figure, and its spread over processes says how far it holds.

usage: bench/compare/pool_builds.py [--build NAME=DIR ...] [--allocator LIST] [--processes N]
                            [--size LIST] [--iterations N] [--dry] [--json FILE]
  --build NAME=DIR  a build folder (with bench/lodestar-bench); repeatable; default
                    new=$LODESTAR_BUILD (else build)
  --allocator LIST  glibc, mimalloc, jemalloc (default all three; one not installed is
                    skipped with a line naming its Debian package)
  --processes N     fresh processes per build and allocator (default 5)
  --size LIST       passed to rent-return (default 64,256,1K,4K,64K,1M)
  --iterations N    rounds per process (default 9)
  --dry             one process, sizes 64 and 4K, 3 rounds
  --json FILE       the summary rows (name, unit, median, min, max, page_faults) as JSON

Per size, allocator and build (and "NAME inline", the pair through bench/pool_inline.h,
where the build's rent-return has it) it prints: the pool's per-process median (min over processes,
median over processes), the same for malloc+free, and the per-round ratio pool/malloc: the
median over processes of each process's median ratio, with the processes' [min, max]. The
issue-14 targets are a ratio of at most 0.6 under glibc and at most 1.0 under mimalloc.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

import benchlib

PRELOAD = {"mimalloc": ("libmimalloc.so.2", "libmimalloc2.0"),
           "jemalloc": ("libjemalloc.so.2", "libjemalloc2")}


def find_lib(soname):
    out = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == soname and ("x86-64" in line or "64bit" in line):
            return parts[-1]
    return None


def parse_args(argv):
    opts = {"builds": [], "allocators": ["glibc", "mimalloc", "jemalloc"], "processes": 5,
            "size": "64,256,1K,4K,64K,1M", "iterations": 9, "dry": False, "json": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        val = argv[i + 1] if i + 1 < len(argv) else None
        if a in ("--build", "--allocator", "--processes", "--size", "--iterations", "--json"):
            if val is None:
                sys.exit("pool_builds: %s wants a value" % a)
            i += 1
        if a == "--build":
            if "=" not in val:
                sys.exit("pool_builds: --build wants NAME=DIR, got %r" % val)
            opts["builds"].append(tuple(val.split("=", 1)))
        elif a == "--allocator":
            opts["allocators"] = [x for x in val.split(",") if x]
        elif a == "--processes":
            opts["processes"] = int(val)
        elif a == "--size":
            opts["size"] = val
        elif a == "--iterations":
            opts["iterations"] = int(val)
        elif a == "--json":
            opts["json"] = val
        elif a == "--dry":
            opts["dry"] = True
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        else:
            print("pool_builds: unknown option %r (try --help)" % a, file=sys.stderr)
            sys.exit(2)
        i += 1
    for a in opts["allocators"]:
        if a != "glibc" and a not in PRELOAD:
            print("pool_builds: unknown allocator %r" % a, file=sys.stderr)
            sys.exit(2)
    if not opts["builds"]:
        top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        opts["builds"] = [("new", os.environ.get("LODESTAR_BUILD", os.path.join(top, "build")))]
    if opts["dry"]:
        opts.update(processes=1, size="64,4K", iterations=3)
    return opts


def run_one(bench, env_add, size, iterations):
    """One fresh process: {size label: (pool samples, malloc samples)}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rr.json")
        env = dict(os.environ, **env_add)
        subprocess.run([bench, "rent-return", "--size", size, "--iterations", str(iterations),
                        "--allocator", "none", "--json", out], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as f:
            rows = json.load(f)["rows"]
    pairs = {}
    for r in rows:
        name = r["name"]
        for kind in ("rent+return ", "malloc+free ", "inline rent+return "):
            if name.startswith(kind):
                label = name[len(kind):]
                pairs.setdefault(label, {})[kind.strip()] = r["samples"]
    # {size: {"call": (pool, malloc), "inline": (pool, malloc)}}; a build without
    # bench/pool_inline.h (once lodestar_pool_inline.h) has no inline row
    got = {}
    for k, v in pairs.items():
        if "malloc+free" not in v:
            continue
        for kind, key in (("rent+return", "call"), ("inline rent+return", "inline")):
            if kind in v:
                got.setdefault(k, {})[key] = (v[kind], v["malloc+free"])
    return got


def main(argv):
    opts = parse_args(argv)
    envs = []
    for a in opts["allocators"]:
        if a == "glibc":
            envs.append((a, {}))
            continue
        soname, package = PRELOAD[a]
        lib = find_lib(soname)
        if not lib:
            print("pool_builds: %s not found (apt-get install %s): skipped" % (soname, package),
                  file=sys.stderr)
            continue
        envs.append((a, {"LD_PRELOAD": lib}))
    for name, d in opts["builds"]:
        if not os.access(os.path.join(d, "bench", "lodestar-bench"), os.X_OK):
            sys.exit("pool_builds: %s: no bench/lodestar-bench in %s" % (name, d))
    print("machine: %s, %d cpus | load average at start: %s" %
          (benchlib.cpu_model(), os.cpu_count(), benchlib.loadavg()))
    print("builds: %s" % ", ".join("%s=%s" % b for b in opts["builds"]))
    print("each: lodestar-bench rent-return --size %s --iterations %d --allocator none, "
          "%d processes per build and allocator, builds alternating" %
          (opts["size"], opts["iterations"], opts["processes"]))
    # results[(alloc, build)][size] = list over processes of (pool med, malloc med, ratio med)
    results = {}
    order = []
    labels = []  # each build, and "NAME inline" where its bench has the inline pair
    for p in range(opts["processes"]):
        for alloc, env_add in envs:
            for name, d in opts["builds"]:
                got = run_one(os.path.join(d, "bench", "lodestar-bench"), env_add, opts["size"],
                              opts["iterations"])
                for size, kinds in got.items():
                    if size not in order:
                        order.append(size)
                    for kind, (pool, mal) in kinds.items():
                        label = name if kind == "call" else name + " inline"
                        if label not in labels:
                            labels.append(label)
                        ratios = [a / b for a, b in zip(pool, mal) if b > 0]
                        results.setdefault((alloc, label), {}).setdefault(size, []).append(
                            (statistics.median(pool), statistics.median(mal),
                             statistics.median(ratios)))
    print("load average at end: %s" % benchlib.loadavg())
    print()
    print("%-7s %-9s %-10s | pool ns/pair min  med | malloc ns/pair min  med | "
          "pool/malloc per round: median over processes [min, max]  n" % ("size", "malloc",
                                                                          "build"))
    summary = []
    for size in order:
        for alloc, _ in envs:
            for name in labels:
                rows = results.get((alloc, name), {}).get(size, [])
                if not rows:
                    continue
                pool = [r[0] for r in rows]
                mal = [r[1] for r in rows]
                rat = [r[2] for r in rows]
                print("%-7s %-9s %-10s |           %6.2f %6.2f |             %6.2f %6.2f | "
                      "%.2f [%.2f, %.2f]  n=%d" % (size, alloc, name, min(pool),
                                                   statistics.median(pool), min(mal),
                                                   statistics.median(mal),
                                                   statistics.median(rat), min(rat), max(rat),
                                                   len(rows)))
                summary.append({"name": "pool/malloc %s %s %s" % (size, alloc, name),
                                "unit": "ratio", "median": statistics.median(rat),
                                "min": min(rat), "max": max(rat), "page_faults": 0,
                                "pool_ns_min": min(pool), "malloc_ns_min": min(mal)})
        print()
    return benchlib.write_summary(argv, "pool_builds", "pool-builds", opts["dry"], summary)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
