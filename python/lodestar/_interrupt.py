"""Progress reports and Ctrl-C for the long C calls (load, Live.reload, write).

A C call made through ctypes runs with the GIL released, so Python's own SIGINT handler
(which raises KeyboardInterrupt) cannot run until the call returns, and a load from a
slow URL or a pipe could run for hours. Call arms the call's lds_load_options.cancel and
.progress hooks (CANCEL_FN, PROGRESS_FN) and, in the main thread while the SIGINT handler
is Python's default one, replaces that handler for the duration of the call with one that
only records the signal. The C side calls cancel before each chunk, at least every
50 ms while it waits for a URL and every 100 ms while it waits on a pipe or socket (so a
SIGINT taken by another thread, or handled just after cancel's last answer, still stops
it); ctypes runs the callback in the main thread, where the recorded handler runs
first, so cancel answers true, the load stops with LDS_E_CANCELLED after returning its
rental, and Call raises KeyboardInterrupt (docs/adr/0034). Other threads, and a program
that installed its own SIGINT handler, keep their behaviour (progress still works).
"""
import ctypes
import signal
import threading

from . import _capi


class Call:
    """One C call's hooks. `progress`: None or a callable of (bytes done, bytes total or
    None when unknown). Use as a context manager around the call, then finish(status)."""

    def __init__(self, progress=None):
        if progress is not None and not callable(progress):
            raise TypeError("progress must be a callable of (done, total), not %s"
                            % type(progress).__name__)
        self._progress = progress
        self.interrupted = False
        self.failure = None  # an exception raised by `progress`, raised again after
        self.in_python_read = False  # inside a Python file object's read (see _on_sigint)
        self.last = None  # the last (done, total) reported
        self._old = None
        self._cancel_fn = _capi.CANCEL_FN(self._cancel)
        self._progress_fn = _capi.PROGRESS_FN(self._report) if progress is not None else None

    def arm(self, opts):
        """Sets the cancel and progress hooks of lds_load_options `opts`."""
        opts.cancel = ctypes.cast(self._cancel_fn, ctypes.c_void_p).value
        if self._progress_fn is not None:
            opts.progress = ctypes.cast(self._progress_fn, ctypes.c_void_p).value
        return opts

    def _cancel(self, _ctx):
        return self.interrupted or self.failure is not None

    def _report(self, done, total, _ctx):
        if self.failure is not None:
            return
        try:
            self.last = (done, None if total == _capi.LENGTH_UNKNOWN else total)
            self._progress(*self.last)
        except BaseException as e:  # stops the call; raised again by finish
            self.failure = e

    def report(self, done, total):
        """A report from Python code (write's row loop); raises what `progress` raised."""
        if self._progress is not None:
            self.last = (done, total)
            self._progress(done, total)

    def complete(self, total):
        """After a successful call: the final report (done == total) if the library made
        none (the memory path reads nothing, so it reports nothing)."""
        if self._progress is not None and self.last != (total, total):
            self.report(total, total)

    def _on_sigint(self, signum, frame):
        self.interrupted = True
        if self.in_python_read:
            # A Python read retries a read interrupted by a handler that returned (PEP
            # 475), so the load would not see the flag before the read ends: stop it.
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                    self._old = signal.signal(signal.SIGINT, self._on_sigint)
            except ValueError:  # not the main interpreter
                self._old = None
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None
        return False

    def finish(self, status, undo=None):
        """After the call returned `status`: raises KeyboardInterrupt if SIGINT came
        during the call, or what `progress` raised (calling `undo` first when the call
        had succeeded, to free what it made); otherwise returns `status`."""
        if self.interrupted or self.failure is not None:
            if status == 0 and undo is not None:
                undo()
            if self.failure is not None and not isinstance(self.failure, KeyboardInterrupt):
                raise self.failure
            raise KeyboardInterrupt
        return status


def url_options(timeout):
    """An lds_url_options with the library's defaults and `timeout` (seconds, a real
    number > 0, or None for no deadline) as its deadline."""
    uo = _capi.UrlOptions()
    _capi.library().lds_url_options_default(ctypes.byref(uo))
    if timeout is not None:
        t = float(timeout)
        if not t > 0 or t > 4294967:
            raise ValueError("timeout must be a number of seconds in (0, 4294967], or None, "
                             "not %r" % (timeout,))
        uo.timeout_ms = max(1, int(round(t * 1000)))
    return uo
