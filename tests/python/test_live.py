"""lodestar.Live: pins that outlive reloads, failed and refused reloads, stats, threads."""
import gc
import io
import sys
import threading
import time

import numpy as np
import pytest

import lodestar
from lodestar import _capi


def _content(g):
    """What generation g holds: 10 + g rows of dim 6 from seed g, keys, metadata gen."""
    v = np.random.default_rng(1000 + g).standard_normal((10 + g, 6)).astype(np.float32)
    return v, ["g%d_%d" % (g, i) for i in range(len(v))]


@pytest.fixture(scope="module")
def gens(tmp_path_factory):
    """{g: (path, bytes)} for generations 1..4 of _content."""
    d = tmp_path_factory.mktemp("live")
    out = {}
    for g in range(1, 5):
        v, keys = _content(g)
        path = str(d / ("gen%d.ldsi" % g))
        lodestar.write(path, v, keys=keys, metadata={"gen": str(g)})
        out[g] = (path, open(path, "rb").read())
    return out


def _is_gen(index, g):
    """index holds generation g's content, exactly."""
    v, keys = _content(g)
    return (index.rows == len(v) and np.array_equal(index.vectors, v)
            and index.meta("gen") == str(g) and index.key(len(v) - 1) == keys[-1])


def _leases(live):
    return lodestar.pool_stats(live._pool)["leases_current"]


def test_a_pin_keeps_its_generation_through_a_reload(gens):
    with lodestar.Live(gens[1][0]) as live:
        assert live.generation == 1
        with live.pin() as old:
            v = old.vectors
            want_search = old.search(_content(1)[0][:3], k=4)
            assert live.reload(gens[2][0]) == 2 and live.generation == 2
            assert old.generation == 1 and _is_gen(old, 1)
            got = old.search(_content(1)[0][:3], k=4)
            assert np.array_equal(got[0], want_search[0]) and np.array_equal(got[1],
                                                                              want_search[1])
            with live.pin() as new:
                assert new.generation == 2 and _is_gen(new, 2)
                assert not np.shares_memory(new.vectors, v)
            s = live.stats()
            assert (s["generation"], s["reloads_done"], s["retired_pinned"],
                    s["pins_on_retired"], s["generations_freed"]) == (2, 2, 1, 1, 0)
            assert _leases(live) == 2  # generation 1's rental is still out
        # the with block closed `old`, but the array v still pins generation 1
        assert np.array_equal(v, _content(1)[0])
        assert live.stats()["retired_pinned"] == 1 and _leases(live) == 2
        del v
        s = live.stats()
        assert (s["retired_pinned"], s["pins_on_retired"], s["generations_freed"]) == (0, 0, 1)
        assert _leases(live) == 1  # returned exactly at the last release, not before
        p = lodestar.pool_stats(live._pool)
        assert p["rents"] == p["returns"] + 1 == 2


def test_reload_from_every_kind_of_source(gens, tmp_path):
    with lodestar.Live() as live:
        assert live.generation == 0
        with pytest.raises(lodestar.StateError):
            live.pin()  # nothing loaded yet
        assert live.reload(gens[1][1]) == 1  # bytes (copied)
        with open(gens[2][0], "rb") as f:  # a file object with an fd
            assert live.reload(f) == 2
            assert f.tell() == len(gens[2][1])
        assert live.reload(io.BytesIO(gens[3][1])) == 3  # readinto: the stream path
        assert live.reload(bytearray(gens[4][1])) == 4
        with live.pin() as index:
            assert _is_gen(index, 4) and index.info["path"] == "memory"
        assert live.stats()["last_load"]["path"] == "memory"


def _bad_checksum(data, g):
    b = bytearray(data)
    at = bytes(b).index(_content(g)[0][0].tobytes())  # first row's bytes, in the payload
    b[at] ^= 0x01
    return bytes(b)


def test_a_failed_reload_keeps_the_current_generation(gens, tmp_path):
    short = tmp_path / "short.ldsi"
    short.write_bytes(gens[2][1][:len(gens[2][1]) - 7])
    with lodestar.Live(gens[1][0]) as live:
        leases = _leases(live)
        # a file and bytes carry their length: a short one disagrees with its header;
        # a stream just ends early
        bad = [(str(short), lodestar.LengthMismatchError, "E_LENGTH_MISMATCH"),
               (gens[2][1][:len(gens[2][1]) - 7], lodestar.LengthMismatchError,
                "E_LENGTH_MISMATCH"),
               (_bad_checksum(gens[2][1], 2), lodestar.ChecksumError, "E_CHECKSUM"),
               (io.BytesIO(gens[2][1][:200]), lodestar.TruncatedError, "E_TRUNCATED")]
        for n, (source, cls, status) in enumerate(bad, 1):
            with pytest.raises(cls) as e:
                live.reload(source)
            assert e.value.status == status
            s = live.stats()
            assert (s["generation"], s["reloads_done"], s["reloads_failed"],
                    s["last_status"]) == (1, 1, n, status)
            with live.pin() as index:
                assert index.generation == 1 and _is_gen(index, 1)
            assert _leases(live) == leases  # the failed load's rental is back
        assert live.reload(gens[2][0]) == 2
        assert live.stats()["last_status"] == "OK"


