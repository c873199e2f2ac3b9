#!/usr/bin/env python3
"""Every embedding file in and out: `lodestar pack` on the inputs numpy, gensim-style tools
and the distributors write (float64 / int8 / big-endian / Fortran .npy, .npz, gzip, zstd
and xz compression, GloVe keys with spaces, fastText .vec), and `lodestar export` back out,
round-tripped bit for bit. Fixtures are made here with numpy; expected values come from
numpy's own conversions (astype float32 / float16 round once, to nearest even).

usage: test_formats.py LODESTAR
"""

import gzip
import io
import lzma
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests, skip  # noqa: E402

LODESTAR = os.path.abspath(sys.argv[1])
WORK = tempfile.mkdtemp(prefix="lodestar-test-formats-")
RNG = np.random.default_rng(16)
# Sanitizer builds reserve terabytes of shadow memory: no address-space cap there.
SANITIZED = bool(os.environ.get("LDS_SANITIZE"))


def path(name):
    return os.path.join(WORK, name)


def run(*args, limit_as=None):
    """Runs lodestar; returns (exit code, stdout, stderr). limit_as caps its address space."""

    def cap():
        if limit_as and not SANITIZED:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    p = subprocess.run(
        [LODESTAR, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
        preexec_fn=cap,
    )
    return p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace")


def ok(*args):
    rc, out, err = run(*args)
    check(rc == 0, f"lodestar {' '.join(args)}: exit {rc}\n{out}{err}")
    return out


def refused(code, needle, *args, **kw):
    rc, out, err = run(*args, **kw)
    check(rc == code, f"lodestar {' '.join(args)}: exit {rc}, want {code}\n{out}{err}")
    check(needle in err, f"{needle!r} not in: {err}")
    return err


def vectors(index):
    """The index's vectors as float32 (exported to .npy by lodestar itself)."""
    out = index + ".npy"
    ok("export", index, out)
    return np.load(out)


def keys(index):
    return ok("keys", index).split("\n")[:-1]


def same_bits(a, b, what):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    check(a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}")
    bad = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
    check(bad.size == 0, f"{what}: {bad.size} elements differ, first at {bad[:3]}: "
          f"{a.ravel()[bad[:3]]} vs {b.ravel()[bad[:3]]}")


def f64_fixture():
    """float64 values with float16 and float32 rounding boundaries in them."""
    a = RNG.standard_normal((40, 6))
    # Just above a float16 tie: double rounding through float32 would round to even.
    a[0, :3] = [1 + 2.0**-11 + 2.0**-40, -(1 + 2.0**-11 + 2.0**-40), 2 + 2.0**-10 + 2.0**-38]
    a[1, :2] = [1 + 2.0**-24 + 2.0**-50, 0.1]  # a float32 boundary
    return a


def npy_bytes(a):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a)
    return buf.getvalue()


def zip_one(name, payload, method=0, level=6, usize=None, crc=None, after=b"", local_name=None,
            local_method=None, local_usize=None):
    """A zip of one entry, written here byte by byte (APPNOTE 4.3.7, 4.3.12, 4.3.16) so each
    field can be made to disagree. Returns (bytes, data offset, central header offset)."""
    if method == 8:
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        data = c.compress(payload) + c.flush() + after
    else:
        data = payload + after
    crc = zlib.crc32(payload) if crc is None else crc
    usize = len(payload) if usize is None else usize
    lname = (local_name or name).encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0,
                        method if local_method is None else local_method, 0, 0, crc, len(data),
                        usize if local_usize is None else local_usize, len(lname), 0) + lname
    data_at = len(local)
    cd_at = data_at + len(data)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc,
                          len(data), usize, len(name), 0, 0, 0, 0, 0, 0) + name.encode()
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), cd_at, 0)
    return local + data + central + end, data_at, cd_at


