#!/usr/bin/env python3
"""Tests of the lodestar program: exit codes, help, and every subcommand on a tiny fixture.

usage: test_cli.py LODESTAR FIXTURE_DIR [EXAMPLE]

LODESTAR is the built program, FIXTURE_DIR is tests/fixtures/cli, EXAMPLE the
README example program (tests/example_readme.c), optional. Standard library
only. Prints one line per test and a closing "N passed, N failed, N skipped"
line; exits 0 only if no test failed.

The fixture tiny.glove.txt holds 7 words of 4 dimensions chosen so that every
cosine is exact: king=(1,0,0,0), queen=(0.8,0.6,0,0), prince=(0.6,0,0.8,0),
royal=(0.5,0.5,0.5,0.5), apple=(0,0,0,1), pear=(0,0,0.6,0.8), banana=(-1,0,0,0).
"""

import ctypes
import ctypes.util
import json
import os
import re
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests, skip  # noqa: E402

LODESTAR = os.path.abspath(sys.argv[1])
FIXTURES = os.path.abspath(sys.argv[2])
EXAMPLE = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
TINY = os.path.join(FIXTURES, "tiny.glove.txt")
COMMANDS = ["pack", "info", "get", "similar", "verify", "split", "diff"]

WORK = tempfile.mkdtemp(prefix="lodestar-test-cli-")
INDEX = os.path.join(WORK, "tiny.ldsi")


def run(*args, stdin=None, input_bytes=None):
    """Runs lodestar with args; returns (exit code, stdout, stderr) as text."""
    p = subprocess.run(
        [LODESTAR, *args],
        stdin=stdin,
        input=input_bytes,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    return p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace")


def expect(rc, out, err, code):
    check(rc == code, f"exit code {rc}, expected {code}\nstdout: {out}\nstderr: {err}")


def pack(src, dst, *extra):
    rc, out, err = run("pack", src, dst, "--format", "glove", *extra)
    expect(rc, out, err, 0)
    return out


# ---- usage and exit codes -------------------------------------------------


def test_no_arguments_is_usage_error():
    rc, out, err = run()
    expect(rc, out, err, 2)
    check("usage: lodestar" in err and out == "", "usage on stderr, nothing on stdout")


def test_unknown_command_exits_2_with_usage():
    rc, out, err = run("frobnicate", "x")
    expect(rc, out, err, 2)
    check(out == "", "nothing on stdout")
    check("lodestar: unknown command 'frobnicate'" in err, err)
    check("usage: lodestar" in err, "usage on stderr")


def test_help():
    for flag in ("--help", "-h"):
        rc, out, err = run(flag)
        expect(rc, out, err, 0)
        check(out.startswith("usage: lodestar"), out)
        for cmd in COMMANDS:
            check(f"\n  {cmd} " in out, f"{cmd} listed in --help")


def test_version():
    rc, out, err = run("--version")
    expect(rc, out, err, 0)
    check(out.startswith("lodestar 0.1.0"), out)


def test_every_command_has_help():
    for cmd in COMMANDS:
        rc, out, err = run(cmd, "--help")
        expect(rc, out, err, 0)
        check(out.startswith(f"usage: lodestar {cmd} "), out)
        check(err == "", err)


def test_usage_errors_exit_2():
    cases = [
        ("info",),
        ("info", "a", "b"),
        ("info", "--bogus", "x"),
        ("pack", TINY),
        ("pack", TINY, INDEX, "--dtype", "f64"),
        ("pack", TINY, INDEX, "--metric", "hamming"),
        ("pack", TINY, INDEX, "--format", "csv"),
        ("get", "x"),
        ("similar", "x", "king", "-k", "0"),
        ("similar", "x", "king", "-k", "ten"),
        ("get", "--row", "-1", "x"),
        ("verify",),
    ]
    for args in cases:
        rc, out, err = run(*args)
        check(rc == 2, f"{args}: exit {rc}, expected 2 (stderr: {err})")
        check(f"lodestar {args[0]}" in err, f"{args}: message names the command: {err}")


# ---- pack, info, get, similar, verify on the fixture ------------------------


def test_pack():
    out = pack(TINY, INDEX, "--model", "tiny-test", "--source", "tests/fixtures/cli")
    check(out.startswith(f"packed 7 rows x 4 dims (glove, f32, cosine) from {TINY} into {INDEX}"), out)
    check(os.path.getsize(INDEX) > 64, "index written")


def test_info_text():
    rc, out, err = run("info", INDEX)
    expect(rc, out, err, 0)
    lines = out.splitlines()
    for line in (
        f"file:       {INDEX}",
        "rows:       7",
        "dim:        4",
        "dtype:      f32",
        "metric:     cosine",
        "normalized: no",
        "keys:       yes (unique)",
        "ids:        no",
        "  model = tiny-test",
        "  source = tests/fixtures/cli",
        "load path:  pooled (adopt)",
    ):
        check(line in lines, f"line {line!r} in\n{out}")
    payload = os.path.getsize(INDEX) - 64
    check(f"bytes:      {payload} payload + 64 header" in lines, out)
    check(any(l.startswith("checksum:   xxh3-64 ") and l.endswith("(verified)") for l in lines), out)
    check(any(l.startswith("load time:  ") and l.endswith(" ms") for l in lines), out)


def info_json(*args, **kw):
    rc, out, err = run("info", "--json", *args, **kw)
    expect(rc, out, err, 0)
    return json.loads(out)


def test_info_json():
    j = info_json(INDEX)
    check(j["file"] == INDEX, j)
    check((j["rows"], j["dim"], j["dtype"], j["metric"]) == (7, 4, "f32", "cosine"), j)
    check(j["has_keys"] is True and j["has_ids"] is False and j["normalized"] is False, j)
    check(j["metadata"]["model"] == "tiny-test", j)
    check(j["metadata"]["source"] == "tests/fixtures/cli", j)
    check(j["payload_bytes"] == os.path.getsize(INDEX) - 64 and j["header_bytes"] == 64, j)
    check(j["checksum"]["algorithm"] == "xxh3-64" and j["checksum"]["verified"] is True, j)
    check(len(j["checksum"]["value"]) == 16, j)
    check(j["load"]["path"] == "pooled" and j["load"]["elapsed_ns"] > 0, j)
    m = info_json("--mmap", INDEX)
    check(m["load"]["path"] == "mapped" and m["checksum"] == j["checksum"], m)


def test_info_from_stdin():
    with open(INDEX, "rb") as f:
        j = info_json("-", stdin=f)
    check(j["file"] is None and j["rows"] == 7 and j["checksum"]["verified"] is True, j)
    with open(INDEX, "rb") as f:
        data = f.read()
    # Through a pipe: the stream has no size, the header's declared length is used.
    p = subprocess.run(
        f"cat '{INDEX}' | '{LODESTAR}' info --json -",
        shell=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    check(p.returncode == 0, p.stderr)
    j = json.loads(p.stdout)
    check(j["rows"] == 7 and j["stream_bytes"] == len(data), j)


def test_get():
    rc, out, err = run("get", INDEX, "queen")
    expect(rc, out, err, 0)
    check(out == "key:    queen\nrow:    1\ndim:    4\nvector: 0.8 0.6 0 0\n", out)
    rc, out, err = run("get", "--row", "6", INDEX)
    expect(rc, out, err, 0)
    check(out == "key:    banana\nrow:    6\ndim:    4\nvector: -1 0 0 0\n", out)
    rc, out, err = run("get", "--json", INDEX, "pear")
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j == {"key": "pear", "row": 5, "id": None, "dim": 4, "vector": [0, 0, 0.6, 0.8]}, j)


def test_get_missing_key_exits_1():
    rc, out, err = run("get", INDEX, "durian")
    expect(rc, out, err, 1)
    check(err == f"lodestar: {INDEX}: key 'durian' not found\n", err)
    rc, out, err = run("get", "--row", "7", INDEX)
    expect(rc, out, err, 1)
    check("row 7 is out of range (the index has 7 rows)" in err, err)


def test_similar():
    rc, out, err = run("similar", INDEX, "king", "-k", "3")
    expect(rc, out, err, 0)
    check(
        out
        == "rank  cosine          row  key\n"
        "   1  0.8               1  queen\n"
        "   2  0.6               2  prince\n"
        "   3  0.5               3  royal\n",
        out,
    )
    # Default k is 10: all six others, ties (apple, pear at 0) in row order, never king itself.
    rc, out, err = run("similar", INDEX, "king")
    expect(rc, out, err, 0)
    keys = [line.split()[3] for line in out.splitlines()[1:]]
    check(keys == ["queen", "prince", "royal", "apple", "pear", "banana"], keys)
    check(out.splitlines()[-1].split()[1] == "-1", out)
    rc, out, err = run("similar", "--json", INDEX, "apple", "-k", "2")
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j["key"] == "apple" and j["row"] == 4 and j["metric"] == "cosine", j)
    check(
        j["neighbours"]
        == [
            {"key": "pear", "row": 5, "score": 0.8},
            {"key": "royal", "row": 3, "score": 0.5},
        ],
        j,
    )


def test_similar_l2_and_other_dtypes():
    l2 = os.path.join(WORK, "tiny-l2.ldsi")
    pack(TINY, l2, "--metric", "l2")
    rc, out, err = run("similar", l2, "king", "-k", "2")
    expect(rc, out, err, 0)
    # Squared distances: queen 0.2^2 + 0.6^2 = 0.4 (0.40000004 in float32 arithmetic: the
    # table shows the float exactly), prince 0.4^2 + 0.8^2 = 0.8.
    check(
        out
        == "rank  distance        row  key\n"
        "   1  0.40000004        1  queen\n"
        "   2  0.8               2  prince\n",
        out,
    )
    for dtype in ("f16", "bf16", "i8"):
        path = os.path.join(WORK, f"tiny-{dtype}.ldsi")
        out = pack(TINY, path, "--dtype", dtype)
        check(f"(glove, {dtype}, cosine)" in out, out)
        j = info_json(path)
        check(j["dtype"] == dtype and j["rows"] == 7, j)
        rc, out, err = run("similar", "--json", path, "king", "-k", "3")
        expect(rc, out, err, 0)
        keys = [h["key"] for h in json.loads(out)["neighbours"]]
        check(keys == ["queen", "prince", "royal"], (dtype, keys))


def test_similar_vector_and_vector_file():
    # A raw vector: nothing is left out (no row of its own), k hits exactly.
    rc, out, err = run("similar", "--vector", "1,0,0,0", INDEX, "-k", "3")
    expect(rc, out, err, 0)
    keys = [line.split()[3] for line in out.splitlines()[1:]]
    check(keys == ["king", "queen", "prince"], out)
    check(out.splitlines()[1].split()[1] == "1", out)
    vf = os.path.join(WORK, "query.txt")
    with open(vf, "w") as f:
        f.write("0 0\t0.6, 0.8\n")  # commas and white space, mixed
    rc, out, err = run("similar", "--json", "--vector-file", vf, INDEX, "-k", "2")
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j["key"] is None and j["row"] is None and j["metric"] == "cosine", j)
    check([h["key"] for h in j["neighbours"]] == ["pear", "apple"], j)
    check(j["neighbours"][0]["score"] == 1, j)
    # Bad vectors name the problem; two sources at once is a usage error.
    for v, msg in [("1,0,0", "3 numbers, the index has dim 4"),
                   ("1,0,0,x", "element 3 'x' is not a finite decimal number"),
                   ("1,0,0,nan", "element 3 'nan'"), ("1,0,0,0x1p3", "element 3 '0x1p3'"),
                   ("1,0,0,1e99", "element 3 '1e99' is out of float32's range"),
                   ("", "0 numbers")]:
        rc, out, err = run("similar", "--vector", v, INDEX)
        expect(rc, out, err, 1)
        check(msg in err and out == "", (v, err))
    rc, out, err = run("similar", "--vector", "0,0,0,0", INDEX)
    expect(rc, out, err, 1)
    check("zero query" in err, err)
    rc, out, err = run("similar", "--vector", "1,0,0,0", "--row", "1", INDEX)
    expect(rc, out, err, 2)
    rc, out, err = run("get", "--vector", "1,0,0,0", INDEX)
    expect(rc, out, err, 2)
    rc, out, err = run("similar", "--vector-file", os.path.join(WORK, "absent"), INDEX)
    expect(rc, out, err, 1)
    check("cannot read" in err, err)


def test_similar_queries_batch():
    qf = os.path.join(WORK, "queries.txt")
    with open(qf, "w") as f:
        f.write("king\n0.8,0.6,0,0\n\r\npear\r\n0 0 0 1\n")
    for threads in ("1", "2", "0"):
        rc, out, err = run("similar", "--queries", qf, INDEX, "-k", "2", "--threads", threads)
        expect(rc, out, err, 0)
        lines = [json.loads(line) for line in out.splitlines()]
        check([j["query"] for j in lines] == [1, 2, 4, 5], out)
        # Each line is what the single query prints (--json), plus "query".
        rc1, one, err1 = run("similar", "--json", INDEX, "king", "-k", "2")
        want = json.loads(one)
        want["query"] = 1
        check(lines[0] == want, (lines[0], want))
        check(lines[1]["key"] is None and lines[1]["neighbours"][0]["key"] == "queen", lines[1])
        check(lines[2]["key"] == "pear" and lines[2]["neighbours"][0]["key"] == "apple", lines[2])
        check(lines[3]["neighbours"][0] == {"key": "apple", "row": 4, "score": 1}, lines[3])
    # From standard input; a bad line stops the run after the lines before it.
    rc, out, err = run("similar", "--queries", "-", INDEX, "-k", "1",
                       input_bytes=b"queen\ndurian\nking\n")
    expect(rc, out, err, 1)
    check(len(out.splitlines()) == 1 and json.loads(out)["key"] == "queen", out)
    check("line 2: not a key of the index ('durian'), nor a vector" in err, err)
    rc, out, err = run("similar", "--queries", qf, INDEX, "--threads", "x")
    expect(rc, out, err, 2)


def test_verify():
    rc, out, err = run("verify", INDEX)
    expect(rc, out, err, 0)
    check(out.startswith(f"{INDEX}: ok: 7 rows x 4 f32, checksum "), out)
    # Format 1.1 (docs/format.md 2.5): one 4 KiB chunk (the writer's default, ADR 0048)
    # holds this small index.
    check(out.endswith(" verified (1 chunk of 4096 bytes)\n"), out)
    rc, out, err = run("info", INDEX)
    expect(rc, out, err, 0)
    check("chunks:     1 of 4096 bytes (format 1.1, each verified)\n" in out, out)
    rc, out, err = run("info", "--json", INDEX)
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j["format"] == "1.1" and j["chunks"] == {"bytes": 4096, "count": 1}, j)


def corrupt_copy(name, offset, xor=0x01):
    path = os.path.join(WORK, name)
    shutil.copyfile(INDEX, path)
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ xor]))
    return path


def test_verify_corrupted_vector_byte():
    # A flipped bit in the first row's vector: only the checksum can tell.
    bad = corrupt_copy("bad-vector.ldsi", 64 + 2)
    rc, out, err = run("verify", bad)
    expect(rc, out, err, 1)
    check(err.startswith(f"lodestar: {bad}: "), err)
    # Format 1.1: the chunk is named, with its payload bytes, at its first byte (file offset 64).
    with open(bad, "rb") as f:
        d = covered_length(f.read())
    check(err.startswith(f"lodestar: {bad}: checksum of chunk 0 (payload bytes 0..{d - 1}): "
                         "stored "), f"names the chunk: {err}")
    check(err.endswith("(at byte 64)\n"), f"names the offset: {err}")
    check("computed" in err and "precomputed" not in err and "caller" not in err, err)
    # Then every chunk is checked and each bad one listed (here the only one).
    lines = out.splitlines()
    check(len(lines) == 2 and lines[0].startswith(f"{bad}: checksum of chunk 0 (payload bytes 0..")
          and lines[1] == f"{bad}: 1 of 1 chunks bad", out)


