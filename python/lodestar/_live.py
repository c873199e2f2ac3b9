"""lodestar.Live: the live index of include/lodestar_live.h (pin, reload, retire)."""
import ctypes
import json
import operator
import threading

from . import _capi, _interrupt
from ._capi import library
from ._errors import check, from_status
from ._index import Index, _options, from_source

DEFAULT_MAX_RETIRED = 2  # LDS_LIVE_DEFAULT_MAX_RETIRED


class Live:
    """A live index: readers pin the current generation, reload() swaps a new one in.

        live = lodestar.Live("index.ldsi")
        with live.pin() as index:      # an Index of the generation current now
            scores, rows = index.search(queries, k=10)
        live.reload("index.ldsi")      # readers pinning from now on get the new one

    source: None (nothing to pin until the first reload), or the first generation's
    source, as reload() takes it. max_retired: how many retired generations may still be
    pinned (1 to 64; None = 2); a reload beyond it raises lodestar.LimitError (field
    "live.max_retired") at once and loads nothing. mmap, verify, ownership, max_payload,
    populate, read_threads, url_connections: as lodestar.load's, for every reload. delta: the default of
    reload()'s delta (False, the default: reloads load and verify in full; True: a reload
    from a path or a file reads only the chunks that changed, see reload()).

    Pool: with max_retained_bytes None (the default), generations are loaded from the
    live index's own pool (lds_live_pool, docs/adr/0049: no thread caches, room for
    2 + max_retired payloads of a class whatever their size; it is also where a delta
    reload's standby is kept, docs/adr/0050). Given max_retained_bytes, a private pool
    without thread caches is created at the first reload and retains that many bytes
    (a generation is freed by the thread that releases its last pin; a thread cache
    would keep its buffer from the reloader).

    Lifetime: an Index from pin() holds its pin until it is closed *and* the last
    numpy array taken from it is gone, exactly as an Index from lodestar.load holds
    its memory (so an array kept after the `with` block keeps that generation pinned,
    and counts against max_retired until it goes). A retired generation is freed when
    its last pin is released. Live.close() frees at once and refuses (RuntimeError)
    while a pin is held or a reload runs; leaving a `with` block closes for callers
    and frees after the last pin. Every method may be called from several threads at
    once; the C calls release the GIL.
    """

    def __init__(self, source=None, *, max_retired=None, max_retained_bytes=None,
                 mmap=False, verify=True, ownership=None, max_payload=None, populate=False,
                 read_threads=0, url_connections=0, delta=False):
        lib = library()
        lo = _capi.LiveOptions()
        lib.lds_live_options_default(ctypes.byref(lo))
        lo.delta = bool(delta)
        if max_retired is not None:
            m = operator.index(max_retired)
            if m < 1:
                raise ValueError("max_retired must be >= 1, not %d" % m)
            lo.max_retired = min(m, 0xFFFFFFFF)  # above 64: the library refuses it
        self._max_retired = lo.max_retired or DEFAULT_MAX_RETIRED
        if max_retained_bytes is not None:
            max_retained_bytes = operator.index(max_retained_bytes)
            if max_retained_bytes < 0:
                raise ValueError("max_retained_bytes must be >= 0, not %d"
                                 % max_retained_bytes)
        self._max_retained = max_retained_bytes
        self._mmap = bool(mmap)
        self._opts = _options(mmap, populate, verify, ownership, max_payload, read_threads,
                              url_connections)
        self._h = None
        self._pool = None
        self._pool_owned = False  # a private pool (max_retained_bytes given), freed here
        self._holds = 0  # pins held and calls in flight
        self._closed = False
        self._infos = {}  # generation -> its lds_load_info (the recent ones)
        self._lock = threading.Lock()
        err = _capi.new_error()
        h = ctypes.c_void_p()
        check(lib.lds_live_create(ctypes.byref(lo), ctypes.byref(h), ctypes.byref(err)), err)
        self._h = h.value
        if source is not None:
            try:
                self.reload(source)
            except BaseException:
                self._free()
                raise

    # ---- lifetime

    def _enter(self):
        with self._lock:
            if self._closed or not self._h:
                raise ValueError("live index is closed")
            self._holds += 1
            return self._h

    def _leave(self):
        with self._lock:
            self._holds -= 1
            free = self._closed and not self._holds
        if free:
            self._free()

    def _free(self):
        with self._lock:
            h, self._h = self._h, None
            pool, self._pool = self._pool, None
            owned, self._pool_owned = self._pool_owned, False
        if _capi._lib is not None:
            if h:
                _capi._lib.lds_live_free(h)
            if pool and owned:
                _capi._lib.lds_pool_free(pool)

    @property
    def closed(self):
        return self._closed or not self._h

    def close(self):
        """Frees the live index and every generation now (RuntimeError while a pin is
        held, an array of a pinned Index lives, or a reload runs)."""
        with self._lock:
            if self._closed or not self._h:
                self._closed = True
                return
            if self._holds:
                raise RuntimeError("live index still pinned (%d pins or calls); close the "
                                   "pinned indexes and drop their arrays first" % self._holds)
            self._closed = True
        self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._closed = True
            free = not self._holds
        if free:
            self._free()

    def __del__(self):
        # Pins hold a reference to their Live, so this runs with none held, except when
        # the garbage collector finalizes a cycle holding both: then the last unpin frees.
        if getattr(self, "_h", None):
            self.__exit__(None, None, None)

    def __repr__(self):
        if self.closed:
            return "<lodestar.Live (closed)>"
        return "<lodestar.Live generation %d>" % self.generation

    # ---- readers

    def pin(self):
        """Pins the current generation and returns it as an Index (with `generation`
        set). The generation is never freed while the Index is open or an array from it
        lives (see the class). lodestar.StateError if nothing was loaded yet."""
        lib = library()
        h = self._enter()
        pin = _capi.Pin()
        try:
            st = lib.lds_live_pin(h, ctypes.byref(pin))
        except BaseException:
            self._leave()
            raise
        if st != 0:
            self._leave()
            e = from_status(st)
            if e.status == "E_STATE":  # nothing loaded yet: say what to do
                raise type(e)("nothing is loaded yet, so there is no generation to pin: "
                              "call live.reload(source) first, or create it with "
                              "lodestar.Live(source)", code=e.code, status=e.status)
            raise e
        info = self._infos.get(pin.generation)
        if info is None:  # a generation older than the recent ones kept
            info = _capi.LoadInfo()
            lib.lds_load_info_init(ctypes.byref(info))

        def release():
            lib.lds_live_unpin(h, ctypes.byref(pin))
            self._leave()

        return Index(pin.index, info, release=release, generation=pin.generation)

    # ---- the reloader

    def _pool_for(self, source):
        """The pool a reload names: None (NULL: the live index's own, which self._pool
        then names for pool_stats) unless max_retained_bytes was given: then the private
        pool, created at the first reload (see the class)."""
        with self._lock:
            lib = library()
            cap = self._max_retained
            if cap is None:
                if not self._pool:
                    self._pool = lib.lds_live_pool(self._h)
                return None
            if self._pool:
                return self._pool
            po = _capi.PoolOptions()
            lib.lds_pool_options_default(ctypes.byref(po))
            po.thread_cache_count = 0
            po.max_retained_bytes = cap
            pool = ctypes.c_void_p()
            check(lib.lds_pool_create(ctypes.byref(po), ctypes.byref(pool)))
            self._pool = pool.value
            self._pool_owned = True
            return self._pool

    def reload(self, source, *, delta=None, timeout=None, progress=None):
        """Loads `source` (a path, a bytes-like object, a binary file object, as
        lodestar.load takes them; bytes are always copied here, since the library may
        free a generation in any thread) as the next generation, and swaps it in only
        once it has loaded and validated completely. Returns the new generation number.
        On failure nothing changes and the current generation keeps serving; raises the
        load's lodestar.Error (TruncatedError, ChecksumError, ...), lodestar.StateError
        (field "live.reload") when another reload of this live index is running (refused
        at once, never queued), lodestar.LimitError (field "live.max_retired") when
        max_retired retired generations are still pinned (refused at once).
        timeout, progress, and Ctrl-C: as lodestar.load's (KeyboardInterrupt with nothing
        changed and the rental returned; a Ctrl-C that comes once the new generation was
        swapped in is raised as KeyboardInterrupt too, the new generation serving).
        delta: True reads from a path, a URL or a file object (a regular file, uncompressed,
        format 1.1, the current generation's chunk size) only the chunks whose checksum
        matches no chunk of the current generation, copying the others from it, and
        verifies every chunk as a full load does (lds_live_reload_path_delta,
        docs/adr/0047); when that cannot be done the reload is a full one and
        stats()["last_load"]["delta_fallback"] is true, with the reason in
        stats()["delta_fallback_reason"]. False: a full reload. None: the Live's delta
        option. From an http(s):// or s3:// URL of a format 1.1 file, delta fetches
        only the chunks the current generation does not hold, as Range requests
        (lds_live_reload_url_delta, docs/adr/0053; a server without ranges, a zstd or
        format 1.0 file falls back as above); bytes_read is then the bytes transferred.
        Other sources (bytes, streams) always reload in full. The bytes
        read and copied are in stats()["last_load"] (bytes_read, bytes_copied,
        chunks_read, chunks_copied) and in last_reload()."""
        lib = library()
        h = self._enter()
        try:
            opts = _capi.LoadOptions.from_buffer_copy(self._opts)
            opts.pool = self._pool_for(source)
            uo = _interrupt.url_options(timeout)
            opts.url = ctypes.cast(ctypes.byref(uo), ctypes.c_void_p).value
            call = _interrupt.Call(progress)
            call.arm(opts)
            info = _capi.LoadInfo()
            lib.lds_load_info_init(ctypes.byref(info))
            err = _capi.new_error()
            gen = ctypes.c_uint64()
            tail = (ctypes.byref(opts), ctypes.byref(gen), ctypes.byref(info),
                    ctypes.byref(err))
            with call:
                st, _ = from_source(
                    source, self._mmap, info, False,
                    path=lambda p: (lib.lds_live_reload_path(h, p, *tail) if delta is None
                                    else lib.lds_live_reload_path_delta(h, p, bool(delta),
                                                                        *tail)),
                    url=lambda u: (lib.lds_live_reload_url(h, u, *tail) if delta is None
                                   else lib.lds_live_reload_url_delta(h, u, bool(delta), *tail)),
                    fd=lambda fd: (lib.lds_live_reload_fd(h, fd, *tail) if delta is None
                                   else lib.lds_live_reload_fd_delta(h, fd, bool(delta), *tail)),
                    memory=lambda address, n, copy: lib.lds_live_reload_memory(
                        h, address, n, copy, *tail),
                    callback=lambda cb: lib.lds_live_reload_callback(h, cb, None, *tail),
                    call=call)
            if st == 0:
                with self._lock:
                    self._infos[gen.value] = info
            call.finish(st)
            check(st, err)
            call.complete(info.payload_bytes)
            with self._lock:
                self._infos[gen.value] = info
                for g in [g for g in self._infos if g + 2 * _LIMIT < gen.value]:
                    del self._infos[g]
            return gen.value
        finally:
            self._leave()

    # ---- observability

    def last_reload(self):
        """The lds_load_info of the last reload that loaded (successful or failed), as a
        dict: stats()["last_load"] (bytes_read, bytes_copied, chunks_read, chunks_copied,
        delta_fallback, ...)."""
        return self.stats()["last_load"]

    def _stats_struct(self):
        lib = library()
        h = self._enter()
        try:
            s = _capi.LiveStats()
            lib.lds_live_stats_init(ctypes.byref(s))
            check(lib.lds_live_get_stats(h, ctypes.byref(s)))
            return s
        finally:
            self._leave()

    def stats(self):
        """A snapshot (lds_live_get_stats, through lds_live_stats_json) as a dict:
        generation, reloads_done, reloads_failed, reloads_refused, retired_pinned,
        retired_pinned_peak, pins_on_retired, bytes_retired, bytes_current,
        generations_freed, last_status ("OK", "E_CHECKSUM", ...) and last_load (the
        last reload that loaded: a dict as Index.info's)."""
        lib = library()
        s = self._stats_struct()
        need = ctypes.c_size_t()
        lib.lds_live_stats_json(ctypes.byref(s), None, 0, ctypes.byref(need))
        buf = ctypes.create_string_buffer(need.value + 1)
        check(lib.lds_live_stats_json(ctypes.byref(s), buf, len(buf), None))
        return json.loads(buf.value.decode())

    @property
    def generation(self):
        """The number of the serving generation: 0 before the first successful reload,
        then 1, 2, ... (one per successful reload)."""
        return self._stats_struct().generation

    @property
    def max_retired(self):
        return self._max_retired


_LIMIT = 64  # LDS_LIVE_MAX_RETIRED_LIMIT: generations whose load info is kept, twice
