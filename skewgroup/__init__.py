"""skewgroup: skew-proof keyed grouping for Spark Structured Streaming.

The routing core (``partitioner``) spreads a stream's keys over n workers with a load-balancing
strategy from the papers; ``skewgroup.spark`` (imported separately, it needs pyspark) uses it to
aggregate a DataFrame by key with the hot keys spread out.
"""
# The native core first, so that a source tree without it fails with what to do. Python puts the
# current directory (or the script's) first on sys.path: run from a checkout that was never built,
# this folder hides the installed package and its compiled modules (in _routing/), and the first
# import of one would otherwise end in "cannot import name '_hash' from 'skewgroup._routing'".
try:
    from skewgroup._routing import _hash  # noqa: F401
except ImportError as error:
    import importlib.machinery
    import os

    _here = os.path.dirname(os.path.abspath(__file__))
    if not any(os.path.exists(os.path.join(_here, "_routing", "_hash" + suffix))
               for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        raise ImportError(
            f"skewgroup's compiled modules are not built in this source tree ({_here}); build "
            f"them in place with `python setup.py build_ext --inplace` (in "
            f"{os.path.dirname(_here)}), or run from another directory to use the installed "
            f"package", name="skewgroup") from None     # name: `python -m` prints one line
    raise                   # built but broken (e.g. for another Python): the real error

from skewgroup._routing.config import STRATEGIES
from skewgroup._routing.keys import hash_keys
from skewgroup import streams
from skewgroup._routing.partitioner import Partitioner, partitioner, state_bound

__version__ = "0.1.0"

__all__ = ["Partitioner", "STRATEGIES", "get_include", "hash_keys", "partitioner", "state_bound",
           "streams", "__version__"]


def get_include():
    """The directory of the C headers the core's ``.pxd`` files name (xxHash), for an extension
    that cimports skewgroup's structures: pass it in ``include_dirs``, as numpy's."""
    import os

    return os.path.join(os.path.dirname(__file__), "include")
