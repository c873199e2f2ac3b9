#!/usr/bin/env python3
"""pool-cost's single-case mode and its observed allocation counter (issue 31, ADR 0039).

- --strategy S --consumer C --size N runs exactly one case: the JSON has one row, named by
  that strategy and consumer; --strategy alone runs that strategy's consumers only;
- bad --strategy / --consumer values exit 2 with usage on stderr;
- --processes N runs each case as its own process: one sample per process, and (where the
  interposer is built) an observed bytes/op beside the counted one that agree for allocate.

usage: test_pool_cost_cases.py BENCH [OBSERVE_LIB]
"""
import json
import os
import subprocess
import sys
import tempfile

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + (": " + detail if detail else ""))


def run_json(bench, args, tmp, name):
    out = os.path.join(tmp, name + ".json")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([bench, "pool-cost"] + args + ["--json", out], capture_output=True,
                       text=True, env=env, timeout=240)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:])
        return r.returncode, None
    with open(out, encoding="utf-8") as f:
        return 0, json.load(f)


def timed_rows(doc):
    return [row for row in doc["rows"] if "median" in row and row.get("unit", "").endswith("/op")]


def main():
    bench = sys.argv[1]
    have_observer = len(sys.argv) > 2 and os.path.exists(sys.argv[2])
    quick = ["--iterations", "2", "--warmup", "0"]
    with tempfile.TemporaryDirectory() as tmp:
        rc, doc = run_json(bench, quick + ["--strategy", "rent", "--consumer", "yield",
                                           "--size", "4096"], tmp, "one")
        names = [row["name"] for row in timed_rows(doc)] if doc else []
        check(rc == 0 and names == ["rent, same thread, yields per chunk"],
              "--strategy rent --consumer yield --size 4096 runs exactly one case", str(names))

        rc, doc = run_json(bench, quick + ["--strategy", "owner", "--size", "64"], tmp, "owner")
        names = [row["name"] for row in timed_rows(doc)] if doc else []
        check(rc == 0 and len(names) == 3 and all(n.startswith("owner ") for n in names),
              "--strategy owner runs only owner's three consumers", str(names))

        rc, doc = run_json(bench, quick + ["--processes", "3", "--strategy", "allocate",
                                           "--consumer", "same", "--size", "4096"], tmp, "procs")
        rows = timed_rows(doc) if doc else []
        check(rc == 0 and len(rows) == 1 and rows[0]["name"].startswith("allocate"),
              "--processes 3 with one case: one row", str([r["name"] for r in rows]))
        if rows:
            row = rows[0]
            check(len(row.get("samples", [])) == 3, "one sample per process",
                  str(row.get("samples")))
            check(row.get("bytes_allocated_per_op") == 4096,
                  "counted bytes/op of allocate at 4096 is 4096",
                  str(row.get("bytes_allocated_per_op")))
            for k in ("pool_retained", "allocator_kept", "rss"):
                check(k in row, "residency column %s present" % k)
            if have_observer:
                check(row.get("observed_bytes_per_op") == 4096
                      and row.get("observed_vs_counted") == "agree",
                      "observed bytes/op of allocate at 4096 is 4096 and agrees",
                      "%r %r" % (row.get("observed_bytes_per_op"),
                                 row.get("observed_vs_counted")))

    for bad in (["--strategy", "malloc"], ["--consumer", "async"], ["--strategy"],
                ["--consumer", ""]):
        r = subprocess.run([bench, "pool-cost"] + bad, capture_output=True, text=True)
        check(r.returncode == 2 and "usage" in r.stderr, "pool-cost %s exits 2 with usage"
              % " ".join(bad), "exit %d" % r.returncode)

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
