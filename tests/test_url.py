#!/usr/bin/env python3
"""Tests of lds_load_url and URLs in the CLI, against real servers on 127.0.0.1.

usage: test_url.py LODESTAR URL_CLIENT FIXTURE_DIR [--nginx [--glove FILE]]

Starts tests/http_fault_server.py (standard library) on a free loopback port and
stops it at the end; with --nginx, runs the nginx cases instead (nginx started the
same way; every test skips, and the script exits 77, when /usr/sbin/nginx is
missing). URL_CLIENT is tests/url_client.c: it loads one URL from a pool of its own
and prints the status, message, field, pool rents/returns and peak RSS. If the
library was built without libcurl, every case checks the LDS_E_UNSUPPORTED answer
instead. --glove FILE (suite 'slow'): also the full GloVe index through nginx, compared
with the file (skipped when FILE is missing).
"""
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests, skip  # noqa: E402

LODESTAR = os.path.abspath(sys.argv[1])
CLIENT = os.path.abspath(sys.argv[2])
FIXTURES = os.path.abspath(sys.argv[3])
NGINX_MODE = "--nginx" in sys.argv[4:]
GLOVE = sys.argv[sys.argv.index("--glove") + 1] if "--glove" in sys.argv[4:] else None
HERE = os.path.dirname(os.path.abspath(__file__))
WORK = tempfile.mkdtemp(prefix="lodestar-test-url-")
SERVE = os.path.join(WORK, "serve")
os.mkdir(SERVE)
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sh(*args, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, **kw)
    check(p.returncode == 0, f"{args}: {p.returncode}\n{p.stderr.decode()}")
    return p.stdout.decode()


def make_fixtures():
    """tiny (7 rows), big (3000 x 64 f32, 768 KiB: many reads and callbacks), big.zst,
    and unknown (tiny's payload after a header that declares no length)."""
    tiny = os.path.join(SERVE, "tiny.ldsi")
    sh(LODESTAR, "pack", "--format", "glove", os.path.join(FIXTURES, "tiny.glove.txt"), tiny)
    rnd = random.Random(17)
    text = os.path.join(WORK, "big.txt")
    with open(text, "w") as f:
        for r in range(3000):
            f.write("w%d " % r + " ".join("%.5f" % rnd.uniform(-1, 1) for _ in range(64)) + "\n")
    big = os.path.join(SERVE, "big.ldsi")
    sh(LODESTAR, "pack", "--format", "glove", text, big)
    sh("zstd", "-q", "-f", "-3", big, "-o", big + ".zst")
    with open(os.path.join(FIXTURES, "length-unknown.header"), "rb") as f:
        header = f.read()
    with open(tiny, "rb") as f:
        b = f.read()
    # A 1.0 header declares no length: keep the 1.0 payload, without format 1.1's chunk
    # table (docs/format.md 2.5: it starts at chunk_table_offset, header bytes 24..31).
    end = 64 + struct.unpack_from("<Q", b, 24)[0] if struct.unpack_from("<I", b, 12)[0] & 1 \
        else len(b)
    payload = b[64:end]
    with open(os.path.join(SERVE, "unknown.ldsi"), "wb") as f:
        f.write(header + payload)
    # The ranged-fetch cases: 768 KiB of vectors in 64 KiB chunks (format 1.1: 13 ranges,
    # the chunk table first), and the same rows in format 1.0.
    sh(CLIENT, "--write", os.path.join(SERVE, "ranged.ldsi"), "3000", "64", "65536")
    sh(CLIENT, "--write", os.path.join(SERVE, "ranged10.ldsi"), "3000", "64", "4294967295")
    # The delta cases (docs/adr/0053): a base in 4 KiB chunks, and files with row 1500 (in
    # the middle half of the file) changed, one name per case (the server counts by name).
    sh(CLIENT, "--write", os.path.join(SERVE, "dbase.ldsi"), "3000", "64", "4096")
    for name in ("dnew", "dnew-k1", "dcorrupt", "dreplace", "dnorange", "dsecret"):
        sh(CLIENT, "--write", os.path.join(SERVE, name + ".ldsi"), "3000", "64", "4096", "1500")
    sh(CLIENT, "--write", os.path.join(SERVE, "dchunk.ldsi"), "3000", "64", "8192", "1500")


make_fixtures()
SUPPORTED = None


def client(url, *opts, timeout=60):
    """Runs url_client; returns (dict of its lines, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run([CLIENT, *opts, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    secs = time.monotonic() - t0
    check(p.returncode == 0, f"url_client exit {p.returncode}: {p.stderr.decode()}")
    out = {}
    for line in p.stdout.decode().splitlines():
        k, _, v = line.partition(" ")
        out[k] = v
    return out, secs


def balanced(r, what):
    """The pool's rents equal its returns and nothing is left out on lease."""
    check(r["rents"] == r["returns"] and r["leases"] == "0",
          f"{what}: rents {r['rents']} returns {r['returns']} leases {r['leases']}")


class FaultServer:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "http_fault_server.py"),
                                   SERVE], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.p.stdout.readline().decode()
        check(line.startswith("port "), f"fault server did not start: {line!r}")
        self.port = int(line.split()[1])

    def url(self, mode, name):
        return f"http://127.0.0.1:{self.port}/{mode}/{name}"

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            _, err = self.p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            _, err = self.p.communicate()
        return err.decode()


