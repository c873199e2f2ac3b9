"""lodestar.load from every kind of source, with its options."""
import io
import os
import pathlib
import subprocess

import numpy as np
import pytest

import lodestar
from conftest import ROOT, VECTORS


def test_path_str_pathlike_and_bytes_path(tiny):
    for source in (tiny, pathlib.Path(tiny), os.fsencode(tiny)):
        if isinstance(source, bytes):
            with pytest.raises(lodestar.FormatError):  # bytes are an index, not a path
                lodestar.load(source)
            continue
        with lodestar.load(source) as index:
            assert index.info["path"] == "pooled" and index.key(0) == "king"


def test_bytes_are_borrowed_other_buffers_copied(tiny):
    data = open(tiny, "rb").read()
    for source, ownership in ((data, "adopt"), (bytearray(data), "copy"),
                              (memoryview(data), "copy"), (np.frombuffer(data, np.uint8), "copy")):
        with lodestar.load(source) as index:
            assert index.info["path"] == "memory", type(source)
            assert index.info["ownership"] == ownership, type(source)
            assert np.array_equal(index.vectors, VECTORS)
    mutable = bytearray(data)
    with lodestar.load(mutable) as index:
        v = index.vectors
        mutable[64:] = bytes(len(mutable) - 64)  # the copy does not see the change
        assert np.array_equal(v, VECTORS) and not np.shares_memory(v, np.frombuffer(mutable, np.uint8))
        del v


def test_file_objects(tiny):
    data = open(tiny, "rb").read()
    with open(tiny, "rb") as f:  # buffered, seekable: its fd, from its position
        with lodestar.load(f) as index:
            assert index.rows == 4
        assert f.tell() == len(data)
    with open(tiny, "rb", buffering=0) as f:
        with lodestar.load(f, mmap=True) as index:
            assert index.info["path"] == "mapped"
        assert f.tell() == len(data)  # after the index, as a read would leave it
    with open(tiny, "rb") as f:
        with lodestar.load(f, mmap=True) as index:
            assert index.info["path"] == "mapped"
        assert f.tell() == len(data)
    for stream in (io.BytesIO(data), io.BufferedReader(io.BytesIO(data))):  # readinto
        with lodestar.load(stream) as index:
            assert index.info["path"] == "pooled" and np.array_equal(index.vectors, VECTORS)

    class ReadOnly:  # read() but no readinto
        def __init__(self):
            self.b = io.BytesIO(data)

        def read(self, n):
            return self.b.read(min(n, 7))  # short reads too

    with lodestar.load(ReadOnly()) as index:
        assert index.keys[:] == ["king", "queen", "apple", "prince"]


def test_file_object_after_a_prefix(tiny, tmp_path):
    data = open(tiny, "rb").read()
    path = tmp_path / "prefixed"
    path.write_bytes(b"PREFIX" + data)
    with open(path, "rb") as f:
        assert f.read(6) == b"PREFIX"
        f.peek(100)  # the buffered reader has read ahead of its position
        with lodestar.load(f) as index:  # from f's position, not its fd's
            assert index.keys[:] == ["king", "queen", "apple", "prince"]
        assert f.tell() == 6 + len(data) and f.read() == b""


def test_pipe(tiny):
    data = open(tiny, "rb").read()
    p = subprocess.Popen(["cat", tiny], stdout=subprocess.PIPE)
    try:
        with lodestar.load(p.stdout) as index:  # not seekable and buffered: readinto
            assert index.info["stream_bytes"] == len(data)
    finally:
        p.wait()
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    with open(r, "rb", buffering=0) as f:  # raw pipe: its fd
        with lodestar.load(f) as index:
            assert index.rows == 4


def test_zstd_compressed(tiny, tmp_path):
    zst = str(tmp_path / "tiny.ldsi.zst")
    subprocess.run(["zstd", "-q", "-f", tiny, "-o", zst], check=True)
    with lodestar.load(zst) as index:
        assert index.info["compressed"] and np.array_equal(index.vectors, VECTORS)
    with lodestar.load(open(zst, "rb").read()) as index:
        assert index.info["compressed"] and index.key(2) == "apple"


def test_options(tiny):
    with lodestar.load(tiny, verify=False) as index:
        assert not index.checksum_verified
    with lodestar.load(tiny, ownership="copy") as index:
        assert index.info["ownership"] == "copy"
    with lodestar.load(tiny, mmap=True, ownership="adopt", populate=True) as index:
        assert index.info["path"] == "mapped" and index.info["ownership"] == "adopt"
    size = os.path.getsize(tiny) - 64
    with lodestar.load(tiny, max_payload=size):
        pass
    with pytest.raises(lodestar.LimitError) as e:
        lodestar.load(tiny, max_payload=size - 1)
    assert e.value.status == "E_LIMIT" and str(size) in e.value.message


def test_bad_arguments(tiny):
    with pytest.raises(TypeError, match="path, a bytes-like object or a binary file"):
        lodestar.load(42)
    with pytest.raises(ValueError, match="ownership"):
        lodestar.load(tiny, ownership="lend")
    with pytest.raises(ValueError):
        lodestar.load(tiny, max_payload=-1)
    with pytest.raises(TypeError):
        lodestar.load(tiny, max_payload=1.5)
    with pytest.raises(ValueError, match="mmap"):
        lodestar.load(open(tiny, "rb").read(), mmap=True)
    with pytest.raises(ValueError, match="NUL"):
        lodestar.load(tiny + "\0ignored")


def test_read_errors_are_raised_as_they_were(tiny):
    class Broken(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, b):
            raise ConnectionResetError("the peer went away")

    with pytest.raises(ConnectionResetError, match="peer"):
        lodestar.load(Broken())



def test_url(tiny, tmp_path):
    # A loopback server of the standard library: the URL loads the same index as the file.
    import functools
    import http.server
    import threading

    if not lodestar._capi.library().lds_url_supported():
        pytest.skip("built without libcurl")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=os.path.dirname(tiny))
    handler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d/%s" % (srv.server_address[1], os.path.basename(tiny))
        with lodestar.load(url) as a, lodestar.load(tiny) as b:
            assert a.info["path"] == "pooled" and a.key(0) == "king"
            assert a.info["http_status"] == 200 and a.checksum_verified
            assert a.info["payload_bytes"] == b.info["payload_bytes"]
            assert [a.key(i) for i in range(len(a))] == [b.key(i) for i in range(len(b))]
        with pytest.raises(lodestar.IOError, match="HTTP 404"):
            lodestar.load(url + ".missing")
    finally:
        srv.shutdown()
        srv.server_close()


def test_read_threads(tmp_path):
    """read_threads= picks the readers of a regular file (0: automatic); the index is the
    same; info says how many read and whether the rental has huge pages."""
    rng = np.random.default_rng(5)
    v = rng.standard_normal((40000, 128)).astype(np.float32)  # 20 MB: three 8 MiB chunks
    path = str(tmp_path / "threads.ldsi")
    lodestar.write(path, v)
    for threads, used in ((1, 1), (2, 2), (3, 3), (0, 1)):  # automatic: one below 256 MiB
        with lodestar.load(path, read_threads=threads) as index:
            assert index.info["read_threads"] == used, threads
            assert index.checksum_verified and np.array_equal(index.vectors, v)
            assert index.info["huge_pages"] or index.info["huge_pages_fallback"]
    with open(path, "rb") as f:  # through the fd
        with lodestar.load(f, read_threads=2) as index:
            assert index.info["read_threads"] == 2 and np.array_equal(index.vectors, v)
    with pytest.raises(ValueError):
        lodestar.load(path, read_threads=-1)
