#!/usr/bin/python3
"""numpy.load of a .npy, REPS times in this process, for lodestar-bench load-scale.

Prints one line per load: wall ms, CPU ms (user + system), minor page faults, peak RSS MiB
(ru_maxrss: the interpreter and numpy included, about 30 MiB here), system CPU ms, as the
bench's own children do. The array is dropped before the next load.

usage: /usr/bin/python3 bench/compare/load_numpy.py FILE.npy [REPS]
"""
import resource
import sys
import time

import numpy as np


def main():
    path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    for _ in range(reps):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter_ns()
        a = np.load(path)
        t1 = time.perf_counter_ns()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        assert a.dtype == np.float32 and a.ndim == 2
        del a
        cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e3
        print("%.3f %.3f %d %.1f %.3f" % ((t1 - t0) / 1e6, cpu, r1.ru_minflt - r0.ru_minflt,
                                          r1.ru_maxrss / 1024.0,
                                          (r1.ru_stime - r0.ru_stime) * 1e3), flush=True)


if __name__ == "__main__":
    main()
