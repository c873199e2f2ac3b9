"""Index.export: an index back to the formats other tools read, as `lodestar export` does
(cli/export.c): npy, fvecs, glove, word2vec (text with its "N D" header), word2vec-bin.

Text formats print every float in the shortest decimal that reads back as the same float32
(numpy's Dragon4 in unique mode gives the digits), laid out as the program lays them out
(cli/util.c cli_format_float), so the two write the same bytes and `lodestar pack` reads
the output back to the same vectors bit for bit. The program is faster (std::to_chars,
0.12 s of CPU for the 2,000,000 numbers of the GloVe sample against about 3 s in
Python, formatting each distinct value once): prefer it for big text
exports.
"""
import os
import re
import tempfile

import numpy as np

FORMATS = ("npy", "fvecs", "glove", "word2vec", "word2vec-bin")
_EXTENSIONS = ((".npy", "npy"), (".fvecs", "fvecs"), (".bin", "word2vec-bin"),
               (".vec", "word2vec"), (".txt", "glove"))
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|[-+]?(inf|nan)$", re.I)


def format_f32(x):
    """The text of float32 `x` as `lodestar export` writes it: the shortest decimal that
    reads back as x, laid out as C's "%.*g" with that many digits, except that a positive
    exponent is written plain where that is not longer (50, 100; 3e+15 stays); "nan" for
    every NaN, "inf", "-inf", "0", "-0"."""
    return _format_many(np.asarray([x], dtype=np.float32))[0]


def _format_many(values):
    """format_f32 of every element of the float32 array `values` (1-D), as a list."""
    out = [None] * len(values)
    special = ~np.isfinite(values) | (values == 0)
    for i in np.flatnonzero(special).tolist():
        x = values[i]
        out[i] = ("nan" if np.isnan(x) else ("inf" if x > 0 else "-inf") if np.isinf(x)
                  else "-0" if np.signbit(x) else "0")
    scientific = np.format_float_scientific
    for i in np.flatnonzero(~special).tolist():
        out[i] = _layout(scientific(values[i], unique=True, trim="-"))
    return out


def _layout(sci):
    """cli_format_float's layout of the shortest scientific form `sci` ("-d.ddde-XX")."""
    neg = sci[0] == "-"
    mant, _, exp = (sci[1:] if neg else sci).partition("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    exp10, nd = int(exp), len(digits)
    sign = "-" if neg else ""
    if -4 <= exp10 < nd:
        if exp10 < 0:
            return sign + "0." + "0" * (-exp10 - 1) + digits
        tail = digits[exp10 + 1:]
        return sign + digits[:exp10 + 1] + ("." + tail if tail else "")
    text = "%s%s%s%se%s%02d" % (sign, digits[0], "." if nd > 1 else "", digits[1:],
                                "-" if exp10 < 0 else "+", abs(exp10))
    plain = sign + digits + "0" * (exp10 + 1 - nd)
    return plain if exp10 > 0 and len(plain) <= len(text) else text


def _format_of(path, fmt):
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError("unknown format %r (one of %s)" % (fmt, ", ".join(FORMATS)))
        return fmt
    name = os.fspath(path).lower()
    for ext, f in _EXTENSIONS:
        if name.endswith(ext) and len(name) > len(ext):
            return f
    raise ValueError("%s: cannot tell the format from the extension; name it with format= "
                     "(one of %s)" % (os.fspath(path), ", ".join(FORMATS)))


def _key_refusal(key, fmt):
    """Why `key` cannot be written in text format `fmt` (export.c's rules), or None."""
    if not key:
        return "is empty"
    if any(c in key for c in "\n\r\t"):
        return "holds a tab, CR or LF"
    if fmt == "word2vec-bin" and " " in key:
        return "holds a space, which ends a word2vec binary key"
    if key[0] == " " or key[-1] == " ":
        return "starts or ends with a space"
    if " " in key and _NUMBER.match(key.rsplit(" ", 1)[1]):
        return ("ends in a number after a space, which would be read back as part of the "
                "vector")
    return None


def export(index, path, format=None, *, dtype="f32", keys_out=None):
    """Writes `index` to `path` (atomically: a temporary file beside it, renamed over it
    once complete). format: one of FORMATS, or None to take it from the extension (.npy,
    .fvecs, .bin word2vec-bin, .vec word2vec, .txt glove). dtype: "f32" or "f16", npy
    only. keys_out: npy and fvecs: also write the keys there, one per line. Values stored
    as f16, bf16 or i8 are widened to float32 exactly (as_float32). ValueError for an
    unknown format, a text format of a keyless index, or a key a text format cannot hold
    (naming its row)."""
    fmt = _format_of(path, format)
    if dtype not in ("f32", "f16"):
        raise ValueError("dtype is 'f32' or 'f16', not %r" % (dtype,))
    if dtype == "f16" and fmt != "npy":
        raise ValueError("dtype='f16' is for format 'npy'")
    if keys_out is not None and fmt not in ("npy", "fvecs"):
        raise ValueError("keys_out is for npy and fvecs; text formats carry their keys")
    keys = index.keys
    if fmt not in ("npy", "fvecs") or keys_out is not None:
        if keys is None:
            raise ValueError("the index has no keys; %s needs one per row (export to npy or "
                             "fvecs instead)" % ("keys_out" if fmt in ("npy", "fvecs") else fmt))
    if fmt not in ("npy", "fvecs"):
        for r, k in enumerate(keys):
            why = _key_refusal(k, fmt)
            if why:
                raise ValueError("row %d: the key %r %s; %s cannot hold it" % (r, k, why, fmt))
    v = index.as_float32()
    if keys_out is not None:
        _atomic(keys_out, lambda f: f.write("".join(k + "\n" for k in keys).encode()))
    _atomic(path, lambda f: _write(f, fmt, v, keys, dtype))


def _write(f, fmt, v, keys, dtype):
    rows, dim = v.shape
    if fmt == "npy":
        np.save(f, np.ascontiguousarray(v, dtype="<f2" if dtype == "f16" else "<f4"),
                allow_pickle=False)
    elif fmt == "fvecs":
        out = np.empty((rows, dim + 1), dtype="<i4")
        out[:, 0] = dim
        out[:, 1:] = np.ascontiguousarray(v, dtype="<f4").view("<i4")
        f.write(out.tobytes())
    elif fmt == "word2vec-bin":
        f.write(b"%d %d\n" % (rows, dim))
        for k, row in zip(keys, v):
            f.write(k.encode() + b" " + np.ascontiguousarray(row, dtype="<f4").tobytes() + b"\n")
    else:
        if fmt == "word2vec":
            f.write(b"%d %d\n" % (rows, dim))
        # Each distinct float formatted once (embeddings repeat values: the GloVe sample's
        # 2,000,000 numbers hold about a tenth as many distinct ones), rows in blocks.
        step = max(1, (1 << 22) // max(dim, 1))
        for start in range(0, rows, step):
            block = np.ascontiguousarray(v[start:start + step], dtype="<f4")
            distinct, where = np.unique(block.view("<u4"), return_inverse=True)
            text = np.array(_format_many(distinct.view("<f4")), dtype=object)
            words = text[where.reshape(block.shape)]
            f.write("".join(k + " " + " ".join(w) + "\n"
                            for k, w in zip(keys[start:start + len(block)], words)).encode())


def _atomic(path, fill):
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=d)
    try:
        try:  # mkstemp's 0600 would hide the output from others: the old file's, or 0644
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except OSError:
            os.chmod(tmp, 0o644)
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
