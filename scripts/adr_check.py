#!/usr/bin/env python3
"""Evaluates each decision record's `Holds-if:` condition on this machine.

A record's header carries one line (syntax in docs/adr/README.md, "Conditions"):

    - Holds-if: NAME [OPTIONS] | REF [FIELD] [/ REF [FIELD]] OP NUMBER

NAME is the "name" of a bench-map.json row; OPTIONS are added to its command. REF is a quoted
row name, optionally "ROW @ TABLE", where TABLE is a substring of the row's table title. With
no FIELD a REF stands for the row's time samples; a ratio of two such REFs is taken round by
round (the rows ran interleaved, so round i of A and round i of B shared the machine's
state). FIELD is median, min, max, faults (page faults per op, per round) or a named column
of the row (as in the JSON: vs_bare_read, ratio_to_1_thread, ...). OP is one of < <= > >= ==.

The verdict: the condition is tested on every round's value (or on the one value a FIELD
gives). "holds" when the median value satisfies it and at least 3 rounds in 4 do; "flips"
when the median does not and at most 1 round in 4 does; otherwise "too noisy to say". Every
record's command runs once first (a command several records name, once for all). Then a
condition that is too noisy to say has its command run again, as a new process, and the rounds
of every run pooled, the undecided condition whose command has had the fewest seconds first,
until the verdict is decided or the condition's time bound (--bound, default 90 s of its
commands) is reached or the next run (expected to take its runs' average) would end past the
whole check's budget (--budget, default 570 s, so that the check ends within 10 minutes with
the start-up); the line says how many runs and seconds it took and when a bound stopped it.
The verdicts are printed after the last run.

A superseded record (status "superseded by NNNN") is listed with its condition but not run
and not counted: the record that amends it carries the decision now (--superseded runs them
too, counted apart).

usage: adr_check.py [--build DIR] [--source-root DIR] [--dry] [--only NNNN[,NNNN...]]
                    [--list] [--keep DIR] [--strict] [--bound S] [--budget S] [--superseded]
  --build DIR   the build whose build/bench/lodestar-bench and liblodestar.so are run
                (default: build)
  --dry         run every command with --dry (tiny sizes): checks that each condition's rows
                exist, says nothing about the decision
  --only LIST   only these records
  --list        print each record's parsed condition and the command it runs, run nothing
  --keep DIR    keep each command's JSON and text output in DIR (without it they go to a
                temporary folder, removed when the check ends, however it ends)
  --strict      exit 1 if a condition cannot be evaluated (a command failed, a row is missing)
  --bound S     repeat a too-noisy condition's command until S seconds of its runs (90)
  --budget S    start no repeat that would end past S seconds of the whole check (570)
  --superseded  also run superseded records' conditions (reported, not counted)
Exit status 0 whatever the verdicts (it informs, it is not a test), 2 on a usage error.
Called by scripts/adr-check.sh, which builds a release build first.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HOLDS_RE = re.compile(r"^- Holds-if: (.+)$", re.M)
STATUS_RE = re.compile(r"^- Status: (.+)$", re.M)
OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
}
FIELDS_SPECIAL = ("median", "min", "max", "faults")


class ConditionError(ValueError):
    pass


class Stopped(Exception):
    """SIGTERM (e.g. `timeout`'s) during the runs: the verdicts so far are printed."""


def _on_sigterm(signum, frame):
    raise Stopped()


def parse_condition(line):
    """The parsed `Holds-if:` text: {name, options, refs: [(row, table, field)], op, value}.
    Raises ConditionError naming what is wrong."""
    if "|" not in line:
        raise ConditionError("no '|' between the command and the comparison")
    cmd, expr = line.split("|", 1)
    try:
        cargv = shlex.split(cmd)
        toks = shlex.split(expr)
    except ValueError as e:
        raise ConditionError("cannot split: %s" % e)
    if not cargv:
        raise ConditionError("no bench-map name before '|'")
    name, options = cargv[0], cargv[1:]
    for t in options:
        if not (t.startswith("-") or re.match(r"^[A-Za-z0-9_.,/=:+-]+$", t)):
            raise ConditionError("option %r is not an option or a value" % t)
    if options and not options[0].startswith("-"):
        raise ConditionError("%r after the name is not an option" % options[0])
    if len(toks) < 3:
        raise ConditionError("the comparison needs REF [FIELD] [/ REF [FIELD]] OP NUMBER")
    op, num = toks[-2], toks[-1]
    if op not in OPS:
        raise ConditionError("comparison %r is not one of %s" % (op, " ".join(OPS)))
    try:
        value = float(num)
    except ValueError:
        raise ConditionError("%r is not a number" % num)
    body = toks[:-2]
    parts = []
    cur = []
    for t in body:
        if t == "/":
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    if len(parts) > 2 or any(not p or len(p) > 2 for p in parts):
        raise ConditionError("the comparison needs REF [FIELD] [/ REF [FIELD]] OP NUMBER")
    refs = []
    for p in parts:
        row = p[0]
        table = None
        if " @ " in row:
            row, table = (s.strip() for s in row.split(" @ ", 1))
        field = p[1] if len(p) == 2 else None
        if field is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", field):
            raise ConditionError("field %r is not a name" % field)
        if not row:
            raise ConditionError("an empty row name")
        refs.append((row, table, field))
    if len(refs) == 2 and (refs[0][2] is None) != (refs[1][2] is None):
        raise ConditionError("a ratio takes both rows' samples or both rows' fields")
    return {"name": name, "options": options, "refs": refs, "op": op, "value": value}


def read_records(root):
    """[(number, file name, title, Holds-if text or None, count of Holds-if lines, status)]."""
    adr = os.path.join(root, "docs", "adr")
    out = []
    for n in sorted(os.listdir(adr)):
        m = re.match(r"^(\d{4})-.*\.md$", n)
        if not m:
            continue
        with open(os.path.join(adr, n), encoding="utf-8") as f:
            text = f.read()
        title = text.splitlines()[0].split(". ", 1)[-1] if text else n
        found = HOLDS_RE.findall(text)
        st = STATUS_RE.findall(text)
        out.append((m.group(1), n, title, found[0].strip() if found else None, len(found),
                    st[0].strip() if st else ""))
    return out


def bench_map(root):
    with open(os.path.join(root, "bench-map.json"), encoding="utf-8") as f:
        bmap = json.load(f)
    return {e["name"]: e for e in bmap.get("nightly", []) + bmap.get("diagnostics", [])}


def command_for(entry, cond, build, json_path, dry):
    """argv that runs the bench-map row with the condition's options and writes JSON."""
    argv = shlex.split(entry["command"])
    out = []
    skip = False
    for i, t in enumerate(argv):
        if skip:
            skip = False
            continue
        if t == "--json":  # the map's own --json FILE is replaced by ours
            skip = True
            continue
        if t.startswith("build/"):
            t = os.path.join(build, t[len("build/"):])
        out.append(t)
    out += cond["options"] + ["--json", json_path]
    if dry:
        out.append("--dry")
    return out


def find_row(doc, row, table):
    hits = [r for r in doc.get("rows", [])
            if r.get("name") == row and (table is None or table in r.get("table", ""))]
    if not hits:
        raise ConditionError("no row %r%s in the output" % (
            row, "" if table is None else " in a table titled '...%s...'" % table))
    if len(hits) > 1 and table is not None:
        # "batch 100 k 10" is in "batch 100 k 100" too: a title equal to TABLE is the one meant
        exact = [r for r in hits if r.get("table", "") == table]
        if len(exact) == 1:
            hits = exact
    if len(hits) > 1:
        raise ConditionError("row %r matches %d rows; name the table with ' @ TABLE'"
                             % (row, len(hits)))
    return hits[0]


def ref_values(r, field):
    """Per-round values (list) of a row, or a one-item list for a single-valued field."""
    if field is None:
        return [float(x) for x in r.get("samples", []) if x is not None]
    if field == "faults":
        s = r.get("page_fault_samples")
        if s:
            return [float(x) for x in s if x is not None]
        return [float(r["page_faults"])]
    if field not in r or not isinstance(r[field], (int, float)):
        raise ConditionError("row %r has no numeric column %r" % (r.get("name"), field))
    return [float(r[field])]


def evaluate(cond, doc):
    """(value, lo, hi, verdict, rounds) of a condition against a command's JSON output, or
    against a list of outputs of the same command (its runs: their rounds pooled)."""
    if isinstance(doc, list):
        per = []
        for d in doc:
            per += per_round(cond, d)
        return verdict_of(cond, per)
    return verdict_of(cond, per_round(cond, doc))


def per_round(cond, doc):
    """The condition's value per round of one command's JSON output."""
    vals = []
    for row, table, field in cond["refs"]:
        vals.append(ref_values(find_row(doc, row, table), field))
    if len(vals) == 1:
        per = vals[0]
    else:
        a, b = vals
        if len(a) != len(b):
            if len(a) == 1 or len(b) == 1:
                a = a * len(b) if len(a) == 1 else a
                b = b * len(a) if len(b) == 1 else b
            else:
                raise ConditionError("the two rows have %d and %d rounds" % (len(a), len(b)))
        if any(y == 0 for y in b):
            raise ConditionError("the divisor row has a zero value")
        per = [x / y for x, y in zip(a, b)]
    return per


def verdict_of(cond, per):
    """(median, min, max, verdict, rounds) of per-round values."""
    if not per:
        raise ConditionError("no samples")
    test = OPS[cond["op"]]
    med = statistics.median(per)
    share = sum(1 for v in per if test(v, cond["value"])) / len(per)
    if test(med, cond["value"]) and share >= 0.75:
        verdict = "holds"
    elif not test(med, cond["value"]) and share <= 0.25:
        verdict = "flips"
    else:
        verdict = "too noisy to say"
    return med, min(per), max(per), verdict, len(per)


def fmt(v):
    if v == int(v) and abs(v) < 1e15:
        return "%d" % v
    return "%.3g" % v if abs(v) >= 0.001 else "%.3e" % v


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def host_facts():
    """The hypervisor, THP mode and proactive reclaim, as lodestar-bench's machine line has
    them (for outputs of the Python scripts, which do not say)."""
    virt = "none"
    cpuinfo = _read("/proc/cpuinfo") or ""
    if re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M):
        virt = "unnamed"
        try:
            p = subprocess.run(["systemd-detect-virt", "--vm"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, timeout=5)
            if p.stdout.strip() and p.stdout.strip() != "none":
                virt = p.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    xen = _read("/sys/hypervisor/type")
    if xen:
        virt = xen

    def mode(path):
        t = _read(path)
        if t is None:
            return "-"
        m = re.search(r"\[(\w[\w+]*)\]", t)
        return m.group(1) if m else t

    thp = mode("/sys/kernel/mm/transparent_hugepage/enabled")
    defrag = mode("/sys/kernel/mm/transparent_hugepage/defrag")
    acts = []
    for k in range(8):
        base = "/sys/kernel/mm/damon/admin/kdamonds/%d" % k
        st = _read(base + "/state")
        if st is None:
            break
        if st == "on":
            acts.append(_read(base + "/contexts/0/schemes/0/action") or "monitor only")
    damon = "on: " + "+".join(acts) if acts else "off"
    swap = "-"
    mi = re.search(r"^SwapTotal:\s+(\d+) kB", _read("/proc/meminfo") or "", re.M)
    if mi:
        swap = "none" if mi.group(1) == "0" else "%d MiB" % (int(mi.group(1)) // 1024)
    return "hypervisor %s | THP %s, defrag %s | DAMON %s, swap %s" % (virt, thp, defrag, damon,
                                                                     swap)


def machine_line(docs):
    for d in docs:
        m = d.get("machine")
        if isinstance(m, dict):
            return "%s, %s cpus | %s | %s %s | lodestar %s (%s build) | %s" % (
                m.get("cpu"), m.get("cpus"), m.get("kernel"), m.get("allocator"),
                m.get("allocator_version"), d.get("lodestar_version"), m.get("build"),
                m.get("host") or host_facts())
        if isinstance(m, str):
            return "%s | %s" % (m, host_facts())
    return "unknown | %s" % host_facts()


def run_command(argv_, root, env, jpath, timeout):
    """One run of a condition's command: (JSON document, seconds). Raises ConditionError."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv_, cwd=root, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise ConditionError("`%s` ran past %d s" % (" ".join(argv_), e.timeout))
    secs = time.monotonic() - t0
    with open(jpath[:-5] + ".txt", "w", encoding="utf-8") as f:
        f.write(p.stdout)
    if p.returncode != 0:
        tail = p.stdout.strip().splitlines()[-3:]
        raise ConditionError("`%s` exited %d: %s" % (
            " ".join(argv_), p.returncode, " / ".join(tail)))
    with open(jpath, encoding="utf-8") as f:
        return json.load(f), secs


def main(argv=None):
    ap = argparse.ArgumentParser(add_help=True, description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--source-root", default=os.path.join(os.path.dirname(
        os.path.abspath(__file__)), os.pardir))
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--bound", type=float, default=90.0)
    ap.add_argument("--budget", type=float, default=570.0)
    ap.add_argument("--superseded", action="store_true")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    root = os.path.abspath(a.source_root)
    build = os.path.abspath(a.build)
    records = read_records(root)
    if a.only:
        want = set(a.only.split(","))
        records = [r for r in records if r[0] in want]
        if not records:
            print("adr_check: no record numbered %s" % a.only, file=sys.stderr)
            return 2
    bmap = bench_map(root)
    env = dict(os.environ)
    env.setdefault("LODESTAR_LIB", os.path.join(build, "liblodestar.so"))
    env.setdefault("LODESTAR_BUILD", build)  # the Python scripts' lodestar program
    # The runs' JSON and text go to --keep's folder (kept) or a temporary one, removed however
    # the check ends (an exception, SIGTERM, a return).
    workdir = a.keep or tempfile.mkdtemp(prefix="lodestar-adr-check-")
    os.makedirs(workdir, exist_ok=True)
    try:
        return _check(a, build, records, bmap, env, workdir)
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _check(a, build, records, bmap, env, workdir):
    """Runs the records' commands in `workdir` and prints the verdicts; main's exit status."""
    root = os.path.abspath(a.source_root)
    cache = {}  # the same command's runs serve every record that names it: key -> [docs, secs]
    docs = []
    held = total = 0
    broken = 0
    skipped = []
    old_held = old_total = 0
    noisy = 0
    start = time.monotonic()
    print("decision records checked on this machine%s" % (" (dry: rows only)" if a.dry else ""))
    print("load average: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    if not a.dry and not a.list:
        print("every condition's command runs once; then a too-noisy condition is run again "
              "(the one with the fewest seconds so far first) until decided, at most %d s of "
              "its runs, and no run is started that would end past %d s for the whole check"
              % (a.bound, a.budget))
    print()

    def run_once(key, num, cond, first):
        jpath = os.path.join(workdir, "%s-%s%s.json" % (
            num, cond["name"], "" if first else "-run%d" % (len(cache[key][0]) + 1)))
        argv_ = command_for(bmap[cond["name"]], cond, build, jpath, a.dry)
        doc, secs = run_command(argv_, root, env, jpath, max(a.bound * 4, 300))
        if first:
            cache[key] = [[doc], secs]
            docs.append(doc)
        else:
            cache[key][0].append(doc)
            cache[key][1] += secs

    stopped_by = None
    state = {}
    stopped = {}
    old_term = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        # Pass 1: every record's command once, in record order (a command several records name
        # runs once for all of them). state[num] = (cond, key) or an error text.
        for num, fname, title, line, count, status in records:
            superseded = status.startswith("superseded")
            if line is None or (superseded and not a.superseded and not a.list and not a.dry):
                continue
            try:
                cond = parse_condition(line)
                if cond["name"] not in bmap:
                    raise ConditionError("%r is not a name in bench-map.json" % cond["name"])
                key = (cond["name"], tuple(cond["options"]))
                if a.list:
                    argv_ = command_for(bmap[cond["name"]], cond, build, os.path.join(
                        workdir, "%s-%s.json" % (num, cond["name"])), a.dry)
                    state[num] = " ".join(shlex.quote(t) for t in argv_)
                    continue
                if key not in cache:
                    run_once(key, num, cond, True)
                evaluate(cond, cache[key][0])  # a missing row is an error now, not in pass 2
                state[num] = (cond, key)
            except (ConditionError, OSError, ValueError) as e:
                state[num] = "cannot evaluate: %s" % e

        # Pass 2: the undecided ones again, the one whose command has had the fewest seconds
        # first, while its bound and the check's budget allow (a run is expected to take as
        # long as its command's runs did on average).
        while not a.dry and not a.list:
            undecided = []
            for num, st in state.items():
                if isinstance(st, tuple):
                    cond, key = st
                    try:
                        if evaluate(cond, cache[key][0])[3] == "too noisy to say":
                            undecided.append((cache[key][1], num, cond, key))
                    except ConditionError:
                        pass
            pick = None
            for secs, num, cond, key in sorted(undecided, key=lambda u: (u[0], u[1])):
                per_run = secs / len(cache[key][0])
                if secs >= a.bound:
                    stopped[num] = "bound of %g s reached" % a.bound
                elif time.monotonic() - start + per_run > a.budget:
                    stopped[num] = "the check's budget of %g s spent" % a.budget
                elif pick is None:
                    pick = (num, cond, key)
            if pick is None:
                break
            num, cond, key = pick
            stopped.pop(num, None)
            try:
                run_once(key, num, cond, False)
            except (ConditionError, OSError, ValueError) as e:
                state[num] = "cannot evaluate: %s" % e

    except Stopped:
        stopped_by = "SIGTERM after %.0f s" % (time.monotonic() - start)
    finally:
        signal.signal(signal.SIGTERM, old_term)

    for num, fname, title, line, count, status in records:
        superseded = status.startswith("superseded")
        print("%s  %s" % (num, title))
        if line is None:
            print("      condition: none (no '- Holds-if:' line)")
            broken += 1
            print()
            continue
        print("      condition: %s" % line)
        if superseded and not a.superseded and not a.list and not a.dry:
            print("      %s: not run, not counted (its decision is carried by the record that "
                  "amends it; --superseded runs it)" % status)
            skipped.append(num)
            print()
            continue
        st = state.get(num)
        if st is None and stopped_by:
            st = "not run: the check was stopped by %s" % stopped_by
            try:  # its command may have run for an earlier record
                cond = parse_condition(line)
                key = (cond["name"], tuple(cond["options"]))
                if key in cache:
                    st = (cond, key)
            except ConditionError:
                pass
        if a.list:
            print("      runs: %s" % st if not st.startswith("cannot") else "      " + st)
            print()
            continue
        if not isinstance(st, tuple):
            print("      %s" % st)
            broken += 1
            print()
            continue
        cond, key = st
        try:
            med, lo, hi, verdict, rounds = evaluate(cond, cache[key][0])
        except ConditionError as e:  # a row a repeat's output lacked
            print("      cannot evaluate: %s" % e)
            broken += 1
            print()
            continue
        runs = len(cache[key][0])
        if superseded:
            old_total += 1
            old_held += verdict == "holds"
        else:
            total += 1
            held += verdict == "holds"
            noisy += verdict == "too noisy to say"
        print("      here: %s (min-max %s-%s over %d %s, %d %s, %.0f s) -> %s%s" % (
            fmt(med), fmt(lo), fmt(hi), rounds, "round" if rounds == 1 else "rounds", runs,
            "run" if runs == 1 else "runs", cache[key][1],
            verdict if not a.dry else "evaluable (dry run: no verdict)",
            " (%s)" % stopped[num] if verdict == "too noisy to say" and num in stopped
            else ""))
        if superseded:
            print("      (%s: reported, not counted)" % status)
        print()
    if a.list:
        return 0
    print("machine: %s" % machine_line(docs))
    if a.dry:
        print("%d of %d conditions evaluable (dry run)" % (total + old_total,
                                                        total + old_total + broken))
    else:
        print("%d of %d decisions hold on this machine (%d too noisy to say; %.0f s; bounds: "
              "%d s of runs a condition, %d s in all)" % (
                  held, total + broken, noisy, time.monotonic() - start, a.bound, a.budget))
    if stopped_by:
        print("stopped by %s: later runs not made" % stopped_by)
    if skipped:
        print("superseded, not run: %s" % ", ".join(skipped))
    if old_total:
        print("superseded, run and not counted: %d of %d hold" % (old_held, old_total))
    if broken:
        print("(%d could not be evaluated)" % broken)
    return 1 if broken and a.strict else 0


if __name__ == "__main__":
    sys.exit(main())
