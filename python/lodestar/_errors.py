"""lodestar.Error and one subclass per status of include/lodestar.h (LDS_STATUS_LIST).

Families: FormatError (the bytes, or the values given to the writer, do not make a
valid index), IOError (also an OSError), LimitError, and the usage errors. Where a
builtin family fits, the class derives from it too, so that `except ValueError`
catches InvalidArgumentError and BadValueError, `except OSError` catches IOError,
`except MemoryError` catches NoMemoryError, `except LookupError` NotFoundError.
"""


class Error(Exception):
    """A refusal from liblodestar.

    status: the status name ("E_TRUNCATED"); code: its number; field: the field at
    fault ("header.magic", "row 17") or None; offset: byte offset of that field in
    the file or stream; line: 1-based line or row of text or binary input, else 0;
    errno: errno of a failed system call, else 0; message: the library's sentence
    (its text for the status when it gave none). str() is "STATUS: message".
    """

    def __init__(self, message, *, code=None, status=None, field=None, offset=0, line=0,
                 sys_errno=0):
        super().__init__("%s: %s" % (status, message) if status else message)
        self.message = message
        self.code = code
        self.status = status
        self.field = field
        self.offset = offset
        self.line = line
        self.errno = sys_errno


class FormatError(Error):
    """The bytes are not a valid index, or values given to the writer cannot be stored."""


class LimitError(Error):
    """E_LIMIT: a configured limit (payload, dim, rows, key or metadata bytes) was exceeded."""


class IOError(Error, OSError):  # noqa: A001 (lodestar.IOError, as the issue names it)
    """E_IO: the source or destination failed; .errno holds the system's errno."""


class InvalidArgumentError(Error, ValueError):
    """E_INVALID_ARG: the library refused an argument."""


class NoMemoryError(Error, MemoryError):
    """E_NOMEM."""


class CancelledError(Error):
    """E_CANCELLED."""


class NotFoundError(Error, LookupError):
    """E_NOT_FOUND."""


class PoolRefusedError(Error):
    """E_POOL_REFUSED."""


class UnsupportedError(Error):
    """E_UNSUPPORTED: e.g. ids asked of an index without ids, an unknown header flag."""


class StateError(Error, RuntimeError):
    """E_STATE: a call not valid in the object's current state."""


class DeadlineError(Error, TimeoutError):
    """E_TIMEOUT: the deadline passed (load(url, timeout=...)); the message names the URL
    and the bytes received."""


def _format(name, doc, *extra):
    return type(name, (FormatError,) + extra, {"__doc__": doc})


BadMagicError = _format("BadMagicError", "E_BAD_MAGIC: not a lodestar index.")
VersionError = _format("VersionError", "E_VERSION: unsupported format major version.")
HeaderCheckError = _format("HeaderCheckError", "E_HEADER_CHECK: header check value mismatch.")
TruncatedError = _format("TruncatedError", "E_TRUNCATED: input ended before its declared length.")
TrailingError = _format("TrailingError", "E_TRAILING: bytes after the end of the payload.")
BadSectionError = _format("BadSectionError", "E_BAD_SECTION: invalid section table.")
ChecksumError = _format("ChecksumError", "E_CHECKSUM: payload checksum mismatch.")
SizeOverflowError = _format("SizeOverflowError", "E_OVERFLOW: declared sizes overflow.")
BadUTF8Error = _format("BadUTF8Error", "E_BAD_UTF8: a key or value is not valid UTF-8.",
                       ValueError)
DuplicateKeyError = _format("DuplicateKeyError", "E_DUP_KEY: a key appears twice.", ValueError)
BadValueError = _format("BadValueError", "E_BAD_VALUE: an invalid value (a field, a NaN, a "
                        "value out of the dtype's range, a zero query under cosine).", ValueError)
LengthMismatchError = _format("LengthMismatchError",
                              "E_LENGTH_MISMATCH: declared length disagrees with the transport.")
ZstdError = _format("ZstdError", "E_ZSTD: the zstd stream is corrupt.")
ParseError = _format("ParseError", "E_PARSE: malformed input.")

# code -> (status name as lds_status_name gives it, class); test_errors checks the names
# against the library, so a status added to LDS_STATUS_LIST without a class here fails.
STATUS_CLASSES = {
    1: ("E_INVALID_ARG", InvalidArgumentError),
    2: ("E_NOMEM", NoMemoryError),
    3: ("E_IO", IOError),
    4: ("E_BAD_MAGIC", BadMagicError),
    5: ("E_VERSION", VersionError),
    6: ("E_HEADER_CHECK", HeaderCheckError),
    7: ("E_TRUNCATED", TruncatedError),
    8: ("E_TRAILING", TrailingError),
    9: ("E_BAD_SECTION", BadSectionError),
    10: ("E_CHECKSUM", ChecksumError),
    11: ("E_LIMIT", LimitError),
    12: ("E_OVERFLOW", SizeOverflowError),
    13: ("E_BAD_UTF8", BadUTF8Error),
    14: ("E_DUP_KEY", DuplicateKeyError),
    15: ("E_BAD_VALUE", BadValueError),
    16: ("E_LENGTH_MISMATCH", LengthMismatchError),
    17: ("E_ZSTD", ZstdError),
    18: ("E_CANCELLED", CancelledError),
    19: ("E_NOT_FOUND", NotFoundError),
    20: ("E_PARSE", ParseError),
    21: ("E_POOL_REFUSED", PoolRefusedError),
    22: ("E_UNSUPPORTED", UnsupportedError),
    23: ("E_STATE", StateError),
    24: ("E_TIMEOUT", DeadlineError),
}

__all__ = ["Error", "FormatError", "LimitError", "IOError", "InvalidArgumentError",
           "NoMemoryError", "CancelledError", "NotFoundError", "PoolRefusedError",
           "UnsupportedError", "StateError", "DeadlineError"] + [
               cls.__name__ for _, cls in STATUS_CLASSES.values()
               if cls.__bases__[0] is FormatError]

for _cls in [Error, FormatError] + [c for _, c in STATUS_CLASSES.values()]:
    _cls.__module__ = "lodestar"  # as users name them: lodestar.TruncatedError


def from_status(code, err=None):
    """The exception for status `code`, with the detail of lds_error `err` if given."""
    from ._capi import library
    lib = library()
    status = lib.lds_status_name(code).decode()
    cls = STATUS_CLASSES.get(code, (None, Error))[1]
    message = err.message.decode(errors="replace") if err is not None else ""
    if not message:
        message = lib.lds_strerror(code).decode(errors="replace")
    kw = {}
    if err is not None:
        kw = dict(field=err.field.decode(errors="replace") if err.field else None,
                  offset=err.offset, line=err.line, sys_errno=err.sys_errno)
    return cls(message, code=code, status=status, **kw)


def check(code, err=None):
    """Raises the exception for `code` unless it is LDS_OK (0)."""
    if code != 0:
        raise from_status(code, err)
