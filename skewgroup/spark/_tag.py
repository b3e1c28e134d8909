"""The tag step: every row's worker id, from a router per input partition.

One stage for batch DataFrames, streams and windowed streams: an Arrow iterator UDF over the
key columns (packed in one struct), so only the keys cross to Python, the other columns stay
in the JVM, and no shuffle comes before it. A UDF call receives one input partition's Arrow
batches, so each input partition is one source of the papers with its own router
(a :class:`skewgroup.Partitioner`), which hashes (native) and routes (native, ``nogil``) whole
batches.

* Batch DataFrame: a fresh router per task, so a retried task routes as its first attempt.
* Stream: the router of (query, partition) continues from the partition's previous
  micro-batch, kept as soft state by the executors (``_routers``); a replayed batch routes as
  its first attempt. The UDF also gives what the observed metrics need (:func:`make_tagger`).

Marked nondeterministic so the optimizer never evaluates it twice (e.g. once for the worker
column and once inside the placement expression), which would route the same rows twice.
"""
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from skewgroup import Partitioner
from skewgroup._planning.sketches import hash_columns
from skewgroup.spark import _routers
from skewgroup.spark._observe import TaskSummary
from skewgroup.spark._columns import to_arrow_safe

# Spark's local properties of a micro-batch's tasks (set by MicroBatchExecution).
QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


def tag(df, keys, key_fields, workers, config, seed, names):
    """``df`` plus ``names.worker`` (int) for every row; on a stream also ``names.summary`` for
    the observed metrics (see :func:`make_tagger`)."""
    from pyspark.sql.functions import arrow_udf

    streaming = df.isStreaming
    function = make_tagger(keys, config, workers, seed, streaming,
                           df.sparkSession.conf.get(_routers.CONF, None), names)
    columns = [to_arrow_safe(F.col(k), f.dataType) for k, f in zip(keys, key_fields)]
    # One key crosses as its own column (cheaper for Spark to write than a struct of one).
    key_column = columns[0] if len(keys) == 1 else F.struct(*columns)
    if not streaming:
        udf = arrow_udf(function, "int").asNondeterministic()
        return df.withColumn(names.worker, udf(key_column))
    udf = arrow_udf(function, f"{names.worker} int, {names.summary} string").asNondeterministic()
    tagged = df.withColumn(names.tag, udf(key_column))
    return (tagged.withColumn(names.worker, F.col(names.tag)[names.worker])
            .withColumn(names.summary, F.col(names.tag)[names.summary]).drop(names.tag))


def make_tagger(keys, config, workers, seed, streaming, snapshots_conf, names):
    """The UDF's function: Arrow batches of one partition's key (a struct of the keys when there
    are several) -> worker ids.

    On a stream, one row of each task also carries the task's summary for the observed
    metrics (``_observe.TaskSummary``), the other rows a null: an observation is evaluated row
    by row outside Spark's generated code, so everything per row is done here, in numpy. To
    put the summary on a row, each batch's output waits for the next batch (Spark pairs output
    and input rows in order).
    """
    fields = [pa.field(names.worker, pa.int32(), False), pa.field(names.summary, pa.string())]

    def tag_partition(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        slot = _stream_slot(snapshots_conf) if streaming else None
        if slot is None:
            router = Partitioner(config, workers, seed)
        else:
            router, _ = _routers.acquire(*slot, config, workers, seed)
        summary = TaskSummary(workers)
        held = None
        for column in batches:
            if len(column):
                hashes = hash_columns([column] if len(keys) == 1 else column.flatten(), seed)
            else:
                hashes = np.empty(0, dtype=np.uint64)
            ids = router.route_hashes(hashes)
            if not streaming:
                yield pa.array(ids)
            elif len(ids):
                summary.add(hashes, ids)
                if held is not None:
                    yield _tagged(held, None, fields)
                held = ids
            else:
                yield _tagged(ids, None, fields)
        if held is not None:
            yield _tagged(held, summary.to_json(), fields)
        if slot is not None:
            _routers.release(*slot, router)

    return tag_partition


def _tagged(ids, summary, fields):
    rows = len(ids)
    if summary is None:
        summaries = pa.nulls(rows, pa.string())
    else:
        summaries = pa.array([summary] + [None] * (rows - 1), pa.string())
    return pa.StructArray.from_arrays([pa.array(ids), summaries], fields=fields)


def _stream_slot(snapshots_conf):
    """(snapshot directory, query id, partition, batch id) of this micro-batch task, or None
    outside a streaming query's micro-batch (then the router is fresh, as in a batch)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    query, batch = context.getLocalProperty(QUERY_ID), context.getLocalProperty(BATCH_ID)
    if not query or batch is None:
        return None
    return (_routers.directory_from_conf(snapshots_conf), query, context.partitionId(),
            int(batch))