def test_verify_corrupted_magic():
    bad = corrupt_copy("bad-magic.ldsi", 1)
    rc, out, err = run("verify", bad)
    expect(rc, out, err, 1)
    check(err.startswith(f"lodestar: {bad}: "), err)
    check(err.startswith(f"lodestar: {bad}: header.magic: "), f"names the field: {err}")
    check(err.endswith("(at byte 0)\n"), f"names the offset: {err}")
    rc, out, err = run("info", bad)
    expect(rc, out, err, 1)


def test_verify_truncated():
    short = os.path.join(WORK, "short.ldsi")
    with open(INDEX, "rb") as f:
        data = f.read()
    with open(short, "wb") as f:
        f.write(data[:-10])
    rc, out, err = run("verify", short)
    expect(rc, out, err, 1)
    check(err.startswith(f"lodestar: {short}: "), err)


def test_missing_file_exits_1():
    missing = os.path.join(WORK, "no-such-file.ldsi")
    for cmd in (("info", missing), ("verify", missing), ("get", missing, "king")):
        rc, out, err = run(*cmd)
        expect(rc, out, err, 1)
        check(err.startswith(f"lodestar: {missing}: "), err)


def test_pack_refuses_malformed_input():
    bad = os.path.join(FIXTURES, "bad-width.glove.txt")
    out_path = os.path.join(WORK, "bad.ldsi")
    rc, out, err = run("pack", bad, out_path, "--format", "glove")
    expect(rc, out, err, 1)
    check(err.startswith(f"lodestar: {bad}: "), err)
    check("line 2" in err, f"names the line: {err}")
    check(not os.path.exists(out_path), "no output left behind")


# ---- limits, hostile content, messages -------------------------------------

# A valid header declaring an unknown payload length (tests/bad/length-unknown.OK.ldsi's).
UNKNOWN_HEADER = os.path.join(FIXTURES, "length-unknown.header")
SANITIZED = bool(os.environ.get("LDS_SANITIZE"))


def run_bounded(args, input_bytes, max_rss_mib=256):
    """Runs lodestar under an address-space limit (not under sanitizers, which reserve
    terabytes); returns (exit code, stdout, stderr, seconds)."""

    def limit():
        if not SANITIZED:
            cap = max_rss_mib << 20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    t0 = time.monotonic()
    p = subprocess.run([LODESTAR, *args], input=input_bytes, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60, preexec_fn=limit)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


def test_max_payload_stops_an_endless_stream():
    with open(UNKNOWN_HEADER, "rb") as f:
        header = f.read()
    check(len(header) == 64, "the fixture is one header")
    # 32 MiB after a header that declares no length: the growable path stops at 1 MiB.
    stream = header + bytes(32 << 20)
    for cmd in ("info", "verify", "get", "similar"):
        args = [cmd, "--max-payload", "1M", "-"] + (["--row", "0"] if cmd in ("get", "similar") else [])
        rc, out, err, secs = run_bounded(args, stream)
        expect(rc, out, err, 1)
        check("max_payload_bytes (1048576 bytes)" in err, f"{cmd}: names the limit: {err}")
        check("--max-payload" in err, f"{cmd}: names the flag: {err}")
        check(secs < 10, f"{cmd}: took {secs:.1f} s")
    # A declared length above the limit is refused from the header.
    rc, out, err = run("verify", "--max-payload", "100", INDEX)
    expect(rc, out, err, 1)
    check("exceeds max_payload_bytes (100)" in err, err)
    # The default (well above 32 MiB) lets the stream through to the checksum.
    rc, out, err, secs = run_bounded(["info", "-"], stream)
    expect(rc, out, err, 1)
    check("checksum" in err and "max_payload_bytes" not in err, err)


def test_max_payload_sizes():
    for size in ("1K", "64m", "2G", "1T", "4096", "64MiB", "1GiB"):
        rc, out, err = run("info", "--json", "--max-payload", size, INDEX)
        expect(rc, out, err, 0)
    for size in ("0", "0K", "1X", "K", "-1M", "1MB", "1Mi", "1MiBs", "99999999999T", ""):
        rc, out, err = run("info", "--max-payload", size, INDEX)
        check(rc == 2 and "--max-payload wants a size" in err, f"{size!r}: {rc} {err}")
    pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    default = min(64 << 30, pages * page // 2)
    for cmd in ("info", "verify", "get", "similar"):
        rc, out, err = run(cmd, "--help")
        expect(rc, out, err, 0)
        check("--max-payload SIZE" in out, f"{cmd} --help: {out}")
    rc, out, err = run("info", "--help")
    gib = default / (1 << 30)
    check(f"(here {gib:.1f} GiB)" in out or f"(here {gib:.0f} GiB)" in out, f"{gib}: {out}")


def xxh3_64(data):
    lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(data, len(data))


def covered_length(b):
    """Payload bytes before the chunk table (format 1.1, docs/format.md 2.5), or all of them (1.0)."""
    if struct.unpack_from("<I", b, 12)[0] & 1:
        return struct.unpack_from("<Q", b, 24)[0]
    return len(b) - 64


def reseal(b):
    """Rewrites the checksum, and for format 1.1 the chunk table, its hash and the header check."""
    d = covered_length(b)
    b[64 + d - 8:64 + d] = struct.pack("<Q", xxh3_64(bytes(b[64:64 + d - 8])))
    if struct.unpack_from("<I", b, 12)[0] & 1:
        n = struct.unpack_from("<Q", b, 32)[0]
        cb = struct.unpack_from("<I", b, 48)[0]
        table = b"".join(struct.pack("<Q", xxh3_64(bytes(b[64 + k * cb:64 + min((k + 1) * cb, d)])))
                         for k in range(n))
        b[64 + d:] = table
        b[40:48] = struct.pack("<Q", xxh3_64(table))
        b[56:64] = struct.pack("<Q", xxh3_64(bytes(b[:56])))


def rechunk(b, cb):
    """A format 1.1 file of the same covered bytes with chunks of `cb` bytes (cb 0: format
    1.0), its table, table hash and header check rewritten."""
    d = covered_length(b)
    out = bytearray(b[:64 + d])
    if cb == 0:
        out[12:16] = struct.pack("<I", struct.unpack_from("<I", out, 12)[0] & ~1)
        out[16:24] = struct.pack("<Q", d)
        out[24:56] = bytes(32)
        out[56:64] = struct.pack("<Q", xxh3_64(bytes(out[:56])))
        return out
    n = (d + cb - 1) // cb
    out[12:16] = struct.pack("<I", struct.unpack_from("<I", out, 12)[0] | 1)
    out[16:24] = struct.pack("<Q", d + 8 * n)
    out[24:32] = struct.pack("<Q", d)
    out[32:40] = struct.pack("<Q", n)
    out[48:52] = struct.pack("<I", cb)
    out += bytes(8 * n)
    reseal(out)
    return out


def test_secrets_in_arguments_never_printed():
    """A URL's password and a signed query's token, in an argument of any command, even one
    that takes files only (pack, diff) or a mistyped URL taken for a path (http:/...), are
    never printed (found by a tester: pack and diff echoed them)."""
    for url in ("http://user:hunter2SECRET@127.0.0.1:9/x.ldsi?token=secret2TOK&n=1",
                "http:/user:hunter2SECRET@127.0.0.1:9/x.ldsi?X-Amz-Signature=secret2TOK"):
        for args in (("pack", url, os.path.join(WORK, "never.ldsi")), ("diff", url, INDEX),
                     ("diff", INDEX, url), ("info", url), ("verify", url)):
            rc, out, err = run(*args)
            check(rc != 0, f"{args}: exit {rc}")
            check("hunter2SECRET" not in out + err and "secret2TOK" not in out + err,
                  f"{args} printed a secret: {out}{err}")
            check("127.0.0.1" in err, f"{args}: the message still names the host: {err}")


def test_s3_bucket_with_credentials_is_one_clear_sentence():
    """`info s3://u:pw@bad_bucket!/k` showed "s3://bad_bucket!/k: the bucket name has a
    character S3 does not allow", and a good bucket name behind user:password the same
    (found by a tester): one line that names the bucket field, credentials never shown."""
    if "built without libcurl" in run("info", "s3://b/k")[2]:
        skip("built without libcurl")
    for url, shown in (("s3://u:pw@bad_bucket!/k", "s3://bad_bucket!/k"),
                       ("s3://u:pw@goodbucket/k", "s3://goodbucket/k")):
        rc, out, err = run("info", url)
        expect(rc, out, err, 1)
        check(err == f"lodestar: {shown}: the bucket field of an s3:// URL holds the bucket "
              "name only, no user, password or port (credentials come from AWS_ACCESS_KEY_ID "
              "and AWS_SECRET_ACCESS_KEY, an endpoint from AWS_ENDPOINT_URL)\n", err)
        check("pw" not in err, err)
    rc, out, err = run("info", "s3://bad_bucket!/k")
    expect(rc, out, err, 1)
    check(err == "lodestar: s3://bad_bucket!/k: the bucket name \"bad_bucket!\" has '!', which "
          "S3 does not allow (letters, digits, '.', '-' and '_' only)\n", err)


def test_url_refused_before_a_request_is_named_once():
    """A URL the loader refuses before any request ("s3://b" without a key) was named twice,
    "lodestar: s3://b: s3://b: an s3:// URL names..." (found by a tester): once, redacted."""
    for url, shown in (("s3://b", "s3://b"), ("s3://AKID:pw0SECRET@b", "s3://b")):
        for args in (("info", url), ("info", "--json", url), ("verify", url)):
            rc, out, err = run(*args)
            check(rc == 1, f"{args}: exit {rc}: {err}")
            check(err.startswith(f"lodestar: {shown}: ") and err.count(shown) == 1
                  and "pw0SECRET" not in out + err, f"{args}: {err}")


def test_redacted_url_in_parentheses_keeps_the_closing_paren():
    """A URL in parentheses in a message ("(http://h/x?sig=SECRET)") printed
    "?sig=REDACTED" without the ')' (found by a tester): the token opened by '(' ends at
    the ')' closing it; a ')' followed by more of the word stays in the redacted value."""
    url = "http://127.0.0.1:9/x.ldsi?sig=SECRETsig"
    rc, out, err = run("info", f"({url})")
    check(rc != 0, f"exit {rc}")
    check("SECRETsig" not in out + err, err)
    # (the file is named once, before the message: test_a_file_is_named_once_in_a_message)
    check(err.startswith("lodestar: (http://127.0.0.1:9/x.ldsi?sig=REDACTED): cannot open: "),
          err)
    rc, out, err = run("info", f"({url}).")
    check(err.startswith("lodestar: (http://127.0.0.1:9/x.ldsi?sig=REDACTED).: cannot open: "),
          err)
    rc, out, err = run("info", f"({url})tail")
    check("SECRETsig" not in err and ")tail" not in err and "sig=REDACTED: " in err, err)


def test_diff_against_a_compressed_new_says_unknown():
    """A zstd NEW has no header before decompression: diff says a reload reads all of it,
    and --json gives payload_bytes and bytes_read null, not 0 (found by a tester)."""
    if shutil.which("zstd") is None:
        return
    z = os.path.join(WORK, "tiny-diff.ldsi.zst")
    subprocess.run(["zstd", "-qf", INDEX, "-o", z], check=True)
    rc, out, err = run("diff", INDEX, z)
    expect(rc, out, err, 0)
    check("reads and decompresses all of NEW" in out and " 0 payload bytes" not in out, out)
    rc, out, err = run("diff", INDEX, z, "--json")
    expect(rc, out, err, 0)
    doc = json.loads(out)
    check(doc["payload_bytes"] is None and doc["bytes_read"] is None and doc["delta"] is False
          and doc["chunks_read"] is None,
          out)


def test_diff_reads_a_compressed_old_through_zstd():
    """A zstd OLD gives the same plan as OLD itself (a live index serving it holds it
    decompressed and reloads by delta from it; diff said no delta, found by a tester); a
    cut or damaged one is a failure naming it, not a plan."""
    if shutil.which("zstd") is None:
        return
    z = os.path.join(WORK, "tiny-old.ldsi.zst")
    subprocess.run(["zstd", "-qf", INDEX, "-o", z], check=True)
    rc, plain, err = run("diff", "--json", INDEX, INDEX)
    expect(rc, plain, err, 0)
    rc, out, err = run("diff", "--json", z, INDEX)
    expect(rc, out, err, 0)
    check(json.loads(out) == json.loads(plain) and json.loads(out)["delta"] is True, out)
    # Two frames (split inside the header, or after the table), or bytes after the frame:
    # the loader refuses them (it reads one frame holding the header and the payload), so
    # diff plans no delta from them (found by a tester: diff planned one).
    with open(INDEX, "rb") as f:
        raw = f.read()
    with open(z, "rb") as f:
        data = f.read()
    for name, parts, tail in (("tiny-two.ldsi.zst", (raw[:40], raw[40:]), b""),
                              ("tiny-two2.ldsi.zst", (raw, raw[:64]), b""),
                              ("tiny-tail.ldsi.zst", (raw,), b"garbage")):
        path = os.path.join(WORK, name)
        frames = [subprocess.run(["zstd", "-qc"], input=part, stdout=subprocess.PIPE,
                                 check=True).stdout for part in parts]
        with open(path, "wb") as f:
            f.write(b"".join(frames) + tail)
        # what the loader says, and no hint to pack it: it is a compressed index already
        # (found by a tester: the hint proposed a pack that refuses it)
        rc, out, err = run("info", path)
        check(rc != 0 and "lodestar pack" not in err and "not a lodestar index" not in err,
              out + err)
        rc, out, err = run("diff", "--json", path, INDEX)
        expect(rc, out, err, 1)
        if len(parts) == 2 and len(parts[0]) == 40:
            check(f"{path}: its zstd frame ends after 40 decompressed bytes, short of "
                  "64 (a compressed index is one frame" in err, err)  # its header's 64
        else:
            check(f"{path}: bytes follow its zstd frame at compressed byte {len(frames[0])} "
                  "(the loader refuses them)" in err, err)
    cut = os.path.join(WORK, "tiny-cut.ldsi.zst")
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    rc, out, err = run("diff", cut, INDEX)
    expect(rc, out, err, 1)
    check(err.startswith(f"lodestar: {cut}: its zstd stream ends inside a frame after ")
          and ("before its header" in err or "before its chunk table" in err), err)
    bad = os.path.join(WORK, "tiny-bad.ldsi.zst")
    with open(bad, "wb") as f:
        f.write(data[:4] + b"\xff" * (len(data) - 4))
    rc, out, err = run("diff", bad, INDEX)
    expect(rc, out, err, 1)
    check(err.startswith(f"lodestar: {bad}: zstd: "), err)


def test_a_compressed_index_after_skippable_frames():
    """A zstd file may begin with skippable frames (RFC 8878 section 3.1.2: magic
    0x184D2A50..0x184D2A5F, a 4-byte little-endian size, content a decoder skips); such a
    compressed index was called "not a lodestar file" (found by a tester). info, verify,
    similar and diff read it; a skippable frame larger than the first KiB the CLI sniffs, one
    that runs past the file's end, and an uncompressed index after one are told apart."""
    if shutil.which("zstd") is None:
        return
    pack(TINY, INDEX)
    z = subprocess.run(["zstd", "-qc", INDEX], stdout=subprocess.PIPE, check=True).stdout

    def skippable(magic_low, content):
        return struct.pack("<II", 0x184D2A50 + magic_low, len(content)) + content

    path = os.path.join(WORK, "tiny-skip.ldsi.zst")
    with open(path, "wb") as f:
        f.write(skippable(0, b"meta") + skippable(15, b"\0" * 3000) + z)
    rc, out, err = run("info", path)
    expect(rc, out, err, 0)
    check("rows:       7" in out, out)
    rc, out, err = run("verify", path)
    expect(rc, out, err, 0)
    rc, out, err = run("similar", path, "king", "-k", "2")
    expect(rc, out, err, 0)
    rc, plain, err = run("diff", "--json", INDEX, INDEX)
    rc, out, err = run("diff", "--json", path, INDEX)
    expect(rc, out, err, 0)
    check(json.loads(out) == json.loads(plain), out)
    rc, out, err = run("diff", INDEX, path)
    expect(rc, out, err, 0)
    check("no delta: NEW is compressed (zstd)" in out, out)
    # Bytes after the frame: the loader's message, no hint to pack a compressed index.
    tail = os.path.join(WORK, "tiny-skip-tail.ldsi.zst")
    with open(tail, "wb") as f:
        f.write(skippable(1, b"\0" * 3000) + z + b"garbage")
    rc, out, err = run("info", tail)
    expect(rc, out, err, 1)
    check("bytes follow the zstd frame" in err and "lodestar pack" not in err, err)
    # A skippable frame declared past the end, and one before an uncompressed index.
    for name, data, says in (
            ("tiny-skip-long.ldsi.zst", skippable(2, b"x" * 100)[:80],
             "the skippable frame at compressed byte 0 declares 100 bytes, but the input "
             "ends 28 bytes short of them"),
            ("tiny-skip-raw.ldsi", skippable(3, b"") + open(INDEX, "rb").read(),
             "not a zstd frame after the skippable frame at compressed byte 0")):
        bad = os.path.join(WORK, name)
        with open(bad, "wb") as f:
            f.write(data)
        rc, out, err = run("info", bad)
        expect(rc, out, err, 1)
        check(err.startswith(f"lodestar: {bad}: {says}"), err)
        rc, out, err = run("diff", bad, INDEX)
        expect(rc, out, err, 1)
        check(f"{bad}: its skippable zstd frames (RFC 8878 section 3.1.2) are not followed by "
              "a zstd frame inside the file" in err, err)


def test_diff_names_a_directory_and_a_pipe():
    """diff reads at offsets: a directory and a pipe are said as such, not as a short header
    (found by a tester)."""
    rc, out, err = run("diff", WORK, INDEX)
    expect(rc, out, err, 1)
    check("is a directory" in err, err)
    r = subprocess.run(f"cat {INDEX} | {LODESTAR} diff /dev/stdin {INDEX}", shell=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 1 and b"is not a regular file" in r.stderr, r.stderr.decode())


def test_pack_refuses_chunk_padding_larger_than_the_vectors():
    """--chunk-bytes 1G --layout chunks on a few rows wrote 3 GiB of zeros (found by a
    tester): chunks over 16 MiB longer than the vectors are refused under a forced chunk
    layout, naming the option, leaving nothing at the path; auto packs the same input."""
    src = os.path.join(WORK, "pad.glove.txt")
    with open(src, "w") as f:
        f.write("".join(f"w{i} 1 2 3 4\n" for i in range(10)))
    dst = os.path.join(WORK, "pad.ldsi")
    for size in ("1G", "32M"):
        rc, out, err = run("pack", src, dst, "--format", "glove",
                           "--chunk-bytes", size, "--layout", "chunks")
        # Said in the CLI's terms (found by a tester: it named lds_writer_options.layout and
        # LDS_LAYOUT_CHUNK_ALIGNED and said "(at byte 0)").
        check(rc == 1 and f"--layout chunks pads every section to a chunk of --chunk-bytes "
              f"{size}, longer than the 160 bytes of vectors; use --layout auto" in err
              and "--chunk-bytes 16M or smaller" in err, (rc, err))
        check("lds_" not in err and "LDS_" not in err and "at byte" not in err, err)
        check(not os.path.exists(dst), f"{dst} left behind")
    # "chunks" and "no chunk table" contradict each other: refused, in either order, where
    # it silently wrote a format 1.0 file.
    for order in (("--layout", "chunks", "--chunk-bytes", "0"),
                  ("--chunk-bytes", "0", "--layout", "chunks")):
        rc, out, err = run("pack", src, dst, "--format", "glove", *order)
        expect(rc, out, err, 2)
        check("--layout chunks aligns sections to chunks and --chunk-bytes 0 writes none"
              in err, err)
        check(not os.path.exists(dst), f"{dst} left behind")
    pack(src, dst, "--chunk-bytes", "0")
    with open(dst, "rb") as f:
        check(f.read(12)[8:12] == struct.pack("<HH", 1, 0), "--chunk-bytes 0 alone: format 1.0")
    pack(src, dst, "--chunk-bytes", "1G")
    check(os.path.getsize(dst) < 1 << 20, os.path.getsize(dst))
    pack(src, dst, "--chunk-bytes", "16M", "--layout", "chunks")
    check(os.path.getsize(dst) >= 16 << 20, os.path.getsize(dst))
    os.unlink(dst)


def test_diff_of_a_url_says_it_compares_local_files():
    """A URL given to diff was reported as 'No such file or directory' (found by a tester):
    it is a usage error naming which argument, with the password redacted."""
    rc, out, err = run("diff", "https://user:s3cret@127.0.0.1:9/a.ldsi", INDEX)
    expect(rc, out, err, 2)
    check("OLD" in err and "is a URL" in err and "No such file" not in err, err)
    check("s3cret" not in err, err)
    rc, out, err = run("diff", INDEX, "s3://bucket/b.ldsi")
    expect(rc, out, err, 2)
    check("NEW" in err and "is a URL" in err, err)


def test_diff():
    """lodestar diff against hand-counted chunks: 400 words of 8 f32 (32-byte rows, so
    row r is payload bytes 32 r..32 r + 31, in chunk 32 r // 1024 of 1 KiB chunks); word
    100 changed -> chunk 3; the last chunk holds the checksum, which changed too."""
    words = [f"w{i}" for i in range(400)]
    def glove(changed):
        return "".join(f"{w} " + " ".join(str(((i * 7 + j * 3 + (5 if i == changed else 0)) % 11) - 5)
                                          for j in range(8)) + "\n"
                       for i, w in enumerate(words))
    files = {}
    for name, changed in (("old", -1), ("new", 100)):
        src = os.path.join(WORK, f"diff-{name}.glove.txt")
        with open(src, "w") as f:
            f.write(glove(changed))
        dst = os.path.join(WORK, f"diff-{name}.ldsi")
        pack(src, dst)
        with open(dst, "rb") as f:
            files[name] = bytearray(f.read())
    paths = {}
    for name, cb in (("old", 1024), ("new", 1024), ("old2k", 2048), ("old10", 0)):
        paths[name] = os.path.join(WORK, f"diff-{name}-{cb}.ldsi")
        with open(paths[name], "wb") as f:
            f.write(rechunk(files["old" if name.startswith("old") else "new"], cb))
    d = covered_length(rechunk(files["new"], 1024))
    n = (d + 1023) // 1024
    last = n - 1
    rc, out, err = run("diff", paths["old"], paths["new"])
    expect(rc, out, err, 0)
    lines = out.splitlines()
    check(lines[0] == "chunk 3  payload bytes 3072..4095  (1024 bytes)", out)
    check(lines[1] == f"chunk {last}  payload bytes {last * 1024}..{d - 1}  ({d - last * 1024} bytes)", out)
    want_read = 1024 + (d - last * 1024) + 8 * n
    check(lines[2].startswith(f"read 2 of {n} chunks (1024 bytes each): {want_read} bytes with the "
                              f"{8 * n}-byte chunk table"), out)
    check(f"{d + 8 * n - want_read} bytes copied from OLD" in lines[2], out)
    rc, out, err = run("diff", "--json", paths["old"], paths["new"])
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j["delta"] is True and j["chunks"] == n and j["chunk_bytes"] == 1024, out)
    check(j["read"] == [[3, 3, 3072, 4096], [last, last, last * 1024, d]], out)
    check(j["chunks_read"] == 2 and j["bytes_read"] == want_read, out)
    check(j["bytes_copied"] == d + 8 * n - want_read, out)
    # the same file: nothing but the table
    rc, out, err = run("diff", paths["new"], paths["new"])
    expect(rc, out, err, 0)
    check(out.startswith(f"read 0 of {n} chunks"), out)
    # no delta: another chunk size, format 1.0
    rc, out, err = run("diff", paths["old2k"], paths["new"])
    expect(rc, out, err, 0)
    check(out == f"no delta: the chunk size changed (OLD 2048, NEW 1024); a reload reads all "
                 f"{d + 8 * n} payload bytes of NEW\n", out)
    rc, out, err = run("diff", "--json", paths["old10"], paths["new"])
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j["delta"] is False and "format 1.0" in j["why"] and j["bytes_read"] == d + 8 * n, out)
    # Read whole, not by chunks: chunks_read null beside bytes_read (found by a tester: 0).
    check(j["chunks_read"] is None and j["read"] == [] and j["bytes_copied"] == 0, out)
    rc, out, err = run("diff", "--json", paths["old2k"], paths["new"])
    j = json.loads(out)
    check(j["delta"] is False and j["chunks_read"] is None and j["bytes_read"] == d + 8 * n,
          out)
    # a corrupt table: failure, named
    bad = bytearray(rechunk(files["new"], 1024))
    bad[64 + d + 5] ^= 1
    badp = os.path.join(WORK, "diff-bad.ldsi")
    with open(badp, "wb") as f:
        f.write(bad)
    rc, out, err = run("diff", paths["old"], badp)
    expect(rc, out, err, 1)
    check("chunk table" in err, err)
    rc, out, err = run("diff", paths["old"])
    expect(rc, out, err, 2)


