"""The job's query and sinks: source -> ``skew_group(keys, aggregates)``, observed with the rows
each partition would get under plain groupBy; the sinks (memory, console, parquet exactly once
through ``foreachBatch``); and Spark's own way to run a Python merge in a stream, measured on
the same micro-batches (:func:`per_key_query`)."""
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from skewgroup._groups import BufferState, group_rows, merge_runs
from skewgroup.aggregators import adapt
from skewgroup.app.options import PYTHON_MERGED, check_columns
from skewgroup.app.sources import source
from skewgroup.app.workload import python_aggregator, score_aggregate


QUERY_NAME = "skewgroup"


# The names under which the job observes each micro-batch: rows per partition had the query
# been groupBy(keys) (Spark's hash placement, pmod(murmur3(keys, 42), n)).
GROUPBY_ROWS = "skewgroup_groupby_rows"


def aggregates(args, schema, timings=None):
    from skewgroup.spark import agg

    made = []
    for kind, column in args.agg:
        if kind == "score":
            a = score_aggregate(column, timings)
        elif kind in PYTHON_MERGED:
            obj, columns = python_aggregator(kind, column, schema)
            a = agg.aggregator(obj, *columns)
        else:
            a = getattr(agg, kind)(column) if column else agg.count()
        # Plain names: parquet refuses the parentheses of Spark's default 'sum(amount)'.
        made.append(a.alias(output_name(kind, column)))
    return made


def output_name(kind, column):
    return kind if column is None else f"{kind}_{column.replace(',', '_')}"


def merged_in_python(args):
    return any(kind in PYTHON_MERGED for kind, _ in args.agg)


def build_query(spark, args, timings=None):
    """The job's streaming DataFrame: source -> skew_group(keys, aggregates), observed with
    the rows each partition would get under plain groupBy."""
    from pyspark.sql import functions as F

    from skewgroup.spark import skew_group

    df = source(spark, args)
    check_columns(args, df.columns)     # before the query starts, not as a failed query
    placed_by_hash = F.pmod(F.hash(*args.key), F.lit(args.workers))
    df = df.observe(GROUPBY_ROWS, *[F.count_if(placed_by_hash == w).alias(f"w{w}")
                                    for w in range(args.workers)])
    # Always routed: the job's point is the per-batch balance of the routing, which the "auto"
    # plan would hand to Spark's own aggregation for built-in aggregates (nothing to observe).
    return df.transform(skew_group(args.key, *aggregates(args, df.schema, timings), plan="routed",
                                   workers=args.workers, strategy=args.strategy, seed=args.seed,
                                   **args.params))


def start(result, args, checkpoint, latest=None):
    """Start the query. With Python aggregators (update mode only) the memory sink keeps the
    latest row per key in ``latest`` (a dict on the driver) instead of Spark's memory table."""
    writer = result.writeStream.option("checkpointLocation", checkpoint).queryName(QUERY_NAME)
    if args.sink == "memory" and latest is not None:
        def keep(batch, batch_id):
            for row in batch.collect():
                latest[tuple(row[k] for k in args.key)] = row

        writer = writer.outputMode("update").foreachBatch(keep)
    elif args.sink == "memory":
        writer = writer.format("memory").outputMode("complete")
    elif args.sink == "console":
        writer = (writer.format("console").outputMode("update").option("numRows", 20)
                  .option("truncate", "false"))
    else:
        writer = writer.outputMode("update").foreachBatch(_batch_writer(args.output))
    if args.trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    elif args.trigger == "once":
        writer = writer.trigger(once=True)
    elif args.trigger:
        writer = writer.trigger(processingTime=args.trigger)
    return writer.start()


def _batch_writer(output):
    def write(batch, batch_id):
        # Overwrite, not append: a micro-batch replayed after a crash replaces what its first
        # attempt may have written, which makes the sink idempotent (exactly once with the
        # checkpoint).
        batch.write.mode("overwrite").parquet(os.path.join(output, f"batch={batch_id}"))
    return write