def test_npz_entries_checked():
    """Every entry read is checked against its zip records: the CRC-32, both sizes, no bytes
    after a deflate stream, the local header's method and name (issue 24 item 1)."""
    a = RNG.standard_normal((6, 4)).astype(np.float32)
    payload = npy_bytes(a)
    data_off = len(payload) - a.nbytes  # the .npy header's length

    def write(name, blob):
        open(path(name), "wb").write(blob)
        return path(name)

    for method, level in [(0, 0), (8, 0), (8, 6)]:
        blob, data_at, cd_at = zip_one("v.npy", payload, method, level)
        good = write(f"good{method}{level}.npz", blob)
        ok("pack", good, path("good.ldsi"))
        same_bits(vectors(path("good.ldsi")), a, f"npz method {method} level {level}")
        # One byte flipped in row 2 (stored data, or a stored deflate block) decodes to a
        # wrong value: only the CRC-32 sees it.
        if level == 0:
            body = data_at + (5 if method == 8 else 0) + data_off + 2 * 16 + 1
            flips = [body]
        else:
            flips = range(data_at + 2, cd_at, 7)
        for at in flips:
            bad = bytearray(blob)
            bad[at] ^= 0x01
            p = write("flip.npz", bytes(bad))
            rc, out, err = run("pack", p, path("flip.ldsi"))
            check(rc == 1, f"flip at {at} (method {method} level {level}): exit {rc}\n{err}")
            if level == 0:
                check(f"byte {cd_at + 16}: .npz entry 'v.npy'" in err and "CRC-32" in err
                      and "damaged" in err, err)

    # The declared uncompressed size (central and local alike) disagrees with deflate's output.
    # Declared too small, the decoder stops at the declared size; too large, the whole
    # stream decodes short of it.
    for usize, decodes in [(10, "more"), (2**31, str(len(payload)))]:
        blob, data_at, cd_at = zip_one("v.npy", payload, 8, usize=usize)
        refused(1, f"byte {cd_at + 24}: .npz entry 'v.npy': the uncompressed size declares "
                   f"{usize} bytes, but the entry's data (byte {data_at}) decodes to "
                   f"{decodes}", "pack", write("usize.npz", blob), path("t.ldsi"))
    # A lying entry (found in review): the .npy header promises 10^8 x 8 f32, the sizes
    # declare 4,000 bytes, the deflate stream holds 256 MiB. It is refused at the declared
    # size, not after decoding (and writing) the whole stream to fail its CRC-32.
    huge = npy_bytes(np.zeros((1, 8), np.float32)).replace(b"(1, 8)", b"(100000000, 8)")
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(1 << 20)
    stream = c.compress(huge)
    for _ in range(256):
        stream += c.compress(zeros)
    stream += c.flush()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, 0, len(stream), 4000, 5,
                        0) + b"v.npy"
    cd_at = len(local) + len(stream)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, 0, len(stream),
                          4000, 5, 0, 0, 0, 0, 0, 0) + b"v.npy"
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), cd_at, 0)
    refused(1, f"byte {cd_at + 24}: .npz entry 'v.npy': the uncompressed size declares 4000 "
               f"bytes, but the entry's data (byte {len(local)}) decodes to more", "pack",
            write("liar.npz", local + stream + central + end), path("t.ldsi"))
    # Bytes after the end of the deflate stream, inside the compressed size.
    blob, data_at, cd_at = zip_one("v.npy", payload, 8, after=b"junk!")
    refused(1, f"byte {cd_at - 5}: .npz entry 'v.npy': 5 bytes after the end of its deflate "
               "stream", "pack", write("after.npz", blob), path("t.ldsi"))
    # The local header disagrees with the central directory.
    blob, _, _ = zip_one("v.npy", payload, 0, local_method=8)
    refused(1, "byte 8: .npz entry 'v.npy': the local header says method 8, the central "
               "directory", "pack", write("method.npz", blob), path("t.ldsi"))
    blob, _, _ = zip_one("v.npy", payload, 0, local_name="w.npy")
    refused(1, "byte 30: .npz entry 'v.npy': the local header names it 'w.npy'", "pack",
            write("name.npz", blob), path("t.ldsi"))
    blob, _, _ = zip_one("v.npy", payload, 8, local_usize=len(payload) + 1)
    refused(1, "byte 22: .npz entry 'v.npy': the local header's uncompressed size is", "pack",
            write("lsize.npz", blob), path("t.ldsi"))
    blob, _, _ = zip_one("v.npy", payload, 0, crc=zlib.crc32(payload) ^ 1)
    refused(1, "CRC-32", "pack", write("crc.npz", blob), path("t.ldsi"))
    # A Fortran-order array in a stored entry is read by offset: its CRC-32 is checked too.
    fort = npy_bytes(np.asfortranarray(a))
    blob, data_at, cd_at = zip_one("v.npy", fort, 0)
    ok("pack", write("fort.npz", blob), path("fort.ldsi"))
    same_bits(vectors(path("fort.ldsi")), a, "npz Fortran, own zip")
    bad = bytearray(blob)
    bad[cd_at - 3] ^= 0x10
    refused(1, f"byte {cd_at + 16}: .npz entry 'v.npy'", "pack", write("fortflip.npz", bytes(bad)),
            path("t.ldsi"))


