#!/usr/bin/env python3
"""Keeps docs/cli.md's usage text equal to the program's own --help, so the two cannot drift.

usage: scripts/readme-help.py [--write] LODESTAR [FILE]
       (-h or --help prints this and does nothing else)

FILE (default docs/cli.md, the program's reference, which README.md links) holds one block
per command, between the lines
    <!-- lodestar COMMAND --help: written by scripts/readme-help.py -->
    <!-- end of lodestar COMMAND --help -->
(and one for `lodestar --help` itself), each a fenced text block of exactly what
`LODESTAR COMMAND --help` prints, with the --max-payload default it computes for the
machine at hand replaced by a note (as in the man pages, scripts/man-page.sh). The text
between the blocks is written by hand.

Without --write it checks: every command that `lodestar --help` lists has its block,
no block names another command, and each block equals the --help output; it prints a
diff of any difference and exits 1 (the meson test 'docs' runs this). With --write it
rewrites the blocks in place (a command whose block is missing is reported, not added:
place its two marker lines where it belongs in FILE). Exit 2 on a usage error.
"""
import difflib
import os
import re
import subprocess
import sys

# The --max-payload default is the machine's: "(here 11.8 GiB)" becomes this note.
HERE_RE = re.compile(r"^( *)\(here [^)]*\)$", re.M)
HERE_NOTE = r"\1(lodestar COMMAND --help shows it for the machine at hand)"
BLOCK_RE = re.compile(
    r"<!-- lodestar (?:([a-z]+) )?--help: written by scripts/readme-help.py -->\n"
    r"```text\n(.*?)```\n"
    r"<!-- end of lodestar (?:([a-z]+) )?--help -->",
    re.S,
)


def block(name, body):
    label = f"lodestar {name + ' ' if name else ''}--help"
    return (f"<!-- {label}: written by scripts/readme-help.py -->\n```text\n{body}```\n"
            f"<!-- end of {label} -->")


def help_text(lodestar, command):
    args = [lodestar] + ([command] if command else []) + ["--help"]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"readme-help: {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return HERE_RE.sub(HERE_NOTE, p.stdout)


def commands(top_help):
    """The commands listed under "commands:" in `lodestar --help`."""
    m = re.search(r"^commands:\n(.*?)\n\n", top_help, re.M | re.S)
    return [line.split()[0] for line in m.group(1).splitlines() if re.match(r"^  [a-z]", line)]


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    write = "--write" in argv
    args = [a for a in argv if a != "--write"]
    if not 1 <= len(args) <= 2 or any(a.startswith("-") for a in args):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    lodestar = args[0]
    readme = args[1] if len(args) == 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "docs", "cli.md")
    shown = os.path.basename(readme)
    text = open(readme, encoding="utf-8").read()
    top = help_text(lodestar, None)
    want = {None: top}
    for c in commands(top):
        want[c] = help_text(lodestar, c)

    problems = []
    seen = set()

    def replace(m):
        name, body, end = m.group(1), m.group(2), m.group(3)
        label = f"lodestar {name + ' ' if name else ''}--help"
        if name != end:
            problems.append(f"{label}: its end marker names '{end}'")
            return m.group(0)
        if name not in want:
            problems.append(f"{label}: not a command of 'lodestar --help'")
            return m.group(0)
        if name in seen:
            problems.append(f"{label}: two blocks")
        seen.add(name)
        if body != want[name]:
            if not write:
                diff = difflib.unified_diff(body.splitlines(True), want[name].splitlines(True),
                                            shown, label)
                problems.append(f"{label}: {shown} differs from the program:\n" + "".join(diff))
            return block(name, want[name])
        return m.group(0)

    new = BLOCK_RE.sub(replace, text)
    for name in want:
        if name not in seen:
            label = f"lodestar {name + ' ' if name else ''}--help"
            problems.append(f"{label}: no block in {shown} (add its two marker lines)")
    if write and new != text:
        with open(readme, "w", encoding="utf-8") as f:
            f.write(new)
        print(f"readme-help: rewrote the blocks of {readme} that differed")
    for p in problems:
        print(f"readme-help: {p}")
    if problems and not write:
        print(f"readme-help: to update {readme}: scripts/readme-help.py --write BUILD/cli/lodestar")
    if problems:
        return 1
    print(f"readme-help: {shown}'s {len(seen)} usage blocks equal the program's --help")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
