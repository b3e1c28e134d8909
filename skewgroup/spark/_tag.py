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

from skewgroup import hash_keys
from skewgroup._hash import combine
from skewgroup._partitioner import Partitioner
from skewgroup.spark import _routers
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


# Distinct keys and (worker, key) pairs are estimated from the K smallest distinct 63-bit codes
# of each (a KMV sketch, Bar-Yossef et al. 2002: relative standard error about 1 / sqrt(K - 2),
# 4.4 %), merged over the tasks with Spark's native array functions. A pair's code is its key's
# code with the worker in the low bits (``_pair_codes``), so both sketches sample the same
# smallest keys and their errors cancel in the replication factor pairs / keys: 1 under key
# grouping (two independent 5 % estimates once printed 0.91 there).
SKETCH_SIZE = 512
SUMMARY_TYPE = ("struct<rows: array<bigint>, hot_pairs: array<bigint>, hot_keys: array<bigint>, "
                "keys: array<bigint>, pairs: array<bigint>>")


def make_tagger(keys, config, workers, seed, streaming, snapshots_conf, names):
    """The UDF's function: Arrow batches of one partition's key (a struct of the keys when there
    are several) -> worker ids.

    On a stream, one row of each task also carries the summary the observed metrics are
    made of (``_observe``), the other rows a null: an observation is evaluated row by row
    outside Spark's generated code, so everything per row is done here, in numpy. The summary:
    rows per worker, the codes of the hot (key, worker) pairs and hot keys (a key is hot in an
    Arrow batch whose head it is in, ``head_rows``), and the ``SKETCH_SIZE`` smallest key and pair
    codes (merged over the tasks by ``_observe``); as JSON of ``SUMMARY_TYPE``: a string
    column costs Spark less per (null) row than the nested struct. To put the summary on a row,
    each batch's output waits for the next batch (Spark pairs output and input rows in order).
    """
    fields = [pa.field(names.worker, pa.int32(), False), pa.field(names.summary, pa.string())]

    def tag_partition(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        slot = _stream_slot(snapshots_conf) if streaming else None
        if slot is None:
            router = Partitioner(config, workers, seed)
        else:
            router, _ = _routers.acquire(*slot, config, workers, seed)
        summary = _Summary(workers)
        held = None
        for column in batches:
            if len(column):
                hashes = key_hashes([column] if len(keys) == 1 else column.flatten(), seed)
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
            yield _tagged(held, summary.value(), fields)
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


class _Summary:
    """One task's figures for the observed metrics, batch by batch."""

    def __init__(self, workers):
        self.workers = workers
        self.rows = np.zeros(workers, dtype=np.int64)
        self.hot_pairs = set()
        self.hot_keys = set()
        self.keys = np.empty(0, dtype=np.int64)    # the smallest key codes, sorted, distinct
        self.pairs = np.empty(0, dtype=np.int64)   # the smallest pair codes, likewise

    def add(self, hashes, ids):
        self.rows += np.bincount(ids, minlength=self.workers)
        pairs = hashes.copy()
        combine(pairs, ids.astype(np.uint64))
        hot = head_rows(hashes, self.workers)
        self.hot_pairs.update(np.unique(pairs[hot].view(np.int64)).tolist())
        self.hot_keys.update(np.unique(hashes[hot].view(np.int64)).tolist())
        self._sample(hashes, ids)

    def _sample(self, hashes, ids):
        codes = (hashes >> np.uint64(1)).view(np.int64)
        self.keys = _smallest(self.keys, codes)
        self.pairs = _smallest(self.pairs, _pair_codes(codes, ids))

    def value(self):
        import json

        return json.dumps({"rows": self.rows.tolist(), "hot_pairs": sorted(self.hot_pairs),
                           "hot_keys": sorted(self.hot_keys), "keys": self.keys.tolist(),
                           "pairs": self.pairs.tolist()},
                          separators=(",", ":"))


def _smallest(kept, codes):
    """The SKETCH_SIZE smallest distinct codes of ``kept`` (sorted) and ``codes``."""
    if kept.shape[0] == SKETCH_SIZE:
        codes = codes[codes < kept[-1]]   # most rows: nothing to sort
    return np.union1d(kept, codes)[:SKETCH_SIZE]


def _pair_codes(key_codes, workers):
    """(key code, worker) as one non-negative int64: the key code's bits above the low
    ``WORKER_BITS``, the worker below (skewgroup's MAX_WORKERS is 2^20), so pair codes order
    as their keys do."""
    return ((key_codes >> WORKER_BITS) << WORKER_BITS) | workers.astype(np.int64)


WORKER_BITS = 20


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


def key_hashes(columns, seed):
    """One 64-bit hash per row over one or several Arrow key columns."""
    hashes = hash_keys(columns[0], seed)
    for column in columns[1:]:
        combine(hashes, hash_keys(column, seed))
    return hashes


def head_rows(hashes, workers):
    """Rows whose key is in the batch's head H = {k : f_k / m >= theta}, theta = 1 / (5n), the
    D-Choices paper's head (§III) that every strategy is judged on: the hot keys whose
    replication the observed metrics report. Found with a SpaceSaving of 10n counters
    (estimates within m / 10n = theta m / 2 above the true count), in C."""
    from skewgroup._spacesaving import SpaceSaving

    if hashes.shape[0] == 0:
        return np.empty(0, dtype=bool)
    summary = SpaceSaving(10 * workers)
    summary.update_hashes(hashes)
    return summary.estimate_hashes(hashes) * (5 * workers) >= hashes.shape[0]
