"""Every example in skewgroup's docstrings runs and prints what it says (the compiled core's
included); the Spark layer's only with pyspark."""
import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import skewgroup

# Entry points run when imported (``python -m skewgroup``, ``spark-submit skewgroup/app/job.py``).
SCRIPTS = ("skewgroup.__main__",)
NEEDS_SPARK = ("skewgroup.spark", "skewgroup.app.main", "skewgroup.app.query",
               "skewgroup.app.sources", "skewgroup.app.display")


def _has_examples(name):
    """Whether the module's file (source, or compiled: docstrings are kept in it) holds one."""
    return b">>>" in Path(importlib.util.find_spec(name).origin).read_bytes()


MODULES = sorted(m.name for m in pkgutil.walk_packages(skewgroup.__path__, "skewgroup.")
                 if m.name not in SCRIPTS and _has_examples(m.name))


def test_the_core_and_the_api_have_examples():
    assert {"skewgroup._routing._spacesaving", "skewgroup._routing._binomial", "skewgroup.metrics",
            "skewgroup.streams", "skewgroup.aggregators", "skewgroup.spark.agg"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    if name.startswith(NEEDS_SPARK):
        pytest.importorskip("pyspark")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