def test_npy_float64_rounds_once():
    a = f64_fixture()
    np.save(path("f8.npy"), a)
    ok("pack", path("f8.npy"), path("f8.ldsi"))
    same_bits(vectors(path("f8.ldsi")), a.astype(np.float32), "f64 -> f32")
    ok("pack", path("f8.npy"), path("f8h.ldsi"), "--dtype", "f16")
    # numpy's float64 -> float16 rounds once; through float32 first it would not.
    want = a.astype(np.float16).astype(np.float32)
    check(want[0, 0] != a[0, 0].astype(np.float32).astype(np.float16), "fixture lost its tie")
    same_bits(vectors(path("f8h.ldsi")), want, "f64 -> f16")


def test_npy_layouts_and_byte_orders():
    a = RNG.standard_normal((33, 5)).astype(np.float32)
    for name, arr in [("be4", a.astype(">f4")), ("be8", a.astype(">f8")),
                      ("fort", np.asfortranarray(a)), ("fort8", np.asfortranarray(a, ">f8")),
                      ("h", a.astype("<f2")), ("beh", a.astype(">f2"))]:
        np.save(path(name + ".npy"), arr)
        check(name[:4] != "fort" or np.load(path(name + ".npy"), mmap_mode="r").flags.f_contiguous,
              "numpy did not write Fortran order")
        ok("pack", path(name + ".npy"), path(name + ".ldsi"))
        same_bits(vectors(path(name + ".ldsi")), arr.astype(np.float32), name)


def test_npy_int8_uint8():
    i8 = RNG.integers(-127, 128, size=(10, 4), dtype=np.int8)
    u8 = RNG.integers(0, 256, size=(10, 4), dtype=np.uint8)
    np.save(path("i8.npy"), i8)
    np.save(path("u8.npy"), u8)
    ok("pack", path("i8.npy"), path("i8.ldsi"))
    same_bits(vectors(path("i8.ldsi")), i8.astype(np.float32), "int8 -> f32")
    ok("pack", path("i8.npy"), path("i8q.ldsi"), "--dtype", "i8", "--i8-scale", "1")
    same_bits(vectors(path("i8q.ldsi")), i8.astype(np.float32), "int8 -> i8 scale 1")
    ok("pack", path("u8.npy"), path("u8.ldsi"))
    same_bits(vectors(path("u8.ldsi")), u8.astype(np.float32), "uint8 -> f32")


def test_i8_scale_auto():
    a = f64_fixture()
    np.save(path("auto.npy"), a)
    out = ok("pack", path("auto.npy"), path("auto.ldsi"), "--dtype", "i8", "--i8-scale", "auto")
    scale = np.float32(np.abs(a.astype(np.float32)).max() / 127.0)
    printed = [line for line in out.splitlines() if line.startswith("i8 scale ")]
    check(len(printed) == 1 and np.float32(printed[0].split()[2]) == scale, out)
    q = np.rint(a / np.float64(scale)) + 0.0  # the index stores int8 0, never -0
    check(np.abs(q).max() == 127, f"max |q| {np.abs(q).max()}")
    same_bits(vectors(path("auto.ldsi")), q.astype(np.float32) * scale, "i8 auto")
    refused(2, "--i8-scale auto reads IN twice", "pack", "-", path("x.ldsi"), "--format", "npy",
            "--dtype", "i8", "--i8-scale", "auto")


