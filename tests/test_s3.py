#!/usr/bin/env python3
"""lds_load_url on s3:// URLs against s3rver (an S3-compatible server from npm) on 127.0.0.1.

usage: test_s3.py LODESTAR URL_CLIENT

Installs s3rver 3.7.1 with npm into $LODESTAR_CACHE/s3rver, else .cache/s3rver of the
source tree (once; git-ignored), starts it on a free loopback port with a bucket "idx",
uploads objects with the curl program (signed PUTs), and loads them through
AWS_ENDPOINT_URL with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the environment.
Exits 77 (skipped) when node, npm or curl is missing or the install fails (offline).

s3rver checks that the access key id exists (InvalidAccessKeyId) but does not compute
SigV4 signatures (its lib/middleware/authentication.js: "Signature version 4 calculation
is unimplemented"): a wrong secret is accepted here. The signature itself is checked by
tests/http_fault_server.py's sigv4 mode (test_url.py: test_s3_signed_requests).
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests, skip  # noqa: E402

LODESTAR = os.path.abspath(sys.argv[1])
CLIENT = os.path.abspath(sys.argv[2])
HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
WORK = tempfile.mkdtemp(prefix="lodestar-test-s3-")
CACHE = os.path.join(os.environ.get("LODESTAR_CACHE") or os.path.join(TOP, ".cache"), "s3rver")
VERSION = "3.7.1"
KEY_ID = SECRET = "S3RVER"  # s3rver's built-in account
STATE = {}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start():
    if "port" in STATE:
        return STATE["port"]
    if "skip" in STATE:
        skip(STATE["skip"])
    node, npm, curl = shutil.which("node"), shutil.which("npm"), shutil.which("curl")
    if node is None or npm is None or curl is None:
        STATE["skip"] = "node, npm or curl is not installed"
        skip(STATE["skip"])
    main = os.path.join(CACHE, "node_modules", "s3rver", "bin", "s3rver.js")
    if not os.path.exists(main):
        os.makedirs(CACHE, exist_ok=True)
        p = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", CACHE,
                            f"s3rver@{VERSION}"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=600)
        if p.returncode != 0 or not os.path.exists(main):
            STATE["skip"] = f"npm install s3rver@{VERSION} failed: {p.stdout.decode()[-300:]}"
            skip(STATE["skip"])
    port = free_port()
    data = os.path.join(WORK, "data")
    os.mkdir(data)
    proc = subprocess.Popen([node, main, "-d", data, "-a", "127.0.0.1", "-p", str(port),
                             "--silent", "--configure-bucket", "idx"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    STATE["proc"] = proc
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None:
                STATE["skip"] = f"s3rver did not start: {proc.stderr.read().decode()[-300:]}"
                skip(STATE["skip"])
            time.sleep(0.1)
    STATE["port"] = port
    ranged = os.path.join(WORK, "ranged.ldsi")
    subprocess.run([CLIENT, "--write", ranged, "3000", "64", "65536"], check=True, timeout=60)
    put(ranged, "ranged.ldsi")
    return port


def endpoint():
    return f"http://127.0.0.1:{start()}"


def put(path, key):
    p = subprocess.run(["curl", "-sS", "-f", "-T", path, "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                        "--user", f"{KEY_ID}:{SECRET}", f"{endpoint()}/idx/{key}"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 0, f"PUT {key}: {p.stderr.decode()}")


def env(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    e.update(AWS_ACCESS_KEY_ID=KEY_ID, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION="us-east-1",
             AWS_ENDPOINT_URL=endpoint())
    e.update(kw)
    return {k: v for k, v in e.items() if v is not None}


def client(url, e, *opts):
    p = subprocess.run([CLIENT, *opts, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60, env=e)
    check(p.returncode == 0, p.stderr.decode())
    return dict(line.partition(" ")[::2] for line in p.stdout.decode().splitlines())


def test_s3_signed_get_loads():
    local = os.path.join(WORK, "ranged.ldsi")
    e = env()
    for k in ("1", "4"):
        r = client("s3://idx/ranged.ldsi", e, "--file", local, "--connections", k)
        check(r["status"] == "OK" and r["same"] == "1", f"K={k}: {r}")
        check(r["rents"] == r["returns"] == "1", str(r))
        print(f"     K={k}: connections {r['connections']}, HTTP {r['http_status']}")
    p = subprocess.run([LODESTAR, "info", "s3://idx/ranged.ldsi"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60, env=e)
    check(p.returncode == 0 and "rows:" in p.stdout.decode(), p.stdout + p.stderr)


def test_s3_unknown_key_refused_with_the_servers_error():
    r = client("s3://idx/ranged.ldsi", env(AWS_ACCESS_KEY_ID="NOSUCHKEYID"))
    check(r["status"] == "E_IO" and "HTTP 403 InvalidAccessKeyId: " in r["message"], str(r))
    check(r["rents"] == "0", str(r))
    print(f"     {r['message']}")


def test_s3_missing_object_is_named():
    r = client("s3://idx/missing.ldsi", env())
    check(r["status"] == "E_IO" and r["field"] == "http.status", str(r))
    check(r["message"].startswith("GET s3://idx/missing.ldsi: HTTP 404 NoSuchKey: "), str(r))
    print(f"     {r['message']}")


def test_s3_credentials_absent_from_output():
    outs = []
    for e in (env(AWS_SECRET_ACCESS_KEY="Sup3rS3cretValue", AWS_SESSION_TOKEN="T0kenValue"),
              env(AWS_ACCESS_KEY_ID="AKIDNOTSHOWN", AWS_SECRET_ACCESS_KEY="Sup3rS3cretValue")):
        for url in ("s3://idx/ranged.ldsi", "s3://idx/missing.ldsi"):
            p = subprocess.run([CLIENT, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=60, env=e)
            outs.append(p.stdout.decode() + p.stderr.decode())
            for cmd in (["info"], ["verify"], ["info", "--json"]):
                p = subprocess.run([LODESTAR, *cmd, url], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=60, env=e)
                outs.append(p.stdout.decode() + p.stderr.decode())
    check(any("InvalidAccessKeyId" in o for o in outs), outs)
    for o in outs:
        for word in ("Sup3rS3cretValue", "T0kenValue", "AKIDNOTSHOWN"):
            check(word not in o, f"{word} shown: {o}")


def test_s3_manifest_of_shards_loads_through_python():
    if os.environ.get("LDS_SANITIZE"):
        skip("the package loads the library into an uninstrumented python")
    split = os.path.join(WORK, "split")
    subprocess.run([LODESTAR, "split", os.path.join(WORK, "ranged.ldsi"), split, "--shards", "3"],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    for name in sorted(os.listdir(split)):
        put(os.path.join(split, name), "split/" + name)
    # (lodestar.dask.DaskShards needs a dask.distributed cluster: not started here.)
    code = ("import sys, numpy, lodestar\n"
            "q = numpy.random.default_rng(1).standard_normal((4, 64)).astype('float32')\n"
            "with lodestar.Shards(sys.argv[1], url_connections=2) as s:\n"
            "    ix = lodestar.load(sys.argv[2])\n"
            "    a = s.search(q, k=3)\n"
            "    b = ix.search(q, k=3)\n"
            "    print(s.rows, bool((a[1] == b[1]).all()))\n")
    e = env(PYTHONPATH=os.path.join(TOP, "python"),
            LODESTAR_LIB=os.path.join(os.path.dirname(os.path.dirname(LODESTAR)),
                                      "liblodestar.so"))
    p = subprocess.run(["/usr/bin/python3", "-c", code, "s3://idx/split/manifest.json",
                        os.path.join(WORK, "ranged.ldsi")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120, env=e)
    out = p.stdout.decode()
    check(p.returncode == 0 and out.startswith("3000 True"), out + p.stderr.decode())
    print(f"     {out.strip()}")


def test_s3_stop():
    if "proc" in STATE:
        STATE["proc"].terminate()
        STATE["proc"].wait(timeout=10)


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