def test_max_retired_refuses_a_reload_until_a_pin_goes(gens):
    with lodestar.Live(gens[1][0], max_retired=1) as live:
        assert live.max_retired == 1
        held = live.pin()
        assert live.reload(gens[2][0]) == 2  # generation 1 retired, still pinned
        with pytest.raises(lodestar.LimitError) as e:
            live.reload(gens[3][0])
        assert e.value.field == "live.max_retired"
        s = live.stats()
        assert (s["generation"], s["reloads_refused"], s["reloads_failed"]) == (2, 1, 0)
        held.close()
        assert live.reload(gens[3][0]) == 3
        assert live.stats()["retired_pinned_peak"] == 1
    with pytest.raises(ValueError):
        lodestar.Live(max_retired=0)
    with pytest.raises(lodestar.InvalidArgumentError) as e:
        lodestar.Live(max_retired=65)  # above LDS_LIVE_MAX_RETIRED_LIMIT
    assert e.value.field == "lds_live_options.max_retired"


class _GatedReader:
    """A file object whose reads wait for `go` after signalling `reading`."""

    def __init__(self, data):
        self._f = io.BytesIO(data)
        self.reading, self.go = threading.Event(), threading.Event()

    def readinto(self, buf):
        self.reading.set()
        assert self.go.wait(30)
        return self._f.readinto(buf)


def test_a_second_reload_at_once_is_refused(gens):
    with lodestar.Live(gens[1][0]) as live:
        slow = _GatedReader(gens[2][1])
        result = []
        t = threading.Thread(target=lambda: result.append(live.reload(slow)))
        t.start()
        try:
            assert slow.reading.wait(30)  # the first reload is inside its load now
            with pytest.raises(lodestar.StateError) as e:
                live.reload(gens[3][0])
            assert e.value.field == "live.reload" and e.value.status == "E_STATE"
            with pytest.raises(RuntimeError):
                live.close()  # a reload is running
        finally:
            slow.go.set()
            t.join()
        assert result == [2]
        s = live.stats()
        assert (s["generation"], s["reloads_done"], s["reloads_refused"]) == (2, 2, 1)


def test_stats_dict_is_the_struct(gens):
    with lodestar.Live(gens[1][0]) as live:
        keep = live.pin()
        live.reload(gens[2][0])
        d, s = live.stats(), live._stats_struct()
        for name, _ in _capi.LiveStats._fields_:
            if name not in ("size", "last_status", "last_load"):
                v = getattr(s, name)
                assert d[name] == (v.decode() if isinstance(v, bytes) else v), name
        assert d["bytes_retired"] == s.bytes_retired > 0
        assert d["last_load"]["payload_bytes"] == s.last_load.payload_bytes > 0
        keep.close()


def test_close_and_with_wait_for_the_last_pin(gens):
    live = lodestar.Live(gens[1][0])
    index = live.pin()
    with pytest.raises(RuntimeError, match="pinned"):
        live.close()
    live.__exit__(None, None, None)  # closed for callers, freed after the last pin
    assert live.closed and live._h is not None
    with pytest.raises(ValueError):
        live.pin()
    assert _is_gen(index, 1)
    index.close()
    assert live._h is None


def test_a_pin_released_by_another_thread(gens):
    with lodestar.Live(gens[1][0]) as live:
        index = live.pin()
        live.reload(gens[2][0])
        t = threading.Thread(target=index.close)
        t.start()
        t.join()
        assert live.stats()["generations_freed"] == 1


def test_a_mapped_generation_survives_a_replace_by_rename(gens, tmp_path):
    path = str(tmp_path / "served.ldsi")
    v1, k1 = _content(1)
    lodestar.write(path, v1, keys=k1, metadata={"gen": "1"})
    with lodestar.Live(path, mmap=True) as live:
        with live.pin() as old:
            assert old.info["path"] == "mapped"
            v2, k2 = _content(2)
            lodestar.write(path, v2, keys=k2, metadata={"gen": "2"})  # atomic rename
            assert live.reload(path) == 2
            assert _is_gen(old, 1)  # the old inode stays mapped while pinned
            with live.pin() as new:
                assert _is_gen(new, 2)


