"""The one merge dispatch: which named path merges a call's partial rows, from the call's facts
and the plan alone (no session, no job)."""
from types import SimpleNamespace

import pytest

from skewgroup.spark import _merge
from skewgroup.spark._plans import PLANS


def call(builtins_only=False, stateful=False, merged_apart=False, one_row=False,
         python=False, python_alone=False):
    return SimpleNamespace(builtins_only=builtins_only, stateful=stateful,
                           keys_merged_apart=merged_apart, one_row_per_key=one_row,
                           merged_in_python=python, python_alone=python_alone)


@pytest.mark.parametrize("facts, plan, streaming, path", [
    (dict(builtins_only=True), "routed", False, _merge.SPARK_GROUPBY),
    (dict(builtins_only=True), "hash", True, _merge.SPARK_GROUPBY),
    (dict(stateful=True, python=True), "routed", True, _merge.STATEFUL),
    (dict(one_row=True), "routed", True, _merge.SPARK_MERGE),
    (dict(one_row=True), "hash", False, _merge.PARTIAL_IS_RESULT),
    (dict(one_row=True), "routed", False, _merge.SPARK_MERGE),
    (dict(one_row=True, merged_apart=True), "hash", False, _merge.SPARK_MERGE),
    (dict(python=True, python_alone=True), "routed", False, _merge.PYTHON_AFTER_HASH),
    (dict(python=True, python_alone=True), "hash", False, _merge.PYTHON_AFTER_HASH),
    (dict(python=True, python_alone=True, merged_apart=True), "hash", False,
     _merge.COLLECTED_THEN_PYTHON),
    (dict(python=True), "spread", False, _merge.COLLECTED_THEN_PYTHON),
    ({}, "local", False, _merge.SPARK_MERGE),
])
def test_merge_path(facts, plan, streaming, path):
    assert _merge.merge_path(call(**facts), PLANS[plan], streaming) == path
