#!/usr/bin/env python3
"""More inputs for `lodestar pack` (issue 16): `--ids FILE`, `--on-duplicate last`, and HDF5
files as ann-benchmarks writes them (`--format hdf5 --dataset NAME`). Fixtures are written
here with numpy and h5py; every test compares exact values (vector bits, ids, keys, the
metric recorded). The HDF5 tests skip when h5py is missing; when lodestar was built
without libhdf5 they check its refusal instead.

usage: test_pack_inputs.py LODESTAR
"""

import gzip
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests, skip  # noqa: E402

try:
    import h5py
except ImportError:  # python3-h5py (scripts/deps.sh); the HDF5 tests skip without it
    h5py = None

LODESTAR = os.path.abspath(sys.argv[1])
WORK = tempfile.mkdtemp(prefix="lodestar-test-pack-inputs-")
RNG = np.random.default_rng(24)
U64_MAX = 2**64 - 1
# Under LeakSanitizer, libhdf5's own leak after a metadata checksum error is suppressed
# (tests/lsan-libhdf5.supp), for those runs only.
HDF5_LEAKS = dict(os.environ, LSAN_OPTIONS=":".join(
    x for x in [os.environ.get("LSAN_OPTIONS"), "suppressions=" + os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "lsan-libhdf5.supp"), "print_suppressions=0"]
    if x))


def path(name):
    return os.path.join(WORK, name)