def test_diff_with_one_repeated_chunk():
    """Every vector chunk of OLD is the same (4,096 zero rows of 8 f32 = 128 chunks of 1 KiB):
    the chunks of OLD go into lodestar diff's table once per (checksum, length), not once per
    chunk (a run of 128 slots every insert and lookup walked: chunks x copies steps, minutes
    for a large zero-filled file). NEW changes row 100 (chunk 3): chunk 3 and the last are
    read, every other zero chunk matched."""
    rows = 4096
    def glove(changed):
        return "".join(f"w{i} " + " ".join("1" if i == changed else "0" for _ in range(8)) + "\n"
                       for i in range(rows))
    paths = {}
    for name, changed in (("old", -1), ("new", 100)):
        src = os.path.join(WORK, f"rep-{name}.glove.txt")
        with open(src, "w") as f:
            f.write(glove(changed))
        paths[name] = os.path.join(WORK, f"rep-{name}.ldsi")
        pack(src, paths[name], "--chunk-bytes", "1K", "--layout", "chunks")
    rc, out, err = run("diff", "--json", paths["old"], paths["new"])
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j["delta"] is True and j["chunk_bytes"] == 1024, out)
    n = j["chunks"]
    check([r[:2] for r in j["read"]] == [[3, 3], [n - 1, n - 1]], out)
    check(j["read"][0][2:] == [3072, 4096], out)
    check(j["chunks_read"] == 2, out)


