"""Build the native routing core (csrc/) as extension modules of the skewgroup package.

One row per compiled module, as preshed does; Cython directives are set once here.
``SKEWGROUP_DEBUG=1 pip install .`` turns bounds and wraparound checks back on and
compiles without optimisation, for chasing a memory error.
"""
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

MOD_NAMES = [
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


def extension(name):
    return Extension(
        f"skewgroup.{name}",
        [f"csrc/skewgroup/{name}.pyx"],
        include_dirs=[np.get_include(), "csrc/vendor/xxhash", "csrc"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=COMPILE_ARGS,
    )


setup(
    ext_modules=cythonize(
        [extension(name) for name in MOD_NAMES if os.path.exists(f"csrc/skewgroup/{name}.pyx")],
        compiler_directives=DIRECTIVES,
        include_path=["csrc"],
        nthreads=os.cpu_count() or 1,
    ),
)
