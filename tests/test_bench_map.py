#!/usr/bin/env python3
"""bench-map.json against lodestar-bench.

Checks that every subcommand of lodestar-bench is listed in bench-map.json,
that every listed command runs in --dry mode and exits 0 (JSON output, where
the command writes it, holds the summary the issue asks for), and that an
unknown subcommand or option exits 2 with usage on stderr.

With --quick, only the structure: every subcommand listed, its --help, the
usage errors and the size parser; no listed command is run (each --dry run
costs seconds to minutes on a loaded machine). The unit suite runs --quick
('bench-map'), the slow suite everything ('bench-map-full').

usage: test_bench_map.py --source-root DIR --build-root DIR [--quick]
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

REQUIRED_ROW_KEYS = ("name", "unit", "median", "min", "max", "page_faults")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-root", required=True)
    ap.add_argument("--build-root", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="structure only: run no listed command (the unit suite's check)")
    args = ap.parse_args()
    src = os.path.abspath(args.source_root)
    if not args.quick:
        # The listed commands drive the lab (faiss, gensim, allocators, hyperfine...):
        # without it (scripts/deps.sh --lab), skip.
        lab = subprocess.run(["bash", os.path.join(src, "scripts", "deps.sh"), "--lab", "--check"],
                             capture_output=True, text=True)
        if lab.returncode != 0:
            print("skip: lab packages missing (scripts/deps.sh --lab): " + " ".join(lab.stdout.split()))
            return 77
    build = os.path.abspath(args.build_root)
    bench = os.path.join(build, "bench", "lodestar-bench")
    passed, failed = 0, 0

    def check(ok, what, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("ok   " + what)
        else:
            failed += 1
            print("FAIL " + what + (": " + detail if detail else ""))

    with open(os.path.join(src, "bench-map.json"), encoding="utf-8") as f:
        bmap = json.load(f)
    entries = bmap.get("nightly", []) + bmap.get("diagnostics", [])
    check(len(bmap.get("nightly", [])) > 0 and len(bmap.get("diagnostics", [])) > 0,
          "bench-map.json has nightly rows and diagnostics")
    names = [e["name"] for e in entries]
    check(len(names) == len(set(names)), "entry names are unique")
    nightly_subs = {e.get("subcommand") for e in bmap["nightly"]}
    for diag in ("pool-cost", "heap-warmth", "reload"):
        check(diag not in nightly_subs, diag + " is a diagnostic, not a nightly row")

    listed = subprocess.run([bench, "--list"], capture_output=True, text=True)
    subs = listed.stdout.split()
    check(listed.returncode == 0 and len(subs) > 0, "lodestar-bench --list")
    covered = {e.get("subcommand") for e in entries}
    for s in subs:
        check(s in covered, "subcommand %s is listed in bench-map.json" % s)
        # Its own help: usage naming it, its options and a typical run time, on stdout.
        r = subprocess.run([bench, s, "--help"], capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout.startswith("usage: lodestar-bench %s " % s)
              and "\noptions:\n" in r.stdout and "typical run time:" in r.stdout
              and "subcommands:" not in r.stdout,
              "'%s --help' prints that subcommand's options and run time" % s,
              "exit %d\n%s" % (r.returncode, r.stdout[-500:]))

    for e in entries if args.quick else []:
        # The listed command names a known subcommand, or a script that exists.
        argv = shlex.split(e["command"])
        if argv[0].startswith("build/"):
            check(e.get("subcommand") in subs, "%s: subcommand %s exists" % (e["name"], e.get("subcommand")))
        else:
            scripts = [a for a in argv if a.endswith((".py", ".sh"))]
            check(len(scripts) > 0 and all(os.path.exists(os.path.join(src, a)) for a in scripts),
                  "%s: its script exists" % e["name"], " ".join(argv))
    with tempfile.TemporaryDirectory(prefix="lodestar-bench-map-") as tmp:
        env = dict(os.environ)
        env["LODESTAR_BUILD"] = build
        env["LODESTAR_LIB"] = os.path.join(build, "liblodestar.so")
        env["TMPDIR"] = tmp
        for e in [] if args.quick else entries:
            argv = shlex.split(e["command"])
            if argv[0].startswith("build/"):
                argv[0] = os.path.join(build, argv[0][len("build/"):])
            json_out = None
            if "--json" in argv:
                i = argv.index("--json")
                json_out = os.path.join(tmp, e["name"] + ".json")
                argv[i + 1] = json_out
            argv.append("--dry")
            if os.environ.get("LDS_SANITIZE") and any(a.endswith(".py") for a in argv):
                # A sanitizer-built liblodestar cannot be loaded into a plain python
                # process (its runtime must come first); the plain build runs this entry.
                print("skip: %s under LDS_SANITIZE=%s" % (e["name"], os.environ["LDS_SANITIZE"]))
                continue
            try:
                r = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True,
                                   timeout=900)
                rc, out, err = r.returncode, r.stdout, r.stderr
            except (OSError, subprocess.TimeoutExpired) as exc:
                rc, out, err = -1, "", str(exc)
            check(rc == 0, "%s: '%s' exits 0" % (e["name"], " ".join(argv)),
                  "exit %d\n%s\n%s" % (rc, out[-2000:], err[-2000:]))
            if json_out and rc == 0:
                try:
                    with open(json_out, encoding="utf-8") as f:
                        doc = json.load(f)
                    machine = doc["machine"]
                    ok = (doc["subcommand"] == e["subcommand"]
                          and all(machine.get(k) for k in ("cpu", "kernel", "allocator",
                                                           "allocator_version"))
                          and len(doc["rows"]) > 0
                          and all(k in row for row in doc["rows"] for k in REQUIRED_ROW_KEYS))
                    check(ok, "%s: JSON summary has subcommand, machine and rows" % e["name"])
                except (OSError, ValueError, KeyError) as exc:
                    check(False, "%s: JSON summary" % e["name"], str(exc))

    r = subprocess.run([bench, "no-such-subcommand"], capture_output=True, text=True)
    check(r.returncode == 2 and "usage" in r.stderr and r.stdout == "",
          "unknown subcommand exits 2 with usage on stderr",
          "exit %d, stderr %r" % (r.returncode, r.stderr[:200]))
    r = subprocess.run([bench], capture_output=True, text=True)
    check(r.returncode == 2 and "usage" in r.stderr, "no subcommand exits 2 with usage on stderr")
    r = subprocess.run([bench, "rent-return", "--no-such-option"], capture_output=True, text=True)
    check(r.returncode == 2 and "usage" in r.stderr, "unknown option exits 2 with usage on stderr")
    r = subprocess.run([bench, "pool-cost", "--size", "12Q"], capture_output=True, text=True)
    check(r.returncode == 2, "a bad --size value exits 2")
    # Sizes follow the lodestar program's rule: K/M/G/T powers of 1024, optionally "iB".
    for bad in ("4KB", "-1", "1P"):
        r = subprocess.run([bench, "pool-cost", "--size", bad], capture_output=True, text=True)
        check(r.returncode == 2, "--size %s exits 2" % bad)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rr.json")
        r = subprocess.run([bench, "rent-return", "--dry", "--size", "4KiB,2k", "--json", out],
                           capture_output=True, text=True)
        sizes = set()
        if r.returncode == 0:
            with open(out) as f:
                sizes = {row["requested"] for row in json.load(f)["rows"] if "requested" in row}
        check(sizes == {4096, 2048}, "--size 4KiB,2k means 4096 and 2048 bytes", str(sizes))

    # The load bench on a generated index large enough that the writer lays it out on chunk
    # boundaries (format 1.2: 2,048 rows x 512 bytes = 256 chunks of 4 KiB): its unknown-length
    # copy is rewritten packed first. It failed in every 'load' condition of adr-check
    # ("section[1].offset: 136593408 must be 136591616"): the copy kept the 1.2 offsets
    # under a 1.0 header.
    with tempfile.TemporaryDirectory(prefix="lodestar-bench-load-") as tmp:
        r = subprocess.run([bench, "load", "--rows", "2048", "--dim", "128", "--iterations", "1",
                            "--warmup", "0", "--dir", tmp], capture_output=True, text=True)
        check(r.returncode == 0 and "growable (unknown length), adopt" in r.stdout,
              "load on a chunk-aligned (1.2) reference index, unknown-length row included",
              "exit %d\n%s%s" % (r.returncode, r.stdout[-300:], r.stderr[-500:]))

    # search --json goes through the harness's report: one row per configuration (it was
    # parsed by the common options and ignored: no file was written).
    with tempfile.TemporaryDirectory(prefix="lodestar-bench-search-") as tmp:
        kernels = subprocess.run([bench, "search", "--dry", "--rows", "600", "--dtype", "f32",
                                  "--batch", "1,8", "--iterations", "2", "--warmup", "0",
                                  "--dir", tmp, "--json", os.path.join(tmp, "s.json")],
                                 capture_output=True, text=True)
        doc = None
        if kernels.returncode == 0 and os.path.exists(os.path.join(tmp, "s.json")):
            with open(os.path.join(tmp, "s.json"), encoding="utf-8") as f:
                doc = json.load(f)
        table = [ln.split() for ln in kernels.stdout.splitlines() if ln.startswith("f32 ")]
        rows = (doc or {}).get("rows", [])
        check(doc is not None and doc["subcommand"] == "search" and len(rows) == len(table) >= 4
              and all(k in r for r in rows for k in REQUIRED_ROW_KEYS)
              and all(len(r["samples"]) == 2 and r["median"] > 0 and r["cpu_ms_per_query"] > 0
                      for r in rows)
              and {(r["batch"], r["threads"]) for r in rows} == {(1, 1), (1, 2), (8, 1), (8, 2)}
              and ["%s %s %s %s" % (r["dtype"], r["metric"], r["batch"], r["threads"])
                   for r in rows] == [" ".join(t[:4]) for t in table],
              "search --json: one harness row per printed configuration, 2 samples each",
              "exit %d\n%s%s" % (kernels.returncode, kernels.stdout[-500:], kernels.stderr[-300:]))

    if not args.quick:
        pool_rows_checks(bench, check)

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def run_json(bench, args, tmp, name):
    """Runs lodestar-bench ARGS --json; (exit status, parsed JSON or None)."""
    out = os.path.join(tmp, name + ".json")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([bench] + args + ["--json", out], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return r.returncode, None
    with open(out, encoding="utf-8") as f:
        return 0, json.load(f)


def pool_rows_checks(bench, check):
    """capacity --counts and its one-pass rows; rent-return --allocator; contention's cores."""
    with tempfile.TemporaryDirectory() as tmp:
        rc, doc = run_json(bench, ["capacity", "--dry", "--counts", "32,100"], tmp, "cap")
        tables = sorted({r["table"] for r in doc["rows"]}) if doc else []
        check(tables == ["100 retained buffers of 1024 B", "32 retained buffers of 1024 B"],
              "capacity --counts 32,100 gives exactly those two tables", str(tables))
        for count in (32, 100):
            rows = {r["name"]: r for r in (doc or {"rows": []})["rows"]
                    if r["table"].startswith("%d retained" % count)}
            p = rows.get("drain and refill (one pass over the capacity)")
            m = rows.get("malloc and free all (baseline for the pass)")
            ok = (p is not None and m is not None and p["unit"] == "us/pass" and p["median"] > 0
                  and abs(p["ns_per_buffer"] - p["median"] * 1e3 / count) < 1e-6 * p["ns_per_buffer"]
                  and "rent from an empty pool" in rows and "drain (rent all retained)" in rows
                  and "refill (return all)" in rows)
            check(ok, "capacity at %d: one-pass drain+refill row (us/pass, ns per buffer = "
                  "pass / %d) beside the per-operation and empty-rent rows" % (count, count))
        for bad in ("0", "32,x", "2000000", "32,", ""):
            r = subprocess.run([bench, "capacity", "--dry", "--counts", bad],
                               capture_output=True, text=True)
            check(r.returncode == 2, "capacity --counts %r exits 2" % bad)

        rc, doc = run_json(bench, ["rent-return", "--dry", "--size", "64,1M"], tmp, "rr")
        check(rc == 0 and doc is not None, "rent-return --dry with the default other pools")
        if doc:
            names = {r["name"] for r in doc["rows"]}
            # dlopen()ed, not linked: the process's malloc is still glibc's (no LD_PRELOAD)
            check(doc["machine"]["allocator"] == "glibc",
                  "rent-return's other pools leave malloc as glibc's",
                  doc["machine"]["allocator"])
            for key, label in (("mi-heap", "mi_heap_malloc+mi_free"),
                               ("tcmalloc", "tc_malloc+tc_free")):
                v = doc["params"].get(key, "")
                check(v != "", "rent-return states %s's version or why it is skipped" % key)
                if v and not v.startswith("skipped"):
                    rows = [r for r in doc["rows"] if r["name"] in (label + " 64 B", label + " 1 MiB")]
                    check(len(rows) == 2 and all(r["median"] > 0 for r in rows)
                          and any(c.isdigit() for c in v),
                          "rent-return has %s rows at 64 B and 1 MiB, version %r" % (label, v))
            check({"rent+return 64 B", "malloc+free 64 B", "rent+return 1 MiB",
                   "malloc+free 1 MiB"} <= names, "rent-return keeps the pool and malloc rows")
        rc, doc = run_json(bench, ["rent-return", "--dry", "--size", "64", "--allocator", "none"],
                           tmp, "rr-none")
        check(doc is not None and not any(r["name"].startswith(("mi_heap", "tc_malloc"))
                                          for r in doc["rows"]),
              "rent-return --allocator none has no other-pool rows")
        for bad in ("nope", "mi-heap,", "mi-heap,,tcmalloc", ""):
            r = subprocess.run([bench, "rent-return", "--dry", "--allocator", bad],
                               capture_output=True, text=True)
            check(r.returncode == 2, "rent-return --allocator %r exits 2" % bad)

        rc, doc = run_json(bench, ["contention", "--dry", "--threads", "4"], tmp, "ct")
        threads = sorted({int(r["threads"]) for r in doc["rows"]}) if doc else []
        check(threads == [1, 2, 4], "contention --threads 4 runs 1, 2 and 4 threads", str(threads))
        cores = (doc or {"params": {}})["params"].get("cores", "")
        usable = len(os.sched_getaffinity(0))
        check("%d usable by this process (sched_getaffinity)" % usable in cores,
              "contention states the usable cores (%d)" % usable, cores)
        notes = " ".join(n if isinstance(n, str) else n.get("text", "")
                         for n in (doc or {}).get("notes", []))
        check("scaling past %d worker" % usable in notes and "oversubscription" in notes,
              "contention says scaling past the cores is oversubscription", notes[:300])


if __name__ == "__main__":
    sys.exit(main())
