"""README's Python example runs and prints what README shows under it (as the C example
is compiled and run by test_cli.py)."""
import contextlib
import io
import os
import re

from conftest import ROOT


def _example():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```python\n(.*?)```\n\n```\n(.*?)```", section, re.S)
    assert m, "README's Python section has no python block followed by its output"
    return m.group(1), m.group(2)


def test_readme_python_example(tmp_path, monkeypatch):
    code, expected = _example()
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    assert out.getvalue() == expected
    assert os.listdir(tmp_path) == ["tiny.ldsi"]
