"""Rows grouped by key in Arrow (skewgroup._aggregation.groups), without Spark: the grouping
against a Python dict."""
from collections import defaultdict

import pyarrow as pa

from skewgroup._aggregation.groups import group_rows


def test_groups_follow_spark_keys():
    # Nulls one group; a null struct and a struct of nulls two groups; two key columns.
    window = pa.array([{"a": 1}, None, {"a": None}, {"a": 1}, None, {"a": None}],
                      pa.struct([("a", pa.int64())]))
    table = pa.table({"w": window, "k": pa.array([1, 1, 1, 1, 1, 2])})
    grouped = group_rows(table, ["w", "k"])
    expected = defaultdict(list)
    for i, (w, k) in enumerate(zip(window.to_pylist(), table.column("k").to_pylist())):
        expected[(repr(w), k)].append(i)
    got = {}
    order = grouped.order.to_pylist()
    for g, (start, stop) in enumerate(zip(grouped.offsets[:-1], grouped.offsets[1:])):
        key = (repr(grouped.keys["w"][g].as_py()), grouped.keys["k"][g].as_py())
        got[key] = sorted(order[start:stop])
    assert got == dict(expected)
    assert grouped.keys["w"].type == window.type
    assert grouped.keys["w"].null_count == 1            # the null struct stays null
