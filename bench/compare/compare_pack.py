#!/usr/bin/python3
"""Packing text and binary embeddings: `lodestar pack` against gensim's load_word2vec_format.

The same input files for every alternative, made here:

  glove text      the shipped 20k GloVe sample (data/glove-100d-20k.txt.zst), decompressed:
                  20,000 x 100, no header (gensim: no_header=True)
  word2vec text   the same rows with the "20000 100" header line
  word2vec bin    GoogleNews-shaped: --bin-rows x 300 float32 (random, seeded), keys like
                  GoogleNews' (words and phrases joined by '_'), a newline after each row
                  as word2vec's C tool writes it (gensim: binary=True)

Alternatives, interleaved in every round (A B C A B C ...), each timed with a monotonic clock:

  pack            `lodestar pack IN OUT --format F` of this build (build/cli/lodestar, or
                  $LODESTAR_BUILD/cli/lodestar): a whole process that parses, checks the
                  keys, and writes the index file
  pack (old)      the same command of another binary (--old PATH, e.g. one built from main
                  before ADR 0022), when given
  gensim          KeyedVectors.load_word2vec_format(IN, binary=..., no_header=...) inside this
                  process (gensim imported once, before timing): parses into numpy arrays,
                  writes nothing

Printed: per input and alternative the median, min and max of --rounds rounds, wall time and
CPU time (user + sys: of the pack process, from getrusage; of this process for gensim), and
the ratios of medians pack/gensim and pack/pack (old). Wall time includes pack's fsync of the
index and its directory, and on a loaded machine the wait for a cpu; CPU time is steadier. Also counted, exactly: how many of the
stored elements differ from gensim's (gensim parses text as float64 and then rounds to
float32, twice; pack rounds once) and, with --old, whether both packs wrote the same bytes.

The machine is named (lscpu model name) with the load average before and after: on a shared
machine times are noisy, which is why the rounds are interleaved and min/max shown.

usage: /usr/bin/python3 bench/compare/compare_pack.py [--dry] [--rounds N] [--bin-rows N]
       [--old PATH] [--dir DIR] [--json FILE]
  --json FILE  also write the rows (name: alternative, table: input, samples in seconds) for
               scripts/adr-check.sh
env:   LODESTAR_BUILD (default build), LODESTAR_LIB (default $LODESTAR_BUILD/liblodestar.so)
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, os.pardir, os.pardir)
BUILD = os.environ.get("LODESTAR_BUILD", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("LODESTAR_LIB", os.path.join(BUILD, "liblodestar.so"))

import numpy as np  # noqa: E402

import lodestar  # noqa: E402
from benchlib import cpu_model, loadavg  # noqa: E402

try:
    from gensim.models import KeyedVectors
except ImportError:  # python3-gensim (scripts/deps.sh)
    KeyedVectors = None

SAMPLE = os.path.join(ROOT, "data", "glove-100d-20k.txt.zst")


def machine():
    return "%s, %d cpus" % (cpu_model(), os.cpu_count())


def make_inputs(d, glove_rows, bin_rows):
    """Writes the three inputs into d; returns [(name, path, lodestar format, gensim kwargs)]."""
    text = subprocess.run(["zstd", "-q", "-d", "-c", SAMPLE], check=True,
                          capture_output=True).stdout
    lines = text.split(b"\n")
    lines = [ln for ln in lines if ln][:glove_rows]
    dim = len(lines[0].split(b" ")) - 1
    glove = os.path.join(d, "glove.txt")
    with open(glove, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    w2v = os.path.join(d, "word2vec.txt")
    with open(w2v, "wb") as f:
        f.write(b"%d %d\n" % (len(lines), dim))
        f.write(b"\n".join(lines) + b"\n")
    # GoogleNews-shaped binary: 300 dims, phrase keys, float32 in (-0.5, 0.5).
    rng = np.random.default_rng(20261201)
    vecs = (rng.random((bin_rows, 300), dtype=np.float32) - 0.5).astype("<f4")
    words = [ln.split(b" ", 1)[0] for ln in lines]
    binp = os.path.join(d, "googlenews-shaped.bin")
    with open(binp, "wb") as f:
        f.write(b"%d 300\n" % bin_rows)
        for r in range(bin_rows):
            w = words[r % len(words)]
            key = w if r < len(words) else b"%s_%s_%d" % (w, words[(r * 7) % len(words)], r)
            f.write(key + b" " + vecs[r].tobytes() + b"\n")
    return [
        ("glove text", glove, "glove", {"binary": False, "no_header": True}),
        ("word2vec text", w2v, "word2vec", {"binary": False}),
        ("word2vec bin", binp, "word2vec-bin", {"binary": True}),
    ]


def child_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_pack(binary, src, fmt, out):
    """Wall and CPU (user + sys) seconds of one `lodestar pack`."""
    c0 = child_cpu()
    t0 = time.monotonic()
    r = subprocess.run([binary, "pack", "--format", fmt, src, out], capture_output=True)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("%s pack %s: exit %d: %s" % (binary, src, r.returncode, r.stderr.decode()[-500:]))
    return dt, child_cpu() - c0


def run_gensim(src, kwargs):
    c0 = time.process_time()
    t0 = time.monotonic()
    kv = KeyedVectors.load_word2vec_format(src, **kwargs)
    dt = time.monotonic() - t0
    return dt, time.process_time() - c0, kv


def stats(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "samples": xs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry", action="store_true", help="200 rows, 2 rounds")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--bin-rows", type=int, default=20000)
    ap.add_argument("--old", help="another lodestar binary to time the same packs with")
    ap.add_argument("--dir", help="where the inputs go (default: a temporary directory)")
    ap.add_argument("--json", help="also write the samples (seconds) as JSON")
    a = ap.parse_args()
    glove_rows = 200 if a.dry else 20000
    bin_rows = 200 if a.dry else a.bin_rows
    rounds = 2 if a.dry else a.rounds
    pack_bin = os.path.join(BUILD, "cli", "lodestar")
    alts = [("pack", pack_bin)]
    if a.old:
        alts.append(("pack (old)", a.old))
    with tempfile.TemporaryDirectory(prefix="compare-pack-", dir=a.dir) as d:
        inputs = make_inputs(d, glove_rows, bin_rows)
        before = loadavg()
        print("machine: %s; load average %s; %d rounds, interleaved" % (machine(), before,
                                                                        rounds))
        times = {(i[0], n): [] for i in inputs for n in [x[0] for x in alts] + ["gensim"]}
        cpus = {k: [] for k in times}
        checks = {}
        for rnd in range(rounds):
            for name, src, fmt, kw in inputs:
                outs = {}
                for alt, binary in alts:
                    out = os.path.join(d, "%s.ldsi" % alt.replace(" ", "_").strip("()"))
                    wall, cpu = run_pack(binary, src, fmt, out)
                    times[(name, alt)].append(wall)
                    cpus[(name, alt)].append(cpu)
                    outs[alt] = out
                if KeyedVectors is None:
                    continue
                dt, cpu, kv = run_gensim(src, kw)
                times[(name, "gensim")].append(dt)
                cpus[(name, "gensim")].append(cpu)
                if rnd == 0:
                    idx = lodestar.load(outs["pack"])
                    v = idx.vectors
                    v = np.asarray(v() if callable(v) else v, dtype=np.float32)
                    g = np.asarray(kv.vectors, dtype=np.float32)
                    c = {"rows": int(v.shape[0]), "gensim_rows": int(g.shape[0])}
                    if v.shape == g.shape:
                        c["elements_differing_from_gensim"] = int(
                            np.count_nonzero(v.view(np.uint32) != g.view(np.uint32)))
                    if a.old:
                        with open(outs["pack"], "rb") as f1, open(outs["pack (old)"], "rb") as f2:
                            c["same_bytes_as_old"] = f1.read() == f2.read()
                    checks[name] = c
                    del idx
        after = loadavg()
    names = [x[0] for x in alts] + (["gensim"] if KeyedVectors is not None else [])
    print("%-14s %-11s %9s %9s %9s %11s %9s %9s" % (
        "input", "alternative", "median s", "min s", "max s", "cpu med s", "cpu min", "cpu max"))
    summary = {}
    for name, _, _, _ in inputs:
        for alt in names:
            s = stats(times[(name, alt)])
            c = stats(cpus[(name, alt)])
            summary.setdefault(name, {})[alt] = s
            summary[name][alt + " cpu"] = c
            print("%-14s %-11s %9.3f %9.3f %9.3f %11.3f %9.3f %9.3f" % (
                name, alt, s["median"], s["min"], s["max"], c["median"], c["min"], c["max"]))
        row = summary[name]
        for other in ("gensim", "pack (old)"):
            if other in row:
                print("%-14s pack/%s = %.3f wall, %.3f cpu" % (
                    "", other, row["pack"]["median"] / row[other]["median"],
                    row["pack cpu"]["median"] / row[other + " cpu"]["median"]))
        if name in checks:
            print("%-14s %s" % ("", json.dumps(checks[name])))
    print("load average before %s, after %s" % (before, after))
    if a.json:
        rows = [{"name": alt, "table": name, "unit": "s", "median": s["median"], "min": s["min"],
                 "max": s["max"], "samples": s["samples"]}
                for name, alts_of in summary.items() for alt, s in alts_of.items()]
        with open(a.json, "w") as f:
            json.dump({"subcommand": "compare-pack", "dry": a.dry,
                       "machine": "%s | load average %s, after %s" % (machine(), before, after),
                       "rows": rows, "checks": checks}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
