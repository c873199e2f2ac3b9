#!/usr/bin/env python3
"""The program's documentation cannot drift from the program.

- docs/cli.md's usage blocks equal each command's --help (scripts/readme-help.py), and
  README.md links docs/cli.md rather than holding copies of --help;
- every command that `lodestar --help` lists has a man page, lodestar-COMMAND.1, built by
  help2man from its --help (scripts/man-page.sh), naming every option the --help names,
  with the command's one-line summary as its NAME, and lodestar.1 lists every page;
- README.md's C example is tests/example_readme.c, which the cli test compiles and runs;
- a docs/cli.md block changed by hand is caught (the check runs on a damaged copy).

usage: test_docs.py LODESTAR SOURCE_ROOT MAN_DIR|-   (- : built without man pages)
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lds_testrun import check, run_tests, skip  # noqa: E402

LODESTAR = os.path.abspath(sys.argv[1])
SRC = os.path.abspath(sys.argv[2])
MAN_DIR = sys.argv[3]
WORK = tempfile.mkdtemp(prefix="lodestar-test-docs-")
CHECKER = os.path.join(SRC, "scripts", "readme-help.py")


def help_of(*cmd):
    return subprocess.run([LODESTAR, *cmd, "--help"], capture_output=True, text=True,
                          check=True).stdout


def commands():
    top = help_of()
    body = top.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [l.split()[0] for l in body.splitlines() if re.match(r"^  [a-z]", l)]


CLI_MD = os.path.join(SRC, "docs", "cli.md")


def readme_check(path):
    p = subprocess.run([sys.executable, CHECKER, LODESTAR, path], capture_output=True,
                       text=True)
    return p.returncode, p.stdout + p.stderr


def test_cli_md_usage_is_the_help():
    rc, out = readme_check(CLI_MD)
    check(rc == 0, f"docs/cli.md's usage text differs from --help:\n{out}")
    check(f"cli.md's {len(commands()) + 1} usage blocks" in out, out)
    # With no FILE the checker reads docs/cli.md beside it.
    p = subprocess.run([sys.executable, CHECKER, LODESTAR], capture_output=True, text=True)
    check(p.returncode == 0 and "cli.md's" in p.stdout, p.stdout + p.stderr)


def test_readme_links_the_reference_instead_of_copying_it():
    readme = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
    check("(docs/cli.md)" in readme, "README.md does not link docs/cli.md")
    check("written by scripts/readme-help.py" not in readme, "README.md holds a usage block")
    check("\noptions:\n" not in readme, "README.md holds a copy of an options list")


def test_readme_c_example_is_the_tested_one():
    # The `cli` test compiles and runs tests/example_readme.c; README.md shows it without
    # its first line (the comment naming it), and the two must not drift.
    readme = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
    blocks = re.findall(r"```c\n(.*?)```\n", readme, re.S)
    check(len(blocks) == 1, f"README.md has {len(blocks)} C blocks, not 1")
    example = open(os.path.join(SRC, "tests", "example_readme.c"), encoding="utf-8").read()
    first, rest = example.split("\n", 1)
    check(first.startswith("/*") and first.endswith("*/"), first)
    check(blocks[0] == rest, "README.md's C example differs from tests/example_readme.c")


def test_cli_md_check_catches_an_edit():
    text = open(CLI_MD, encoding="utf-8").read()
    cases = {
        "an option removed": text.replace("  --positive K1,K2,...  keys to add", "", 1),
        "a block removed": re.sub(r"<!-- lodestar keys --help:.*?<!-- end of lodestar keys "
                                  r"--help -->", "", text, count=1, flags=re.S),
        "a block for no command": text + "\n<!-- lodestar nosuch --help: written by "
        "scripts/readme-help.py -->\n```text\nx\n```\n<!-- end of lodestar nosuch --help -->\n",
    }
    for what, damaged in cases.items():
        check(damaged != text, f"{what}: the damage applies")
        path = os.path.join(WORK, "cli.md")
        with open(path, "w", encoding="utf-8") as f:
            f.write(damaged)
        rc, out = readme_check(path)
        check(rc == 1, f"{what}: the check exits {rc}, not 1:\n{out}")
        # --write puts the text back (a missing block is reported, not invented).
        p = subprocess.run([sys.executable, CHECKER, "--write", LODESTAR, path],
                           capture_output=True, text=True)
        if what == "an option removed":
            check(p.returncode == 0 and open(path, encoding="utf-8").read() == text,
                  f"--write restores cli.md: {p.stdout}")


def man_text(name):
    with open(os.path.join(MAN_DIR, name), encoding="utf-8") as f:
        return f.read()


def test_search_kernels_doc_lists_the_kernels():
    """lds_search_kernels' doc comment names the kernels in search.c's order (found by a
    tester: it listed four after avx512bf16 made five)."""
    with open(os.path.join(SRC, "search", "search.c"), encoding="utf-8") as f:
        body = f.read().split("kernel_list[] = {", 1)[1].split("};", 1)[0]
    code = re.findall(r"&lds__kernel_(\w+)", body)
    with open(os.path.join(SRC, "include", "lodestar_index.h"), encoding="utf-8") as f:
        head = f.read().split("LDS_API size_t lds_search_kernels(", 1)[0]
    doc = head[head.rindex("/**"):]
    order = doc.split("in the order", 1)[1].split(", each", 1)[0]
    check(len(code) == 5 and re.findall(r'"(\w+)"', order) == code, (code, order))


def test_man_pages():
    if MAN_DIR == "-":
        skip("built without man pages (-Dman, or help2man missing)")
    top = man_text("lodestar.1")
    for cmd in commands():
        page = f"lodestar-{cmd}.1"
        check(os.path.exists(os.path.join(MAN_DIR, page)), f"{page} is built")
        man = man_text(page)
        check(f'.TH LODESTAR-{cmd.upper()} "1"' in man, f"{page}: title")
        summary = re.search(rf"^  {cmd} +(.*)$", help_of(), re.M).group(1).split()[0]
        check(re.search(rf"^lodestar-{cmd} \\- {re.escape(summary)}", man, re.M),
              f"{page}: NAME is the summary of lodestar --help")
        options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_of(cmd)))
        for opt in sorted(options):
            check(opt.replace("-", r"\-") in man, f"{page}: names {opt}")
        check("(here " not in man, f"{page}: no machine-specific default")
        check(rf".BR lodestar\-{cmd} (1)" in top, f"lodestar.1 refers to {page}")


if __name__ == "__main__":
    sys.exit(run_tests(globals(), WORK))
