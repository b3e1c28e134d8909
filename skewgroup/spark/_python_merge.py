"""The batch's Python merges (docs/plans.md, "The merge"): never one call per key.

* :func:`merge_partitions` -- aggregators alone: one ``mapInArrow`` call per partition groups
  the partial rows by key and merges and finishes each key's buffers;
* :func:`finish_collected` -- an aggregator beside other aggregates: each key's buffers
  collected by Spark's aggregation, merged and finished one partition at a time.

A stream's merge with an aggregator is ``_stream_merge``.
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from pyspark.sql import types as T

from skewgroup._aggregation.batches import table_of
from skewgroup._aggregation.groups import group_rows


def finish_collected(merged, layout):
    """``merged`` (one row per key, each aggregator's buffers collected in a list) with each
    list replaced by the aggregator's result."""
    results = {f.name: f for f in layout.part.buffer_fields}
    schema = T.StructType([results.get(f.name, f) for f in merged.schema.fields])
    results_arrow = {f.name: f for f in layout.arrow.merged_buffers if f.name in results}
    buffers = layout.part.buffers

    def finish(batches):
        for batch in batches:
            if not batch.num_rows:
                continue
            # Every column but the buffers' lists comes out as Spark handed it in.
            target = pa.schema([results_arrow.get(f.name, f) for f in batch.schema])
            out = {name: batch.column(name) for name in batch.schema.names}
            for state in buffers:
                lists = batch.column(state.column)
                lengths = pa.compute.list_value_length(lists).fill_null(0).to_numpy()
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                out[state.column] = state.finished(lists.flatten(), offsets)
            yield pa.RecordBatch.from_arrays(
                [out[f.name].cast(f.type) for f in target], schema=target)

    return merged.mapInArrow(finish, schema)


def merge_partitions(partials, layout, repartition=True):
    """``partials`` of Python aggregators alone merged per key: one row per key, its keys and
    each aggregator's result in its buffer column (the layout's finishes select them). Without
    ``repartition`` each key's partial rows must be in one partition already."""
    target = layout.arrow.merged_buffers
    buffers = layout.part.buffers
    keys = list(layout.keys)

    def merge(batches):
        table = table_of(batches)
        if table is None:
            return
        groups = group_rows(table, keys)
        out = dict(groups.keys)
        for state in buffers:
            out[state.column] = state.finished(table.column(state.column).take(groups.order),
                                               groups.offsets)
        yield from pa.Table.from_arrays([out[f.name].cast(f.type) for f in target],
                                        schema=target).to_batches()

    return (partials.repartition(*keys) if repartition else partials).mapInArrow(
        merge, layout.merged_buffers())
