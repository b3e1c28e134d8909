"""Build the native routing core (csrc/) as extension modules of the routing area,
``skewgroup._routing``, which imports them from within (no import through the package face).

One row per compiled module, as preshed does; Cython directives are set once here.
``SKEWGROUP_DEBUG=1 pip install .`` turns bounds and wraparound checks back on and
compiles without optimisation, for chasing a memory error.

The wheel also carries the core's ``.pxd`` contracts (beside the compiled modules, where Cython
looks for ``cimport skewgroup._routing._spacesaving``; an ``__init__.pxd`` in each package on the
way) and the C headers they name
(``skewgroup/include``, see ``skewgroup.get_include()``), so other extensions can cimport the
structures.
"""
import glob
import os
import shutil

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

MOD_NAMES = [
    "_validation",
    "_serial",
    "_hash",
    "_keymap",
    "_spacesaving",
    "_binomial",
    "_ring",
    "_router",
    "_levels",
    "_basic",
    "_heavy",
    "_pdstream",
    "_fish",
    "_flexd",
    "_dkg",
    "_adaptive",
]

DEBUG = os.environ.get("SKEWGROUP_DEBUG", "0") not in ("", "0")

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    # nonecheck stays off: with it Cython refuses the nogil routing loops that read attributes
    # of self ("Operation not allowed without gil"), so the debug build would not compile.
    "nonecheck": False,
    "embedsignature": True,
}

COMPILE_ARGS = ["-O0", "-g"] if DEBUG else ["-O3"]


# The compiled modules' package, and where their sources and .pxd contracts are (the same path
# under csrc/, so that Cython resolves ``cimport skewgroup._routing._hash`` with csrc/ on its path).
PACKAGE = "skewgroup._routing"
SOURCES = os.path.join("csrc", *PACKAGE.split("."))


def extension(name):
    source = f"{SOURCES}/{name}.pyx"
    if not os.path.exists(source):
        raise SystemExit(f"setup.py: MOD_NAMES lists {name!r}, but {source} does not exist")
    return Extension(
        f"{PACKAGE}.{name}",
        [source],
        include_dirs=[np.get_include(), "csrc/vendor/xxhash", "csrc"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=COMPILE_ARGS,
    )


class BuildPyWithContracts(build_py):
    """build_py, plus the .pxd files and the headers they include, copied into the package."""

    def run(self):
        super().run()
        package = os.path.join(self.build_lib, "skewgroup")
        include = os.path.join(package, "include")
        os.makedirs(include, exist_ok=True)
        # Each package's own .pxd files (its __init__.pxd; the routing area's contracts).
        for pxd in glob.glob("csrc/skewgroup/**/*.pxd", recursive=True):
            target = os.path.join(self.build_lib, os.path.relpath(os.path.dirname(pxd), "csrc"))
            os.makedirs(target, exist_ok=True)
            shutil.copy(pxd, target)
        for header in ("csrc/xxhash_inline.h", "csrc/vendor/xxhash/xxhash.h",
                       "csrc/vendor/xxhash/LICENSE"):
            target = "xxhash-LICENSE" if header.endswith("LICENSE") else os.path.basename(header)
            shutil.copy(header, os.path.join(include, target))


setup(
    cmdclass={"build_py": BuildPyWithContracts},
    ext_modules=cythonize(
        [extension(name) for name in MOD_NAMES],
        compiler_directives=DIRECTIVES,
        include_path=["csrc"],
        nthreads=os.cpu_count() or 1,
    ),
)