def test_a_reader_pinning_during_reloads_sees_whole_generations(gens):
    """One thread pins and checks in a loop while this one reloads N times: every pin
    must hold exactly the content of the generation it names."""
    n = 40
    order = [1 + i % 4 for i in range(n + 1)]  # generation number g holds _content(order[g-1])
    with lodestar.Live(gens[order[0]][0], max_retired=8) as live:
        stop, seen, errors = threading.Event(), [], []

        def reader():
            try:
                while not stop.is_set():
                    with live.pin() as index:
                        g = index.generation
                        if not _is_gen(index, order[g - 1]):
                            errors.append("generation %d holds the wrong content" % g)
                        seen.append(g)
                    del index
            except BaseException as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=reader)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)  # let the threads interleave between C calls
        t.start()
        try:
            for i in range(n + 1):
                if i:
                    assert live.reload(gens[order[i]][0]) == i + 1
                # the next reload only once the reader has pinned this generation, so
                # that it sees every one (while its next pin races that reload)
                deadline = time.monotonic() + 30
                while (not seen or seen[-1] < i + 1) and not errors:
                    assert time.monotonic() < deadline, "the reader stopped"
                    time.sleep(0.0002)
        finally:
            stop.set()
            t.join()
            sys.setswitchinterval(switch)
        gc.collect()
        assert not errors, errors[:3]
        assert seen == sorted(seen) and set(seen) == set(range(1, n + 2))
        s = live.stats()
        assert (s["generation"], s["reloads_done"], s["reloads_failed"]) == (n + 1, n + 1, 0)
        assert (s["retired_pinned"], s["pins_on_retired"], s["generations_freed"]) == (0, 0, n)
        # One reader holds one pin at a time: at most one retired generation stays pinned
        # (the peak is taken after the swap's scan has freed the unpinned ones).
        assert s["retired_pinned_peak"] == 1
        assert _leases(live) == 1



def test_more_pins_in_one_thread_than_it_has_slots(gens):
    """A thread has 6 fast slots per live index; pins beyond them are counted (slower,
    just as correct)."""
    with lodestar.Live(gens[1][0]) as live:
        held = [live.pin() for _ in range(9)]
        assert live.reload(gens[2][0]) == 2
        s = live.stats()
        assert (s["retired_pinned"], s["pins_on_retired"]) == (1, 9)
        for n, index in enumerate(held):
            assert _is_gen(index, 1)
            index.close()
            assert live.stats()["pins_on_retired"] == 8 - n
        s = live.stats()
        assert (s["retired_pinned"], s["generations_freed"]) == (0, 1)
        assert _leases(live) == 1


