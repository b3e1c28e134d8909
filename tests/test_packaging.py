"""The wheel carries the core's ``.pxd`` contracts, the headers they name and ``py.typed``: an
extension of one's own cimports a skewgroup structure from the installed wheel.

Slow (it builds the wheel and compiles against it): about a minute on two cores."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_EXTENSION = '''
# cython: language_level=3
from libc.stdint cimport uint64_t
from skewgroup._routing._spacesaving cimport (StreamSummary, ss_init, ss_free, ss_update,
                                              ss_estimate)


def estimates(uint64_t[:] updates, uint64_t[:] probes, int capacity):
    cdef StreamSummary summary
    ss_init(&summary, capacity)
    try:
        for key in updates:
            ss_update(&summary, key)
        return [ss_estimate(&summary, key) for key in probes]
    finally:
        ss_free(&summary)
'''

BUILD_USER_EXTENSION = '''
import skewgroup
from Cython.Build import cythonize
from setuptools import Extension, setup

setup(script_args=["build_ext", "--inplace"], ext_modules=cythonize(
    [Extension("user_counter", ["user_counter.pyx"], include_dirs=[skewgroup.get_include()])],
    include_path=[SITE]))
'''


@pytest.mark.slow
def test_an_extension_cimports_spacesaving_from_the_installed_wheel(tmp_path):
    pytest.importorskip("Cython")
    if not (ROOT / "setup.py").exists():
        pytest.skip("needs the source tree")
    source = tmp_path / "source"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "*.html")
    shutil.copytree(ROOT / "csrc", source / "csrc", ignore=ignore)
    shutil.copytree(ROOT / "skewgroup", source / "skewgroup", ignore=ignore)
    # Unoptimised: the wheel's contents are under test here, not its speed.
    env = dict(os.environ, SKEWGROUP_DEBUG="1")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist"), str(source)], check=True, env=env)
    wheel = next((tmp_path / "dist").glob("skewgroup-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"skewgroup/py.typed", "skewgroup/_routing/_spacesaving.pxd",
            "skewgroup/_routing/_types.pxd", "skewgroup/_routing/_keymap.pxd",
            "skewgroup/__init__.pxd", "skewgroup/_routing/__init__.pxd",
            "skewgroup/include/xxhash.h",
            "skewgroup/include/xxhash_inline.h", "skewgroup/include/xxhash-LICENSE",
            "skewgroup/app/main.py"} <= names
    # Every package of the source tree is in the wheel.
    packages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "skewgroup").rglob("__init__.py")}
    assert packages <= names, sorted(packages - names)
    # The compiled modules sit in the routing area, none at the package's top.
    compiled = {n for n in names if n.endswith((".so", ".pyd"))}
    assert any(n.startswith("skewgroup/_routing/_spacesaving.") for n in compiled)
    assert all(n.startswith("skewgroup/_routing/_") for n in compiled), compiled

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True)
    user = tmp_path / "user"
    user.mkdir()
    (user / "user_counter.pyx").write_text(USER_EXTENSION)
    (user / "build.py").write_text(f"SITE = {str(site)!r}\n" + BUILD_USER_EXTENSION)
    env = dict(os.environ, PYTHONPATH=str(site))
    subprocess.run([sys.executable, "build.py"], cwd=user, check=True, env=env,
                   capture_output=True)

    rng = np.random.default_rng(0)
    updates = rng.zipf(1.5, 5_000).astype(np.uint64)
    probes = np.arange(1, 20, dtype=np.uint64)
    code = ("import sys, numpy as np, user_counter, skewgroup._routing._spacesaving as ss; "
            "u = np.load(sys.argv[1]); p = np.load(sys.argv[2]); "
            "print(user_counter.estimates(u, p, 16)); print(ss.__file__)")
    np.save(tmp_path / "u.npy", updates)
    np.save(tmp_path / "p.npy", probes)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "u.npy"),
                          str(tmp_path / "p.npy")], cwd=user, check=True, env=env,
                         capture_output=True, text=True).stdout.splitlines()
    # The same structure through skewgroup's own Python API, in this process.
    from skewgroup._routing._spacesaving import SpaceSaving

    reference = SpaceSaving(16)
    reference.update_hashes(updates)
    assert out[0] == str(reference.estimate_hashes(probes).tolist())
    assert out[1].startswith(str(site))
