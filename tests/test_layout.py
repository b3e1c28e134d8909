"""The arrows between the package's areas (docs/architecture.md), read from each module's
imports: pyspark only in the Spark adapter and the applications; routing below aggregation
and planning; nothing below the adapter importing it or the applications."""
import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "skewgroup"


def imports(path):
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules(area):
    """The modules of ``area`` (None: the package's top modules, but ``__main__``, which is
    the command line's entry into the applications)."""
    if area:
        return sorted((PACKAGE / area).rglob("*.py"))
    return sorted(p for p in PACKAGE.glob("*.py") if p.name != "__main__.py")


def area_of(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "skewgroup" else None


# area -> the areas of the package it must not import (None: skewgroup's own top modules)
FORBIDDEN = {
    "_routing": {"_aggregation", "_planning", "spark", "app"},
    "_aggregation": {"_planning", "spark", "app"},
    "_planning": {"_aggregation", "spark", "app"},
    None: {"spark", "app"},
}


@pytest.mark.parametrize("area", ["_routing", "_aggregation", "_planning", None])
def test_no_pyspark_and_no_arrow_up_below_the_spark_adapter(area):
    for path in modules(area):
        found = imports(path)
        assert not any(name == "pyspark" or name.startswith("pyspark.") for name in found), path
        upward = {area_of(name) for name in found} & FORBIDDEN[area]
        assert not upward, f"{path.relative_to(PACKAGE)} imports {sorted(upward)}"


def test_routing_imports_nothing_above_it():
    # The routing area, its compiled modules (csrc/skewgroup/_routing) included, is the bottom:
    # it imports from skewgroup only its own modules, never through the package's face.
    sources = PACKAGE.parent / "csrc" / "skewgroup" / "_routing"
    compiled = sorted(sources.glob("*.pyx")) + sorted(sources.glob("*.pxd"))
    assert compiled, sources
    for path in modules("_routing"):
        named = {name for name in imports(path) if name.split(".")[0] == "skewgroup"}
        outside = {name for name in named if area_of(name) != "_routing"}
        assert not outside, f"{path.relative_to(PACKAGE)} imports {sorted(outside)}"
    for path in compiled:
        named = set(re.findall(r"^\s*(?:from|c?import)\s+(skewgroup[\w.]*)", path.read_text(),
                               re.MULTILINE))
        outside = {name for name in named if area_of(name) != "_routing"}
        assert not outside, f"{path.name} imports {sorted(outside)}"


def test_the_rules_read_real_imports():
    # The reader finds imports at all: the adapter imports pyspark and _aggregation.
    found = set().union(*(imports(p) for p in modules("spark")))
    assert "pyspark.sql" in found and "skewgroup._aggregation.stream.bucket" in found


# module of the adapter -> the modules it must not import: the partial stage knows nothing of
# metrics (the merge observes them); the batch's Python merges nothing of the stream's.
MODULE_FORBIDDEN = {
    "spark/_partial.py": {"skewgroup.spark._observe", "skewgroup.spark._stream_merge"},
    "spark/_python_merge.py": {"skewgroup.spark._stream_merge",
                               "pyspark.sql.streaming.stateful_processor"},
}


@pytest.mark.parametrize("module", sorted(MODULE_FORBIDDEN))
def test_a_module_keeps_to_its_concern(module):
    found = imports(PACKAGE / module)
    # ``from skewgroup.spark import _observe`` names the module as an attribute of the package.
    assert not found & MODULE_FORBIDDEN[module], module