def final_result(output, keys=("key",)):
    """The latest row per key of a ``--sink parquet`` output (pandas), sorted by key.

    Each micro-batch holds the keys it updated with their running aggregates, so the row of a
    key's last batch is its final value.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    frames = []
    for part in sorted(Path(output).glob("batch=*")):
        table = pq.read_table(part)
        if table.num_rows:
            frame = table.to_pandas()
            frame["_batch"] = int(part.name.split("=", 1)[1])
            frames.append(frame)
    if not frames:
        return pd.DataFrame()
    everything = pd.concat(frames, ignore_index=True).sort_values("_batch", kind="stable")
    last = everything.drop_duplicates(list(keys), keep="last").drop(columns="_batch")
    return last.sort_values(list(keys)).reset_index(drop=True)


def per_key_query(spark, args):
    """What Spark offers a Python merge in a stream: ``groupBy(keys).applyInPandasWithState``
    over the raw rows, one Python call per key per micro-batch, the key's merged buffers its
    state (the same aggregators, their vectorized reduce on the key's rows). The job's Python
    aggregators only: built-ins beside them cost a key's call next to nothing."""
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout


    df = source(spark, args)
    python_merged = [(kind, column) for kind, column in args.agg if kind in PYTHON_MERGED]
    adapters = []
    for kind, column in python_merged:
        obj, columns = python_aggregator(kind, column, df.schema)
        adapters.append(adapt(obj, columns))
    outputs = [T.StructField(output_name(*a), T._parse_datatype_string(adapter.obj.outputType))
               for a, adapter in zip(python_merged, adapters)]
    output = T.StructType([df.schema[k] for k in args.key] + outputs)
    state = T.StructType([T.StructField(f"b{i}", T.BinaryType()) for i in range(len(adapters))])
    inputs = sorted({c for adapter in adapters for c in adapter.columns})

    def per_key(key, frames, group_state):
        rows = pa.Table.from_pandas(pd.concat(list(frames), ignore_index=True)[inputs],
                                    preserve_index=False)
        offsets = np.array([0, rows.num_rows])
        buffers, results = [], []
        for i, adapter in enumerate(adapters):
            buffer = adapter.reduce_groups(rows, offsets)
            if group_state.exists:
                stored = adapter.decode(pa.array([group_state.get[i]], pa.binary()))
                buffer = adapter.merge_groups(stored + buffer, np.array([0, 2]))
            buffers.append(adapter.encode(buffer)[0].as_py())
            results.append(adapter.finish(buffer)[0].as_py())
        group_state.update(tuple(buffers))
        yield pd.DataFrame([list(key) + results], columns=output.fieldNames())

    return df.groupBy(*args.key).applyInPandasWithState(
        per_key, output, state, "update", GroupStateTimeout.NoTimeout)


BUCKETS = 64   # the expert's bucket count, as skew_group's stream merge uses (the job sees only the
#               Spark layer's public API, so the figure is written here too)


def bucketed_query(spark, args):
    """What a Spark expert writes for a Python merge in a stream: ``applyInPandasWithState``
    over ``pmod(xxhash64(keys), BUCKETS)``, one call per bucket of keys per micro-batch, the
    call reducing its rows per key (the aggregators' vectorized reduce) and merging them into
    the bucket's stored buffers (one Arrow blob, rewritten whole: ``_groups.merge_runs`` over
    one run). The hot key's rows all reach its bucket's one call."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout


    df = source(spark, args)
    python_merged = [(kind, column) for kind, column in args.agg if kind in PYTHON_MERGED]
    adapters = [adapt(*python_aggregator(kind, column, df.schema))
                for kind, column in python_merged]
    buffers = [f"b{i}" for i in range(len(adapters))]
    states = [BufferState(adapter, b) for adapter, b in zip(adapters, buffers)]
    outputs = [T.StructField(b, T._parse_datatype_string(adapter.obj.outputType))
               for b, adapter in zip(buffers, adapters)]
    output = T.StructType([df.schema[k] for k in args.key] + outputs)
    state_schema = T.StructType([T.StructField("blob", T.BinaryType())])
    keys = list(args.key)
    inputs = sorted({c for adapter in adapters for c in adapter.columns})

    def per_bucket(_, frames, group_state):
        rows = pa.concat_tables([pa.Table.from_pandas(f[keys + inputs], preserve_index=False)
                                 for f in frames if len(f)])
        groups = group_rows(rows, keys)
        new = pa.table(groups.keys)
        for adapter, b in zip(adapters, buffers):
            grouped = rows.select(list(adapter.columns)).take(groups.order)
            new = new.append_column(b, adapter.encode(adapter.reduce_groups(
                grouped, groups.offsets)).cast(pa.binary()))
        stored = (pa.ipc.open_stream(group_state.get[0]).read_all() if group_state.exists
                  else new.schema.empty_table())
        result = merge_runs([stored], new, keys, states)
        kept = result.live()
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, kept.schema) as writer:
            writer.write_table(kept)
        group_state.update((sink.getvalue().to_pybytes(),))
        yield pa.table({**{k: result.emitted[k] for k in keys},
                        **{b: result.emitted[b] for b in buffers}}).to_pandas()

    bucket = F.pmod(F.xxhash64(*keys), F.lit(BUCKETS)).alias("bucket")
    return df.select(*keys, *inputs, bucket).groupBy("bucket").applyInPandasWithState(
        per_bucket, output, state_schema, "update", GroupStateTimeout.NoTimeout)


def measure_per_key(spark, args, batches, make_query=per_key_query):
    """Micro-batch seconds of ``make_query`` (:func:`per_key_query` or :func:`bucketed_query`)
    over the first ``batches`` micro-batches of the same source (a generated source draws the
    same rows again; files are read again)."""
    checkpoint = tempfile.mkdtemp(prefix="skewgroup-per-key-")
    query = (make_query(spark, args).writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", checkpoint).start())
    try:
        while query.isActive and _batches_done(query) < batches:
            time.sleep(0.25)
    finally:
        # The batch running now is cancelled, and its tasks end after stop() returns: the log
        # stays off, as _stop_quietly leaves it.
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    return [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress
            if p["numInputRows"]][:batches]


def _batches_done(query):
    return sum(1 for p in query.recentProgress if p["numInputRows"])
