"""Every ctypes mirror of python/lodestar/_capi.py against the C compiler's layout.

tests/python/layout.c prints sizeof and offsetof of each mirrored struct (built by meson
as python_layout, its path in $LDS_LAYOUT_EXE; run by hand, it is compiled here with cc).
A header change the binding misses (a field added, moved, resized or renamed) fails here.
"""
import ctypes
import os
import shutil
import subprocess

import pytest

from conftest import ROOT
from lodestar import _capi


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    exe = os.environ.get("LDS_LAYOUT_EXE")
    if not exe:
        cc = shutil.which("cc")
        if not cc:
            pytest.skip("no C compiler and no LDS_LAYOUT_EXE")
        exe = str(tmp_path_factory.mktemp("layout") / "layout")
        subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), "-o", exe,
                        os.path.join(ROOT, "tests", "python", "layout.c")], check=True)
    out = subprocess.run([exe], check=True, stdout=subprocess.PIPE).stdout.decode()
    sizes, fields = {}, {}
    for line in out.splitlines():
        name, *values = line.split()
        if "." in name:
            fields[name] = tuple(int(v) for v in values)  # (offset, size)
        else:
            sizes[name] = int(values[0])
    return sizes, fields


def mismatches(mirrors, sizes, fields):
    """What differs between `mirrors` (C name -> ctypes.Structure) and the C layout."""
    out = []
    for name, mirror in mirrors.items():
        if name not in sizes:
            out.append("layout.c does not print %s" % name)
            continue
        if ctypes.sizeof(mirror) != sizes[name]:
            out.append("sizeof(%s): C %d, mirror %d" % (name, sizes[name], ctypes.sizeof(mirror)))
        mirrored = {"%s.%s" % (name, f[0]): (getattr(mirror, f[0]).offset,
                                            getattr(mirror, f[0]).size) for f in mirror._fields_}
        printed = {k: v for k, v in fields.items() if k.startswith(name + ".")}
        for k in sorted(set(mirrored) | set(printed)):
            if mirrored.get(k) != printed.get(k):
                out.append("%s (offset, size): C %s, mirror %s" % (k, printed.get(k),
                                                                   mirrored.get(k)))
    return out


def test_every_mirror_matches_the_header(layout):
    assert mismatches(_capi.MIRRORS, *layout) == []


def test_every_printed_struct_is_mirrored(layout):
    sizes, _ = layout
    assert set(sizes) <= set(_capi.MIRRORS)
    assert set(sizes) == set(_capi.MIRRORS)
    assert {"lds_error", "lds_load_options", "lds_load_info", "lds_writer_options",
            "lds_hit", "lds_limits", "lds_search_options", "lds_pool_options",
            "lds_live_options", "lds_pin", "lds_live_stats"} <= set(sizes)


def test_a_drifted_mirror_is_caught(layout):
    class Hit(ctypes.Structure):  # score as a double: the same size and offsets, by padding
        _fields_ = [("row", ctypes.c_uint64), ("score", ctypes.c_double)]

    class Writer(ctypes.Structure):  # a field missed
        _fields_ = [f for f in _capi.WriterOptions._fields_ if f[0] != "unique_keys"]

    class Info(ctypes.Structure):  # a field the header does not have yet
        _fields_ = _capi.LoadInfo._fields_ + [("newer", ctypes.c_uint64)]

    class Pin(ctypes.Structure):  # one internal word where the header has two
        _fields_ = [("index", ctypes.c_void_p), ("generation", ctypes.c_uint64),
                    ("internal_", ctypes.c_void_p * 1)]

    class Stats(ctypes.Structure):  # last_status (an enum) as a 64-bit field, in its padding
        _fields_ = [(n, ctypes.c_uint64 if n == "last_status" else t)
                    for n, t in _capi.LiveStats._fields_]

    found = mismatches({"lds_hit": Hit, "lds_writer_options": Writer, "lds_load_info": Info,
                        "lds_pin": Pin, "lds_live_stats": Stats}, *layout)
    assert [m.split(" ")[0] for m in found] == [
        "lds_hit.score", "lds_writer_options.unique_keys", "sizeof(lds_load_info):",
        "lds_load_info.newer", "sizeof(lds_pin):", "lds_pin.internal_",
        "lds_live_stats.last_status"], found
