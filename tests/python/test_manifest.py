"""The shard manifest read by the library's one reader (lds_manifest_read, issue 24 item 2):
Python refuses what `lodestar verify` refuses, with the same message, as lodestar.Error
subclasses (never RecursionError or a bare ValueError), and a manifest URL's password is
sent as HTTP authentication, never to the resolver."""
import base64
import http.server
import json
import os
import socket
import subprocess
import threading

import numpy as np
import pytest

import lodestar
from lodestar import _shard


def _split(cli, path, outdir, shards):
    subprocess.run([cli, "split", path, str(outdir), "--shards", str(shards)], check=True,
                   stdout=subprocess.PIPE)
    return os.path.join(str(outdir), "manifest.json")


def _verify(cli, man):
    p = subprocess.run([cli, "verify", man], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def _cases(good):
    """(name, text, exception class, words of the message, where it is refused)."""
    def edited(edit):
        d = json.loads(json.dumps(good))
        edit(d)
        return json.dumps(d)
    pb = good["shards"][1]["payload_bytes"]
    return [
        ("version 2", edited(lambda d: d.update(version=2)), lodestar.VersionError,
         "version: 2, and this library reads version 1 only", "read"),
        ("has_ids", edited(lambda d: d.update(has_ids=not d["has_ids"])),
         lodestar.BadValueError, "ids presence differs from the manifest's", "open"),
        ("has_keys", edited(lambda d: d.update(has_keys=not d["has_keys"])),
         lodestar.BadValueError, "keys presence differs from the manifest's", "open"),
        ("payload_bytes", edited(lambda d: d["shards"][1].update(payload_bytes=pb + 64)),
         lodestar.BadValueError,
         "payload_bytes differs from the manifest's (file %d, manifest %d)" % (pb, pb + 64),
         "open"),
        ("deep", '{"format": "lodestar-shards", "x": ' + "[" * 5000 + "]" * 5000 + "}",
         lodestar.LimitError, "JSON nested deeper than 8 arrays and objects", "read"),
        ("digits", json.dumps(good)[:-1] + ', "x": ' + "7" * 5000 + "}", lodestar.LimitError,
         "a number of more than 20 digits", "read"),
        ("float", edited(lambda d: d.update(rows=7.5)), lodestar.BadValueError,
         "a number that is not a non-negative integer", "read"),
        ("escape", edited(lambda d: d["shards"][0].update(file="\x1b[31mRED\u009b")),
         lodestar.BadValueError, '"\\x1b[31mRED\\xc2\\x9b" contains a control character',
         "read"),
        ("trailing", json.dumps(good) + "\n{}", lodestar.ParseError, "bytes after the JSON "
         "object", "read"),
    ]


def test_python_refuses_what_verify_refuses_with_the_same_message(tmp_path, cli, tiny):
    man = _split(cli, tiny, tmp_path / "s", 2)
    with open(man) as f:
        good = json.load(f)
    for name, text, cls, words, where in _cases(good):
        with open(man, "w") as f:
            f.write(text)
        rc, out, err = _verify(cli, man)
        assert rc == 1, (name, out, err)
        assert b"\x1b" not in out + err and "\u009b".encode() not in out + err, name
        if where == "read":
            with pytest.raises(cls) as e:
                lodestar.read_manifest(man)
        else:
            lodestar.read_manifest(man)   # the text is sound; the shards disagree with it
            with pytest.raises(cls) as e:
                lodestar.open_shards(man)
        assert words in e.value.message, (name, e.value.message)
        assert words in err.decode(), (name, err)
        assert "\x1b" not in str(e.value), name
    with open(man, "w") as f:
        json.dump(good, f)
    assert _verify(cli, man)[0] == 0
    with lodestar.open_shards(man) as sh:
        assert sh.rows == good["rows"]


def test_fields_are_named_with_the_entry(tmp_path, cli, tiny):
    man = _split(cli, tiny, tmp_path / "s", 2)
    with open(man) as f:
        good = json.load(f)
    good["shards"][1]["rows"] = 9
    with open(man, "w") as f:
        json.dump(good, f)
    with pytest.raises(lodestar.BadValueError) as e:
        lodestar.read_manifest(man)
    assert e.value.field == "shards[1].rows" and e.value.line == 2
    assert "shards[1].rows: 9 goes past the manifest's 4 rows" in e.value.message


def test_a_shard_named_by_many_entries_is_loaded_once(tmp_path, cli, tiny, monkeypatch):
    man = _split(cli, tiny, tmp_path / "s", 1)
    with open(man) as f:
        doc = json.load(f)
    entry = doc["shards"][0]
    doc["shards"] = [dict(entry, first_row=4 * i) for i in range(50)]
    doc["rows"] = 200
    with open(man, "w") as f:
        json.dump(doc, f)
    loads = []
    real = _shard.load

    def counting(path, **kw):
        loads.append(path)
        return real(path, **kw)
    monkeypatch.setattr(_shard, "load", counting)
    with lodestar.open_shards(man) as sh:
        s, r = sh.search(np.ones(4, np.float32), 200)
        assert sorted(r[0]) == list(range(200))
    assert len(loads) == 1


class _Handler(http.server.SimpleHTTPRequestHandler):
    auth = []

    def do_GET(self):
        type(self).auth.append(self.headers.get("Authorization"))
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    """A local HTTP server over tmp_path/www on 127.0.0.1: (port, Authorization headers)."""
    root = tmp_path / "www"
    root.mkdir()
    _Handler.auth = []

    def handler(*a, **kw):
        return _Handler(*a, directory=str(root), **kw)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield root, httpd.server_address[1], _Handler.auth
    httpd.shutdown()
    httpd.server_close()


def test_a_manifest_url_password_never_reaches_the_resolver(tmp_path, cli, tiny, server,
                                                             monkeypatch):
    if not lodestar._capi.library().lds_url_supported():
        pytest.skip("library built without libcurl")
    root, port, auth = server
    _split(cli, tiny, root, 2)
    hosts = []
    real = socket.getaddrinfo

    def watching(host, *a, **kw):
        hosts.append(host)
        return real(host, *a, **kw)
    monkeypatch.setattr(socket, "getaddrinfo", watching)
    url = "http://u:PW@127.0.0.1:%d/manifest.json" % port
    m = lodestar.read_manifest(url)
    assert m["shards"][1]["path"] == "http://u:PW@127.0.0.1:%d/shard-0001.ldsi" % port
    with lodestar.open_shards(url) as sh, lodestar.load(tiny) as whole:
        q = np.ones(4, np.float32)
        assert np.array_equal(sh.search(q, 4)[1], whole.search(q, 4)[1])
    assert not any("PW" in str(h) for h in hosts), hosts
    # The credentials went where they belong: HTTP authentication, on every request.
    want = "Basic " + base64.b64encode(b"u:PW").decode()
    assert len(auth) == 4 and all(a == want for a in auth), auth  # 2 manifests, 2 shards
    # A refusal names the URL without the password.
    (root / "manifest.json").write_text('{"format": "lodestar-shards", "version": 2}')
    with pytest.raises(lodestar.VersionError) as e:
        lodestar.read_manifest(url)
    assert "PW" not in str(e.value) and "127.0.0.1" in str(e.value)
