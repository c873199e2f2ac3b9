"""DLPack capsules over an index's payload (Index.__dlpack__), built with ctypes.

numpy 1.24's own ndarray.__dlpack__ refuses read-only arrays, and an index's rows are
read-only, so the DLManagedTensor is built here (the structs of dlpack.h, DLPack 0.8 and
1.0, https://dmlc.github.io/dlpack/latest/c_api.html). The capsule's tensor points at the
payload itself: no copy. What keeps the index alive is a read-only numpy view of its rows
(Index.vectors), held in `_exported` until the consumer calls the tensor's deleter (or the
capsule is dropped unconsumed, whose destructor calls it): an Index closed or left by its
`with` block meanwhile is freed only after that, as for any other view (docs/adr/0035).

DLPack 1.0's versioned tensor (asked for with max_version >= (1, 0)) carries
DLPACK_FLAG_BITMASK_READ_ONLY; the unversioned one, all that numpy 1.24 and torch 1.13
consume, has no such flag, so the consumer's tensor is writable in its own eyes: writing
through it is undefined (a mapped index's pages are read-only: SIGSEGV).
"""
import ctypes
import threading

KDL_CPU = 1
_KDL_INT, _KDL_FLOAT, _KDL_BFLOAT = 0, 2, 4
_DL_CODES = {"f32": (_KDL_FLOAT, 32), "f16": (_KDL_FLOAT, 16), "bf16": (_KDL_BFLOAT, 16),
             "i8": (_KDL_INT, 8)}
READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedVersioned(ctypes.Structure):
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


# address of a managed tensor -> (the struct, its shape array, the view keeping the index)
_exported = {}
_lock = threading.Lock()


def _delete(address):
    """The tensor's deleter, called by the consumer when it is done (any thread: ctypes
    takes the GIL): drops the struct and the view, so the index may be freed."""
    with _lock:
        _exported.pop(address, None)


_deleter = _DELETER(_delete)

_NAMES = {False: ctypes.create_string_buffer(b"dltensor"),
          True: ctypes.create_string_buffer(b"dltensor_versioned")}

# Prototypes of our own: ctypes.pythonapi's function objects are shared with every other
# user in the process, who may set other argtypes on them.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capsule_destructor(versioned):
    name = _NAMES[versioned]

    def destroy(capsule):
        # A consumer renames the capsule ("used_dltensor...") when it takes the tensor
        # over; still named "dltensor" it was never consumed: its deleter is ours to call.
        if _capsule_valid(capsule, name):
            _delete(_capsule_pointer(capsule, name))

    return _DESTRUCTOR(destroy)


_destructors = {False: _capsule_destructor(False), True: _capsule_destructor(True)}


def capsule(view, dtype, versioned):
    """A DLPack capsule over numpy array `view` (the index's read-only rows, stored dtype
    `dtype`: "f32", "f16", "bf16" as DLPack bfloat16, "i8" as int8: scale it by i8_scale),
    C-contiguous, on the CPU; `view` is held until the tensor's deleter runs. versioned:
    a DLManagedTensorVersioned (DLPack 1.0) flagged read-only, else a DLManagedTensor."""
    managed = _ManagedVersioned() if versioned else _Managed()
    shape = (ctypes.c_int64 * 2)(*view.shape)
    t = managed.dl_tensor
    t.data = view.ctypes.data if view.size else None
    t.device = _Device(KDL_CPU, 0)
    t.ndim = 2
    code, bits = _DL_CODES[dtype]
    t.dtype = _DataType(code, bits, 1)
    t.shape = shape
    t.strides = None  # compact row-major
    t.byte_offset = 0
    managed.deleter = _deleter
    if versioned:
        managed.version = _Version(1, 0)
        managed.flags = READ_ONLY
    address = ctypes.addressof(managed)
    with _lock:
        _exported[address] = (managed, shape, view)
    try:
        return _capsule_new(address, _NAMES[versioned],
                                  ctypes.cast(_destructors[versioned], ctypes.c_void_p))
    except BaseException:
        _delete(address)
        raise


def exported():
    """How many tensors are exported and not yet deleted (for tests)."""
    with _lock:
        return len(_exported)


__all__ = ["capsule", "exported", "KDL_CPU"]
