"""The install a new user does: a fresh clone, a venv, pip install . (offline), import;
and a wheel built offline (pip wheel --no-build-isolation), installed into a fresh venv.

The two are marked slow (a clone and a release build of the library each, about 15-90 s):
meson runs them in suite 'slow' (test python-install), `pytest -m slow tests/python` by
hand. test_every_module_is_installed is quick (suite unit).
"""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT


CHECK = r"""
import importlib.metadata, os, sys
import numpy as np
import lodestar
print(lodestar.library_path())
print(lodestar.__version__, importlib.metadata.version("lodestar"))
lodestar.write("t.ldsi", np.eye(3), keys=["a", "b", "c"])
with lodestar.load("t.ldsi") as index:
    print(index.most_similar("a", k=1), index.search(np.eye(3)[1], k=1)[1].tolist())
with lodestar.Live("t.ldsi") as live, live.pin() as index:
    print(live.reload(b"".join(open("t.ldsi", "rb"))), index.generation, index.key(2))
"""


def _meson_version():
    text = open(os.path.join(ROOT, "meson.build")).read()
    return text.split("version: '", 1)[1].split("'", 1)[0]


def test_every_module_is_installed():
    """python/meson.build lists every module of the package (a module left out is missing
    from `pip install .` and from the wheel, and only there)."""
    pkg = os.path.join(ROOT, "python", "lodestar")
    listed = open(os.path.join(ROOT, "python", "meson.build")).read()
    missing = [m for m in sorted(os.listdir(pkg))
               if m.endswith(".py") and "'lodestar/%s'" % m not in listed]
    assert missing == []


def _offline_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LODESTAR_LIB", "VIRTUAL_ENV")}
    env["PIP_NO_INDEX"] = "1"  # offline: everything comes from the system and the clone
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _clone(tmp_path):
    if not os.path.isdir(os.path.join(ROOT, ".git")) and not os.path.isfile(
            os.path.join(ROOT, ".git")):
        pytest.skip("the source tree is not a git checkout")
    for tool in ("git", "meson", "ninja"):
        if not shutil.which(tool):
            pytest.skip("%s is not installed" % tool)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", ROOT, str(clone)], check=True)
    return clone


@pytest.mark.slow
def test_wheel_built_offline_installs_into_a_fresh_venv(tmp_path):
    """pip wheel --no-build-isolation (meson-python): a wheel holding the package and its
    own liblodestar, installed into a new venv after the clone is gone, imported from
    elsewhere with no LODESTAR_LIB."""
    clone = _clone(tmp_path)
    env = _offline_env()
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
                            "--no-deps", "-w", str(dist), "."], cwd=clone, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert built.returncode == 0, built.stdout.decode()[-4000:]
    shutil.rmtree(clone)
    wheels = list(dist.glob("lodestar-*.whl"))
    assert len(wheels) == 1
    import zipfile
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "lodestar/liblodestar.so" in names
    assert all("lodestar/%s" % m in names for m in ("_dlpack.py", "_export.py", "_index.py"))
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, env=env)  # numpy from the system: offline
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", str(wheels[0])], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert pip.returncode == 0, pip.stdout.decode()[-4000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK], cwd=elsewhere, env=env,
                         check=True, stdout=subprocess.PIPE).stdout.decode().splitlines()
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          env=env, check=True, stdout=subprocess.PIPE).stdout.decode().strip()
    assert out[0] == os.path.join(site, "lodestar", "liblodestar.so")
    assert out[1] == "%s %s" % (_meson_version(), _meson_version())
    assert out[2] == "[('b', 0.0)] [[1]]"
    assert out[3] == "2 1 c"


@pytest.mark.slow
def test_fresh_clone_installs_into_a_venv_and_imports_anywhere(tmp_path):
    if not os.path.isdir(os.path.join(ROOT, ".git")) and not os.path.isfile(
            os.path.join(ROOT, ".git")):
        pytest.skip("the source tree is not a git checkout")
    for tool in ("git", "meson", "ninja"):
        if not shutil.which(tool):
            pytest.skip("%s is not installed" % tool)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", ROOT, str(clone)], check=True)
    venv = tmp_path / "v"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LODESTAR_LIB", "VIRTUAL_ENV")}
    env["PIP_NO_INDEX"] = "1"  # offline: everything comes from the system and the clone
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, env=env)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "."],
                         cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert pip.returncode == 0, pip.stdout.decode()[-4000:]
    shutil.rmtree(clone)  # the install must not depend on the source or build tree
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # A stale library named by LODESTAR_LIB must not be picked up by an installed package.
    env["LODESTAR_LIB"] = str(tmp_path / "stale" / "liblodestar.so")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK], cwd=elsewhere, env=env,
                         check=True, stdout=subprocess.PIPE).stdout.decode().splitlines()
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          env=env, check=True, stdout=subprocess.PIPE).stdout.decode().strip()
    assert out[0] == os.path.join(site, "lodestar", "liblodestar.so")
    assert out[1] == "%s %s" % (_meson_version(), _meson_version())
    assert out[2] == "[('b', 0.0)] [[1]]"
    assert out[3] == "2 1 c"
