"""Rows grouped by key in Arrow and a stream's bucket merge (skewgroup._groups), without Spark:
the grouping against a Python dict, the bucket merge against the sums of every row, over
micro-batches merged into stored state in update and append mode."""
from collections import defaultdict

import numpy as np
import pyarrow as pa

from skewgroup._groups import BufferState, group_rows, merge_bucket
from skewgroup._reductions import Reduction, ReducedState
from skewgroup.aggregators import adapt

SUM_BUFFER = pa.struct([("total", pa.int64()), ("n", pa.int64())])


class Sum:
    """Spark's Aggregator protocol: an integer total and a row count, exact."""

    bufferSchema = "total bigint, n bigint"
    outputType = "bigint"

    def zero(self):
        return (0, 0)

    def reduce(self, buffer, value):
        return (buffer[0] + value[0], buffer[1] + 1)

    def merge(self, buffer1, buffer2):
        return (buffer1[0] + buffer2[0], buffer1[1] + buffer2[1])

    def finish(self, buffer):
        return buffer[0]


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


def _partials(adapter, keys, values):
    """One encoded buffer per key of ``keys`` (as the partial stage writes them)."""
    keys, values = np.asarray(keys), np.asarray(values)
    order = np.argsort(keys, kind="stable")
    unique, starts = np.unique(keys[order], return_index=True)
    offsets = np.append(starts, len(keys)).astype(np.int64)
    buffers = adapter.reduce_groups(pa.table({"x": values[order]}), offsets)
    return pa.table({"k": unique, "b": adapter.encode(buffers).cast(pa.binary())})


def test_bucket_merge_equals_the_sums_of_every_row():
    adapter = adapt(Sum(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    rng = np.random.default_rng(7)
    stored = pa.table({"k": pa.array([], pa.int64()), "b": pa.array([], pa.binary())})
    totals = defaultdict(int)
    for _ in range(4):
        # Each micro-batch: two workers' partials, a key on both of them or on one.
        new = []
        touched = set()
        for _ in range(2):
            keys = rng.integers(0, 50, size=300)
            values = rng.integers(-1000, 1000, size=300)
            for k, v in zip(keys.tolist(), values.tolist()):
                totals[k] += v
            touched.update(keys.tolist())
            new.append(_partials(adapter, keys, values))
        before = dict(zip(stored.column("k").to_pylist(), stored.column("b").to_pylist()))
        result = merge_bucket(stored, pa.concat_tables(new), ["k"], [BufferState(adapter, "b")])
        emitted = dict(zip(result.emitted["k"].to_pylist(), result.emitted["b"].to_pylist()))
        assert set(emitted) == touched
        assert emitted == {k: totals[k] for k in touched}
        stored = result.kept
        kept = dict(zip(stored.column("k").to_pylist(), stored.column("b").to_pylist()))
        assert set(kept) == set(totals)
        # An untouched key is kept as its bytes, not decoded and encoded again.
        assert all(kept[k] == before[k] for k in before if k not in touched)


def test_bucket_merge_closes_keys_and_forgets_them():
    adapter = adapt(Sum(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    stored = _partials(adapter, [1, 2, 3], [10, 20, 30])
    new = _partials(adapter, [3, 4], [5, 6])
    # Keys below 3 are final: 1 and 2 are emitted though this batch did not touch them.
    result = merge_bucket(stored, new, ["k"], [BufferState(adapter, "b")],
                          closed=lambda merged: pa.compute.less(merged.column("k"), 3))
    assert dict(zip(result.emitted["k"].to_pylist(), result.emitted["b"].to_pylist())) == {
        1: 10, 2: 20}
    kept = result.kept
    assert kept.column("k").to_pylist() == [3, 4]
    totals = [adapter.finish(adapter.decode(kept.column("b").take([i])))[0] for i in range(2)]
    assert [t.as_py() if hasattr(t, "as_py") else t for t in totals] == [35, 6]


def test_bucket_merge_mixes_reductions_with_an_aggregator():
    # A micro-batch's partial rows carry a count, a sum's (value, n) and a buffer side by side;
    # the bucket merges each with its own rule and emits Spark's results (null for a key whose
    # values were all null).
    adapter = adapt(Sum(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    count, total = Reduction("count", pa.int64()), Reduction("sum", pa.int64())
    states = [ReducedState(count, ["n"], "count"), ReducedState(total, ["s", "sn"], "sum"),
              BufferState(adapter, "b")]

    def partials(keys, values):
        order = np.argsort(keys, kind="stable")
        keys = np.asarray(keys)[order]
        values = pa.array([values[i] for i in order], pa.int64())
        unique, starts = np.unique(keys, return_index=True)
        offsets = np.append(starts, len(keys)).astype(np.int64)
        s, sn = total.reduce(values, offsets)
        buffers = adapter.reduce_groups(pa.table({"x": values.fill_null(0)}), offsets)
        return pa.table({"k": unique, "n": count.reduce(values, offsets)[0], "s": s, "sn": sn,
                         "b": adapter.encode(buffers).cast(pa.binary())})

    first = partials([1, 1, 2], [5, None, None])
    result = merge_bucket(first.slice(0, 0), first, ["k"], states)
    second = partials([2, 1], [7, 3])
    result = merge_bucket(result.kept, second, ["k"], states)
    emitted = {k: (n, s, b) for k, n, s, b in zip(
        *(result.emitted[c].to_pylist() for c in ("k", "count", "sum", "b")))}
    assert emitted == {1: (2, 8, 8), 2: (1, 7, 7)}
    # A number goes out filled, its status beside it: key 2's sum of one null is null.
    emitted = merge_bucket(first.slice(0, 0), first, ["k"], states).emitted
    assert emitted["sum"].to_pylist() == [5, 0] and emitted["sum__s"].to_pylist() == [1, 0]
