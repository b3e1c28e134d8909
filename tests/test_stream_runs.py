"""A micro-batch merged into a bucket's runs (skewgroup._aggregation.stream.runs) with each
state's rule (skewgroup._aggregation.stream.states), without Spark."""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.reductions import Reduction
from skewgroup._aggregation.stream.runs import merge_runs
from skewgroup._aggregation.stream.states import BufferState, ReducedState
from skewgroup.aggregators import adapt

from _aggregators import Total
from _stream_buckets import SUM_BUFFER


def test_bucket_merge_mixes_reductions_with_an_aggregator():
    # A micro-batch's partial rows carry a count, a sum's (value, n) and a buffer side by side;
    # the bucket merges each with its own rule and emits Spark's results (null for a key whose
    # values were all null).
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
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
        buffers = adapter.reduce_arrow(pa.table({"x": values.fill_null(0)}), offsets)
        return pa.table({"k": unique, "n": count.reduce(values, offsets)[0], "s": s, "sn": sn,
                         "b": buffers})

    first = partials([1, 1, 2], [5, None, None])
    result = merge_runs([], first, ["k"], states)
    second = partials([2, 1], [7, 3])
    result = merge_runs([result.run], second, ["k"], states)
    emitted = {k: (n, s, b) for k, n, s, b in zip(
        *(result.emitted[c].to_pylist() for c in ("k", "count", "sum", "b")))}
    assert emitted == {1: (2, 8, 8), 2: (1, 7, 7)}
    # Key 2's sum of one null is null.
    emitted = merge_runs([], first, ["k"], states).emitted
    assert emitted["sum"].to_pylist() == [5, None]