def run(*args, stdin=None, env=None):
    p = subprocess.run([LODESTAR, *args], stdin=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace")


def ok(*args, stdin=None):
    rc, out, err = run(*args, stdin=stdin)
    check(rc == 0, f"lodestar {' '.join(args)}: exit {rc}\n{out}{err}")
    return out


def refused(code, needle, *args, stdin=None, env=None):
    rc, out, err = run(*args, stdin=stdin, env=env)
    check(rc == code, f"lodestar {' '.join(args)}: exit {rc}, want {code}\n{out}{err}")
    check(needle in err, f"{needle!r} not in: {err}")
    # Nothing of libhdf5's own error printing, nor of a sanitizer, may reach the user.
    check("HDF5-DIAG" not in err and "Sanitizer" not in err, err)
    return err


def vectors(index):
    out = index + ".npy"
    ok("export", index, out)
    return np.load(out)


def keys(index):
    return ok("keys", index).split("\n")[:-1]


def ids(index, rows):
    """The id of each row, as `lodestar get --row R` prints it."""
    got = []
    for r in range(rows):
        m = re.search(r"^id:\s+(\d+)$", ok("get", "--row", str(r), index), re.M)
        check(m, f"row {r} of {index} shows no id")
        got.append(int(m.group(1)))
    return got


def info_field(index, name):
    m = re.search(rf"^{name}:\s+(\S+)", ok("info", index), re.M)
    check(m, f"info {index} shows no {name}")
    return m.group(1)


def same_bits(a, b, what):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    check(a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}")
    bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
    check(bad.size == 0, f"{what}: {bad.size} elements differ, first at {bad[:3]}")


def write(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


# ---- --ids FILE --------------------------------------------------------------------------

def test_ids_fill_the_id_section():
    txt = write("ids.txt", "a 1 2\nb 3 4\nc 5 6\n")
    idf = write("ids.ids", f"0\n{U64_MAX}\n42\n")
    out = ok("pack", txt, path("ids.ldsi"), "--ids", idf)
    check("packed 3 rows" in out, out)
    check(info_field(path("ids.ldsi"), "ids") == "yes", "no ids section")
    check(ids(path("ids.ldsi"), 3) == [0, U64_MAX, 42], "ids differ")
    check(keys(path("ids.ldsi")) == ["a", "b", "c"], "keys differ")
    # A BOM, CRLF and a missing last newline, as an editor writes; repeated ids are allowed
    # (format.md 3.2: ids need not be unique).
    with open(path("crlf.ids"), "wb") as f:
        f.write(b"\xef\xbb\xbf7\r\n7\r\n0009")
    ok("pack", txt, path("crlf.ldsi"), "--ids", path("crlf.ids"))
    check(ids(path("crlf.ldsi"), 3) == [7, 7, 9], "CRLF ids differ")
    # .npy rows with keys and ids from two side files.
    a = RNG.standard_normal((4, 3)).astype(np.float32)
    np.save(path("ids.npy"), a)
    kf = write("ids.keys", "w\nx\ny\nz\n")
    idf = write("npy.ids", "5\n6\n7\n8\n")
    ok("pack", path("ids.npy"), path("npy.ldsi"), "--keys", kf, "--ids", idf)
    check(ids(path("npy.ldsi"), 4) == [5, 6, 7, 8], "npy ids differ")
    same_bits(vectors(path("npy.ldsi")), a, "npy with ids")


def test_ids_refusals_name_line_and_byte():
    txt = write("r.txt", "a 1 2\nb 3 4\nc 5 6\n")
    out = path("r.ldsi")
    cases = [
        ("1\n2x\n3\n", 1, "ids file line 2 (byte 3): \"2x\" is not an unsigned decimal integer"),
        ("1\n+2\n3\n", 1, "ids file line 2 (byte 2): \"+2\" is not"),
        ("1\n 2\n3\n", 1, "ids file line 2 (byte 2): \" 2\" is not"),
        ("1\n-2\n3\n", 1, "ids file line 2 (byte 2)"),
        ("1\n\n3\n", 1, "ids file line 2 (byte 2): empty line"),
        (f"1\n2\n{U64_MAX + 1}\n", 1, f"ids file line 3 (byte 4): {U64_MAX + 1} is above 2^64 - 1"),
        ("1\n2\n", 1, "the ids file has 2 lines, fewer than the input's rows: line 3 (byte 12)"),
        ("1\n2\n3\n4\n", 1, "the ids file has 4 lines but the input has 3 rows"),
        ("1\n2\n3\n\n", 1, "the ids file has 4 lines but the input has 3 rows"),
    ]
    for i, (text, code, needle) in enumerate(cases):
        idf = write(f"bad{i}.ids", text)
        err = refused(code, needle, "pack", txt, out, "--ids", idf)
        check(err.startswith(f"lodestar: {idf}: "), f"not named by the ids file: {err}")
        check(not os.path.exists(out), f"case {i}: an index was written")
    # Not a regular file: refused before a byte is read (a FIFO without a writer would block).
    fifo = path("ids.fifo")
    os.mkfifo(fifo)
    refused(1, "is a FIFO (pipe); it must be a regular file", "pack", txt, out, "--ids", fifo)
    refused(1, "is a directory", "pack", txt, out, "--ids", WORK)
    # The output may not replace the ids file.
    idf = write("self.ids", "1\n2\n3\n")
    refused(1, "is the same file as the ids file", "pack", txt, idf, "--ids", idf)


def test_ids_follow_the_rows_kept():
    txt = write("dupi.txt", "a 1 2\nb 3 4\na 5 6\nc 7 8\n")
    idf = write("dupi.ids", "10\n20\n30\n40\n")
    ok("pack", txt, path("first.ldsi"), "--ids", idf, "--on-duplicate", "first")
    check(ids(path("first.ldsi"), 3) == [10, 20, 40], "first: ids")
    ok("pack", txt, path("last.ldsi"), "--ids", idf, "--on-duplicate", "last")
    check(keys(path("last.ldsi")) == ["b", "a", "c"], keys(path("last.ldsi")))
    check(ids(path("last.ldsi"), 3) == [20, 30, 40], "last: ids")


# ---- --on-duplicate last -----------------------------------------------------------------

def test_on_duplicate_last():
    txt = write("dl.txt", "a 1 2\nb 3 4\na 5 6\nc 7 8\nb 9 10\na 11 12\n")
    out = ok("pack", txt, path("dl.ldsi"), "--on-duplicate", "last")
    check("packed 3 rows" in out and "skipped 3 rows whose key comes again later" in out, out)
    check(keys(path("dl.ldsi")) == ["c", "b", "a"], keys(path("dl.ldsi")))
    same_bits(vectors(path("dl.ldsi")), np.array([[7, 8], [9, 10], [11, 12]]), "last kept")
    # A compressed file can be read twice; standard input cannot.
    with open(path("dl.txt.gz"), "wb") as f:
        f.write(gzip.compress(open(txt, "rb").read()))
    ok("pack", path("dl.txt.gz"), path("dlz.ldsi"), "--on-duplicate", "last")
    same_bits(vectors(path("dlz.ldsi")), vectors(path("dl.ldsi")), "last from gzip")
    cat = subprocess.Popen(["cat", txt], stdout=subprocess.PIPE)
    refused(2, "--on-duplicate last reads IN twice; (standard input) cannot be read twice",
            "pack", "-", path("dls.ldsi"), "--format", "glove", "--on-duplicate", "last",
            stdin=cat.stdout)
    cat.stdout.close()
    cat.wait()
    # .npy rows keyed by a keys file, and word2vec binary.
    a = RNG.standard_normal((5, 3)).astype(np.float32)
    np.save(path("dl.npy"), a)
    kf = write("dl.keys", "x\ny\nx\nz\ny\n")
    ok("pack", path("dl.npy"), path("dln.ldsi"), "--keys", kf, "--on-duplicate", "last")
    check(keys(path("dln.ldsi")) == ["x", "z", "y"], keys(path("dln.ldsi")))
    same_bits(vectors(path("dln.ldsi")), a[[2, 3, 4]], "npy last")
    with open(path("dl.bin"), "wb") as f:
        f.write(b"3 2\n")
        for k, v in [(b"p", [1, 2]), (b"p", [3, 4]), (b"q", [5, 6])]:
            f.write(k + b" " + np.array(v, dtype="<f4").tobytes() + b"\n")
    ok("pack", path("dl.bin"), path("dlb.ldsi"), "--on-duplicate", "last")
    same_bits(vectors(path("dlb.ldsi")), np.array([[3, 4], [5, 6]]), "binary last")
    # Errors after the first pass still name the input's own line.
    txt2 = write("dl2.txt", "a 1 2\na 3 4\nc 5\n")
    refused(1, "line 3", "pack", txt2, path("dl2.ldsi"), "--on-duplicate", "last")


def test_on_duplicate_last_with_i8_scale_auto():
    # The largest |x| is on a row that is skipped: the scale comes from the rows kept.
    txt = write("dli8.txt", "a 127 0\nb 0.5 1\na 2.54 -1.27\n")
    out = ok("pack", txt, path("dli8.ldsi"), "--on-duplicate", "last", "--dtype", "i8",
             "--i8-scale", "auto")
    check("i8 scale 0.02 (max |x| / 127)" in out, out)
    got = vectors(path("dli8.ldsi"))
    scale = np.float32(np.float32(2.54) / np.float32(127))
    want = np.rint(np.array([[0.5, 1], [2.54, -1.27]], dtype=np.float32) / scale) * scale
    same_bits(got, want.astype(np.float32), "i8 rows kept")


def test_on_duplicate_last_crafted_repeats():
    """Many repeats of one key, and every key repeated: bounded, linear work (one keyed
    probe per row); a quadratic pass would not finish 200,000 rows in the timeout."""
    n = 100_000
    with open(path("one.txt"), "w") as f:
        for i in range(n):
            f.write(f"k {i} 0\n")
    out = ok("pack", path("one.txt"), path("one.ldsi"), "--on-duplicate", "last")
    check("packed 1 rows" in out and f"skipped {n - 1} rows" in out, out)
    same_bits(vectors(path("one.ldsi")), np.array([[n - 1, 0]]), "one key: last row")
    with open(path("all.txt"), "w") as f:
        for rep in range(2):
            for i in range(n):
                f.write(f"w{i} {rep} {i}\n")
    out = ok("pack", path("all.txt"), path("all.ldsi"), "--on-duplicate", "last")
    check(f"packed {n} rows" in out and f"skipped {n} rows" in out, out)
    v = vectors(path("all.ldsi"))
    check(v.shape == (n, 2) and (v[:, 0] == 1).all() and (v[:, 1] == np.arange(n)).all(),
          "every key: the second copy kept, in order")


# ---- HDF5 --------------------------------------------------------------------------------

def need_hdf5():
    """Skips without h5py; checks the refusal when lodestar was built without libhdf5."""
    if h5py is None:
        skip("python3-h5py is not installed")
    with h5py.File(path("probe.h5"), "w") as f:
        f.create_dataset("train", data=np.zeros((1, 1), dtype=np.float32))
    rc, out, err = run("pack", path("probe.h5"), path("probe.ldsi"))
    if rc != 0 and "built without HDF5 support" in err:
        check(rc == 1, err)
        skip("lodestar was built without libhdf5 (its refusal was checked)")
    check(rc == 0, f"pack of a one-element HDF5 file: exit {rc}\n{err}")


def ann_file(name, distance="angular", **extra):
    train = RNG.standard_normal((50, 7)).astype(np.float32)
    test = RNG.standard_normal((6, 7))  # float64, as numpy makes it
    with h5py.File(path(name), "w", **extra) as f:
        f.create_dataset("train", data=train)
        f.create_dataset("test", data=test)
        f.create_dataset("neighbors", data=RNG.integers(0, 50, (6, 10), dtype=np.int32))
        f.create_dataset("distances", data=RNG.random((6, 10)).astype(np.float32))
        if distance is not None:
            f.attrs["distance"] = distance
        f.attrs["type"] = "dense"
        f.attrs["point_type"] = "float"
    return train, test


def test_hdf5_ann_benchmarks_layout():
    need_hdf5()
    train, test = ann_file("ann.hdf5")
    out = ok("pack", path("ann.hdf5"), path("ann.ldsi"))
    check("packed 50 rows x 7 dims (hdf5, f32, cosine)" in out, out)
    same_bits(vectors(path("ann.ldsi")), train, "train")
    check(info_field(path("ann.ldsi"), "metric") == "cosine", "angular -> cosine")
    # float64 is rounded once, straight to the stored dtype.
    ok("pack", path("ann.hdf5"), path("test.ldsi"), "--dataset", "test")
    same_bits(vectors(path("test.ldsi")), test.astype(np.float32), "test f64 -> f32")
    t = test.copy()
    t[0, 0] = 1 + 2.0**-11 + 2.0**-40  # through float32 first this would round to 1.0
    with h5py.File(path("tie.h5"), "w") as f:
        f.create_dataset("train", data=t)
    ok("pack", path("tie.h5"), path("tie.ldsi"), "--dtype", "f16")
    want = t.astype(np.float16).astype(np.float32)
    check(want[0, 0] != np.float32(t[0, 0]).astype(np.float16), "fixture lost its tie")
    same_bits(vectors(path("tie.ldsi")), want, "f64 -> f16 once")
    # --metric wins over the attribute; the other distances map as documented.
    ok("pack", path("ann.hdf5"), path("annl2.ldsi"), "--metric", "l2")
    check(info_field(path("annl2.ldsi"), "metric") == "l2", "--metric l2")
    for dist, metric in [("euclidean", "l2"), ("dot", "dot"), ("ip", "dot"), (None, "cosine")]:
        ann_file("m.h5", distance=dist)
        out = ok("pack", path("m.h5"), path("m.ldsi"))
        check(info_field(path("m.ldsi"), "metric") == metric, f"{dist} -> {metric}: {out}")
    ann_file("fixed.h5", distance=np.bytes_(b"euclidean"))  # a fixed-length ASCII string
    ok("pack", path("fixed.h5"), path("fixed.ldsi"))
    check(info_field(path("fixed.ldsi"), "metric") == "l2", "fixed-length distance")
    ann_file("ham.h5", distance="hamming")
    refused(1, "the attribute distance = \"hamming\" names no lodestar metric", "pack",
            path("ham.h5"), path("ham.ldsi"))
    ok("pack", path("ham.h5"), path("ham.ldsi"), "--metric", "dot")
    # Keys and ids from side files, a dataset inside a group, big-endian, chunked + gzip.
    a = RNG.standard_normal((9, 4)).astype(np.float32)
    with h5py.File(path("more.h5"), "w") as f:
        f.create_dataset("g/emb", data=a.astype(">f4"), chunks=(4, 4), compression="gzip")
    kf = write("more.keys", "".join(f"r{i}\n" for i in range(9)))
    idf = write("more.ids", "".join(f"{100 + i}\n" for i in range(9)))
    ok("pack", path("more.h5"), path("more.ldsi"), "--dataset", "g/emb", "--keys", kf,
       "--ids", idf)
    same_bits(vectors(path("more.ldsi")), a, "big-endian chunked gzip")
    check(keys(path("more.ldsi")) == [f"r{i}" for i in range(9)], "hdf5 keys")
    check(ids(path("more.ldsi"), 9) == list(range(100, 109)), "hdf5 ids")


def test_hdf5_refusals_name_the_dataset():
    need_hdf5()
    ann_file("ref.hdf5")
    with h5py.File(path("ref.hdf5"), "a") as f:
        f.create_dataset("vec1", data=np.zeros(4, dtype=np.float32))
        f.create_dataset("cube", data=np.zeros((2, 2, 2), dtype=np.float32))
        f.create_dataset("half", data=np.zeros((2, 2), dtype=np.float16))
        f.create_group("grp")
    refused(1, "dataset \"neighbors\" holds integers of 4 bytes; lodestar reads 4- and 8-byte "
            "floats", "pack", path("ref.hdf5"), path("x.ldsi"), "--dataset", "neighbors")
    refused(1, "dataset \"half\" holds floats of 2 bytes", "pack", path("ref.hdf5"),
            path("x.ldsi"), "--dataset", "half")
    refused(1, "dataset \"vec1\" has rank 1", "pack", path("ref.hdf5"), path("x.ldsi"),
            "--dataset", "vec1")
    refused(1, "dataset \"cube\" has rank 3", "pack", path("ref.hdf5"), path("x.ldsi"),
            "--dataset", "cube")
    refused(2, "no dataset \"nope\" in the file (its root holds: cube, distances, grp, half, "
            "neighbors, test, train, vec1)", "pack", path("ref.hdf5"), path("x.ldsi"),
            "--dataset", "nope")
    refused(2, "\"grp\" is a group, not a dataset", "pack", path("ref.hdf5"),
            path("x.ldsi"), "--dataset", "grp")
    # The declared extent is bounded before a row is read.
    refused(1, "dataset \"train\" declares 50 x 7 x 4 = 1400 bytes, above max_decoded_bytes = "
            "1000", "pack", path("ref.hdf5"), path("x.ldsi"), "--max-decoded", "1000")
    with open(path("ref.hdf5"), "rb") as f:
        refused(2, "--format hdf5 reads a file that libhdf5 seeks in", "pack", "-",
                path("x.ldsi"), "--format", "hdf5", stdin=f)
    with open(path("ref.h5.gz"), "wb") as f:
        f.write(gzip.compress(open(path("ref.hdf5"), "rb").read()))
    refused(1, "the input is gzip-compressed; libhdf5 reads the HDF5 file itself", "pack",
            path("ref.h5.gz"), path("x.ldsi"))
    check(not os.path.exists(path("x.ldsi")), "a refused pack wrote an index")


def test_hdf5_truncated_and_corrupt():
    """Damaged files are refused with libhdf5's reason in our message (its own printing
    silenced), and no crash: the ASan stage runs this too."""
    need_hdf5()
    ann_file("good.h5", libver="latest")  # checksummed metadata (superblock v3, OHDR)
    raw = open(path("good.h5"), "rb").read()
    for cut in [len(raw) // 2, 600, 100, 8]:
        with open(path("cut.h5"), "wb") as f:
            f.write(raw[:cut])
        rc, out, err = run("pack", path("cut.h5"), path("cut.ldsi"))
        check(rc == 1, f"cut at {cut}: exit {rc}\n{err}")
        check(err.startswith(f"lodestar: {path('cut.h5')}: ") and "HDF5-DIAG" not in err, err)
        check("truncated file" in err or "not an HDF5 file" in err or "libhdf5" in err, err)
    with open(path("cut.h5"), "wb") as f:
        f.write(raw[: len(raw) // 2])
    refused(1, "libhdf5 cannot open the file: truncated file: eof = ", "pack", path("cut.h5"),
            path("cut.ldsi"))
    bad = bytearray(raw)
    bad[1] ^= 0xFF  # the signature
    open(path("sig.h5"), "wb").write(bad)
    refused(1, "not an HDF5 file (no HDF5 signature", "pack", path("sig.h5"), path("s.ldsi"),
            "--format", "hdf5")
    # Flip a byte inside an object header (the root group's, then the datasets'): the
    # checksum catches it. (libhdf5 1.10 then prints "infinite loop closing library" at
    # exit, its own leak after that error, which no call of ours can prevent: ADR 0023.)
    heads = [m.start() for m in re.finditer(b"OHDR", raw)]
    check(len(heads) >= 2, f"object headers at {heads}")
    for i, (at, want) in enumerate([(heads[:1], "libhdf5 cannot look for dataset \"train\": "
                                     "incorrect metadata checksum"),
                                    (heads[1:], "libhdf5 cannot open dataset \"train\": ")]):
        bad = bytearray(raw)
        for h in at:
            bad[h + 6] ^= 0x5A
        open(path(f"ohdr{i}.h5"), "wb").write(bad)
        err = refused(1, want, "pack", path(f"ohdr{i}.h5"), path("o.ldsi"), env=HDF5_LEAKS)
        check(err.startswith(f"lodestar: {path(f'ohdr{i}.h5')}: "), err)
        check(not os.path.exists(path("o.ldsi")), "a refused pack wrote an index")


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
