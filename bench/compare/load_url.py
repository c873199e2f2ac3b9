#!/usr/bin/env python3
"""Loading an index from a URL on loopback against loading it from the file (ADR 0019,
0041).

usage: /usr/bin/python3 bench/compare/load_url.py [--dry] [--index FILE] [--rounds N] [--rows N]
           [--connections 1,2,4,8] [--generate-mib N] [--scratch DIR] [--no-processes]
           [--no-delta | --only-delta] [--delta-rounds N] [--delta-connections 1,4]

Serves the index's directory with nginx on 127.0.0.1 (Python's http.server when nginx
is not installed; the output says which; nginx with one worker process per CPU, as an
object store serves each connection from its own backend), then, in interleaved rounds
(the order rotates each round):

  in one process (the ctypes package): lodestar.load(URL, url_connections=K) for each K
  of --connections vs lodestar.load(FILE), all read into the pool with the checksum
  verified (format 1.1: every chunk), each row with the CPU time per load (medians) of
  this process (getrusage, every thread) and of the server's processes (/proc/PID/stat);
  on a machine where server and loader share the CPUs, their sum bounds what K can give;
  as whole processes (the first index only; --no-processes: none): `lodestar info URL`,
  `lodestar info FILE`, and `curl -s -o TMP URL && lodestar info TMP`.

--generate-mib N (default 1024 when not --dry): also a generated index of about N MiB
(random f32 rows of 1024 dimensions, no keys, format 1.1), written with the package into
--scratch DIR (default a temporary folder) and deleted at the end; its table follows
GloVe's. With it (unless --no-delta), the delta rows (docs/adr/0053): the same index with
1% of its rows changed, at random and in runs of 64 rows, reloaded into a live index
serving the generated one as a delta over HTTP (K of --delta-connections) and in full
from the same URL, interleaved; time and the bytes transferred (% of the payload).
--only-delta: those rows only.

Prints median/min/max wall time per alternative, the ratios of medians to the file,
and, for the processes, minor page faults and peak RSS (wait4, so the curl+lodestar
row counts both processes' faults and the larger RSS; GNU time measures them). The index is --index FILE,
else .cache/glove/glove-100d.ldsi when present, else a random --rows x 100 f32 index
packed here. --dry: a 200-row index, 2 rounds.

env: LODESTAR_BUILD (default build/) for the lodestar program, LODESTAR_LIB (default
build/liblodestar.so) when the package is not installed.
"""
import argparse
import json
import os
import pwd
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.join(HERE, os.pardir, os.pardir)
sys.path.insert(0, os.path.join(TOP, "python"))
BUILD = os.environ.get("LODESTAR_BUILD", os.path.join(TOP, "build"))
os.environ.setdefault("LODESTAR_LIB", os.path.join(BUILD, "liblodestar.so"))
import lodestar  # noqa: E402

GNU_TIME = "/usr/bin/time"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.05)
    raise SystemExit("the server did not answer")


def start_server(root, work):
    port = free_port()
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx")
                                      else None)
    if nginx:
        prefix = os.path.join(work, "nginx")
        os.makedirs(os.path.join(prefix, "tmp"))
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            # The workers run as the invoking user: as root nginx would otherwise drop them to
            # "nobody", who cannot enter a private (0700) work folder (HTTP 403).
            user = ("user %s;\n" % pwd.getpwuid(os.geteuid()).pw_name) if os.geteuid() == 0 else ""
            f.write(f"""daemon off;
{user}master_process on;
worker_processes {os.cpu_count()};
error_log {prefix}/error.log;
pid {prefix}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    sendfile on;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
    server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
""")
        p = subprocess.Popen([nginx, "-p", prefix, "-c", conf], stderr=subprocess.DEVNULL)
        name = "nginx"
    else:
        p = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                              "--directory", root, str(port)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        name = "python http.server"
    wait_port(port, p)
    return p, port, name


def run_process(argv, work):
    """Runs argv under GNU time; returns (seconds, minor faults, peak RSS KiB). The counts
    come from time's wait4 on its own child: a child spawned from this Python would carry
    Python's peak RSS across exec (Linux records the old mm's high-water mark)."""
    out = os.path.join(work, "time.out")
    t0 = time.perf_counter()
    p = subprocess.run([GNU_TIME, "-f", "%M %R", "-o", out, *argv], stdout=subprocess.DEVNULL)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv}: exit {p.returncode}")
    with open(out) as f:
        rss, faults = f.read().split()[-2:]
    return secs, int(faults), int(rss)