def test_delta_reload(tmp_path):
    """A delta reload from a path reads the changed chunks only (1 KiB chunks; 64 f32 rows
    of 16 = 64-byte rows, 16 per chunk: row 40 is in chunk 2), gives the same index as a
    full load, and reports its bytes in stats(); delta=False and bytes fall back or load
    in full."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 16)).astype(np.float32)
    b = a.copy()
    b[40] += 1.0
    pa, pb = str(tmp_path / "a.ldsi"), str(tmp_path / "b.ldsi")
    lodestar.write(pa, a, chunk_bytes=1024)
    lodestar.write(pb, b, chunk_bytes=1024)
    with lodestar.Live(pa, delta=True) as live:
        first = live.stats()
        assert first["last_load"]["delta_fallback"] is True
        assert "no format 1.1 payload" in first["delta_fallback_reason"]
        live.reload(pb)
        info = live.last_reload()
        assert info["delta_fallback"] is False
        # vectors 4096 bytes = chunks 0..3, the section table, footer and checksum in
        # chunk 4 (the last): chunks 2 and 4 differ
        assert info["chunks_read"] == 2 and info["chunks_copied"] == 3
        assert info["bytes_read"] + info["bytes_copied"] == info["payload_bytes"]
        assert info["bytes_copied"] == 3 * 1024
        with live.pin() as index:
            assert np.array_equal(index.vectors, b)
        live.reload(pa, delta=False)
        info = live.last_reload()
        assert info["delta_fallback"] is False and info["bytes_copied"] == 0
        assert info["bytes_read"] == info["payload_bytes"]
        with open(pb, "rb") as f:
            live.reload(f, delta=True)  # a file object: its fd, a delta
        # into the standby (docs/adr/0050): the buffer of generation 2 (b), freed at the
        # full reload, holds every chunk of b at its offset: all kept, nothing read
        info = live.last_reload()
        assert (info["chunks_read"], info["chunks_copied"], info["chunks_shared"]) == (0, 0, 5)
        with live.pin() as index:
            assert np.array_equal(index.vectors, b)
        pc = str(tmp_path / "c.ldsi")
        lodestar.write(pc, a, chunk_bytes=0)  # format 1.0: a delta falls back, says why
        live.reload(pc)
        assert live.last_reload()["delta_fallback"] is True
        assert "1.0" in live.stats()["delta_fallback_reason"]
        live.reload(open(pa, "rb").read())  # bytes: always in full
        assert live.last_reload()["bytes_copied"] == 0
        # nothing fell back in this reload: no reason left from the one before (it stayed)
        assert live.last_reload()["delta_fallback"] is False
        assert live.stats()["delta_fallback_reason"] == ""
    with lodestar.Live(pa, delta=False) as live:
        live.reload(pb)
        assert live.last_reload()["bytes_copied"] == 0
        live.reload(pa, delta=True)
        assert live.last_reload()["chunks_read"] == 2


def test_delta_reload_over_http(tmp_path):
    """Live.reload(URL, delta=True) against tests/http_fault_server.py (plain: ranges and
    ETag): only the changed chunks cross the wire (the server's own count equals
    bytes_read), the index equals the file's; its "norange" mode falls back to a full
    load with the reason; delta=False reloads the URL in full."""
    import os
    import subprocess
    import urllib.request

    if not _capi.library().lds_url_supported():
        pytest.skip("built without libcurl")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((256, 16)).astype(np.float32)
    b = a.copy()
    b[100] += 1.0
    pa, pb = str(tmp_path / "a.ldsi"), str(tmp_path / "b.ldsi")
    lodestar.write(pa, a, chunk_bytes=1024)
    lodestar.write(pb, b, chunk_bytes=1024)
    server = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                          "http_fault_server.py")
    p = subprocess.Popen([sys.executable, server, str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        port = int(p.stdout.readline().split()[1])
        url = "http://127.0.0.1:%d/%%s/b.ldsi" % port
        with lodestar.Live(pa, delta=True) as live:
            live.reload(url % "plain")
            info = live.last_reload()
            assert info["delta_fallback"] is False and info["chunks_read"] == 2, info
            with urllib.request.urlopen("http://127.0.0.1:%d/sent/b.ldsi" % port) as r:
                assert int(r.read()) == info["bytes_read"]
            assert info["bytes_read"] < info["payload_bytes"] // 4
            with live.pin() as index:
                assert np.array_equal(index.vectors, b)
            live.reload(pa)
            live.reload(url % "norange")
            assert live.last_reload()["delta_fallback"] is True
            assert "does not serve ranges" in live.stats()["delta_fallback_reason"]
            live.reload(pa)
            live.reload(url % "plain", delta=False)
            info = live.last_reload()
            assert info["delta_fallback"] is False and info["bytes_copied"] == 0
            with live.pin() as index:
                assert np.array_equal(index.vectors, b)
    finally:
        p.kill()
        p.wait()


def test_diff_agrees_with_the_delta_reload_from_a_zstd_old(tmp_path, cli):
    """`lodestar diff OLD NEW` plans what a live index serving OLD reads on a delta reload
    from NEW. With OLD compressed (zstd) diff said no delta could be used, while the live
    index, which holds OLD decompressed, made one (found by a tester): now both read the
    same chunks and bytes; a zstd NEW falls back in both."""
    import json
    import shutil
    import subprocess
    if shutil.which("zstd") is None:
        pytest.skip("no zstd program")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((256, 16)).astype(np.float32)
    b = a.copy()
    b[40] += 1.0
    b[200] -= 1.0
    pa, pb = str(tmp_path / "a.ldsi"), str(tmp_path / "b.ldsi")
    lodestar.write(pa, a, chunk_bytes=1024)
    lodestar.write(pb, b, chunk_bytes=1024)
    za, zb = pa + ".zst", pb + ".zst"
    for p, z in ((pa, za), (pb, zb)):
        subprocess.run(["zstd", "-qf", p, "-o", z], check=True)

    def diff(old, new):
        r = subprocess.run([cli, "diff", "--json", old, new], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    plain, packed = diff(pa, pb), diff(za, pb)
    assert packed["delta"] is True and "why" not in packed, packed
    assert packed == plain
    with lodestar.Live(za, delta=True) as live:
        live.reload(pb)
        info = live.last_reload()
        assert info["delta_fallback"] is False
        assert (info["chunks_read"], info["bytes_read"], info["bytes_copied"]) == (
            packed["chunks_read"], packed["bytes_read"], packed["bytes_copied"])
        live.reload(zb)
        assert live.last_reload()["delta_fallback"] is True
    d = diff(pa, zb)
    assert d["delta"] is False and "NEW is compressed (zstd)" in d["why"], d