def test_npz_stored_and_deflated():
    a = RNG.standard_normal((20, 3)).astype(np.float32)
    b = RNG.standard_normal((7, 2))
    np.savez(path("one.npz"), vecs=a)
    np.savez(path("two.npz"), vecs=a, other=b)
    np.savez_compressed(path("twoc.npz"), vecs=a, other=b)
    ok("pack", path("one.npz"), path("one.ldsi"))
    same_bits(vectors(path("one.ldsi")), a, "npz only array")
    for name in ["two", "twoc"]:
        refused(2, "name one (--array NAME)", "pack", path(name + ".npz"), path("t.ldsi"))
        ok("pack", path(name + ".npz"), path(name + ".ldsi"), "--array", "other")
        same_bits(vectors(path(name + ".ldsi")), b.astype(np.float32), name + " other")
        ok("pack", path(name + ".npz"), path(name + ".ldsi"), "--array", "vecs.npy")
        same_bits(vectors(path(name + ".ldsi")), a, name + " vecs")
        refused(2, "no array 'nope'", "pack", path(name + ".npz"), path("t.ldsi"), "--array", "nope")
    # Fortran order inside a stored entry is read by offset.
    np.savez(path("fort.npz"), v=np.asfortranarray(a))
    ok("pack", path("fort.npz"), path("fort.ldsi"))
    same_bits(vectors(path("fort.ldsi")), a, "npz Fortran")
    np.savez_compressed(path("fortc.npz"), v=np.asfortranarray(a))
    refused(1, "Fortran-order", "pack", path("fortc.npz"), path("t.ldsi"))
    # A cut zip: the end record is gone.
    blob = open(path("one.npz"), "rb").read()
    open(path("cut.npz"), "wb").write(blob[: len(blob) - 10])
    refused(1, "no end of central directory", "pack", path("cut.npz"), path("t.ldsi"))


def compressors():
    def zst(data):
        p = subprocess.run(["zstd", "-q", "-c", "-"], input=data, stdout=subprocess.PIPE,
                           check=True)
        return p.stdout

    return [("gz", gzip.compress), ("xz", lzma.compress), ("zst", zst)]


def test_compressed_inputs_every_format():
    if not shutil.which("zstd"):
        skip("the zstd program is not installed")
    a = RNG.standard_normal((12, 4)).astype(np.float32)
    words = [f"w{i}" for i in range(len(a))]
    np.save(path("c.npy"), a)
    with open(path("c.txt"), "w") as f:
        for w, v in zip(words, a):
            f.write(w + " " + " ".join(repr(float(x)) for x in v) + "\n")
    with open(path("c.bin"), "wb") as f:  # GoogleNews-vectors-negative300.bin's layout
        f.write(f"{len(a)} {a.shape[1]}\n".encode())
        for w, v in zip(words, a):
            f.write(w.encode() + b" " + v.astype("<f4").tobytes() + b"\n")
    with open(path("c.fvecs"), "wb") as f:
        for v in a:
            f.write(struct.pack("<i", a.shape[1]) + v.astype("<f4").tobytes())
    for base in ["c.npy", "c.txt", "c.bin", "c.fvecs"]:
        raw = open(path(base), "rb").read()
        for ext, fn in compressors():
            name = f"{base}.{ext}"
            open(path(name), "wb").write(fn(raw))
            ok("pack", path(name), path(name + ".ldsi"))
            same_bits(vectors(path(name + ".ldsi")), a, name)
            if base in ("c.txt", "c.bin"):
                check(keys(path(name + ".ldsi")) == words, name + " keys")
    # Named by --format, whatever the name; concatenated gzip members are one input.
    raw = open(path("c.txt"), "rb").read()
    half = raw.index(b"\nw6 ") + 1
    open(path("cat.data"), "wb").write(gzip.compress(raw[:half]) + gzip.compress(raw[half:]))
    ok("pack", path("cat.data"), path("cat.ldsi"), "--format", "glove")
    same_bits(vectors(path("cat.ldsi")), a, "two gzip members")


