"""lodestar.Error and its subclasses: one per status, raised with the library's detail."""
import errno
import io
import os
import subprocess

import pytest

import lodestar
from conftest import ROOT
from lodestar import _errors

BAD = os.path.join(ROOT, "tests", "bad")


def test_a_class_for_every_status_of_the_library():
    lib = lodestar.library()
    unknown = lib.lds_status_name(10_000).decode()
    codes = [c for c in range(1, 256) if lib.lds_status_name(c).decode() != unknown]
    assert codes == sorted(_errors.STATUS_CLASSES), "a status without a class, or the reverse"
    for code, (name, cls) in _errors.STATUS_CLASSES.items():
        assert lib.lds_status_name(code).decode() == name
        assert issubclass(cls, lodestar.Error) and getattr(lodestar, cls.__name__) is cls
        e = _errors.from_status(code)
        assert type(e) is cls and e.code == code and e.status == name
        assert e.message == lib.lds_strerror(code).decode()  # no detail: the status's text
        assert str(e) == "%s: %s" % (name, e.message)


def test_families_and_builtin_bases():
    assert issubclass(lodestar.TruncatedError, lodestar.FormatError)
    assert issubclass(lodestar.ChecksumError, lodestar.FormatError)
    assert issubclass(lodestar.IOError, OSError) and lodestar.IOError is not OSError
    assert issubclass(lodestar.InvalidArgumentError, ValueError)
    assert issubclass(lodestar.BadValueError, ValueError)
    assert issubclass(lodestar.DuplicateKeyError, ValueError)
    assert issubclass(lodestar.NoMemoryError, MemoryError)
    assert issubclass(lodestar.NotFoundError, LookupError)
    assert issubclass(lodestar.StateError, RuntimeError)
    assert not issubclass(lodestar.LimitError, lodestar.FormatError)
    assert repr(lodestar.TruncatedError("x")).startswith("TruncatedError(")
    assert lodestar.TruncatedError.__module__ == "lodestar"


def test_io_error_carries_errno_and_is_an_oserror(tmp_path):
    missing = str(tmp_path / "missing.ldsi")
    with pytest.raises(OSError) as e:
        lodestar.load(missing)
    assert type(e.value) is lodestar.IOError and e.value.status == "E_IO"
    assert e.value.errno == errno.ENOENT and "No such file" in str(e.value)


def test_detail_names_field_and_offset(tiny):
    data = bytearray(open(tiny, "rb").read())
    data[70] ^= 1  # a payload byte: the checksum no longer matches
    with pytest.raises(lodestar.ChecksumError) as e:
        lodestar.load(bytes(data))
    assert e.value.status == "E_CHECKSUM" and e.value.field and "checksum" in e.value.message
    with pytest.raises(lodestar.TruncatedError) as e:
        lodestar.load(io.BytesIO(bytes(data[:40])))
    assert (e.value.field, e.value.offset) == ("header", 40)
    with pytest.raises(lodestar.BadMagicError) as e:
        lodestar.load(b"GIF89a" + bytes(data[6:]))
    assert e.value.field == "header.magic" and e.value.offset == 0
    with pytest.raises(lodestar.TrailingError):
        lodestar.load(io.BytesIO(bytes(data) + b"x"))


def _catalog():
    out = []
    for name in sorted(os.listdir(BAD)):
        parts = name.split(".")
        if len(parts) < 3 or parts[-1] not in ("ldsi", "zst") or "nolimits" in parts:
            continue
        out.append((name, parts[-2]))
    return out


def test_every_file_of_the_bad_catalog_raises_its_class():
    """tests/bad/NAME.STATUS.ldsi|zst through the stream path, as test_bad.c does first."""
    by_name = {name: cls for name, cls in _errors.STATUS_CLASSES.values()}
    seen = set()
    cases = _catalog()
    assert len(cases) > 600
    for name, status in cases:
        data = open(os.path.join(BAD, name), "rb").read()
        if status == "OK":
            with lodestar.load(io.BytesIO(data)) as index:
                index.check_keys()
            continue
        with pytest.raises(lodestar.Error) as e:
            # Repeated keys are found where the key table is built (ADR 0010).
            lodestar.load(io.BytesIO(data)).check_keys()
        assert type(e.value) is by_name[status], name
        assert e.value.status == status and e.value.message, name
        seen.add(status)
    assert {"E_TRUNCATED", "E_CHECKSUM", "E_BAD_MAGIC", "E_HEADER_CHECK", "E_VERSION",
            "E_TRAILING", "E_BAD_SECTION", "E_LIMIT", "E_BAD_UTF8", "E_DUP_KEY", "E_LENGTH_MISMATCH",
            "E_BAD_VALUE", "E_ZSTD", "E_UNSUPPORTED"} <= seen


def test_length_mismatch_and_zstd(tiny, tmp_path):
    data = open(tiny, "rb").read()
    with pytest.raises(lodestar.LengthMismatchError):
        lodestar.load(data + b"\0")  # memory: the length must be exact
    zst = tmp_path / "t.zst"
    subprocess.run(["zstd", "-q", "-f", tiny, "-o", str(zst)], check=True)
    z = bytearray(zst.read_bytes())
    z[len(z) // 2] ^= 0xFF
    with pytest.raises((lodestar.ZstdError, lodestar.ChecksumError)):
        lodestar.load(bytes(z))
