#!/usr/bin/env python3
"""What chunk-aligned sections (format 1.2, docs/format.md 4.4, ADR 0052) cost in file size.

usage: scripts/layout-padding.py LODESTAR [DIR]

For indexes of 1 to 100,000 rows of 128 f32 (512-byte rows) with ids and 8-byte keys,
packs the same rows with `--layout packed` (1.1) and `--layout chunks` (1.2) at 4 KiB
chunks and prints both file sizes, the padding the aligned layout adds, and what
`--layout auto` (the default) chooses. Exact byte counts: no timing, no lock needed.
"""
import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    lodestar = sys.argv[1]
    work = tempfile.mkdtemp(prefix="lodestar-layout-", dir=sys.argv[2] if len(sys.argv) > 2 else None)
    dim = 128
    print(f"{'rows':>8} {'packed (1.1)':>14} {'aligned (1.2)':>14} {'padding':>10} {'padding %':>10}  auto")
    for rows in (1, 10, 100, 1000, 2047, 2048, 10000, 100000):
        src = os.path.join(work, "in.txt")
        ids = os.path.join(work, "ids.txt")
        with open(src, "w") as f:
            for i in range(rows):
                f.write(f"w{i:07d} " + " ".join(str((i * 7 + j * 3) % 11 - 5) for j in range(dim)) + "\n")
        with open(ids, "w") as f:
            f.write("".join(f"{i}\n" for i in range(rows)))
        size = {}
        for layout in ("packed", "chunks", "auto"):
            out = os.path.join(work, f"{layout}.ldsi")
            subprocess.run([lodestar, "pack", "--quiet", "--format", "glove", "--ids", ids,
                            "--chunk-bytes", "4K", "--layout", layout, src, out], check=True,
                           stdout=subprocess.DEVNULL)
            size[layout] = os.path.getsize(out)
            if layout == "auto":
                with open(out, "rb") as f:
                    minor = int.from_bytes(f.read(12)[10:12], "little")
            os.unlink(out)
        pad = size["chunks"] - size["packed"]
        print(f"{rows:>8} {size['packed']:>14,} {size['chunks']:>14,} {pad:>10,} "
              f"{100.0 * pad / size['packed']:>9.1f}%  {'aligned' if minor == 2 else 'packed'}")
    os.unlink(src)
    os.unlink(ids)
    os.rmdir(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