def test_diff_of_an_append_reads_only_the_tails():
    """Format 1.2 (docs/format.md 4.4): sections on chunk boundaries, so rows appended
    change only each section's last chunk. 512 words "w0000000".. of 4 f32 (16-byte rows),
    ids, 1 KiB chunks; 64 words appended (one chunk of rows). Hand-computed payload
    offsets, old: vectors 0..8192 (chunks 0-7), ids 8192..12288 (8-11), keys from 12288
    (513 u32 offsets: 12-14), key bytes 15360..19456 (15-18), metadata and table (19).
    New: vectors chunks 0-8 (8 = the new rows), ids 9216..13824 (9-12 = old 8-11, 13 new),
    offsets from 14336 (14-15 = old 12-13, 16 new), key bytes 17408..22016 (17-20 = old
    15-18, 21 new), metadata and table (22). Read: 8, 13, 16, 21-22. Packed (1.1), the
    same append moves the key bytes by 1536 bytes, not a whole chunk: all read."""
    def build(rows, layout):
        src = os.path.join(WORK, f"append-{rows}.glove.txt")
        ids = os.path.join(WORK, f"append-{rows}.ids")
        with open(src, "w") as f:
            f.write("".join(f"w{i:07d} " + " ".join(str((i * 7 + j * 3) % 11 - 5) for j in range(4))
                            + "\n" for i in range(rows)))
        with open(ids, "w") as f:
            f.write("".join(f"{1000 + i}\n" for i in range(rows)))
        dst = os.path.join(WORK, f"append-{rows}-{layout}.ldsi")
        pack(src, dst, "--ids", ids, "--chunk-bytes", "1K", "--layout", layout)
        with open(dst, "rb") as f:
            b = f.read()
        return dst, b
    old, ob = build(512, "chunks")
    new, nb = build(576, "chunks")
    check(struct.unpack_from("<HI", nb, 10) == (2, 3), "minor 2, CHUNKED | CHUNK_ALIGNED")
    rc, out, err = run("info", "--json", new)
    expect(rc, out, err, 0)
    check(json.loads(out)["format"] == "1.2", out)
    rc, out, err = run("info", new)
    check("(format 1.2, sections on chunk boundaries, each verified)" in out, out)
    check(covered_length(ob) // 1024 == 19, covered_length(ob))
    d = covered_length(nb)
    check(d // 1024 == 22, d)
    rc, out, err = run("diff", "--json", old, new)
    expect(rc, out, err, 0)
    j = json.loads(out)
    check(j["delta"] is True and j["chunks"] == 23, out)
    check(j["read"] == [[8, 8, 8192, 9216], [13, 13, 13312, 14336], [16, 16, 16384, 17408],
                        [21, 22, 21504, d]], out)
    # the same rows packed (1.1): the ids move by one whole chunk (64 rows x 16 bytes) and
    # are copied, the keys by 1536 bytes and are read from their first chunk on
    pold, _ = build(512, "packed")
    pnew, pb = build(576, "packed")
    check(struct.unpack_from("<HI", pb, 10) == (1, 1), "minor 1, CHUNKED")
    rc, out, err = run("diff", "--json", pold, pnew)
    expect(rc, out, err, 0)
    p = json.loads(out)
    check(p["chunks_read"] >= j["chunks_read"] + 4, (p["chunks_read"], j["chunks_read"]))
    # --chunk-bytes 0 writes format 1.0 (no chunk table), as --help says (it was refused
    # with "wants 0 or a power of two ..., not '0'")
    v10 = os.path.join(WORK, "append-512-v10.ldsi")
    rc, out, err = run("pack", os.path.join(WORK, "append-512.glove.txt"), v10, "--format",
                       "glove", "--chunk-bytes", "0")
    expect(rc, out, err, 0)
    with open(v10, "rb") as f:
        check(struct.unpack_from("<HI", f.read(16), 10) == (0, 0), "minor 0, no flags")
    rc, out, err = run("info", "--json", v10)
    expect(rc, out, err, 0)
    check(json.loads(out)["format"] == "1.0", out)
    # a bad --chunk-bytes or --layout is a usage error
    for bad in (("--chunk-bytes", "3000"), ("--chunk-bytes", "512"), ("--chunk-bytes", "00"),
                ("--layout", "tight")):
        rc, out, err = run("pack", os.path.join(WORK, "append-512.glove.txt"),
                           os.path.join(WORK, "never.ldsi"), "--format", "glove", *bad)
        expect(rc, out, err, 2)
        check(bad[0] in err, err)


def patched_copy(name, offset, new_bytes):
    """A copy of INDEX with bytes at file offset `offset` replaced, checksum rewritten."""
    with open(INDEX, "rb") as f:
        b = bytearray(f.read())
    b[offset:offset + len(new_bytes)] = new_bytes
    reseal(b)
    path = os.path.join(WORK, name)
    with open(path, "wb") as f:
        f.write(b)
    return path


def strict_json(text):
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_similar_prints_huge_and_tiny_scores_readably():
    """A finite dot product of 2e38 printed with "%f" as 39 digits, and 1e-9 as 0.000000
    (found by a tester): the table prints the shortest decimal that reads back as the same
    float, as JSON does, the column kept for the usual scores."""
    src = os.path.join(WORK, "huge.glove.txt")
    with open(src, "w") as f:
        f.write("big 1e19 1e19\nsmall 1 1\ntiny 1e-5 0\n")
    dst = os.path.join(WORK, "huge.ldsi")
    pack(src, dst, "--metric", "dot")
    rc, out, err = run("similar", "--vector", "1e19,1e19", dst)
    expect(rc, out, err, 0)
    check(out == "rank  dot             row  key\n"
          "   1  2e+38             0  big\n"
          "   2  2e+19             1  small\n"
          "   3  1e+14             2  tiny\n", out)
    rc, out, err = run("similar", "--vector", "1e-4,0", dst)
    expect(rc, out, err, 0)
    check([l.split()[1] for l in out.splitlines()[1:]] == ["1e+15", "0.0001", "1e-09"], out)
    rc, out, err = run("similar", "--json", "--vector", "1e-4,0", dst)
    check([h["score"] for h in json.loads(out)["neighbours"]] == [1e15, 1e-4, 1e-9], out)


def test_similar_table_columns_stay_in_line_with_a_long_score():
    """A score longer than the 10-character column ("-0.12345678", "-1.2345679e-38") pushed
    its row and key right of the others' (found by a tester): the score column is as wide as
    the longest score printed, the row column as the longest row number, in the tables of
    `similar --vector`, `similar KEY` and the analogy (`--positive`)."""

    def in_line(out):
        lines = out.splitlines()
        check(len(lines) >= 3, out)
        edge = lines[0].index("row") + 3  # the right edge of the row column
        for line in lines[1:]:
            check(line[:edge].split()[-1].isdigit() and line[edge:edge + 2] == "  " and
                  line[edge + 2] != " ", out)
            check(line[6:].split()[0] == line.split()[1], out)  # scores start at column 6

    src = os.path.join(WORK, "long-score.glove.txt")
    with open(src, "w") as f:
        f.write("one 1 0\nneg -0.12345678 0\ntiny -1.2345679e-38 0\nhalf 0.5 0\n")
    dst = os.path.join(WORK, "long-score.ldsi")
    pack(src, dst, "--metric", "dot")
    rc, out, err = run("similar", "--vector", "1,0", dst, "-k", "4")
    expect(rc, out, err, 0)
    check(out == "rank  dot                 row  key\n"
          "   1  1                     0  one\n"
          "   2  0.5                   3  half\n"
          "   3  -1.2345679e-38        2  tiny\n"
          "   4  -0.12345678           1  neg\n", out)
    in_line(out)
    rc, out, err = run("similar", dst, "one", "-k", "3")
    expect(rc, out, err, 0)
    in_line(out)
    # Usual scores keep the 10-character column.
    rc, out, err = run("similar", "--vector", "1,0", dst, "-k", "2")
    check(out.splitlines()[1] == "   1  1                 0  one", out)
    src = os.path.join(WORK, "long-cosine.glove.txt")
    with open(src, "w") as f:
        f.write("one 1 0\nneg -1 -1\nhalf 1 1\nfar 0.1 1\n")
    dst = os.path.join(WORK, "long-cosine.ldsi")
    pack(src, dst)
    rc, out, err = run("similar", dst, "--positive", "one", "-k", "3")
    expect(rc, out, err, 0)
    check([l.split()[1] for l in out.splitlines()[1:]] == ["0.70710677", "0.09950372",
                                                            "-0.70710677"], out)
    in_line(out)


def test_similar_json_infinite_scores_are_null_as_the_help_says():
    """An infinite score (a dot product past the float range) prints null in JSON, as NaN
    does; --help said only NaN (found by a tester). The table prints inf and -inf."""
    src = os.path.join(WORK, "inf.glove.txt")
    with open(src, "w") as f:
        f.write("big 3e38 3e38\nneg -3e38 -3e38\nsmall 1 1\n")
    dst = os.path.join(WORK, "inf.ldsi")
    pack(src, dst, "--metric", "dot")
    rc, out, err = run("similar", "--json", "--vector", "3e38,3e38", dst)
    expect(rc, out, err, 0)
    j = strict_json(out)
    check([(h["key"], h["score"]) for h in j["neighbours"]]
          == [("big", None), ("small", None), ("neg", None)], j)
    rc, out, err = run("similar", "--vector", "3e38,3e38", dst)
    expect(rc, out, err, 0)
    check([l.split()[1] for l in out.splitlines()[1:]] == ["inf", "inf", "-inf"], out)
    rc, out, err = run("similar", "--help")
    expect(rc, out, err, 0)
    check("Scores are printed as the shortest decimal that\nreads back as the same float"
          in out, out)
    check("that is NaN (a row holding NaN ranks last) or +/-infinite (a dot product\n"
          "past the float range) is null" in out, out)


def test_json_with_nan_and_infinity():
    # docs/format.md 3.1: element values are not validated; a crafted row may hold NaN.
    nan = patched_copy("nan.ldsi", 64, struct.pack("<ff", float("nan"), float("inf")))
    rc, out, err = run("verify", nan)
    expect(rc, out, err, 0)
    rc, out, err = run("get", "--json", nan, "king")
    expect(rc, out, err, 0)
    j = strict_json(out)
    check(j["vector"] == [None, None, 0, 0], j)
    rc, out, err = run("similar", "--json", nan, "queen")
    expect(rc, out, err, 0)
    j = strict_json(out)
    last = j["neighbours"][-1]
    check(last["key"] == "king" and last["score"] is None, f"NaN ranks last, as null: {j}")
    check(all(h["score"] is not None for h in j["neighbours"][:-1]), j)
    # A NaN query has no neighbours: the search refuses it.
    rc, out, err = run("similar", "--json", nan, "king")
    expect(rc, out, err, 1)
    want = f"lodestar: {nan}: row 0 of the index holds a non-finite element 0 (at byte 64)\n"
    check(err == want and out == "", err)
    # The index is to blame, not the query; by --row and by a --queries line too.
    rc, out, err = run("similar", nan, "--row", "0")
    expect(rc, out, err, 1)
    check(err == want, err)
    rc, out, err = run("similar", "--queries", "-", nan, "-k", "1",
                       input_bytes=b"queen\nking\n")
    expect(rc, out, err, 1)
    check(err == f"lodestar: {nan}: line 2: row 0 of the index holds a non-finite element 0 "
          "(at byte 64)\n" and json.loads(out)["key"] == "queen", (out, err))
    # A zero query: no library function name in the message; a --queries line is named.
    rc, out, err = run("similar", "--vector", "0,0,0,0", INDEX)
    expect(rc, out, err, 1)
    check(err == f"lodestar: {INDEX}: a zero query has no cosine similarity\n", err)
    rc, out, err = run("similar", "--queries", "-", INDEX, input_bytes=b"king\n0 0 0 0\n")
    expect(rc, out, err, 1)
    check(err == "lodestar: -: line 2: a zero query has no cosine similarity\n", err)
    rc, out, err = run("get", nan, "king")
    expect(rc, out, err, 0)
    check("vector: nan inf 0 0\n" in out, out)


def test_control_characters_are_escaped():
    src = os.path.join(WORK, "hostile.txt")
    with open(src, "wb") as f:
        f.write(b"\x1b[31mred 1 0 0 0\nback\\slash 0.8 0.6 0 0\ncaf\xc3\xa9 0.6 0 0.8 0\n"
                b"bell\x07\xc2\x9b 0 0 0 1\n")
    idx = os.path.join(WORK, "hostile.ldsi")
    pack(src, idx)
    rc, out, err = run("get", idx, "\x1b[31mred")
    expect(rc, out, err, 0)
    check(out.startswith("key:    \\x1b[31mred\nrow:    0\n"), repr(out))
    rc, out, err = run("similar", idx, "--row", "0", "-k", "3")
    expect(rc, out, err, 0)
    keys = [line.split()[3] for line in out.splitlines()[1:]]
    check(keys == ["back\\\\slash", "caf\u00e9", "bell\\x07\\xc2\\x9b"], repr(out))
    check("\x1b" not in out and "\x07" not in out, repr(out))
    rc, out, err = run("get", idx, "\x1b]0;owned\x07")
    expect(rc, out, err, 1)
    check(err == f"lodestar: {idx}: key '\\x1b]0;owned\\x07' not found\n", repr(err))
    # JSON escapes on its own, and keeps the key exact.
    rc, out, err = run("get", "--json", "--row", "3", idx)
    expect(rc, out, err, 0)
    check(json.loads(out)["key"] == "bell\x07\x9b", out)


def write_fvecs(path, rows):
    with open(path, "wb") as f:
        for r in rows:
            f.write(struct.pack("<i", len(r)) + struct.pack(f"<{len(r)}f", *r))


def test_index_without_keys():
    src = os.path.join(WORK, "nokeys.fvecs")
    write_fvecs(src, [(1, 0, 0, 0), (0.8, 0.6, 0, 0), (0, 0, 0, 1)])
    idx = os.path.join(WORK, "nokeys.ldsi")
    rc, out, err = run("pack", src, idx)
    expect(rc, out, err, 0)
    rc, out, err = run("get", "--row", "1", idx)
    expect(rc, out, err, 0)
    check(out == "row:    1\ndim:    4\nvector: 0.8 0.6 0 0\n", repr(out))
    rc, out, err = run("similar", "--row", "0", idx, "-k", "1")
    expect(rc, out, err, 0)
    check(out == "rank  cosine          row\n   1  0.8               1\n", repr(out))
    rc, out, err = run("get", "--json", "--row", "1", idx)
    check(json.loads(out)["key"] is None, out)


def test_get_and_similar_take_mmap_flags():
    for flag in ("--mmap", "--no-mmap"):
        rc, out, err = run("get", flag, INDEX, "queen")
        expect(rc, out, err, 0)
        check(out.endswith("vector: 0.8 0.6 0 0\n"), out)
        rc, out, err = run("similar", flag, INDEX, "king", "-k", "1")
        expect(rc, out, err, 0)
        check(out.splitlines()[1].split()[3] == "queen", out)
    for cmd in ("get", "similar"):
        rc, out, err = run(cmd, "--help")
        check("--no-mmap" in out and "--mmap" in out, out)
    rc, out, err = run("similar", "--help")
    check("1 to 100000" in out, out)


def test_messages():
    rc, out, err = run("--bogus")
    expect(rc, out, err, 2)
    check(err.startswith("lodestar: unrecognized option '--bogus'\n"), err)
    missing = os.path.join(WORK, "no-such-file.ldsi")
    rc, out, err = run("info", missing)
    expect(rc, out, err, 1)
    check(err == f"lodestar: {missing}: cannot open: No such file or directory\n", err)
    # The writer's failures name the output file.
    out_path = os.path.join(WORK, "no-such-dir", "x.ldsi")
    rc, out, err = run("pack", TINY, out_path, "--format", "glove")
    expect(rc, out, err, 1)
    check(err.startswith(f"lodestar: {out_path}: ") and "writer:" not in err, err)
    # An unknown extension and --keys with text input are usage errors with a hint.
    odd = os.path.join(WORK, "vectors.dat")
    shutil.copyfile(TINY, odd)
    rc, out, err = run("pack", odd, os.path.join(WORK, "odd.ldsi"))
    expect(rc, out, err, 2)
    check(err.startswith("lodestar pack: ") and "--format FMT" in err, err)
    rc, out, err = run("pack", TINY, os.path.join(WORK, "k.ldsi"), "--keys", TINY)
    expect(rc, out, err, 2)
    check(err.startswith("lodestar pack: --keys is for npy, npz, fvecs and hdf5") and "drop --keys" in err,
          err)


def test_a_file_is_named_once_in_a_message():
    """`lodestar info /missing` said "lodestar: /missing: cannot open /missing: No such file or
    directory" (found by a tester), and so did every command that loads or packs a file, with
    "D: D is a directory" from pack and the keys file named twice too: the file once, after
    "lodestar: ". diff, which said "cannot open F: ..." without the "F: " before it, now
    puts it as the others do."""
    pack(TINY, INDEX)
    missing = os.path.join(WORK, "no-such-file.ldsi")
    enoent = f"lodestar: {missing}: cannot open: No such file or directory\n"
    for args in (("info", missing), ("verify", missing), ("get", missing, "king"),
                 ("similar", missing, "king"), ("similar", missing, "--positive", "king"),
                 ("similar", "--vector", "1,0,0,0", missing), ("keys", missing),
                 ("export", missing, os.path.join(WORK, "never.npy")),
                 ("split", missing, os.path.join(WORK, "never-split"), "--shards", "2"),
                 ("pack", missing, os.path.join(WORK, "never.ldsi"), "--format", "glove"),
                 ("diff", missing, INDEX), ("diff", INDEX, missing)):
        rc, out, err = run(*args)
        expect(rc, out, err, 1)
        check(err == enoent, f"{args}: {err}")
    rc, out, err = run("pack", WORK, os.path.join(WORK, "never.ldsi"), "--format", "glove")
    expect(rc, out, err, 1)
    check(err == f"lodestar: {WORK}: is a directory\n", err)
    npy = os.path.join(WORK, "two.npy")
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
    header += b" " * (64 - 10 - len(header) - 1) + b"\n"
    with open(npy, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 16)
    rc, out, err = run("pack", npy, os.path.join(WORK, "never.ldsi"), "--keys", missing)
    expect(rc, out, err, 1)
    check(err == f"lodestar: {missing}: cannot open the keys file: No such file or directory\n",
          err)


def test_pack_i8_scale():
    src = os.path.join(WORK, "big.txt")
    with open(src, "w") as f:
        f.write("a 0.5 -0.25 0 0\nb 1 2 -3 0.5\n")
    out_path = os.path.join(WORK, "big-i8.ldsi")
    rc, out, err = run("pack", src, out_path, "--dtype", "i8")
    expect(rc, out, err, 1)
    check("line 2 (byte 16): element 1 is 2," in err and "i8_scale 0.00787402" in err,
          f"names the line, element and scale: {err}")
    check("--i8-scale" in err, f"hints at the flag: {err}")
    check(not os.path.exists(out_path), "no output left behind")
    rc, out, err = run("pack", src, out_path, "--dtype", "i8", "--i8-scale", str(3 / 127))
    expect(rc, out, err, 0)
    j = info_json(out_path)
    check(j["dtype"] == "i8" and abs(j["i8_scale"] - 3 / 127) < 1e-7, j)
    rc, out, err = run("get", "--json", out_path, "b")
    vec = json.loads(out)["vector"]
    check(all(abs(x - y) <= 1.5 / 127 for x, y in zip(vec, [1, 2, -3, 0.5])), vec)
    rc, out, err = run("pack", src, out_path, "--dtype", "i8", "--normalize")
    expect(rc, out, err, 0)
    for bad in ("0", "-1", "nan", "inf", "x", "1e-50"):
        rc, out, err = run("pack", src, out_path, "--dtype", "i8", "--i8-scale", bad)
        check(rc == 2 and "--i8-scale" in err, f"{bad}: {rc} {err}")
    rc, out, err = run("pack", src, out_path, "--i8-scale", "0.1")
    check(rc == 2 and "--i8-scale is for --dtype i8" in err, err)
    rc, out, err = run("pack", "--help")
    check("--i8-scale S" in out, out)


def test_test_sh_only_runs_the_named_stage():
    # scripts/test.sh of this source tree (FIXTURES is tests/fixtures/cli), in --dry-run mode.
    root = os.path.dirname(os.path.dirname(os.path.dirname(FIXTURES)))
    script = os.path.join(root, "scripts", "test.sh")

    def summary(*args):
        env = dict(os.environ, CI="")
        p = subprocess.run(["bash", script, "--dry-run", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env, timeout=60)
        check(p.returncode == 0, p.stderr)
        lines = p.stdout.decode().split("======== summary ========\n")[1].splitlines()
        return {l.split(None, 1)[0]: l.split(None, 1)[1] for l in lines[:-1]}

    check(summary("--only", "slow") == {"slow": "would run"}, summary("--only", "slow"))
    check(summary("--only", "fuzz,werror") == {"werror": "would run", "fuzz": "would run"},
          summary("--only", "fuzz,werror"))
    every = summary()
    check(every["slow"] == "skipped" and every["fuzz"] == "skipped", f"reported skipped: {every}")
    check(every["werror"] == "would run", every)
    check(summary("--slow")["slow"] == "would run", summary("--slow"))
    p = subprocess.run(["bash", script, "--only", "slwo"], stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 2 and b"unknown stage 'slwo'" in p.stderr, p.stderr)


def test_scripts_answer_help():
    # Every script prints its usage for --help and -h and does nothing else: deps.sh would
    # run apt-get, demo.sh the demo. PATH holds only a folder whose every tool fails loudly,
    # so that a script which goes on past --help is caught whatever it runs.
    root = os.path.dirname(os.path.dirname(os.path.dirname(FIXTURES)))
    trap = os.path.join(WORK, "trap-bin")
    os.makedirs(trap, exist_ok=True)
    marker = os.path.join(WORK, "trap-ran")
    for tool in ("apt-get", "sudo", "meson", "ninja", "zstd", "dpkg-query", "npm", "clang",
                 "nproc", "mkdir", "rm", "mktemp", "git"):
        path = os.path.join(trap, tool)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\necho {tool} >> '{marker}'\nexit 97\n")
        os.chmod(path, 0o755)
    env = dict(os.environ, PATH=trap + ":/usr/bin:/bin")
    scripts = sorted(n for n in os.listdir(os.path.join(root, "scripts"))
                     if n.endswith((".sh", ".py")))
    check(len(scripts) >= 6, scripts)
    for name in scripts:
        script = os.path.join(root, "scripts", name)
        for flag in ("--help", "-h"):
            if os.path.exists(marker):
                os.unlink(marker)
            cmd = ["bash", script, flag] if name.endswith(".sh") else [sys.executable, script,
                                                                       flag]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               timeout=60, cwd=WORK)
            out = p.stdout.decode()
            check(p.returncode == 0, f"{name} {flag}: exit {p.returncode}: {p.stderr!r}")
            check("usage:" in out, f"{name} {flag}: no usage: {out!r}")
            ran = open(marker).read() if os.path.exists(marker) else ""
            check(ran == "", f"{name} {flag} went on to run: {ran!r}")


def test_messages_escape_input_bytes():
    # Binary (a zstd frame's magic, a terminal escape) where a number should be: the
    # message quotes the token.
    zst = os.path.join(WORK, "mistaken.txt")
    with open(zst, "wb") as f:
        f.write(b"key \x28\xb5\x2f\xfd\x1b[2J\x07 2\n")
    rc, out, err = run("pack", zst, os.path.join(WORK, "m.ldsi"), "--format", "glove")
    expect(rc, out, err, 1)
    check("\x1b" not in err and "\x07" not in err and "\ufffd" not in err, repr(err))
    check("\\x1b[2J\\x07" in err and "(\\xb5/\\xfd" in err and "\\\\x" not in err,
          f"escaped once as \\xNN: {err!r}")
    # A file name with a control character is escaped too.
    odd = os.path.join(WORK, "odd\x1bname.txt")
    rc, out, err = run("info", odd)
    expect(rc, out, err, 1)
    check("\x1b" not in err and "odd\\x1bname.txt" in err, repr(err))


def test_writer_refusals_have_no_stray_offset():
    src = os.path.join(WORK, "zero-row.txt")
    with open(src, "w") as f:
        f.write("a 1 2\nb 0 0\n")
    rc, out, err = run("pack", src, os.path.join(WORK, "z.ldsi"), "--format", "glove",
                       "--normalize")
    expect(rc, out, err, 1)
    check("(at byte 0)" not in err, err)
    # One place per message: the input's line and byte, not also the writer's row.
    check(err.startswith(f"lodestar: {src}: line 2 (byte 6): ") and "row" not in
          err.split("): ", 1)[1].split(" a row ")[0], err)
    out_path = os.path.join(WORK, "no-such-dir", "x.ldsi")
    rc, out, err = run("pack", TINY, out_path, "--format", "glove")
    expect(rc, out, err, 1)
    check("(at byte 0)" not in err and "writer:" not in err, err)


def test_word2vec_short_row_names_its_line():
    src = os.path.join(WORK, "w2v-short.txt")
    with open(src, "w") as f:
        f.write("2 3\na 1 2 3\nb 1 2\n")
    rc, out, err = run("pack", src, os.path.join(WORK, "w.ldsi"), "--format", "word2vec")
    expect(rc, out, err, 1)
    check("line 3" in err and "expected 3 numbers, found 2" in err, err)


def test_pack_stdin_and_stdout():
    ref = os.path.join(WORK, "ref.ldsi")
    pack(TINY, ref)
    with open(ref, "rb") as f:
        want = f.read()
    with open(TINY, "rb") as f:
        text = f.read()
    # IN -: standard input, with the format named.
    via_stdin = os.path.join(WORK, "stdin.ldsi")
    p = subprocess.run([LODESTAR, "pack", "-", via_stdin, "--format", "glove"], input=text,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 0, p.stderr)
    check(b"from (standard input) into" in p.stdout, p.stdout)
    with open(via_stdin, "rb") as f:
        check(f.read() == want, "pack - OUT writes the same index")
    # OUT -: the index on standard output, the summary on standard error, no file "-".
    p = subprocess.run([LODESTAR, "pack", TINY, "-", "--format", "glove"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, cwd=WORK)
    check(p.returncode == 0, p.stderr)
    check(p.stdout == want, "pack IN - writes the index to standard output")
    check(b"into (standard output)" in p.stderr, p.stderr)
    check(not os.path.exists(os.path.join(WORK, "-")), "no file named '-'")
    # Both at once, piped into info -.
    p = subprocess.run(f"'{LODESTAR}' pack - - --format glove < '{TINY}' | '{LODESTAR}' info -",
                       shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 0 and b"rows:       7" in p.stdout, p.stdout + p.stderr)
    # Standard input has no extension: the format must be named.
    p = subprocess.run([LODESTAR, "pack", "-", via_stdin], input=text, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 2 and b"--format" in p.stderr, p.stderr)


def test_export_and_manifest_outputs_follow_the_writers_rule():
    """export, --keys-out and split's manifest are renamed into place as pack's index is:
    a device, a FIFO or a link to one is refused before a byte is written (as root,
    `export IDX /dev/stdout` renamed a regular file over the /dev/stdout link); a link to a
    regular file writes that file and keeps the link; new files get 0666 less the umask
    (mkstemp's 0600 before)."""
    ref = os.path.join(WORK, "out-rule.ldsi")
    pack(TINY, ref)
    devlink = os.path.join(WORK, "devnull-link")
    fifo = os.path.join(WORK, "out-fifo")
    for p in (devlink, fifo):
        if os.path.lexists(p):
            os.unlink(p)
    os.symlink("/dev/null", devlink)
    os.mkfifo(fifo)
    for target, what in ((devlink, "which is a character device"), (fifo, "is a FIFO")):
        rc, out, err = run("export", ref, target, "--format", "npy")
        expect(rc, out, err, 1)
        check(what in err and "only a regular file is replaced" in err, err)
        rc, out, err = run("export", ref, os.path.join(WORK, "ok.npy"), "--keys-out", target)
        expect(rc, out, err, 1)
        check(what in err, err)
    check(os.path.islink(devlink) and os.readlink(devlink) == "/dev/null", "the link is kept")
    check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO is kept")
    real = os.path.join(WORK, "real-out.npy")
    link = os.path.join(WORK, "link-out.npy")
    for p in (real, link):
        if os.path.lexists(p):
            os.unlink(p)
    with open(real, "w") as f:
        f.write("old")
    os.symlink(real, link)
    old_mask = os.umask(0o022)
    try:
        rc, out, err = run("export", ref, link, "--format", "npy")
        expect(rc, out, err, 0)
        check(os.path.islink(link), "a link to a regular file survives")
        with open(real, "rb") as f:
            check(f.read(6) == b"\x93NUMPY", "the link's target holds the export")
        check(stat.S_IMODE(os.stat(real).st_mode) == 0o644, oct(os.stat(real).st_mode))
        outdir = os.path.join(WORK, "split-out-rule")
        shutil.rmtree(outdir, ignore_errors=True)
        os.mkdir(outdir)
        os.symlink("/dev/null", os.path.join(outdir, "manifest.json"))
        rc, out, err = run("split", ref, outdir, "--shards", "2")
        expect(rc, out, err, 1)
        check("manifest.json is a symbolic link to /dev/null" in err, err)
        shutil.rmtree(outdir)
        rc, out, err = run("split", ref, outdir, "--shards", "2")
        expect(rc, out, err, 0)
        mode = stat.S_IMODE(os.stat(os.path.join(outdir, "manifest.json")).st_mode)
        check(mode == 0o644, oct(mode))
    finally:
        os.umask(old_mask)


def test_export_refuses_one_file_twice_and_keeps_a_replaced_files_mode():
    # --keys-out OUT, OUT IN and --keys-out IN each renamed one file over another (x.npy
    # ended up holding only keys; the index was lost); a replaced file kept no mode (0644).
    ref = os.path.join(WORK, "twice.ldsi")
    pack(TINY, ref)
    with open(ref, "rb") as f:
        want = f.read()
    x = os.path.join(WORK, "twice.npy")
    for args, what in (((ref, x, "--keys-out", x), "is OUT itself"),
                       ((ref, ref, "--format", "npy"), "is the input"),
                       ((ref, x, "--keys-out", ref), "is the input")):
        rc, out, err = run("export", *args)
        expect(rc, out, err, 1)
        check(what in err, err)
    with open(ref, "rb") as f:
        check(f.read() == want, "the input is untouched")
    ro = os.path.join(WORK, "ro.npy")
    with open(ro, "w") as f:
        f.write("old")
    os.chmod(ro, 0o440)
    rc, out, err = run("export", ref, ro)
    expect(rc, out, err, 0)
    check(stat.S_IMODE(os.stat(ro).st_mode) == 0o440, oct(os.stat(ro).st_mode))


def test_keys_file_errors_name_the_keys_file():
    vecs = os.path.join(WORK, "three.fvecs")
    write_fvecs(vecs, [[1, 2], [3, 4], [5, 6]])
    for name, text, what in (("short-keys.txt", "a\nb\n", "2 lines"),
                             ("dup-keys.txt", "a\nb\na\n", "keys file line 3 (byte 4): duplicate")):
        keys = os.path.join(WORK, name)
        with open(keys, "w") as f:
            f.write(text)
        rc, out, err = run("pack", vecs, os.path.join(WORK, "k.ldsi"), "--keys", keys)
        expect(rc, out, err, 1)
        check(err.startswith(f"lodestar: {keys}: ") and what in err, err)


def test_floats_print_shortest_from_one_digit():
    # bits 0x00000001 (the smallest subnormal), a negative NaN, 0.5, and 1 + 2^-23.
    vals = struct.pack("<IIff", 0x00000001, 0xFFC00001, 0.5, 1 + 2 ** -23)
    idx = patched_copy("floats.ldsi", 64, vals)
    rc, out, err = run("get", idx, "king")
    expect(rc, out, err, 0)
    check("vector: 1e-45 nan 0.5 1.0000001\n" in out, out)
    # A positive and a negative NaN print the same.
    neg = patched_copy("negnan.ldsi", 64, struct.pack("<II", 0xFFC00000, 0x7FC00000))
    rc, out, err = run("get", neg, "king")
    expect(rc, out, err, 0)
    check("vector: nan nan 0 0\n" in out, out)
    # Whole numbers whose %g form takes an exponent print plain when that is not longer
    # (50 printed as 5e+01, 100 as 1e+02); 3e+15, 1e+16 and 1e-05 keep theirs.
    src = os.path.join(WORK, "whole.txt")
    with open(src, "w") as f:
        f.write("x 50 100 -250 1500 120000 3e15 1e16 1e-5 0.0001\n")
    dst = os.path.join(WORK, "whole.ldsi")
    pack(src, dst)
    rc, out, err = run("get", dst, "x")
    expect(rc, out, err, 0)
    check("vector: 50 100 -250 1500 120000 3e+15 1e+16 1e-05 0.0001\n" in out, out)


def test_pack_first_with_auto_scale_takes_the_scale_over_kept_rows():
    # --on-duplicate first skips the later "a 50 0 0", so the scale is 1/127 and "a"
    # stores 1 exactly (the skipped row set the scale to 50/127 and "a" lost its 1).
    src = os.path.join(WORK, "first-scale.txt")
    with open(src, "w") as f:
        f.write("a 1 0 0\nb 0 1 0\na 50 0 0\n")
    dst = os.path.join(WORK, "first-scale.ldsi")
    rc, out, err = run("pack", src, dst, "--dtype", "i8", "--i8-scale", "auto",
                       "--on-duplicate", "first")
    expect(rc, out, err, 0)
    check("i8 scale 0.007874016 " in out, out)
    rc, out, err = run("get", dst, "a")
    expect(rc, out, err, 0)
    check("vector: 1 0 0\n" in out, out)


def test_info_names_ownership_as_json_does():
    rc, out, err = run("info", INDEX)
    expect(rc, out, err, 0)
    j = info_json(INDEX)
    check(f"load path:  {j['load']['path']} ({j['load']['ownership']})\n" in out, out)


def npy_data(path):
    """The data bytes of a .npy file written by export (format 1.0)."""
    with open(path, "rb") as f:
        b = f.read()
    hlen = struct.unpack("<H", b[8:10])[0]
    return b[10 + hlen:]


def split_tiny(name, shards, *extra):
    pack(TINY, INDEX)
    outdir = os.path.join(WORK, name)
    shutil.rmtree(outdir, ignore_errors=True)
    rc, out, err = run("split", INDEX, outdir, "--shards", str(shards), *extra)
    expect(rc, out, err, 0)
    with open(os.path.join(outdir, "manifest.json")) as f:
        return outdir, strict_json(f.read())


def test_split_rows_keys_and_checksums():
    outdir, man = split_tiny("split3", 3)
    check(man["format"] == "lodestar-shards" and man["rows"] == 7 and man["dim"] == 4, man)
    check(man["dtype"] == "f32" and man["metric"] == "cosine", man)
    check(man["has_keys"] is True and man["has_ids"] is False, man)
    ranges = [(s["first_row"], s["rows"]) for s in man["shards"]]
    check(ranges == [(0, 3), (3, 2), (5, 2)], ranges)
    check(sorted(os.listdir(outdir)) ==
          ["manifest.json", "shard-0000.ldsi", "shard-0001.ldsi", "shard-0002.ldsi"],
          os.listdir(outdir))
    whole_npy = os.path.join(WORK, "split-whole.npy")
    rc, out, err = run("export", INDEX, whole_npy)
    expect(rc, out, err, 0)
    rc, whole_keys, err = run("keys", INDEX)
    expect(rc, whole_keys, err, 0)
    data, keys = b"", ""
    for s in man["shards"]:
        path = os.path.join(outdir, s["file"])
        with open(path, "rb") as f:
            b = f.read()
        check(s["payload_bytes"] == len(b) - 64, (s, len(b)))
        d = covered_length(b)
        stored = struct.unpack("<Q", b[64 + d - 8:64 + d])[0]
        check(int(s["checksum"], 16) == stored == xxh3_64(b[64:64 + d - 8]), (s, stored))
        npy = os.path.join(WORK, "split-part.npy")
        rc, out, err = run("export", path, npy)
        expect(rc, out, err, 0)
        data += npy_data(npy)
        rc, out, err = run("keys", path)
        expect(rc, out, err, 0)
        keys += out
        rc, out, err = run("info", "--json", path)
        expect(rc, out, err, 0)
        info = strict_json(out)
        check(info["rows"] == s["rows"] and info["dtype"] == "f32", info)
    check(data == npy_data(whole_npy) and len(data) == 7 * 4 * 4, "shards hold the rows in order")
    check(keys == whole_keys and keys.count("\n") == 7, keys)
    rc, out, err = run("verify", os.path.join(outdir, "manifest.json"))
    expect(rc, out, err, 0)
    check("shard-0002.ldsi: ok: rows [5, 7), checksum " in out, out)
    check(out.endswith("manifest.json: ok: 3 shards, 7 rows\n"), out)


def test_split_keeps_dtype_ids_and_metadata():
    src = os.path.join(WORK, "split-ids.fvecs")
    rows = [[float(i), float(-i), 0.5 * i, 1.0] for i in range(1, 6)]
    write_fvecs(src, rows)
    idx = os.path.join(WORK, "split-f16.ldsi")
    rc, out, err = run("pack", src, idx, "--dtype", "f16", "--metric", "l2")
    expect(rc, out, err, 0)
    outdir = os.path.join(WORK, "split-f16")
    rc, out, err = run("split", idx, outdir, "--shards", "2")
    expect(rc, out, err, 0)
    with open(os.path.join(outdir, "manifest.json")) as f:
        man = strict_json(f.read())
    check(man["dtype"] == "f16" and man["metric"] == "l2" and man["has_keys"] is False, man)
    whole = strict_json(run("info", "--json", idx)[1])
    for s in man["shards"]:
        info = strict_json(run("info", "--json", os.path.join(outdir, s["file"]))[1])
        check(info["dtype"] == "f16" and info["metric"] == "l2", info)
        check(info["metadata"] == whole["metadata"], (info["metadata"], whole["metadata"]))


def test_split_refuses_more_shards_than_rows():
    pack(TINY, INDEX)
    rc, out, err = run("split", INDEX, os.path.join(WORK, "split-many"), "--shards", "8")
    expect(rc, out, err, 1)
    check("has 7 rows, fewer than --shards 8" in err, err)
    check(not os.path.exists(os.path.join(WORK, "split-many", "manifest.json")), "no manifest")
    rc, out, err = run("split", INDEX, os.path.join(WORK, "split-zero"), "--shards", "0")
    expect(rc, out, err, 2)


def split_with(src, name, *opts):
    """Runs split SRC WORK/name OPTS; returns (ranges, file sizes, manifest path)."""
    outdir = os.path.join(WORK, name)
    shutil.rmtree(outdir, ignore_errors=True)
    rc, out, err = run("split", src, outdir, *opts)
    expect(rc, out, err, 0)
    mpath = os.path.join(outdir, "manifest.json")
    with open(mpath) as f:
        man = strict_json(f.read())
    ranges = [(s["first_row"], s["rows"]) for s in man["shards"]]
    sizes = [os.path.getsize(os.path.join(outdir, s["file"])) for s in man["shards"]]
    check(sizes == [s["payload_bytes"] + 64 for s in man["shards"]], (sizes, man))
    return ranges, sizes, mpath


def test_split_max_rows():
    pack(TINY, INDEX)
    ranges, _, _ = split_with(INDEX, "split-mr3", "--max-rows", "3")
    check(ranges == [(0, 3), (3, 2), (5, 2)], ranges)   # ceil(7/3) = 3 shards, equal
    ranges, _, _ = split_with(INDEX, "split-mr2", "--max-rows", "2")
    check(ranges == [(0, 2), (2, 2), (4, 2), (6, 1)], ranges)
    ranges, _, mpath = split_with(INDEX, "split-mr9", "--max-rows", "9")
    check(ranges == [(0, 7)], ranges)
    rc, out, err = run("verify", mpath)
    expect(rc, out, err, 0)
    for bad in ("0", "-1", "x"):
        rc, out, err = run("split", INDEX, os.path.join(WORK, "split-mr-bad"), "--max-rows", bad)
        expect(rc, out, err, 2)
        check("--max-rows is a row count >= 1" in err, err)


def test_split_bounds_exclude_each_other():
    pack(TINY, INDEX)
    for opts in (["--shards", "2", "--max-rows", "3"], ["--max-rows", "3", "--max-bytes", "1M"],
                 ["--shards", "2", "--max-bytes", "1M"]):
        rc, out, err = run("split", INDEX, os.path.join(WORK, "split-excl"), *opts)
        expect(rc, out, err, 2)
        check("exclude each other" in err, (opts, err))
    rc, out, err = run("split", INDEX, os.path.join(WORK, "split-none"))
    expect(rc, out, err, 2)
    check("one of --shards N, --max-rows N, --max-bytes SIZE is required" in err, err)


def test_split_max_bytes_without_keys_is_the_fewest_equal_shards():
    # 100 rows of 4 f32 (16 bytes a row, 64-aligned sections): the file size steps every
    # 4 rows, so bounds between steps test that the plan matches the writer exactly.
    src = os.path.join(WORK, "split-mb.fvecs")
    write_fvecs(src, [[float(i), 1.0, -float(i), 0.5] for i in range(100)])
    idx = os.path.join(WORK, "split-mb.ldsi")
    rc, out, err = run("pack", src, idx)
    expect(rc, out, err, 0)
    whole = os.path.getsize(idx)
    ranges, sizes, _ = split_with(idx, "split-mb-whole", "--max-bytes", str(whole))
    check(ranges == [(0, 100)] and sizes == [whole], (ranges, sizes, whole))
    for bound in (whole - 1, 1000, 700, 500, 333):
        ranges, sizes, mpath = split_with(idx, "split-mb-%d" % bound, "--max-bytes", str(bound))
        n = len(ranges)
        check(max(sizes) <= bound, (bound, sizes))
        check(ranges == [(sum(100 // n + (j < 100 % n) for j in range(i)),
                          100 // n + (i < 100 % n)) for i in range(n)], (bound, ranges))
        # the fewest: one shard fewer (equal rows, the best split without keys) is too big
        if n > 1:
            _, fewer, _ = split_with(idx, "split-mb-fewer", "--shards", str(n - 1))
            check(max(fewer) > bound, (bound, n, fewer))
        # the bound is tight: the largest file as the bound gives the same split
        again, _, _ = split_with(idx, "split-mb-tight", "--max-bytes", str(max(sizes)))
        check(again == ranges, (bound, again, ranges))
        rc, out, err = run("verify", mpath)
        expect(rc, out, err, 0)
    one_row = split_with(idx, "split-mb-one", "--max-rows", "1")[1][0]
    rc, out, err = run("split", idx, os.path.join(WORK, "split-mb-small"),
                       "--max-bytes", str(one_row - 1))
    expect(rc, out, err, 1)
    check("--max-bytes %d is too small: the shard holding row 0 alone is %d bytes"
          % (one_row - 1, one_row) in err, err)
    check(not os.path.exists(os.path.join(WORK, "split-mb-small", "manifest.json")), "none")


def test_split_max_bytes_with_keys_of_unequal_length():
    # Row 5's key is 1200 bytes, rows are 64 bytes (16 f32): the equal split puts it
    # with five more rows, over a bound that the split with the smallest largest file
    # (it and at most two more rows) keeps; one row alone too big names it.
    keys = ["k%d" % i for i in range(12)]
    keys[5] = "long" + "x" * 1196
    src = os.path.join(WORK, "split-keys.txt")
    with open(src, "w") as f:
        for i, k in enumerate(keys):
            f.write("%s %s\n" % (k, " ".join(str(i * j % 7) for j in range(16))))
    idx = os.path.join(WORK, "split-keys.ldsi")
    rc, out, err = run("pack", src, idx, "--format", "glove")
    expect(rc, out, err, 0)
    alone = split_with(idx, "split-keys-1", "--max-rows", "1")[1]
    check(max(alone) == alone[5], alone)
    bound = alone[5] + 2 * 64
    ranges, sizes, mpath = split_with(idx, "split-keys-b", "--max-bytes", str(bound))
    check(len(ranges) == 3, ranges)   # rows 0-4 cannot join row 5 whole: 3 at least
    check(max(sizes) <= bound, (sizes, bound))
    check(sum(r for _, r in ranges) == 12 and ranges[0][0] == 0, ranges)
    check(all(a + n == b for (a, n), (b, _) in zip(ranges, ranges[1:])), ranges)
    equal = split_with(idx, "split-keys-eq", "--shards", str(len(ranges)))[1]
    check(max(equal) > bound, ("the equal split would have fit", equal, bound))
    rc, out, err = run("verify", mpath)
    expect(rc, out, err, 0)
    rc, out, err = run("keys", idx)
    got = ""
    for s in json.load(open(mpath))["shards"]:
        got += run("keys", os.path.join(os.path.dirname(mpath), s["file"]))[1]
    check(got == out, (got, out))
    rc, out, err = run("split", idx, os.path.join(WORK, "split-keys-small"),
                       "--max-bytes", str(alone[5] - 1))
    expect(rc, out, err, 1)
    check("the shard holding row 5 alone is %d bytes" % alone[5] in err, err)


def test_a_failed_split_leaves_the_split_before_it():
    # A split that fails (here: keys declared unique that repeat, refused by the writer)
    # leaves the split already in OUTDIR verifiable (it had overwritten shard-0000), and no
    # staging file; a later split into fewer shards removes the shards no manifest names.
    outdir, man = split_tiny("split-keep", 3)
    bad = os.path.join(os.path.dirname(os.path.dirname(FIXTURES)), "bad",
                       "keys-duplicate.E_DUP_KEY.ldsi")
    rc, out, err = run("split", bad, outdir, "--shards", "1")
    expect(rc, out, err, 1)
    check("repeat" in err or "duplicate" in err, err)
    rc, out, err = run("verify", os.path.join(outdir, "manifest.json"))
    expect(rc, out, err, 0)
    check(out.count(": ok: rows") == 3, out)
    check(sorted(os.listdir(outdir)) == ["manifest.json", "shard-0000.ldsi", "shard-0001.ldsi",
                                         "shard-0002.ldsi"], os.listdir(outdir))
    rc, out, err = run("split", INDEX, outdir, "--shards", "2")
    expect(rc, out, err, 0)
    check(sorted(os.listdir(outdir)) == ["manifest.json", "shard-0000.ldsi", "shard-0001.ldsi"],
          os.listdir(outdir))


def test_split_refuses_repeated_keys_planted_links_and_keeps_its_input():
    # Keys declared unique that repeat are refused however many shards (with 2, each
    # shard was unique alone and the split passed verify).
    bad = os.path.join(os.path.dirname(os.path.dirname(FIXTURES)), "bad",
                       "keys-duplicate.E_DUP_KEY.ldsi")
    out = os.path.join(WORK, "split-dupkeys")
    shutil.rmtree(out, ignore_errors=True)
    rc, o, err = run("split", bad, out, "--shards", "2")
    expect(rc, o, err, 1)
    check("repeats the key of row 0" in err, err)
    check(not os.path.exists(os.path.join(out, "manifest.json")), os.listdir(out))
    # A link planted at a staging name is never written through (staging names hold the
    # writer's pid now, .shard-NNNN.ldsi.lds-tmp-PID-staged: an old-style name and one of
    # another pid are someone else's, left alone).
    outdir, man = split_tiny("split-planted", 2)
    victim = os.path.join(WORK, "victim.txt")
    with open(victim, "w") as f:
        f.write("mine")
    planted = [os.path.join(outdir, ".shard-0000.ldsi.split-tmp"),
               os.path.join(outdir, ".shard-0000.ldsi.lds-tmp-1-staged")]
    for p in planted:
        os.symlink(victim, p)
    rc, o, err = run("split", INDEX, outdir, "--shards", "2")
    expect(rc, o, err, 0)
    with open(victim) as f:
        check(f.read() == "mine", "the planted link's target is untouched")
    check(not os.path.islink(os.path.join(outdir, "shard-0000.ldsi")), "shard-0000 is a file")
    for p in planted:
        check(os.path.islink(p), p)
        os.unlink(p)
    # A manifest that cannot be written fails before any shard is renamed.
    before = {n: open(os.path.join(outdir, n), "rb").read() for n in os.listdir(outdir)}
    os.unlink(os.path.join(outdir, "manifest.json"))
    os.symlink("/proc/version", os.path.join(outdir, "manifest.json"))
    rc, o, err = run("split", INDEX, outdir, "--shards", "3")
    expect(rc, o, err, 1)
    for n in ("shard-0000.ldsi", "shard-0001.ldsi"):
        with open(os.path.join(outdir, n), "rb") as f:
            check(f.read() == before[n], n + " untouched by the failed split")
    check(sorted(os.listdir(outdir)) == ["manifest.json", "shard-0000.ldsi", "shard-0001.ldsi"],
          os.listdir(outdir))
    # IN inside OUTDIR under a shard name past the new count is not removed.
    outdir, man = split_tiny("split-own-input", 3)
    own = os.path.join(outdir, "shard-0002.ldsi")
    rc, o, err = run("split", own, outdir, "--shards", "1")
    expect(rc, o, err, 0)
    check(os.path.exists(own), os.listdir(outdir))


def test_verify_manifest_names_a_corrupted_shard():
    outdir, man = split_tiny("split-bad", 3)
    path = os.path.join(outdir, "shard-0001.ldsi")
    with open(path, "r+b") as f:
        f.seek(64 + 2)
        b = f.read(1)[0]
        f.seek(64 + 2)
        f.write(bytes([b ^ 1]))
    rc, out, err = run("verify", os.path.join(outdir, "manifest.json"))
    expect(rc, out, err, 1)
    check("shards[1] (shard-0001.ldsi) failed verification" in err, err)
    check("checksum" in err, err)
    check("shard-0000.ldsi: ok" in out and "shard-0002.ldsi: ok" in out, out)
    check("3 shards" not in out, out)


def test_verify_manifest_names_a_swapped_shard():
    # Every shard is sound on its own, but not the one the manifest names.
    outdir, man = split_tiny("split-swap", 3)
    os.replace(os.path.join(outdir, "shard-0002.ldsi"), os.path.join(outdir, "shard-0001.ldsi"))
    rc, out, err = run("verify", os.path.join(outdir, "manifest.json"))
    expect(rc, out, err, 1)
    check("shards[1] (shard-0001.ldsi): checksum differs from the manifest's" in err, err)


def test_verify_manifest_escapes_names_and_shows_the_values_that_differ():
    # A shard file named with terminal escapes: every line naming it is escaped (the
    # "failed verification" line printed ESC and a C1 byte raw); such a name is refused
    # now (docs/format.md MF9), the refusal escaped too. A metric that differs shows both
    # metrics (it showed the two equal checksums).
    outdir, doc = split_tiny("split-esc", 2)
    man = os.path.join(outdir, "manifest.json")
    esc = "\x1b[31mRED\u009b"
    os.replace(os.path.join(outdir, "shard-0000.ldsi"), os.path.join(outdir, esc))
    doc["shards"][0]["file"] = esc
    with open(man, "w") as f:
        json.dump(doc, f)
    p = subprocess.run([LODESTAR, "verify", man], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    check(p.returncode == 1, p.stderr)
    raw = p.stdout + p.stderr
    check(b"\x1b" not in raw and "\u009b".encode() not in raw, raw)
    err = p.stderr.decode()
    check("shards[0].file: " in err and "contains a control character (MF9)" in err, err)
    check("\\x1b[31mRED" in err, err)
    os.replace(os.path.join(outdir, esc), os.path.join(outdir, "shard-0000.ldsi"))
    doc["shards"][0]["file"] = "shard-0000.ldsi"
    doc["metric"] = "l2" if doc["metric"] != "l2" else "dot"
    with open(man, "w") as f:
        json.dump(doc, f)
    rc, out, err = run("verify", man)
    expect(rc, out, err, 1)
    check("metric differs from the manifest's (file cosine, manifest " + doc["metric"] + ")" in err,
          err)


def test_verify_manifest_is_as_strict_as_the_python_reader():
    # Trailing bytes, a NUL in a file name, another version, a wrong payload_bytes, a
    # syntax error (named by byte), and a first_row past 2^63 shown as written: verify
    # said ok to the first four and showed 2^64-1 as 9223372036854775807.
    outdir, doc = split_tiny("split-strict", 2)
    man = os.path.join(outdir, "manifest.json")
    text = json.dumps(doc)

    def verify_with(raw, want):
        with open(man, "w") as f:
            f.write(raw)
        rc, out, err = run("verify", man)
        expect(rc, out, err, 1)
        check(want in err, (want, err))

    def changed(edit):
        d = json.loads(text)
        edit(d)
        return json.dumps(d)

    verify_with(text + "\n{}", "bytes after the JSON object (MF1) (at byte")
    verify_with(changed(lambda d: d["shards"][0].update(file="shard-0000.ldsi\u0000x")),
                "shards[0].file: contains a NUL character")
    verify_with(changed(lambda d: d.update(version=2)),
                "version: 2, and this library reads version 1 only (MF4)")
    pb = doc["shards"][1]["payload_bytes"]
    verify_with(changed(lambda d: d["shards"][1].update(payload_bytes=pb + 64)),
                f"payload_bytes differs from the manifest's (file {pb}, manifest {pb + 64})")
    verify_with(text[:-3], "the text ends inside a JSON value (MF1) (at byte")
    verify_with(changed(lambda d: d["shards"][0].update(first_row=2 ** 64 - 1)),
                "first_row: 18446744073709551615 ")
    with open(man, "w") as f:
        f.write(text + "\n")
    rc, out, err = run("verify", man)
    expect(rc, out, err, 0)


def test_verify_manifest_of_100000_entries_reads_a_shared_shard_once():
    # 100,000 entries naming one 8 MiB shard: verify loaded and hashed the shard once per
    # entry (800 GB of reads; not done after minutes), it loads each location once now
    # (docs/format.md MF17; the count itself is asserted in tests/test_manifest.c).
    rows, dim = 2048, 1024
    src = os.path.join(WORK, "big.fvecs")
    with open(src, "wb") as f:
        row = struct.pack("<i", dim) + struct.pack("<%df" % dim, *[0.5] * dim)
        for r in range(rows):
            f.write(row[:4] + struct.pack("<f", float(r + 1)) + row[8:])
    outdir = os.path.join(WORK, "split-100k")
    shutil.rmtree(outdir, ignore_errors=True)
    big = os.path.join(WORK, "big.ldsi")
    rc, out, err = run("pack", src, big)
    expect(rc, out, err, 0)
    rc, out, err = run("split", big, outdir, "--shards", "1")
    expect(rc, out, err, 0)
    man = os.path.join(outdir, "manifest.json")
    with open(man) as f:
        doc = json.load(f)
    n = 100000
    doc["shards"] = [dict(doc["shards"][0], first_row=rows * i) for i in range(n)]
    doc["rows"] = rows * n
    with open(man, "w") as f:
        json.dump(doc, f)
    p = subprocess.run([LODESTAR, "verify", man], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60 * (5 if SANITIZED else 1))
    check(p.returncode == 0, p.stderr)
    lines = p.stdout.decode().splitlines()
    check(len(lines) == n + 1, len(lines))
    check(lines[-1].endswith("manifest.json: ok: %d shards, %d rows" % (n, rows * n)), lines[-1])
    check(lines[n - 1].startswith("shard-0000.ldsi: ok: rows [%d, %d)" % (rows * (n - 1),
                                                                         rows * n)), lines[n - 1])


def test_verify_manifest_refuses_bad_row_ranges():
    outdir, man = split_tiny("split-ranges", 3)
    mpath = os.path.join(outdir, "manifest.json")
    cases = [
        ("overlap", 1, "first_row", 2, "shards[1].first_row: 2 overlaps the rows before it"),
        ("gap", 1, "first_row", 4, "shards[1].first_row: 4 leaves rows 3 .. 3 in no shard"),
        ("past", 2, "rows", 3, "shards[2].rows: 3 goes past the manifest's 7 rows"),
        ("short", 2, "rows", 1, "manifest.json: rows: 7, but the shards cover 6 rows"),
        ("negative", 0, "rows", -1, "a number that is not a non-negative integer (MF2)"),
    ]
    for name, i, key, value, message in cases:
        bad = json.loads(json.dumps(man))
        bad["shards"][i][key] = value
        with open(mpath, "w") as f:
            json.dump(bad, f)
        rc, out, err = run("verify", mpath)
        expect(rc, out, err, 1)
        check(message in err, (name, err))
        check(out == "", (name, out))
    with open(mpath, "wb") as f:
        f.truncate((64 << 20) + 1)
    rc, out, err = run("verify", mpath)
    expect(rc, out, err, 1)
    check("more than the manifest limit of 67108864" in err, err)
    bad = json.loads(json.dumps(man))
    bad["shards"][0]["file"] = "../tiny.ldsi"
    with open(mpath, "w") as f:
        json.dump(bad, f)
    rc, out, err = run("verify", mpath)
    expect(rc, out, err, 1)
    check('shards[0].file: "../tiny.ldsi" is neither a file name' in err, err)


def test_runner_counts_skips():
    # lds_testrun itself: a skipped test is counted and named as skipped, not as passed.
    import contextlib
    import io

    def ok():
        pass

    def bad():
        check(False, "no")

    def skipped():
        skip("not here")

    cases = [
        ({"test_a": ok, "test_b": skipped, "test_c": bad}, 1, "1 passed, 1 failed, 1 skipped"),
        ({"test_a": ok, "test_b": skipped}, 0, "1 passed, 0 failed, 1 skipped"),
        ({"test_b": skipped}, 77, "0 passed, 0 failed, 1 skipped"),
    ]
    for ns, code, last in cases:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = run_tests(ns, tempfile.mkdtemp(prefix="lodestar-runner-"))
        lines = out.getvalue().splitlines()
        check(rc == code and lines[-1] == last, f"{rc} {lines}")
        check("skip test_b: not here" in lines, lines)


def test_readme_example():
    # Run by meson always with EXAMPLE; without it this test fails rather than passing
    # having run nothing.
    check(EXAMPLE is not None and os.access(EXAMPLE, os.X_OK),
          f"the README example program was not given (or is not executable): {EXAMPLE}")
    p = subprocess.run([EXAMPLE, INDEX, "king"], stdout=subprocess.PIPE, timeout=60)
    check(p.returncode == 0, p.returncode)
    out = p.stdout.decode()
    check(
        out == "king 1.0000\nqueen 0.8000\nprince 0.6000\nroyal 0.5000\napple 0.0000\n",
        out,
    )


def test_argv_queries_and_bidi_keys_are_escaped():
    # getopt's own messages (opterr) would echo argv raw: ours are escaped.
    rc, out, err = run("--bogus-\x1b[31m")
    expect(rc, out, err, 2)
    check(err.startswith("lodestar: unrecognized option '--bogus-\\x1b[31m'\n"), repr(err))
    rc, out, err = run("info", "--bogus-\x1b")
    expect(rc, out, err, 2)
    check(err == "lodestar info: unrecognized option '--bogus-\\x1b'\n"
          "Try 'lodestar info --help'.\n", repr(err))
    rc, out, err = run("similar", "--row")
    check(err.startswith("lodestar similar: option '--row' requires an argument\n"), repr(err))
    # Every command names the refused option (export and split printed only the hint).
    for cmd in ("export", "split", "keys", "pack", "get", "verify"):
        rc, out, err = run(cmd, "--bogus-\x1b", "a", "b")
        expect(rc, out, err, 2)
        check(err == "lodestar %s: unrecognized option '--bogus-\\x1b'\n"
              "Try 'lodestar %s --help'.\n" % (cmd, cmd), repr(err))
    rc, out, err = run("export", "--dtype")
    check(err.startswith("lodestar export: option '--dtype' requires an argument\n"), repr(err))
    rc, out, err = run("\x1b[31m")
    expect(rc, out, err, 2)
    check(err.startswith("lodestar: unknown command '\\x1b[31m'\n"), repr(err))
    # A --queries line that is neither a key nor a vector is quoted escaped in the reason.
    rc, out, err = run("similar", "--queries", "-", INDEX, input_bytes=b"1,0,0,\x1b[2J\n")
    expect(rc, out, err, 1)
    check("\x1b" not in err and "element 3 '\\x1b[2J' is not a finite decimal number" in err,
          repr(err))
    # Bidi overrides and zero-width marks in keys print as \uXXXX in text output.
    src = os.path.join(WORK, "bidi.txt")
    with open(src, "w", encoding="utf-8") as f:
        f.write("ab\u202ecd 1 0\nx\u200by 0 1\n")
    ix = os.path.join(WORK, "bidi.ldsi")
    pack(src, ix)
    rc, out, err = run("get", ix, "ab\u202ecd")
    expect(rc, out, err, 0)
    check(out.splitlines()[0] == "key:    ab\\u202ecd", repr(out))
    rc, out, err = run("similar", ix, "--row", "0", "-k", "1")
    expect(rc, out, err, 0)
    check(out.splitlines()[1].split()[3] == "x\\u200by", repr(out))
    rc, out, err = run("get", ix, "\u202e")
    expect(rc, out, err, 1)
    check(err == f"lodestar: {ix}: key '\\u202e' not found\n", repr(err))


def test_vector_elements_count_from_0_and_empty_ones_are_refused():
    cases = [
        ("1,2,x,0", "lodestar: --vector: element 2 'x' is not a finite decimal number\n"),
        ("1,,2,3", "lodestar: --vector: element 1 is empty (two commas, or a comma with no "
                   "number before it)\n"),
        (",1,2,3,4", "lodestar: --vector: element 0 is empty (two commas, or a comma with no "
                     "number before it)\n"),
        ("1,2,3,4,", "lodestar: --vector: element 4 is empty (a comma ends the vector)\n"),
        ("1, ,2,3", "lodestar: --vector: element 1 is empty (two commas, or a comma with no "
                    "number before it)\n"),
        ("0,1e39,0,0", "lodestar: --vector: element 1 '1e39' is out of float32's range "
                       "(largest 3.40282347e+38)\n"),
        ("0,-1e39,0,0", "lodestar: --vector: element 1 '-1e39' is out of float32's range "
                        "(largest 3.40282347e+38)\n"),
    ]
    for v, want in cases:
        rc, out, err = run("similar", "--vector", v, INDEX)
        expect(rc, out, err, 1)
        check(err == want, (v, err))
    # "1 2 3 4" and "1, 2, 3, 4" are still vectors.
    for v in ("1 0 0 0", "1, 0, 0, 0", " 1,0 0,0 "):
        rc, out, err = run("similar", "--vector", v, INDEX, "-k", "1")
        expect(rc, out, err, 0)
    # A NUL byte in a vector file: the message quotes the token with it, escaped.
    vf = os.path.join(WORK, "nul.txt")
    with open(vf, "wb") as f:
        f.write(b"1,2\x009,3,4\n")
    rc, out, err = run("similar", "--vector-file", vf, INDEX)
    expect(rc, out, err, 1)
    check(err == f"lodestar: {vf}: element 1 '2\\x009' is not a finite decimal number\n",
          repr(err))


def test_a_broken_key_table_is_not_reported_as_a_missing_key():
    # keys alpha, beta, alpha under the unique flag: the repeat is found at the first
    # lookup (ADR 0010) and reported as such, whatever the key looked up.
    bad = os.path.join(os.path.dirname(os.path.dirname(FIXTURES)), "bad",
                       "keys-duplicate.E_DUP_KEY.ldsi")
    want = (f"lodestar: {bad}: keys.bytes: the key of row 2 repeats the key of row 0 "
            "(at byte 217)\n")
    for line in (b"beta\n", b"gamma\n", b"1,0,0,0\n"):
        rc, out, err = run("similar", "--queries", "-", bad, input_bytes=line)
        expect(rc, out, err, 1)
        check(err == want and out == "", (line, err))
    rc, out, err = run("similar", bad, "beta")
    expect(rc, out, err, 1)
    check(err == want, err)


def test_query_files_that_are_devices_or_too_big_are_refused():
    # /dev/zero never ends: refused as a device, not read until "cannot read: Success".
    for opt in ("--queries", "--vector-file"):
        rc, out, err = run("similar", opt, "/dev/zero", INDEX)
        expect(rc, out, err, 1)
        check(err == "lodestar: /dev/zero: not a regular file or a pipe (a device or a "
              "directory)\n", (opt, err))
    big = os.path.join(WORK, "big-queries.txt")
    with open(big, "wb") as f:
        f.truncate((64 << 20) + 1)
    rc, out, err = run("similar", "--queries", big, INDEX)
    expect(rc, out, err, 1)
    check(err == f"lodestar: {big}: 67108865 bytes, more than the 67108864 (64 MiB) read\n",
          err)
    os.unlink(big)
    # Standard input is bounded as it is read: 64 MiB pass, one byte more does not.
    body = b"king\n" + b"\n" * ((64 << 20) - 5)
    rc, out, err = run("similar", "--queries", "-", INDEX, "-k", "1", input_bytes=body)
    expect(rc, out, err, 0)
    check(json.loads(out)["neighbours"] == [{"key": "queen", "row": 1, "score": 0.8}], out)
    rc, out, err = run("similar", "--queries", "-", INDEX, "-k", "1", input_bytes=body + b"\n")
    expect(rc, out, err, 1)
    check(err == "lodestar: -: more than 67108864 bytes (64 MiB), the most read\n" and out == "",
          err)


def test_mmap_file_truncated_while_in_use_exits_1_with_a_line():
    # Deterministic: the CLI loads (maps) the index, then opens the FIFO given as
    # --queries; our open for writing returns only once it has, so the truncation
    # comes after the load and before the first key lookup touches the mapping.
    ix = os.path.join(WORK, "mapped.ldsi")
    shutil.copy(INDEX, ix)
    fifo = os.path.join(WORK, "queries.fifo")
    os.mkfifo(fifo)
    p = subprocess.Popen([LODESTAR, "similar", "--mmap", "--queries", fifo, ix],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(fifo, "wb") as f:
        os.truncate(ix, 0)
        f.write(b"king\n")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 1, f"exit {p.returncode} (135 is the bus error): {err!r}")
    check(err == b"lodestar: the mapped index file changed underneath (truncated or "
          b"rewritten while in use with --mmap); stopped\n" and out == b"", err)


def test_info_mmap_says_when_mapping_was_not_used():
    zst = os.path.join(WORK, "mm.ldsi.zst")
    p = subprocess.run(["zstd", "-q", "-f", INDEX, "-o", zst])
    check(p.returncode == 0, "zstd")
    rc, out, err = run("info", "--mmap", zst)
    expect(rc, out, err, 0)
    lines = out.splitlines()
    i = lines.index("load path:  pooled (adopt)")
    check(lines[i + 1] == "mmap:       not used (compressed input)", out)
    j = info_json("--mmap", zst)
    check(j["load"]["path"] == "pooled" and j["load"]["mmap_not_used"] == "compressed input", j)
    with open(INDEX, "rb") as f:
        rc, out, err = run("info", "--mmap", "-", input_bytes=f.read())
    expect(rc, out, err, 0)
    check("mmap:       not used (not a regular file)\n" in out, out)
    # Mapped, or not asked: no such line, no such field.
    rc, out, err = run("info", "--mmap", INDEX)
    check("load path:  mapped" in out and "mmap:" not in out, out)
    check("mmap_not_used" not in info_json(zst)["load"], "not asked")


def test_readme_install_lines_are_current():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = readme.splitlines()
    # Debian's python (numpy, mesonpy), not whichever python3 is first on PATH.
    check(any(line.startswith("/usr/bin/python3 -m venv --system-site-packages v ")
              for line in lines), "venv line")
    check(any(line.startswith("v/bin/pip install --no-build-isolation . ") for line in lines),
          "pip line")
    check("python3 -m venv" not in readme.replace("/usr/bin/python3 -m venv", ""), "bare python3")
    with open(os.path.join(root, ".gitignore")) as f:
        check("/v/" in f.read().splitlines(), ".gitignore lacks the venv v/")
    # "a usage error": the message and the --help pointer on stderr, nothing on stdout.
    rc, out, err = run("similar", "--bogus")
    check(rc == 2 and out == "" and err == "lodestar similar: unrecognized option '--bogus'\n"
          "Try 'lodestar similar --help'.\n", (out, err))


# ---- errors that say what to do (issue 28): what the file is, the command that converts it


def _foreign_files():
    """A GloVe text, a word2vec text, an .npy, an .npz, gzip/zstd/xz files and an HDF5
    signature, written by hand (standard library only); {name: path}."""
    d = os.path.join(WORK, "foreign")
    os.makedirs(d, exist_ok=True)
    files = {}

    def put(name, data):
        files[name] = os.path.join(d, name)
        with open(files[name], "wb") as f:
            f.write(data)

    with open(TINY, "rb") as f:
        put("glove.txt", f.read())
    put("w2v.vec", b"2 3\na 1 2 3\nb 4 5 6\n")
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
    header += b" " * (64 - 10 - len(header) - 1) + b"\n"
    put("a.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 16)
    put("a.npz", b"PK\x03\x04" + b"\0" * 60)
    put("a.txt.gz", b"\x1f\x8b\x08\x00" + b"\0" * 60)
    put("a.txt.zst", b"\x28\xb5\x2f\xfd" + b"\0" * 60)
    # after a skippable frame (RFC 8878 3.1.2), small or larger than the first KiB sniffed
    put("s.txt.zst", struct.pack("<II", 0x184D2A50, 4) + b"meta" + b"\x28\xb5\x2f\xfd" + b"\0" * 60)
    put("s2.txt.zst", struct.pack("<II", 0x184D2A5F, 4000) + b"m" * 4000 + b"\x28\xb5\x2f\xfd" +
        b"\0" * 60)
    put("a.txt.xz", b"\xfd7zXZ\x00" + b"\0" * 60)
    put("a.hdf5", b"\x89HDF\r\n\x1a\n" + b"\0" * 120)
    return files


def test_info_says_what_a_foreign_file_is_and_how_to_convert_it():
    f = _foreign_files()
    want = {
        "glove.txt": "is a GloVe text file, not a lodestar index: convert it with "
                     "`lodestar pack %s glove.ldsi`",
        "w2v.vec": "is a word2vec text file, not a lodestar index: convert it with "
                   "`lodestar pack %s w2v.ldsi`",
        "a.npy": "is an .npy file, not a lodestar index: convert it with `lodestar pack %s a.ldsi`",
        "a.npz": "is a zip file (.npz), not a lodestar index: convert it with "
                 "`lodestar pack --format npz %s a.ldsi`",
        "a.hdf5": "is an HDF5 file, not a lodestar index: convert it with "
                  "`lodestar pack --format hdf5 %s a.ldsi`",
        "a.txt.gz": "is a gzip-compressed file, not a lodestar index: if it holds embeddings, "
                    "`lodestar pack %s a.ldsi`",
        "a.txt.zst": "is a zstd-compressed file",
        "s.txt.zst": "is a zstd-compressed file, not a lodestar index: if it holds embeddings",
        "s2.txt.zst": "is a zstd-compressed file, not a lodestar index: if it holds embeddings",
        "a.txt.xz": "is an xz-compressed file",
    }
    for name, text in want.items():
        rc, out, err = run("info", f[name])
        expect(rc, out, err, 1)
        line = "lodestar: %s %s" % (f[name], text.replace("%s", f[name]))
        check(line in err, (name, err))
    rc, out, err = run("info", INDEX if os.path.exists(INDEX) else TINY)
    check("is a" not in err, err)  # an index (or a missing one) gets no such line


def test_pack_with_the_wrong_format_names_the_file():
    f = _foreign_files()
    out_path = os.path.join(WORK, "wrong.ldsi")
    rc, out, err = run("pack", f["a.npy"], out_path, "--format", "glove")
    expect(rc, out, err, 1)
    check(err == "lodestar: %s is an .npy file, not glove input: pack it with --format npy\n"
          % f["a.npy"], err)
    rc, out, err = run("pack", f["a.npz"], out_path, "--format", "npy")
    check(rc == 1 and "is a zip file (.npz), not npy input: pack it with --format npz" in err,
          err)
    pack(TINY, INDEX)
    rc, out, err = run("pack", INDEX, out_path, "--format", "glove")
    check(rc == 1 and "is a lodestar index already, not glove input: nothing to pack" in err,
          err)
    # A word2vec header asked for GloVe text stays the importer's own message.
    rc, out, err = run("pack", f["w2v.vec"], out_path, "--format", "glove")
    check(rc == 1 and "not glove input" not in err, err)
    check(not os.path.exists(out_path), "OUT written")


def test_unknown_format_lists_the_formats():
    rc, out, err = run("pack", "--format", "foo", TINY, os.path.join(WORK, "x.ldsi"))
    expect(rc, out, err, 2)
    check("unknown format 'foo' (glove, word2vec, fasttext, word2vec-bin, npy, npz, fvecs, "
          "hdf5)" in err, err)
    rc, out, err = run("export", "--format", "foo", TINY, os.path.join(WORK, "x.txt"))
    expect(rc, out, err, 2)
    check("(npy, fvecs, glove, word2vec, word2vec-bin)" in err, err)


def test_similar_on_a_manifest_points_to_python():
    pack(TINY, INDEX)
    d = os.path.join(WORK, "split-hint")
    rc, out, err = run("split", INDEX, d, "--shards", "2")
    expect(rc, out, err, 0)
    manifest = os.path.join(d, "manifest.json")
    rc, out, err = run("similar", manifest, "king")
    expect(rc, out, err, 1)
    check("is a lodestar shard manifest (JSON), written by `lodestar split`: a split is "
          "searched through Python, lodestar.search_shards(\"%s\", queries, k=10)" % manifest
          in err, err)


def run_fifo(cmd, feed, *extra):
    """Runs `lodestar CMD FIFO EXTRA...` with a FIFO a writer process fills with `feed` and
    closes; (exit code, stderr), or None when it did not end within 20 s (killed)."""
    ff = os.path.join(WORK, "fifo-%s" % cmd)
    if os.path.exists(ff):
        os.unlink(ff)
    os.mkfifo(ff)
    writer = subprocess.Popen([sys.executable, "-c",
                               "import sys; f = open(sys.argv[1], 'wb'); "
                               "f.write(bytes.fromhex(sys.argv[2])); f.close()",
                               ff, feed.hex()])
    try:
        p = subprocess.run([LODESTAR, cmd, ff, *extra], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20)
        return p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return None
    finally:
        # a writer still waiting for a reader (the program never opened the FIFO) is ended
        try:
            writer.wait(timeout=2)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()
        os.unlink(ff)


def test_a_fifo_is_not_opened_again_for_a_hint():
    """A FIFO holding a cut index or zeros is refused and the program ends (found by a
    tester: the hint opened the FIFO a second time and waited for a writer forever)."""
    pack(TINY, INDEX)
    with open(INDEX, "rb") as f:
        head = f.read(64)
    for cmd, feed, extra in (("info", head, ()), ("verify", head, ()),
                             ("similar", head, ("king",)), ("info", bytes(10), ())):
        got = run_fifo(cmd, feed, *extra)
        check(got is not None, f"lodestar {cmd} on a FIFO of {len(feed)} bytes did not end")
        rc, err = got
        check(rc == 1 and "fifo-" + cmd in err and "lodestar pack" not in err, f"{rc} {err}")


def test_backslash_and_slashless_urls_hide_their_password():
    """A name that starts with a URL scheme is shown redacted whatever follows the ':'
    (found by a tester: "http:\\\\u:pw@h\\x" and "http:u:pw@h/x" were printed with the
    password); a Windows-looking name and a plain path are shown as they are."""
    for name in ("ftp::s3cret@h", "http::s3cret@h/x", "http:u:s3cret" + "a" * 3000 + "@h/x",
                 "http:\\\\u:s3cret@127.0.0.1:1\\x.ldsi", "https:\\/\\/u:s3cret@h/x",
                 "HTTP:\\\\u:s3cret@h/x", "http:u:s3cret@h/x", "http:/u:s3cret@h/x"):
        for cmd in (("info", name), ("verify", name), ("similar", name, "king")):
            rc, out, err = run(*cmd)
            check(rc == 1 and "s3cret" not in err and "s3cret" not in out and err.strip(),
                  f"{cmd}: {rc} {err}")
    rc, out, err = run("info", "http:u:s3cret@h/x")
    check(err.startswith("lodestar: http:h/x: "), err)
    rc, out, err = run("info", "C:\\x")
    check(err.startswith("lodestar: C:\\\\x: cannot open"), err)
    # an existing file by such a name, with a hint to pack it: the hint's commands too
    npy = "http:u:s3cret@h.npy"
    with open(os.path.join(WORK, npy), "wb") as f:
        f.write(b"\x93NUMPY")
    p = subprocess.run([LODESTAR, "info", npy], cwd=WORK, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    err = p.stderr.decode(errors="replace")
    check("`lodestar pack http:h.npy http:h.ldsi`" in err and "s3cret" not in err, err)
    rc, out, err = run("info", "no/such/dir.ldsi")
    check(err.startswith("lodestar: no/such/dir.ldsi: cannot open"), err)


BIG = os.path.join(WORK, "edges-3mib.ldsi")


def big_index():
    """A 3 MiB index (12000 rows x 64 dims of pseudo-random values, which zstd hardly
    shrinks: its first block is far past the first KiB of the compressed file)."""
    if not os.path.exists(BIG):
        import random
        rnd = random.Random(7)
        src = os.path.join(WORK, "edges-3mib.txt")
        with open(src, "w") as f:
            for i in range(12000):
                f.write("w%d %s\n" % (i, " ".join("%.5f" % rnd.uniform(-1, 1)
                                                 for _ in range(64))))
        pack(src, BIG)
    return BIG


def test_a_cut_compressed_index_gets_no_pack_hint():
    """A multi-MB compressed index cut mid-way is a compressed index, not a file to pack
    (found by a tester: only the first KiB of the zstd frame was decompressed, which held no
    whole block, and the hint said "not a lodestar index ... lodestar pack")."""
    for tool in ("zstd", "pzstd"):
        if shutil.which(tool) is None:
            if tool == "zstd":
                skip("no zstd program")
            continue
        z = subprocess.run([tool, "-qc", big_index()], stdout=subprocess.PIPE,
                           check=True).stdout
        check(len(z) > 2_000_000, len(z))
        cut = os.path.join(WORK, "big-cut-%s.ldsi.zst" % tool)
        with open(cut, "wb") as f:
            f.write(z[:500000])
        rc, out, err = run("info", cut)
        check(rc == 1 and "lodestar pack" not in err and "not a lodestar index" not in err
              and "the input ended inside the zstd frame after 500000 compressed bytes" in err,
              f"{tool}: {rc} {err}")


def test_a_compressed_index_of_several_frames_says_so():
    """An index compressed as two zstd frames (found by a tester: only "the input ended after
    699936 of the ... declared payload bytes" was said) gets the line that says a compressed
    index is one frame and what to do; one frame, or one cut, does not."""
    if shutil.which("zstd") is None:
        skip("no zstd program")
    with open(big_index(), "rb") as f:
        raw = f.read()
    frames = [subprocess.run(["zstd", "-qc"], input=part, stdout=subprocess.PIPE,
                             check=True).stdout for part in (raw[:700000], raw[700000:])]
    mf = os.path.join(WORK, "big-two.ldsi.zst")
    with open(mf, "wb") as f:
        f.write(b"".join(frames))
    line = (f"lodestar: {mf}: a compressed index must be one zstd frame; this file has "
            "several: decompress it first (zstd -d) or recompress it as one frame")
    for cmd in (("info", mf), ("verify", mf), ("similar", mf, "w1")):
        rc, out, err = run(*cmd)
        check(rc == 1 and line in err and "lodestar pack" not in err, f"{cmd}: {rc} {err}")
    one = os.path.join(WORK, "big-one-cut.ldsi.zst")
    with open(one, "wb") as f:
        f.write(frames[0][:len(frames[0]) // 2])
    rc, out, err = run("info", one)
    check(rc == 1 and "one zstd frame" not in err, err)


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
