"""What the Python benchmarks in bench/ share: the machine they ran on, and the JSON summary
that tests/test_bench_map.py and scripts/adr-check.sh read. Imported by the scripts run as
`python3 bench/NAME.py` (their directory is then first on sys.path)."""
import json
import os
import platform
import subprocess


def cpu_model():
    """lscpu's "Model name" (the figure's machine, as every record names it), else what
    platform knows."""
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


def loadavg():
    """The three load averages as text, "1.02 1.92 2.40"."""
    return " ".join("%.2f" % a for a in os.getloadavg())


def write_summary(argv, prog, subcommand, dry, rows):
    """With --json FILE in argv, writes the summary {subcommand, dry, machine, rows} there.
    Returns 0, or 2 (with a message) when --json has no FILE."""
    if "--json" not in argv:
        return 0
    i = argv.index("--json")
    if i + 1 >= len(argv):
        print("%s: --json wants FILE" % prog, file=__import__("sys").stderr)
        return 2
    with open(argv[i + 1], "w", encoding="utf-8") as f:
        json.dump({"subcommand": subcommand, "dry": dry,
                   "machine": "%s, %d cpus" % (cpu_model(), os.cpu_count()), "rows": rows},
                  f, indent=1)
    return 0
