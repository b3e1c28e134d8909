"""The merge of Python aggregators (``agg.aggregator``): their buffers merged per key in Python,
one call per partition (batch) or per bucket of keys (streams), never one per key.

Batch: Spark collects each key's encoded buffers (``collect_list``, beside the other aggregates'
merges, combined map-side as every Spark aggregate is), then one ``mapInArrow`` call per
partition decodes them, merges each key's list with the aggregator's ``merge_groups`` and
finishes it (:func:`finish_collected`).

Streams: a key's merged buffer is Spark-checkpointed state. Keys are hashed into ``BUCKETS``
buckets and ``applyInPandasWithState`` keeps one state per bucket: the bucket's keys and their
buffers as one Arrow IPC blob. Each micro-batch calls it once per bucket that has partial rows,
with those rows (about one per key and worker: the routed partial already merged the rows); it
merges them into the stored buffers in one grouping, stores the bucket again and emits the
touched keys' results (:func:`merge_stream`). State is bounded by keys x buffer size; the
bucket count is fixed, so a query restarts on its checkpoint with any ``workers``.
"""
import numpy as np
import pyarrow as pa

from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup.spark._partial import _flat_keys, _unflat_keys, arrow_fields

BUCKETS = 64        # state groups of a stream; fixed: a checkpoint's state is keyed by them
OUTPUT_MODES = ("update", "append")


def finish_collected(merged, spec, df):
    """``merged`` (one row per key, each aggregator's buffers collected in a list) with each
    list replaced by the aggregator's result."""
    columns = {buffer: output_type for _, buffer, output_type in spec.aggregators}
    schema = T.StructType([T.StructField(f.name, columns[f.name], True) if f.name in columns
                           else f for f in merged.schema.fields])
    target = pa.schema(arrow_fields(df, schema))
    aggregators = [(adapter, buffer) for adapter, buffer, _ in spec.aggregators]

    def finish(batches):
        for batch in batches:
            if not batch.num_rows:
                continue
            out = {name: batch.column(name) for name in batch.schema.names}
            for adapter, buffer in aggregators:
                lists = batch.column(buffer)
                lengths = pa.compute.list_value_length(lists).fill_null(0).to_numpy()
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                merged_buffers = adapter.merge_groups(adapter.decode(lists.flatten()), offsets)
                out[buffer] = adapter.finish(merged_buffers)
            yield pa.RecordBatch.from_arrays(
                [out[f.name].cast(f.type) for f in target], schema=target)

    return merged.mapInArrow(finish, schema)


def merge_stream(partials, spec, df, output_mode):
    """The streaming merge: ``partials`` (the routed partial rows of Python aggregators alone)
    merged into per-bucket state; one output row per key touched by the micro-batch."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    names = spec.names
    buffers = [buffer for _, buffer, _ in spec.aggregators]
    kept = T.StructType(spec.key_fields + [T.StructField(b, T.BinaryType(), True)
                                           for b in buffers])
    output = T.StructType(spec.key_fields + [T.StructField(b, t, True)
                                             for _, b, t in spec.aggregators])
    kept_arrow = pa.schema(arrow_fields(df, kept))
    output_arrow = pa.schema(arrow_fields(df, output))
    aggregators = [(adapter, buffer) for adapter, buffer, _ in spec.aggregators]
    keys = spec.keys
    state_schema = T.StructType([T.StructField("blob", T.BinaryType(), True)])
    bucket = F.pmod(F.xxhash64(*[F.col(k) for k in keys]), F.lit(BUCKETS)).alias(names.bucket)

    def merge_bucket(_, frames, state):
        import pandas as pd

        frames = [f for f in frames if len(f)]
        if not frames:
            return
        new = pa.Table.from_pandas(pd.concat(frames, ignore_index=True)[kept_arrow.names],
                                   schema=kept_arrow, preserve_index=False)
        if state.exists:
            stored = pa.ipc.open_stream(state.get[0]).read_all().cast(kept_arrow)
        else:
            stored = kept_arrow.empty_table()
        table = pa.concat_tables([stored, new])
        touched = np.concatenate([np.zeros(stored.num_rows, bool), np.ones(new.num_rows, bool)])
        work, group_keys = _flat_keys(table, keys)
        work = work.append_column("row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
        work = work.append_column("touched", pa.array(touched))
        groups = work.group_by(group_keys, use_threads=False).aggregate(
            [("row", "list"), ("touched", "max")])
        row_lists = groups.column("row_list").combine_chunks()
        offsets = row_lists.offsets.to_numpy().astype(np.int64, copy=False)
        order = row_lists.flatten()
        key_columns = _unflat_keys(groups, table, keys)
        merged = {k: key_columns[k].cast(kept_arrow.field(k).type) for k in keys}
        finished = dict(merged)
        emit = groups.column("touched_max").combine_chunks()
        for adapter, buffer in aggregators:
            buffers = adapter.merge_groups(adapter.decode(table.column(buffer).take(order)),
                                           offsets)
            merged[buffer] = adapter.encode(buffers)
            finished[buffer] = adapter.finish(
                [b for b, e in zip(buffers, emit.to_pylist()) if e])
        sink = pa.BufferOutputStream()
        stored = pa.table(merged, schema=kept_arrow)
        with pa.ipc.new_stream(sink, kept_arrow) as writer:
            writer.write_table(stored)
        state.update((sink.getvalue().to_pybytes(),))
        out = {k: v.filter(emit) if k in keys else v for k, v in finished.items()}
        yield pa.table([out[f.name].cast(f.type) for f in output_arrow],
                       schema=output_arrow).to_pandas()

    return (partials.select(*keys, *buffers, bucket).groupBy(names.bucket)
            .applyInPandasWithState(merge_bucket, output, state_schema, output_mode,
                                    GroupStateTimeout.NoTimeout))
