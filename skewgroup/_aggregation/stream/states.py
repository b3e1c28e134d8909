"""The two kinds of state a stream's bucket keeps per key, each merged by :func:`runs.merge_runs`
with its own rule: a Python aggregator's buffer (:class:`BufferState`) and a reduction with
Spark's semantics (:class:`ReducedState`: a built-in, a custom aggregate's merge rule, a Spark
function). Below the Spark layer (pyarrow only).

A state has ``columns`` (its column names) and ``merge(arrays, offsets)``, which merges
grouped arrays of those columns into one value per group and returns (the merged arrays, a
function from a bool mask over the groups to the masked groups' results by output column).
"""
import pyarrow as pa


class BufferState:
    """A Python aggregator's state in a bucket: one buffer column, ``column``, of the
    adapter's ``wire_type``, merged with its ``merge_arrow`` and finished with its
    ``finish_arrow`` (``skewgroup.aggregators.PythonAggregator``); its result goes out under
    the same name."""

    def __init__(self, adapter, column):
        self.adapter, self.column, self.columns = adapter, column, [column]

    def migrated(self, stored):
        """Buffers of the previous layout (one pickle each) as this one's Arrow column."""
        if not pa.types.is_binary(stored.type):
            raise TypeError(f"expected pickled buffers (binary), got {stored.type}")
        adapter = self.adapter
        return adapter.to_arrow(adapter.decode(stored))

    def finished(self, buffers, offsets):
        """The result of each group of ``buffers`` (``offsets``: the g + 1 group boundaries):
        merged per group and finished (a batch merge)."""
        adapter = self.adapter
        return adapter.finish_arrow(adapter.merge_arrow(buffers, offsets))

    def merge(self, arrays, offsets):
        adapter, column = self.adapter, self.columns[0]
        merged = adapter.merge_arrow(arrays[0], offsets)

        def results(mask):
            return {column: adapter.finish_arrow(merged.filter(pa.array(mask, pa.bool_())))}

        return [merged], results


class ReducedState:
    """A reduction's state in a stream's bucket (:func:`runs.merge_runs`): its columns
    (value and ``n``, or ``n`` for count) and the output column its result goes out under."""

    def __init__(self, reduction, columns, output):
        if len(columns) != len(reduction.state_types):
            raise ValueError(f"{reduction.kind} keeps {len(reduction.state_types)} state "
                             f"column(s); got {list(columns)}.")
        self.reduction, self.columns, self.output = reduction, list(columns), output

    def merge(self, arrays, offsets):
        state = self.reduction.merge(arrays, offsets)

        def results(mask):
            mask = pa.array(mask, pa.bool_())
            return {self.output: self.reduction.result([a.filter(mask) for a in state])}

        return state, results