def test_compressed_truncated_and_corrupt():
    raw = open(path("c.npy"), "rb").read() if os.path.exists(path("c.npy")) else None
    if raw is None:
        np.save(path("c.npy"), RNG.standard_normal((12, 4)).astype(np.float32))
        raw = open(path("c.npy"), "rb").read()
    for ext, fn in compressors():
        if ext == "zst" and not shutil.which("zstd"):
            continue
        blob = fn(raw)
        open(path("t." + ext), "wb").write(blob[: len(blob) // 2])
        refused(1, "ends inside its stream", "pack", path("t." + ext), path("t.ldsi"),
                "--format", "npy")
        bad = bytearray(blob)
        bad[len(bad) // 2] ^= 0xFF
        bad[len(bad) // 2 + 1] ^= 0x55
        open(path("b." + ext), "wb").write(bytes(bad))
        rc, out, err = run("pack", path("b." + ext), path("t.ldsi"), "--format", "npy")
        check(rc == 1 and "lodestar:" in err, f"{ext} corrupt: {rc} {err}")
        check(not os.path.exists(path("t.ldsi")), "a partial output was left")
    # gzip followed by bytes that are not gzip.
    open(path("tail.gz"), "wb").write(gzip.compress(raw) + b"junk")
    refused(1, "after its last member", "pack", path("tail.gz"), path("t.ldsi"), "--format", "npy")


def test_bombs_are_bounded():
    """Inputs that decode to far more than their size stop at a limit, in bounded memory."""
    if not shutil.which("zstd"):
        skip("the zstd program is not installed")
    # An .npy header that promises 2^28 rows of 64 float32, then zeros without end.
    hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (268435456, 64), }"
    hdr += b" " * (118 - len(hdr)) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr
    # Each format concatenates streams (frames, members): one compressed 8 MiB of zeros
    # (or newlines), repeated, makes a bomb in milliseconds.
    zst = lambda data: subprocess.run(["zstd", "-q", "-c", "-"], input=data,
                                      stdout=subprocess.PIPE, check=True).stdout
    chunk = zst(bytes(8 << 20))
    open(path("bomb.npy.zst"), "wb").write(zst(npy) + chunk * 64)  # 512 MiB of zeros
    check(os.path.getsize(path("bomb.npy.zst")) < 200_000, "bomb too large")
    refused(1, "decompression bomb", "pack", path("bomb.npy.zst"), path("bomb.ldsi"),
            limit_as=1 << 30)
    # gzip: the most deflate expands is ~1032 to 1, under the ratio; --max-decoded bounds it.
    chunk = gzip.compress(bytes(4 << 20), 9)
    open(path("bomb.npy.gz"), "wb").write(gzip.compress(npy) + chunk * 8)
    refused(1, "max_decoded_bytes = 16777216", "pack", path("bomb.npy.gz"), path("bomb.ldsi"),
            "--max-decoded", "16M", limit_as=1 << 30)
    chunk = lzma.compress(bytes(8 << 20), preset=0)
    open(path("bomb.npy.xz"), "wb").write(lzma.compress(npy) + chunk * 12)
    refused(1, "decompression bomb", "pack", path("bomb.npy.xz"), path("bomb.ldsi"),
            limit_as=1 << 30)
    check(not os.path.exists(path("bomb.ldsi")), "output left by a refused bomb")


def test_blank_lines_bounded():
    """Bytes that make no row are bounded (--max-idle, default 1 MiB): a small .gz of a GiB
    of blank lines is refused once 1 MiB of them has been read, naming the line where they
    begin, not after decoding them all (issue 24 item 5)."""
    blank = gzip.compress(b"\n" * (16 << 20), 9)
    bomb = gzip.compress(b"a 1 2\n") + blank * 64 + gzip.compress(b"b 3 4\n")  # 1 GiB
    check(len(bomb) < 2_000_000, f"bomb of {len(bomb)} bytes")
    open(path("blank.txt.gz"), "wb").write(bomb)
    refused(1, "line 2 (byte 6): blank lines run on for more than max_idle_bytes = 1048576 "
               "bytes", "pack", path("blank.txt.gz"), path("blank.ldsi"), limit_as=1 << 30)
    # Only blank lines after the last row: valid when short, bounded when long.
    open(path("tail.txt"), "wb").write(b"a 1 2\nb 3 4\n" + b"\r\n \n\t\n")
    ok("pack", path("tail.txt"), path("tail.ldsi"))
    open(path("tail.txt"), "wb").write(b"a 1 2\nb 3 4\n" + b"\n" * (2 << 20))
    refused(1, "line 3 (byte 12): blank lines run on", "pack", path("tail.txt"), path("t.ldsi"))
    ok("pack", path("tail.txt"), path("tail.ldsi"), "--max-idle", "3M")
    same_bits(vectors(path("tail.ldsi")), np.array([[1, 2], [3, 4]], np.float32), "--max-idle")
    refused(2, "--max-idle wants a size above 0", "pack", path("tail.txt"), path("t.ldsi"),
            "--max-idle", "0")
    # word2vec binary: line ends after the rows, likewise.
    rows = b"2 2\na " + struct.pack("<2f", 1, 2) + b"\nb " + struct.pack("<2f", 3, 4) + b"\n"
    open(path("tail.bin"), "wb").write(rows + b"\n\n")
    ok("pack", path("tail.bin"), path("tail.ldsi"))
    open(path("tail.bin"), "wb").write(rows + b"\n" * (2 << 20))
    refused(1, f"byte {len(rows) - 1}: line ends and spaces after the 2 rows run on for more than "
               "max_idle_bytes = 1048576", "pack", path("tail.bin"), path("t.ldsi"))


def test_glove_840b_keys_with_spaces():
    """glove.840B.300d.txt holds tokens with spaces; the last D fields are the vector."""
    a = RNG.standard_normal((5, 300)).astype(np.float32)
    ks = [",", ". . .", "at name@domain.com", "-  -", "the"]
    with open(path("g840.txt"), "w") as f:
        for k, v in zip(ks, a):
            f.write(k + " " + " ".join(repr(float(x)) for x in v) + "\n")
    ok("pack", path("g840.txt"), path("g840.ldsi"))
    check(keys(path("g840.ldsi")) == ks, keys(path("g840.ldsi")))
    same_bits(vectors(path("g840.ldsi")), a, "840B vectors")
    # One number too many is still refused: the field before the vector is a number.
    with open(path("g840bad.txt"), "w") as f:
        f.write("a 1 2 3\nb 0.5 1 2 3\n")
    refused(1, "line 2 (byte 8): expected 3 numbers, found 4", "pack", path("g840bad.txt"),
            path("t.ldsi"))
    # With --dim the first line's key may have spaces too.
    with open(path("g840first.txt"), "w") as f:
        f.write(". . . 1 2\nb 3 4\n")
    refused(1, 'line 1 (byte 2): element 0, ".", is not a decimal number', "pack",
            path("g840first.txt"),
            path("t.ldsi"))
    ok("pack", path("g840first.txt"), path("g840first.ldsi"), "--dim", "2")
    check(keys(path("g840first.ldsi")) == [". . .", "b"], keys(path("g840first.ldsi")))
    same_bits(vectors(path("g840first.ldsi")), np.array([[1, 2], [3, 4]]), "--dim")
    refused(1, "above max_dim", "pack", path("g840first.txt"), path("t.ldsi"), "--dim",
            "70000")
    # Round trip through GloVe text keeps the spaced keys.
    ok("export", path("g840.ldsi"), path("g840.out.txt"))
    ok("pack", path("g840.out.txt"), path("g840b.ldsi"))
    check(keys(path("g840b.ldsi")) == ks, "spaced keys after a round trip")


def test_fasttext_vec():
    a = RNG.standard_normal((4, 3)).astype(np.float32)
    with open(path("ft.vec"), "w") as f:
        f.write("4 3\n")
        for i, v in enumerate(a):
            f.write(f"k{i} " + " ".join(repr(float(x)) for x in v) + " \n")  # fastText's trailing space
    raw = open(path("ft.vec"), "rb").read()
    open(path("ft.vec.gz"), "wb").write(gzip.compress(raw))
    out = ok("pack", path("ft.vec.gz"), path("ft.ldsi"))
    check("(word2vec," in out, out)
    out = ok("pack", path("ft.vec"), path("ft2.ldsi"), "--format", "fasttext")
    check("(fasttext," in out, out)
    same_bits(vectors(path("ft2.ldsi")), a, "fasttext")


def test_on_duplicate():
    with open(path("dup.txt"), "w") as f:
        f.write("a 1 2\nb 3 4\na 5 6\nc 7 8\n")
    refused(1, "line 3 (byte 12): duplicate key \"a\", first seen on line 1", "pack",
            path("dup.txt"), path("d.ldsi"))
    out = ok("pack", path("dup.txt"), path("d.ldsi"), "--on-duplicate", "first")
    check("packed 3 rows" in out and "skipped 1 rows" in out, out)
    check(keys(path("d.ldsi")) == ["a", "b", "c"], keys(path("d.ldsi")))
    same_bits(vectors(path("d.ldsi")), np.array([[1, 2], [3, 4], [7, 8]]), "first kept")
    # A later error still names the input's own line, skipped rows counted.
    with open(path("dup2.txt"), "w") as f:
        f.write("a 1 2\na 5 6\nc 7\n")
    refused(1, "line 3", "pack", path("dup2.txt"), path("d.ldsi"), "--on-duplicate", "first")
    refused(2, "--on-duplicate is error, first or last", "pack", path("dup.txt"),
            path("d.ldsi"), "--on-duplicate", "keep")


def test_export_round_trip_every_format():
    """pack -> export FMT -> pack -> export npy gives the same bits and keys, every dtype."""
    a = f64_fixture()[:, :4]
    ks = [f"k{i}" for i in range(len(a))]
    ks[3] = "naïve"
    ks[4] = "two words"
    np.save(path("rt.npy"), a)
    open(path("rt.keys"), "w").write("\n".join(ks) + "\n")
    for dtype in ["f32", "f16", "bf16", "i8"]:
        extra = ["--dtype", dtype] + (["--i8-scale", "auto"] if dtype == "i8" else [])
        base = path(f"rt-{dtype}.ldsi")
        ok("pack", path("rt.npy"), base, "--keys", path("rt.keys"), *extra)
        stored = vectors(base)
        for fmt, ext in [("npy", "npy"), ("fvecs", "fvecs"), ("glove", "txt"),
                         ("word2vec", "vec"), ("word2vec-bin", "bin")]:
            if fmt == "word2vec-bin":
                continue  # "two words" cannot be a word2vec binary key; below
            out = path(f"rt-{dtype}.{ext}")
            more = ["--keys-out", out + ".keys"] if fmt in ("npy", "fvecs") else []
            ok("export", base, out, "--format", fmt, *more)
            back = path(f"rt-{dtype}-{fmt}.ldsi")
            kk = ["--keys", out + ".keys"] if more else []
            scale = []
            if dtype == "i8":
                scale = ["--i8-scale", "auto"]
            ok("pack", out, back, "--dtype", dtype, *kk, *scale)
            same_bits(vectors(back), stored, f"{dtype} via {fmt}")
            check(keys(back) == ks, f"{dtype} via {fmt}: keys {keys(back)}")
    refused(1, "holds a space, which ends a word2vec binary key", "export",
            path("rt-f32.ldsi"), path("rt.bin"))
    # word2vec binary with keys it can hold.
    open(path("rt2.keys"), "w").write("\n".join(f"k{i}" for i in range(len(a))) + "\n")
    ok("pack", path("rt.npy"), path("rt2.ldsi"), "--keys", path("rt2.keys"))
    ok("export", path("rt2.ldsi"), path("rt2.bin"))
    ok("pack", path("rt2.bin"), path("rt2b.ldsi"))
    same_bits(vectors(path("rt2b.ldsi")), a.astype(np.float32), "via word2vec-bin")
    # numpy reads the exported .npy (and its f16 form) as what was stored.
    ok("export", path("rt-f16.ldsi"), path("rt16.npy"), "--dtype", "f16")
    h = np.load(path("rt16.npy"))
    check(h.dtype == np.float16, h.dtype)
    same_bits(h.astype(np.float32), a.astype(np.float16).astype(np.float32), "export f16")


def test_compressed_standard_input():
    """pack - --format FMT reads a pipe, compressed or not; .npy (C order) included."""
    a = RNG.standard_normal((9, 3)).astype(np.float32)
    np.save(path("pipe.npy"), a)
    raw = open(path("pipe.npy"), "rb").read()
    for name, data in [("plain", raw), ("gzip", gzip.compress(raw)), ("xz", lzma.compress(raw))]:
        p = subprocess.run([LODESTAR, "pack", "-", path("pipe.ldsi"), "--format", "npy"],
                           input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        check(p.returncode == 0, f"{name}: {p.stderr.decode()}")
        same_bits(vectors(path("pipe.ldsi")), a, "stdin " + name)
    # A pipe shorter than its header promises, and one longer.
    for cut, want in [(raw[:-4], "ends inside the row"), (raw + b"x", "data after the 9 rows")]:
        p = subprocess.run([LODESTAR, "pack", "-", path("pipe.ldsi"), "--format", "npy"],
                           input=gzip.compress(cut), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        check(p.returncode == 1 and want in p.stderr.decode(), p.stderr.decode())


def test_export_refusals():
    np.save(path("nk.npy"), np.ones((2, 2), np.float32))
    ok("pack", path("nk.npy"), path("nk.ldsi"))
    refused(1, "has no keys", "export", path("nk.ldsi"), path("nk.txt"))
    refused(2, "cannot tell the format", "export", path("nk.ldsi"), path("nk.dat"))
    with open(path("num.txt"), "w") as f:
        f.write("a 1 2\n")
    ok("pack", path("num.txt"), path("num.ldsi"))
    before = set(os.listdir(WORK))
    refused(1, "has no keys for --keys-out", "export", path("nk.ldsi"), path("nk2.npy"),
            "--keys-out", path("nk2.keys"))
    check(set(os.listdir(WORK)) == before, "a failed export left files behind")


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