SERVER = None


def server():
    global SERVER
    if SERVER is None:
        SERVER = FaultServer()
    return SERVER


def client_env(url, env, timeout=60):
    """client() with its own environment."""
    p = subprocess.run([CLIENT, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, env=env)
    check(p.returncode == 0, f"url_client exit {p.returncode}: {p.stderr.decode()}")
    return dict(line.partition(" ")[::2] for line in p.stdout.decode().splitlines()), p


def need_curl():
    global SUPPORTED
    if SUPPORTED is None:
        r, _ = client("http://127.0.0.1:1/x")
        SUPPORTED = r["status"] != "E_UNSUPPORTED"
    if not SUPPORTED:
        skip("built without libcurl (tested by test_without_curl_a_url_is_unsupported)")


def path_of(name):
    return os.path.join(SERVE, name)


def expect_ok(mode, name, *opts, path="pooled"):
    need_curl()
    r, _ = client(server().url(mode, name), "--file", path_of(name.removesuffix(".zst")), *opts)
    check(r["status"] == "OK", f"{mode}/{name}: {r}")
    check(r["same"] == "1", f"{mode}/{name}: differs from the file: {r}")
    check(r["path"] == path, f"{mode}/{name}: path {r['path']}, expected {path}")
    balanced(r, f"{mode}/{name}")
    return r


def expect_fail(mode, name, status, field, words, *opts):
    need_curl()
    url = server().url(mode, name)
    r, secs = client(url, *opts)
    check(r["status"] == status, f"{mode}/{name}: status {r['status']}, expected {status}: {r}")
    check(r["field"] == field, f"{mode}/{name}: field {r['field']!r}, expected {field!r}")
    check(url in r["message"] or url[:100] in r["message"],
          f"{mode}/{name}: the message names the URL: {r['message']}")
    for w in words:
        check(w in r["message"], f"{mode}/{name}: {w!r} not in {r['message']!r}")
    balanced(r, f"{mode}/{name}")
    print(f"     {mode}/{name}: {status} {r['message']}")
    return r, secs


# ---- fault server -------------------------------------------------------------------------


def fault_tests():
    def test_plain_equals_the_file():
        r = expect_ok("plain", "big.ldsi")
        check(r["http_status"] == "200" and r["resumes"] == "0", str(r))
        check(r["rows"] == "3000", str(r))
        expect_ok("plain", "tiny.ldsi")
        expect_ok("lm", "tiny.ldsi")

    def test_live_reload_from_url():
        """lds_live_reload_url: a good URL becomes generation 2; a lying server leaves
        generation 1 serving, and every rental of both tries is back in the pool."""
        need_curl()
        tiny = path_of("tiny.ldsi")
        r, _ = client(server().url("plain", "big.ldsi"), "--live", tiny)
        check(r["live_status"] == "OK", str(r))
        check(r["live_generation"] == "2" and r["live_rows"] == "3000", str(r))
        balanced(r, "live plain/big.ldsi")
        tiny_rows = client(server().url("plain", "tiny.ldsi"))[0]["rows"]
        for mode, status in (("lie-short", "E_TRUNCATED"), ("lie-long", "E_TRAILING")):
            r, _ = client(server().url(mode, "big.ldsi"), "--live", tiny)
            check(r["live_status"] == status and r["field"] == "http.content_length", str(r))
            check(r["live_generation"] == "1" and r["live_rows"] == tiny_rows, str(r))
            balanced(r, f"live {mode}/big.ldsi")

    def test_small_chunks():
        expect_ok("plain", "big.ldsi", "--chunk", "1000")

    def test_zstd_body_decodes_on_the_fly():
        r = expect_ok("plain", "big.ldsi.zst")
        check(r["compressed"] == "1", str(r))

    def test_no_content_length_takes_the_growable_path():
        expect_ok("chunked", "big.ldsi", path="pooled")  # the header declares the length
        expect_ok("close", "big.ldsi", path="pooled")
        expect_ok("chunked", "unknown.ldsi", path="growable")
        expect_ok("close", "unknown.ldsi", path="growable")

    def test_unknown_declared_length_takes_content_length():
        expect_ok("plain", "unknown.ldsi", path="pooled")

    def test_lying_content_length():
        size = os.path.getsize(path_of("big.ldsi"))
        r, _ = expect_fail("lie-long", "big.ldsi", "E_TRAILING", "http.content_length",
                           [f"Content-Length {size + 100}", f"({size})"])
        check(r["rents"] == "0", f"refused before renting: {r}")
        r, _ = expect_fail("lie-short", "big.ldsi", "E_TRUNCATED", "http.content_length",
                           [f"Content-Length {size - 100}", f"({size})"])
        check(r["rents"] == "0", f"refused before renting: {r}")
        # Without a declared length the short body is taken at its word, then the
        # parser refuses what it got (the checksum or the sections).
        r, _ = client(server().url("lie-short", "unknown.ldsi"))
        check(r["status"] not in ("OK",), str(r))
        balanced(r, "lie-short/unknown")

    def test_drip_loads():
        expect_ok("drip", "tiny.ldsi")

    def test_cancel_a_drip():
        need_curl()
        r, secs = client(server().url("drip", "big.ldsi"), "--cancel-after", "1", "--chunk", "64")
        check(r["status"] == "E_CANCELLED", str(r))
        check(secs < 10, f"cancelled in {secs:.1f} s")
        balanced(r, "drip cancel")

    def test_trickle_ends_at_the_deadline():
        """2 bytes a second keeps above the low-speed limit; the deadline ends it, naming
        the URL and the bytes received, with every rental returned (issue 24 item 3)."""
        need_curl()
        r, secs = expect_fail("trickle", "big.ldsi", "E_TIMEOUT", "http.timeout",
                              ["deadline of 1500 ms passed after", "bytes received"],
                              "--timeout", "1500")
        check(1.4 < secs < 10, f"stopped after {secs:.1f} s")
        got = int(r["message"].split("passed after ")[1].split()[0])
        check(2 <= got <= 16, f"bytes received: {r['message']}")
        # The CLI: --timeout in seconds, the same status in its message, exit 1.
        url = server().url("trickle", "big.ldsi")
        t0 = time.monotonic()
        p = subprocess.run([LODESTAR, "info", "--timeout", "1", url], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        secs = time.monotonic() - t0
        err = p.stderr.decode()
        check(p.returncode == 1 and "deadline of 1000 ms passed" in err and url in err, err)
        check(secs < 10, f"CLI stopped after {secs:.1f} s")

    def test_manifest_download_ends_at_the_deadline():
        """A manifest read from a URL is bounded by --timeout (CLI) and timeout= (Python)
        as a load is (found in review: it waited for libcurl's 30 s low-speed abort)."""
        need_curl()
        man = os.path.join(SERVE, "trickle-manifest.json")
        with open(man, "w") as f:
            f.write('{"format": "lodestar-shards", "version": 1, "rows": 1, "dim": 1, '
                    '"dtype": "f32", "metric": "dot", "has_ids": false, "has_keys": false, '
                    '"shards": [' + " " * 4096 + ']}')
        url = server().url("trickle", "trickle-manifest.json")
        t0 = time.monotonic()
        p = subprocess.run([LODESTAR, "verify", "--timeout", "1", url], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        secs = time.monotonic() - t0
        err = p.stderr.decode()
        check(p.returncode == 1 and "deadline of 1000 ms passed" in err, err)
        check(secs < 10, f"verify of a trickling manifest stopped after {secs:.1f} s")
        code = ("import sys, time, lodestar\n"
                "t = time.monotonic()\n"
                "try:\n"
                "    lodestar.read_manifest(sys.argv[1], timeout=1)\n"
                "except lodestar.DeadlineError as e:\n"
                "    print('deadline', round(time.monotonic() - t, 1), e)\n")
        # A presigned manifest URL (a query after .json) is read as a manifest, not as an
        # index (found in review: "header.magic: 7b 22 66 6f ..."), and its secret is not shown.
        signed = server().url("plain", "trickle-manifest.json") + "?X-Amz-Signature=SECRETSIG"
        p = subprocess.run([LODESTAR, "verify", signed], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        check(p.returncode == 1 and "header.magic" not in err and "shards" in err
              and "SECRETSIG" not in err, err)
        if os.environ.get("LDS_SANITIZE"):
            return  # the Python half loads the library into an uninstrumented python
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, os.pardir, "python"),
                   LODESTAR_LIB=os.path.join(os.path.dirname(os.path.dirname(LODESTAR)),
                                             "liblodestar.so"))
        p = subprocess.run(["/usr/bin/python3", "-c", code, url], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60, env=env)
        out = p.stdout.decode()
        check(p.returncode == 0 and out.startswith("deadline"), out + p.stderr.decode())
        check(float(out.split()[1]) < 10, out)

    def test_dropped_connection_resumes():
        r = expect_ok("drop", "big.ldsi")
        check(r["resumes"] == "1" and r["http_status"] == "206", str(r))
        r = expect_ok("drop", "big.ldsi.zst")
        check(r["resumes"] == "1", str(r))

    def test_dropped_without_validator_fails():
        expect_fail("drop-noval", "big.ldsi", "E_IO", "http",
                    ["after", "not resumed: no ETag or Last-Modified"])

    def test_resumptions_exhausted():
        r, _ = expect_fail("drop-always", "big.ldsi", "E_IO", "http",
                           ["resumptions exhausted"], "--resumes", "2")
        check(r["resumes"] == "2", str(r))
        expect_fail("drop-always", "tiny.ldsi", "E_IO", "http", ["resumption is off"],
                    "--resumes", "0")

    def test_file_changed_between_requests_is_not_spliced():
        expect_fail("drop-change", "big.ldsi", "E_IO", "http.etag",
                    ["changed on the server", '"changed"', "not spliced"])
        expect_fail("drop-ifrange", "big.ldsi", "E_IO", "http.status",
                    ["HTTP 200 to a Range request", "not spliced"])

    def test_stalled_transfer_times_out_then_resumes():
        r = expect_ok("stall", "big.ldsi", "--low-speed", "1")
        check(r["resumes"] == "1", str(r))

    def test_gzip_encoding_is_refused():
        expect_fail("gzip", "big.ldsi", "E_UNSUPPORTED", "http.content_encoding",
                    ["Content-Encoding gzip"])

    def test_endless_response():
        # A known declared length: the byte after it is trailing.
        expect_fail("forever", "tiny.ldsi", "E_TRAILING", "payload.end", [], )
        # No length anywhere: the growable path stops at max_payload_bytes, memory bounded.
        r, secs = expect_fail("forever", "unknown.ldsi", "E_LIMIT", "payload", [],
                              "--max-payload", str(1 << 20))
        if not os.environ.get("LDS_SANITIZE"):  # sanitizers' shadow memory is not ours
            check(int(r["peak_rss_kb"]) < 64 << 10, f"peak RSS {r['peak_rss_kb']} KiB")
        check(secs < 20, f"{secs:.1f} s")

    def test_http_errors_are_named():
        expect_fail("status404", "x", "E_IO", "http.status", ["HTTP 404", "after 0 bytes"])
        expect_fail("status500", "x", "E_IO", "http.status", ["HTTP 500"])
        expect_fail("plain", "missing.ldsi", "E_IO", "http.status", ["HTTP 404"])

    def test_redirects():
        expect_ok("redirect", "tiny.ldsi")
        expect_fail("loop", "tiny.ldsi", "E_IO", "http", ["redirect"])
        expect_fail("redirect", "tiny.ldsi", "E_IO", "http.status",
                    ["HTTP 302", "redirects are not followed"], "--redirects", "0")

    def test_connection_refused():
        need_curl()
        r, _ = client(f"http://127.0.0.1:{free_port()}/plain/tiny.ldsi")
        check(r["status"] == "E_IO" and "after 0 bytes" in r["message"], str(r))
        check(r["rents"] == "0", str(r))

    def test_bad_scheme():
        r, _ = client("ftp://127.0.0.1/x")
        check(r["status"] == "E_INVALID_ARG" and "not an http" in r["message"], str(r))

    def test_credentials_never_shown():
        need_curl()
        url = server().url("auth", "tiny.ldsi").replace("http://", "http://u:p%20w@")
        r, _ = client(url)
        check(r["status"] == "OK", str(r))
        r, _ = client(server().url("auth", "tiny.ldsi"), "--userpwd", "u:p w")
        check(r["status"] == "OK", str(r))
        bad = url.replace("p%20w", "s3cret")
        r, _ = client(bad)
        check(r["status"] == "E_IO" and "HTTP 401" in r["message"], str(r))
        check("s3cret" not in r["message"] and "u:" not in r["message"], r["message"])
        for cmd in (["info"], ["info", "--json"], ["verify"], ["get", "--row", "0"],
                    ["similar", "--row", "0"]):
            p = subprocess.run([LODESTAR, *cmd, url], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=60)
            out = p.stdout.decode() + p.stderr.decode()
            check(p.returncode == 0, f"{cmd}: {out}")
            check("p%20w" not in out and "u:p" not in out, f"{cmd} shows the password: {out}")
        p = subprocess.run([LODESTAR, "info", url], stdout=subprocess.PIPE, timeout=60)
        text = p.stdout.decode()
        check(f"file:       http://127.0.0.1:{server().port}/auth/tiny.ldsi" in text, text)
        check("http:       status 200, 0 resumptions" in text, text)
        p = subprocess.run([LODESTAR, "verify", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        check(p.returncode == 1 and "HTTP 401" in err and "s3cret" not in err, err)

    def test_query_secrets_never_shown():
        """Signed-URL and token query parameters (issue 24 item 7): their values never
        appear in the C loader's message nor in the CLI's error output."""
        need_curl()
        for name in ("X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token",
                     "access_token", "sig", "token", "SIG", "Access_Token"):
            url = server().url("status404", "x") + f"?a=1&{name}=S3CR3T%2Fv&b=2"
            r, _ = client(url)
            check(r["status"] == "E_IO" and "HTTP 404" in r["message"], str(r))
            check("S3CR3T" not in r["message"] and f"{name}=REDACTED&b=2" in r["message"],
                  r["message"])
            for cmd in (["info"], ["verify"], ["get", "--row", "0"]):
                p = subprocess.run([LODESTAR, *cmd, url], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=60)
                out = p.stdout.decode() + p.stderr.decode()
                check(p.returncode == 1 and "HTTP 404" in out, f"{cmd}: {out}")
                check("S3CR3T" not in out and f"{name}=REDACTED" in out, f"{cmd}: {out}")

    def test_cli_url_matches_file():
        need_curl()
        url = server().url("plain", "tiny.ldsi")
        for cmd in (["get", "king"], ["similar", "king"], ["verify"]):
            a = subprocess.run([LODESTAR, *cmd[:1], url, *cmd[1:]], stdout=subprocess.PIPE,
                               timeout=60).stdout.decode()
            b = subprocess.run([LODESTAR, *cmd[:1], path_of("tiny.ldsi"), *cmd[1:]],
                               stdout=subprocess.PIPE, timeout=60).stdout.decode()
            check(a.replace(url, "F") == b.replace(path_of("tiny.ldsi"), "F") and a, f"{a}\n{b}")

    def test_verify_manifest_with_url_shards():
        """A manifest whose shards are http:// URLs: verify loads each over HTTP, checks
        it against the manifest and names a shard the server answers wrongly."""
        need_curl()
        outdir = os.path.join(WORK, "split-url")
        sh(LODESTAR, "split", path_of("big.ldsi"), outdir, "--shards", "3")
        mpath = os.path.join(outdir, "manifest.json")
        with open(mpath) as f:
            man = json.load(f)
        for s in man["shards"]:
            name = "url-" + s["file"]
            shutil.copy(os.path.join(outdir, s["file"]), os.path.join(SERVE, name))
            s["file"] = server().url("plain", name)
        local = os.path.join(WORK, "url-manifest.json")
        with open(local, "w") as f:
            json.dump(man, f)
        p = subprocess.run([LODESTAR, "verify", local], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        out = p.stdout.decode()
        check(p.returncode == 0 and out.endswith("ok: 3 shards, 3000 rows\n"), (out, p.stderr))
        check(server().url("plain", "url-shard-0002.ldsi") + ": ok: rows [2000, 3000)" in out,
              out)
        man["shards"][1]["file"] = server().url("plain", "url-shard-0002.ldsi")
        with open(local, "w") as f:
            json.dump(man, f)
        p = subprocess.run([LODESTAR, "verify", local], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        err = p.stderr.decode()
        check(p.returncode == 1 and "shards[1] (http://127.0.0.1:" in err and
              "checksum differs from the manifest's" in err, err)

    # ---- the ranged fetch (issue 26 item 1, docs/adr/0041) ----

    def test_ranged_fetch_equals_the_file():
        # 13 chunks and the table: 14 ranges, so at most 14 connections of 16.
        for k, used in (("2", "2"), ("4", "4"), ("8", "8"), ("16", "14"), ("99", "14")):
            r = expect_ok("plain", "ranged.ldsi", "--connections", k)
            check(r["connections"] == used and r["hashed_while_reading"] == "1", f"K={k}: {r}")
            check(r["resumes"] == "0" and r["http_status"] == "206", f"K={k}: {r}")
        r = expect_ok("plain", "ranged.ldsi", "--connections", "1")
        check(r["connections"] == "1" and r["http_status"] == "200", str(r))
        r = expect_ok("plain", "ranged10.ldsi", "--connections", "4")  # format 1.0
        check(r["connections"] == "4" and r["verified"] == "1", str(r))
        r = expect_ok("lm", "ranged.ldsi", "--connections", "4")  # Last-Modified only
        check(r["connections"] == "4", str(r))
        # Automatic: one stream below 16 MiB; a zstd body is always one stream.
        check(expect_ok("plain", "ranged.ldsi")["connections"] == "1", "auto")
        r = expect_ok("plain", "big.ldsi.zst", "--connections", "4")
        check(r["connections"] == "1" and r["compressed"] == "1", str(r))

    def test_ranged_drop_resumes_alone():
        r = expect_ok("rdrop", "ranged.ldsi", "--connections", "4")
        check(r["resumes"] == "1" and r["connections"] == "4", str(r))
        r = expect_fail("rdrop", "ranged10.ldsi", "E_IO", "http",
                        ["range ", "resumption is off"], "--connections", "4",
                        "--resumes", "0")[0]
        check(r["connections"] == "4", str(r))

    def test_ranged_changed_bytes_caught_by_the_chunk_checksum():
        # Same ETag, one byte flipped in one range: that chunk's checksum refuses it.
        expect_fail("rchange", "ranged.ldsi", "E_CHECKSUM", "chunk",
                    ["checksum of chunk", "stored", "computed"], "--connections", "4")
        # Format 1.0: the payload checksum does.
        expect_fail("rchange", "ranged10.ldsi", "E_CHECKSUM", "checksum", [],
                    "--connections", "4")

    def test_ranged_server_ignoring_ranges_falls_back_to_one_stream():
        r = expect_ok("norange", "ranged.ldsi", "--connections", "4")
        check(r["connections"] == "1" and r["http_status"] == "200", str(r))

    def test_ranged_lying_content_range_refused():
        expect_fail("rlie", "ranged.ldsi", "E_IO", "http.content_range",
                    ["range ", "Content-Range 'bytes ", "is not the bytes asked"],
                    "--connections", "4")

    def test_ranged_cancel_while_8_transfers_run():
        need_curl()
        r, secs = client(server().url("rslow", "ranged.ldsi"), "--connections", "8",
                         "--cancel-after", "1")
        check(r["status"] == "E_CANCELLED" and "ranges complete" in r["message"], str(r))
        check(r["connections"] == "8", str(r))
        check(secs < 10, f"cancelled in {secs:.1f} s")
        balanced(r, "rslow cancel")

    def test_ranged_slow_range_hits_the_deadline():
        r, secs = expect_fail("rslowone", "ranged.ldsi", "E_TIMEOUT", "http.timeout",
                              ["range ", "deadline of 1500 ms passed"], "--connections", "4",
                              "--timeout", "1500")
        check(1.4 < secs < 10, f"stopped after {secs:.1f} s")

    # ---- delta reloads over HTTP (issue 26 item 3, docs/adr/0053) ----

    def sent(name):
        with urllib.request.urlopen(server().url("sent", name), timeout=10) as r:
            return int(r.read())

    def delta_reload(mode, name, *opts):
        need_curl()
        r, _ = client(server().url(mode, name), "--live", path_of("dbase.ldsi"), "--delta",
                      "--file", path_of(name), *opts)
        balanced(r, f"delta {mode}/{name}")
        return r

    def test_delta_over_http_fetches_only_the_changed_chunk():
        """One row changed: the header, the table, that row's 4 KiB chunk and the last
        chunk (the payload's trailing checksum differs too) cross the wire (the server's
        own count), every other chunk is copied, and the new generation holds the file's
        rows exactly."""
        for name, k in (("dnew.ldsi", "4"), ("dnew-k1.ldsi", "1")):
            r = delta_reload("plain", name, "--connections", k)
            check(r["live_status"] == "OK" and r["live_generation"] == "2", str(r))
            check(r["delta_fallback"] == "0" and r["delta_why"] == "", str(r))
            check(r["same"] == "1", f"the delta's generation differs from the file: {r}")
            check(r["chunks_read"] == "2", str(r))
            payload = int(r["payload_bytes"])
            table = (payload // 4096 + 1) * 8
            check(int(r["chunks_copied"]) + 2 == -(-(payload - table) // 4096), str(r))
            check(int(r["bytes_read"]) == sent(name), f"{r} vs the server's {sent(name)}")
            # header + table + two chunks, nothing of the rest
            check(int(r["bytes_read"]) <= 64 + table + 2 * 4096, str(r))
            check(int(r["bytes_read"]) < payload // 50, str(r))

    def test_delta_over_http_corrupt_chunk_keeps_the_old_generation():
        # rchange flips a byte of the range in the middle half: the changed chunk's.
        r = delta_reload("rchange", "dcorrupt.ldsi")
        check(r["live_status"] == "E_CHECKSUM" and r["field"] == "chunk", str(r))
        check("checksum of chunk" in r["message"] and "127.0.0.1" in r["message"], str(r))
        check(r["live_generation"] == "1", str(r))

    def test_delta_over_http_file_replaced_midway_is_refused():
        # The header and the table come from one file, the chunk's range from another.
        r = delta_reload("rreplace", "dreplace.ldsi")
        check(r["live_status"] == "E_IO" and r["field"] == "http.etag", str(r))
        check("changed on the server" in r["message"], str(r))
        check(r["live_generation"] == "1", str(r))

    def test_delta_over_http_falls_back():
        """A server ignoring ranges, format 1.0, another chunk size: a full load, with
        the reason; the result is the file all the same."""
        for mode, name, words in (("norange", "dnorange.ldsi", "does not serve ranges"),
                                  ("plain", "ranged10.ldsi", "format 1.0"),
                                  ("plain", "dchunk.ldsi", "chunk size changed")):
            r = delta_reload(mode, name)
            check(r["live_status"] == "OK" and r["live_generation"] == "2", str(r))
            check(r["delta_fallback"] == "1" and words in r["delta_why"], str(r))
            check(r["same"] == "1", str(r))
        # Asked in full: no delta, no fallback.
        r, _ = client(server().url("plain", "dnew.ldsi"), "--live", path_of("dbase.ldsi"))
        check(r["live_status"] == "OK" and r["delta_fallback"] == "0", str(r))

    def test_delta_over_http_secrets_never_shown():
        need_curl()
        url = server().url("rreplace", "dsecret.ldsi").replace(
            "http://", "http://user:hunter2@") + "?X-Amz-Signature=deadbeefcafe&token=s3cr3t"
        r, _ = client(url, "--live", path_of("dbase.ldsi"), "--delta")
        out = json.dumps(r)
        check(r["live_status"] != "OK", str(r))
        for secret in ("hunter2", "deadbeefcafe", "s3cr3t"):
            check(secret not in out, f"{secret} shown: {out}")

    # ---- S3 signing against the fault server's own SigV4 check (issue 26 item 2) ----

    def s3_env(**kw):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID="AKIDFAULTSERVER", AWS_SECRET_ACCESS_KEY="FAULTSERVERSECRET",
                   AWS_REGION="us-east-1",
                   AWS_ENDPOINT_URL=f"http://127.0.0.1:{server().port}/sigv4")
        env.update(kw)
        return {k: v for k, v in env.items() if v is not None}

    def s3_client(url, env, *opts):
        p = subprocess.run([CLIENT, *opts, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60, env=env)
        out = dict(line.partition(" ")[::2] for line in p.stdout.decode().splitlines())
        return out, p.stdout.decode() + p.stderr.decode()

    def test_s3_signed_requests():
        """s3://BUCKET/KEY through AWS_ENDPOINT_URL (path-style), signed with SigV4: the
        server computes the signature itself, so a wrong secret is refused with its error;
        ranges and the session token are signed too."""
        need_curl()
        ranged = path_of("ranged.ldsi")
        for k in ("1", "4"):
            for token in (None, "FAULTSERVERTOKEN"):
                r, _ = s3_client("s3://bucket/ranged.ldsi", s3_env(AWS_SESSION_TOKEN=token),
                                 "--file", ranged, "--connections", k)
                check(r["status"] == "OK" and r["same"] == "1" and r["connections"] == k,
                      f"K={k} token={token}: {r}")
        # An https-style URL under the endpoint is signed as well.
        url = f"http://127.0.0.1:{server().port}/sigv4/bucket/ranged.ldsi"
        r, _ = s3_client(url, s3_env(), "--file", ranged)
        check(r["status"] == "OK" and r["same"] == "1", str(r))
        # ... but not without the endpoint override (another host: not S3).
        r, _ = s3_client(url, s3_env(AWS_ENDPOINT_URL=None))
        check(r["status"] == "E_IO" and "HTTP 403" in r["message"], str(r))
        for env, code in ((s3_env(AWS_SECRET_ACCESS_KEY="wrong"), "SignatureDoesNotMatch"),
                          (s3_env(AWS_ACCESS_KEY_ID="AKIDOTHER"), "InvalidAccessKeyId"),
                          (s3_env(AWS_SESSION_TOKEN="stale"), "InvalidToken"),
                          (s3_env(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None),
                           "AccessDenied")):
            r, _ = s3_client("s3://bucket/ranged.ldsi", env, "--connections", "4")
            check(r["status"] == "E_IO" and r["field"] == "http.status" and
                  f"HTTP 403 {code}: " in r["message"] and
                  r["message"].startswith("GET s3://bucket/ranged.ldsi: "), f"{code}: {r}")
            balanced(r, code)
            print(f"     {code}: {r['message']}")
        # Half a credential: refused before any request, naming the missing half.
        r, _ = s3_client("s3://bucket/ranged.ldsi", s3_env(AWS_ACCESS_KEY_ID=None))
        check(r["status"] == "E_INVALID_ARG" and r["field"] == "AWS_ACCESS_KEY_ID", str(r))
        r, _ = s3_client("s3://bucket", s3_env())
        check(r["status"] == "E_INVALID_ARG" and "s3://BUCKET/KEY" in r["message"], str(r))

    def test_s3_credentials_never_shown():
        need_curl()
        secrets = ("AKIDFAULTSERVER", "FAULTSERVERSECRET", "FAULTSERVERTOKEN", "wrongsecret")
        env = s3_env(AWS_SESSION_TOKEN="FAULTSERVERTOKEN")
        bad = s3_env(AWS_SESSION_TOKEN="FAULTSERVERTOKEN", AWS_SECRET_ACCESS_KEY="wrongsecret")
        runs = []
        for e in (env, bad):
            runs.append(s3_client("s3://bucket/ranged.ldsi", e, "--connections", "4")[1])
            runs.append(s3_client("s3://bucket/missing.ldsi", e)[1])
            for cmd in (["info"], ["info", "--json"], ["verify"], ["get", "--row", "0"]):
                p = subprocess.run([LODESTAR, *cmd, "s3://bucket/ranged.ldsi"], env=e,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
                runs.append(p.stdout.decode() + p.stderr.decode())
        check("status OK" in runs[0] and "HTTP 403 SignatureDoesNotMatch" in runs[6], runs)
        for out in runs:
            for word in secrets:
                check(word not in out, f"{word} shown: {out}")

    return {k: v for k, v in locals().items() if k.startswith("test_")}


# ---- nginx --------------------------------------------------------------------------------


def nginx_tests():
    state = {}

    def start():
        if NGINX is None:
            skip("nginx is not installed (apt-get install nginx-light)")
        need_curl()
        if "port" in state:
            return state["port"]
        port, tls_port = free_port(), free_port()
        prefix = os.path.join(WORK, "nginx")
        os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
        # A self-signed certificate for 127.0.0.1, so that TLS verification has a CA to use.
        cert, key = os.path.join(prefix, "cert.pem"), os.path.join(prefix, "key.pem")
        tls = shutil.which("openssl") is not None and subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", key, "-out", cert], capture_output=True).returncode == 0
        tls_server = f"""
    server {{
        listen 127.0.0.1:{tls_port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {SERVE};
        location = /to-http {{ return 302 http://127.0.0.1:{port}/tiny.ldsi; }}
    }}""" if tls else ""
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off;
master_process off;
error_log {prefix}/logs/error.log;
pid {prefix}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/tmp;
    proxy_temp_path {prefix}/tmp;
    fastcgi_temp_path {prefix}/tmp;
    uwsgi_temp_path {prefix}/tmp;
    scgi_temp_path {prefix}/tmp;
    types {{ application/octet-stream ldsi zst; }}
    server {{
        listen 127.0.0.1:{port};
        root {SERVE};
    }}{tls_server}
}}
""")
        os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
        p = subprocess.Popen([NGINX, "-p", prefix, "-c", conf], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if p.poll() is not None:
                    skip(f"nginx did not start: {p.stderr.read().decode()}")
                time.sleep(0.05)
        state["port"] = port
        state["tls_port"] = tls_port if tls else None
        state["cert"] = cert
        state["proc"] = p
        return port

    def url(name):
        return f"http://127.0.0.1:{start()}/{name}"

    def test_nginx_plain_and_zstd_equal_the_file():
        for name in ("tiny.ldsi", "big.ldsi", "big.ldsi.zst", "unknown.ldsi"):
            r, _ = client(url(name), "--file", path_of(name.removesuffix(".zst")))
            check(r["status"] == "OK" and r["same"] == "1" and r["path"] == "pooled", str(r))
            balanced(r, name)

    def test_nginx_serves_ranges_for_resumption():
        # nginx answers a Range request with 206 and the same ETag: what a resumption needs.
        start()
        if shutil.which("curl") is None:
            skip("the curl program is not installed")
        p = subprocess.run(["curl", "-s", "-D", "-", "-o", "/dev/null", "-r", "100-",
                            url("big.ldsi")], stdout=subprocess.PIPE, timeout=30)
        head = p.stdout.decode()
        check(" 206 " in head and "ETag:" in head and "Content-Range: bytes 100-" in head, head)

    def test_nginx_https_verifies_the_server():
        start()
        if state["tls_port"] is None:
            skip("openssl could not make a certificate")
        tls = f"https://127.0.0.1:{state['tls_port']}"
        # Verification is on: a self-signed server is refused unless its CA is named.
        r, _ = client(f"{tls}/tiny.ldsi")
        check(r["status"] == "E_IO" and "certificate" in r["message"], str(r))
        balanced(r, "https without CA")
        print(f"     https without CA: {r['message']}")
        r, _ = client(f"{tls}/big.ldsi", "--ca-file", state["cert"], "--file", path_of("big.ldsi"))
        check(r["status"] == "OK" and r["same"] == "1", str(r))
        balanced(r, "https")
        # Never redirected from https down to http.
        r, _ = client(f"{tls}/to-http", "--ca-file", state["cert"])
        check(r["status"] == "E_IO" and "an https URL stays https" in r["message"]
              and "after 0 bytes" in r["message"], str(r))
        print(f"     https to http: {r['message']}")

    def test_nginx_ranged_fetch_equals_the_file():
        for name in ("ranged.ldsi", "ranged10.ldsi"):
            for k in ("1", "4", "8"):
                r, _ = client(url(name), "--file", path_of(name), "--connections", k)
                check(r["status"] == "OK" and r["same"] == "1" and r["connections"] == k,
                      f"{name} K={k}: {r}")
                balanced(r, name)

    def test_nginx_404():
        r, _ = client(url("missing.ldsi"))
        check(r["status"] == "E_IO" and "HTTP 404" in r["message"], str(r))

    def test_nginx_glove_equals_the_file():
        if GLOVE is None:
            skip("no --glove FILE (suite 'slow' passes it)")
        if not os.path.exists(GLOVE):
            skip(f"{GLOVE} is missing (scripts/fetch-glove.sh)")
        link = os.path.join(SERVE, "glove.ldsi")
        if not os.path.exists(link):
            os.symlink(os.path.abspath(GLOVE), link)
        r, _ = client(url("glove.ldsi"), "--file", GLOVE, timeout=600)
        check(r["status"] == "OK" and r["same"] == "1" and r["path"] == "pooled", str(r))
        balanced(r, "glove")

    tests = {k: v for k, v in locals().items() if k.startswith("test_")}
    if GLOVE is not None:  # the slow run: only what the quick one does not
        tests = {"test_nginx_glove_equals_the_file": test_nginx_glove_equals_the_file}

    def test_nginx_stop():
        if "proc" not in state:
            skip("nginx was not started")
        state["proc"].terminate()
        state["proc"].wait(timeout=10)

    tests["test_nginx_stop"] = test_nginx_stop
    return tests


def test_without_curl_a_url_is_unsupported():
    r, _ = client("http://127.0.0.1:1/x")
    if r["status"] == "E_UNSUPPORTED":
        check("without libcurl" in r["message"], str(r))
    else:
        skip("built with libcurl")


def test_s3_key_sent_as_written():
    """An S3 key is a name: s3://b/../x.ldsi asks for the object "../x.ldsi" of bucket b,
    never for /x.ldsi outside it (libcurl collapsed the dot segments; found by a tester)."""
    need_curl()
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    seen = []

    def answer():
        c, _ = srv.accept()
        seen.append(c.recv(65536).decode(errors="replace").split("\r\n")[0])
        c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        c.close()

    t = threading.Thread(target=answer)
    t.start()
    env = dict(os.environ, AWS_ENDPOINT_URL="http://127.0.0.1:%d" % srv.getsockname()[1],
               AWS_ACCESS_KEY_ID="AKIDTEST", AWS_SECRET_ACCESS_KEY="SECRETTEST")
    p = subprocess.run([CLIENT, "s3://bucket/../x.ldsi"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60, env=env)
    t.join(timeout=30)
    srv.close()
    check(seen == ["GET /bucket/../x.ldsi HTTP/1.1"], f"request line {seen}")
    check(b"SECRETTEST" not in p.stdout + p.stderr, "the secret was printed")
    # Half a credential is refused before any request, naming what is missing (a tester
    # found the key id alone silently ignored: the request went unsigned).
    env.pop("AWS_SECRET_ACCESS_KEY")
    r, _ = client_env("s3://bucket/x.ldsi", env)
    check(r["status"] == "E_INVALID_ARG" and "AWS_SECRET_ACCESS_KEY" in r["message"], str(r))


if __name__ == "__main__":
    tests = nginx_tests() if NGINX_MODE else fault_tests()
    tests["test_without_curl_a_url_is_unsupported"] = test_without_curl_a_url_is_unsupported
    if not NGINX_MODE:
        tests["test_s3_key_sent_as_written"] = test_s3_key_sent_as_written
    try:
        rc = run_tests(tests, WORK)
    finally:
        if SERVER is not None:
            SERVER.stop()
    sys.exit(rc)