def summary(xs):
    return statistics.median(xs), min(xs), max(xs)


def machine():
    cpu = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def generate(path, mib, delta_paths=None):
    """About `mib` MiB of random f32 rows of 1024 dimensions, in blocks (bounded memory).
    delta_paths {pattern: path}: also the same index with 1% of its rows changed, "random"
    (rows drawn uniformly) or "runs of 64" (runs of 64 adjacent rows at random places)."""
    import numpy as np
    rows = max(1, (mib << 20) // 4096)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((rows, 1024), dtype=np.float32)
    lodestar.write(path, x, metric="dot")
    for pattern, out in (delta_paths or {}).items():
        n = max(1, rows // 100)
        if pattern == "random":
            changed = rng.choice(rows, size=n, replace=False)
        else:
            starts = rng.choice(max(1, rows // 64), size=max(1, n // 64), replace=False) * 64
            changed = (starts[:, None] + np.arange(64)[None, :]).ravel()
            changed = changed[changed < rows]
        saved = x[changed].copy()
        x[changed] += 1.0
        lodestar.write(out, x, metric="dot")
        x[changed] = saved
    return rows


def delta_rows(base, base_url, urls, rounds, ks):
    """A live index serving `base` (rented, delta on) reloaded from each URL of `urls`
    ({pattern: URL}, the same index with 1% of its rows changed) as a delta over HTTP, and
    in full from the same URL, interleaved (the order rotates each round); before each timed
    reload the live index is set back to `base` from the file (untimed). Returns
    {name: [(seconds, bytes transferred)]}."""
    names = []
    for pattern in urls:
        names += [(pattern, "delta", k) for k in ks] + [(pattern, "full", ks[-1])]
    out = {n: [] for n in names}
    with lodestar.Live(base, delta=True) as live:
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                pattern, how, k = n
                live.reload(base, delta=True)
                live._opts.url_connections = k
                t0 = time.perf_counter()
                live.reload(urls[pattern], delta=(how == "delta"))
                secs = time.perf_counter() - t0
                info = live.last_reload()
                if how == "delta" and info.get("delta_fallback"):
                    raise SystemExit("the delta over HTTP fell back: %s"
                                     % live.stats().get("delta_fallback_reason"))
                out[n].append((secs, info["bytes_read"] if how == "delta"
                               else info["payload_bytes"] + 64))
    return out


def server_cpu(master):
    """(user, system) seconds used so far by the server's worker processes (the children of
    its master, from /proc/PID/stat), 0 where /proc is absent."""
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0
    try:
        pids = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return 0.0, 0.0
    for pid in pids:
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state ppid ...; utime and stime are fields 14 and 15 (1-based).
        if int(fields[1]) == master or int(pid) == master:
            user += int(fields[11])
            system += int(fields[12])
    return user / tick, system / tick


def inprocess(index, url, ks, rounds, master):
    """{name: [(seconds, loader user s, loader system s, server user s, server system s)]}
    for the file and each K, interleaved, order rotating; the loader's CPU is this whole
    process's (every thread), the server's is its worker processes'."""
    names = ["file"] + ["K=%d" % k for k in ks]
    out = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            k = None if n == "file" else int(n[2:])
            s0 = server_cpu(master)
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            with (lodestar.load(index) if k is None else
                  lodestar.load(url, url_connections=k)) as ix:
                assert ix.checksum_verified
            secs = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            s1 = server_cpu(master)
            out[n].append((secs, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime,
                           s1[0] - s0[0], s1[1] - s0[1]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--index")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--connections", default="1,2,4,8")
    ap.add_argument("--generate-mib", type=int, default=None)
    ap.add_argument("--scratch")
    ap.add_argument("--no-processes", action="store_true")
    ap.add_argument("--json", help="also write the rows' per-round samples (ms) as JSON to this "
                                   "file (scripts/adr-check.sh)")
    ap.add_argument("--no-delta", action="store_true",
                    help="no delta rows (they need the generated index)")
    ap.add_argument("--only-delta", action="store_true",
                    help="only the delta rows (and the index loads they need)")
    ap.add_argument("--delta-rounds", type=int, default=0,
                    help="rounds of the delta rows (default: --rounds)")
    ap.add_argument("--delta-connections", default="4",
                    help="K of the delta reloads (the full reload takes the last)")
    a = ap.parse_args()
    if not os.access(GNU_TIME, os.X_OK):
        raise SystemExit("bench/compare/load_url.py needs GNU time (apt-get install time)")
    rounds = 2 if a.dry else a.rounds
    ks = [int(k) for k in a.connections.split(",")]
    gen_mib = a.generate_mib if a.generate_mib is not None else (0 if a.dry else 1024)
    cli = os.path.join(BUILD, "cli", "lodestar")
    work = tempfile.mkdtemp(prefix="lodestar-load-url-", dir=a.scratch)
    try:
        index = a.index
        glove = os.path.join(TOP, ".cache", "glove", "glove-100d.ldsi")
        if index is None and not a.dry and os.path.exists(glove):
            index = glove
        if index is None:
            rows = 200 if a.dry else a.rows
            rnd = random.Random(7)
            text = os.path.join(work, "ref.txt")
            with open(text, "w") as f:
                for r in range(rows):
                    f.write("w%d " % r + " ".join("%.4f" % rnd.uniform(-1, 1)
                                                  for _ in range(100)) + "\n")
            index = os.path.join(work, "ref.ldsi")
            subprocess.run([cli, "pack", "--format", "glove", text, index], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        serve = os.path.join(work, "serve")
        os.mkdir(serve)
        # nginx's workers run as an unprivileged user when started by root.
        os.chmod(work, 0o755)
        indexes = [os.path.abspath(index)]
        os.symlink(indexes[0], os.path.join(serve, "a.ldsi"))
        deltas = {}
        if gen_mib > 0:
            big = os.path.join(serve, "generated.ldsi")
            if not a.no_delta:
                deltas = {p: os.path.join(serve, "generated-%s.ldsi" % p.replace(" ", "-"))
                          for p in ("random", "runs of 64")}
            generate(big, gen_mib, deltas)
            for p in [big, *deltas.values()]:
                os.chmod(p, 0o644)
            indexes.append(big)
        srv, port, server_name = start_server(serve, work)
        urls = [f"http://127.0.0.1:{port}/{os.path.basename(i) if i.startswith(serve) else 'a.ldsi'}"
                for i in indexes]
        tmp = os.path.join(work, "downloaded.ldsi")
        curl = shutil.which("curl")
        results = []
        procs = {}
        delta_res = {}
        try:
            if deltas:
                delta_res = delta_rows(indexes[-1], urls[-1],
                                       {p: f"http://127.0.0.1:{port}/{os.path.basename(d)}"
                                        for p, d in deltas.items()},
                                       a.delta_rounds if a.delta_rounds else rounds,
                                       [int(k) for k in a.delta_connections.split(",")])
            for i, (index, url) in enumerate(zip(indexes, urls)):
                if a.only_delta:
                    break
                results.append(inprocess(index, url, ks, rounds, srv.pid))
                if i > 0 or a.no_processes:
                    continue
                procs = {"info URL": [], "info FILE": []}
                if curl:
                    procs["curl -o + info"] = []
                cmds = {"info URL": [cli, "info", url], "info FILE": [cli, "info", index],
                        "curl -o + info": ["sh", "-c", f'"{curl}" -s -o "{tmp}" "{url}" && '
                                           f'"{cli}" info "{tmp}" && rm -f "{tmp}"']}
                for r in range(rounds):
                    names = list(procs)
                    names = names[r % len(names):] + names[:r % len(names)]
                    for k in names:
                        procs[k].append(run_process(cmds[k], work))
        finally:
            srv.terminate()
            srv.wait(timeout=10)
        cpu = machine()
        print(f"server {server_name} on 127.0.0.1, {rounds} interleaved rounds")
        print(f"machine: {cpu}, {os.cpu_count()} cpus, load average "
              f"{' '.join('%.2f' % x for x in os.getloadavg())} at the end")
        rows = []
        for n, (index, res) in enumerate(zip(indexes, results)):
            size = os.path.getsize(index)
            print(f"index {index if index != indexes[-1] or gen_mib == 0 else 'generated'} "
                  f"({size} bytes): in one process (ms: median min max, ratio of medians to "
                  f"the file; CPU ms per load, medians: the loading process's user+system, "
                  f"the server's workers' user+system)")
            base = statistics.median(x[0] for x in res["file"])
            for k, samples in res.items():
                xs = [x[0] for x in samples]
                cpu_ms = [statistics.median(x[i] for x in samples) * 1e3 for i in range(1, 5)]
                m, lo, hi = summary(xs)
                name = "lodestar.load(FILE)" if k == "file" else f"lodestar.load(URL, {k})"
                print(f"  {name:28s} {m * 1e3:9.2f} {lo * 1e3:9.2f} {hi * 1e3:9.2f}"
                      f"  x{m / base:.2f}  cpu loader {cpu_ms[0]:6.0f}+{cpu_ms[1]:6.0f}"
                      f"  server {cpu_ms[2]:6.0f}+{cpu_ms[3]:6.0f}")
                rows.append({"table": "in one process, %s index" % ("first" if n == 0
                                                                      else "generated"),
                             "index": os.path.basename(index),
                             "bytes": size, "name": name, "unit": "ms",
                             "median": m * 1e3, "min": lo * 1e3, "max": hi * 1e3,
                             "samples": [x * 1e3 for x in xs],
                             "cpu_ms_medians": dict(zip(
                                 ("loader_user", "loader_system", "server_user",
                                  "server_system"), cpu_ms))})
        if delta_res:
            size = os.path.getsize(indexes[-1])
            print(f"delta reload over HTTP of the generated index ({size} bytes), 1% of its "
                  f"rows changed, against a full reload from the same URL (live.reload; ms: "
                  f"median min max, ratio of medians to the full reload; bytes transferred "
                  f"per reload, % of the payload)")
            for pattern in dict.fromkeys(p for p, _, _ in delta_res):
                full = [v for (p, how, _), v in delta_res.items() if p == pattern and
                        how == "full"][0]
                base = statistics.median(x[0] for x in full)
                for (p, how, k), xs in delta_res.items():
                    if p != pattern:
                        continue
                    m, lo, hi = summary([x[0] for x in xs])
                    sent = statistics.median(x[1] for x in xs)
                    name = f"{pattern}: {how} K={k}"
                    print(f"  {name:28s} {m * 1e3:9.2f} {lo * 1e3:9.2f} {hi * 1e3:9.2f}"
                          f"  x{m / base:.2f}  sent {sent:12.0f}  {100 * sent / size:6.2f}%")
                    rows.append({"table": "delta reload over HTTP, generated index",
                                 "name": name, "unit": "ms", "median": m * 1e3,
                                 "min": lo * 1e3, "max": hi * 1e3,
                                 "samples": [x[0] * 1e3 for x in xs],
                                 "bytes_sent": sent, "percent_of_payload": 100 * sent / size})
        if procs:
            print("whole processes, first index (ms: median min max, ratio; minor faults and "
                  "peak RSS KiB, medians)")
            base = statistics.median(x[0] for x in procs["info FILE"])
            for k, xs in procs.items():
                m, lo, hi = summary([x[0] for x in xs])
                flt = statistics.median(x[1] for x in xs)
                rss = statistics.median(x[2] for x in xs)
                print(f"  {k:16s} {m * 1e3:9.2f} {lo * 1e3:9.2f} {hi * 1e3:9.2f}  "
                      f"x{m / base:.2f}  faults {flt:8.0f}  rss {rss:8.0f}")
            rows += [{"table": "whole processes", "name": k, "unit": "ms",
                      "median": statistics.median(x[0] for x in xs) * 1e3,
                      "min": min(x[0] for x in xs) * 1e3, "max": max(x[0] for x in xs) * 1e3,
                      "samples": [x[0] * 1e3 for x in xs],
                      "page_fault_samples": [x[1] for x in xs]}
                     for k, xs in procs.items()]
        if a.json:
            with open(a.json, "w", encoding="utf-8") as f:
                json.dump({"subcommand": "load-url", "dry": a.dry,
                           "machine": "%s, %d cpus" % (cpu, os.cpu_count()), "rows": rows}, f,
                          indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
