"""Per micro-batch balance in the query's progress (``observedMetrics``), and a live view of it.

``skew_group`` observes a routed stream with:

* ``skewgroup_rows``: one struct ``figures`` of ``rows``, the rows each worker (partition)
  received in the batch (an array of n), and ``hot_pairs`` / ``hot_keys``: distinct
  (worker, key) pairs and keys over the rows whose key is hot, i.e. in the head of the Arrow
  batch it was routed in (f_k / m >= 1 / (5n), ``_planning.sketches.head_rows``); all exact;
* ``skewgroup_partials`` (custom aggregates): ``pairs`` (partial rows, i.e. distinct
  (worker, key) pairs), ``keys`` (approximate distinct keys) and ``hottest`` (most rows one
  worker aggregated for one key). A stream with a Python aggregator packs its partial rows in
  the partial's own task: each task's smallest key and pair codes come with its packed rows
  (:func:`packed_summary`), and ``pairs`` and ``keys`` are estimated from them, as below. With
  built-in aggregates alone Spark computes the partials inside its own aggregation, where they
  cannot be observed: ``pairs`` and ``keys`` are then fields of ``skewgroup_rows.figures``,
  estimated from the tasks' smallest key and pair codes (a KMV sketch of ``SKETCH_SIZE``,
  ``_planning.sketches``: within 4.4 %; both sample the same keys, so pairs / keys is 1 under
  key grouping), and ``hottest`` is absent.

This module owns the per-task summary end to end, in one format (``SUMMARY_TYPE``): a task of
the tag's stage fills a :class:`TaskSummary` in numpy and puts it on one of its rows as JSON of
that type (``_tag.make_tagger``: an observation is evaluated row by row outside Spark's generated
code, so it reads one summary row per task and a null on every other row; a string column costs
Spark less per null row than the nested struct); :func:`observe` parses and merges the tasks'
summaries with Spark's native functions into the figures of the progress; :func:`balance` reads
them back.

:func:`balance` turns a progress into rows per worker, LI = (max - mean) / mean, the batch's
replication factor pairs / keys, the hot keys' replication (workers per hot key), and
:func:`watch` prints it while a query runs.
"""
import json
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup._planning.sketches import head_rows, key_codes, pair_codes, smallest

ROWS = "skewgroup_rows"
FIGURES = "figures"
# HyperLogLog's relative standard deviation for distinct keys: Spark's default 5 % printed an
# RF of 0.91 for key grouping (RF >= 1 by definition); 1 % costs 2^14 registers a batch.
DISTINCT_RSD = 0.01
PARTIALS = "skewgroup_partials"
SKETCH_SIZE = 512    # KMV codes a task keeps: relative standard error 1 / sqrt(K - 2), 4.4 %
SUMMARY_FIELDS = ("rows", "hot_pairs", "hot_keys", "keys", "pairs")
SUMMARY_TYPE = "struct<" + ", ".join(f"{f}: array<bigint>" for f in SUMMARY_FIELDS) + ">"


class TaskSummary:
    """One task's figures for the observed metrics, batch by batch: rows per worker, the codes
    of the hot (key, worker) pairs and hot keys (a key is hot in an Arrow batch whose head it
    is in, ``_planning.sketches.head_rows``), and the ``SKETCH_SIZE`` smallest key and pair codes."""

    def __init__(self, workers):
        self.workers = workers
        self.rows = np.zeros(workers, dtype=np.int64)
        self.hot_pairs = set()
        self.hot_keys = set()
        self.keys = np.empty(0, dtype=np.int64)    # the smallest key codes, sorted, distinct
        self.pairs = np.empty(0, dtype=np.int64)   # the smallest pair codes, likewise

    def add(self, hashes, ids):
        """A batch's key hashes and the workers they were routed to."""
        self.rows += np.bincount(ids, minlength=self.workers)
        codes = key_codes(hashes)
        pairs = pair_codes(codes, ids)
        hot = head_rows(hashes, self.workers)
        self.hot_pairs.update(np.unique(pairs[hot]).tolist())
        self.hot_keys.update(np.unique(codes[hot]).tolist())
        self.keys = smallest(self.keys, codes, SKETCH_SIZE)
        self.pairs = smallest(self.pairs, pairs, SKETCH_SIZE)

    def to_json(self):
        """The summary as JSON of ``SUMMARY_TYPE``."""
        return json.dumps({"rows": self.rows.tolist(), "hot_pairs": sorted(self.hot_pairs),
                           "hot_keys": sorted(self.hot_keys), "keys": self.keys.tolist(),
                           "pairs": self.pairs.tolist()}, separators=(",", ":"))


def observe(df, workers, summary_column, pairs=False):
    """``df`` (tagged) observed with rows per worker and the hot keys' replication (and with
    ``pairs``, the approximate distinct pairs and keys), from the tag's per-task summaries.

    One observation (``ROWS``) of one figure, a struct: each observation costs a pass over every
    row outside Spark's generated code, and each figure of it is evaluated on its own on the
    driver, where higher-order functions run interpreted (bench/RESULTS.md measured both)."""
    parsed = F.transform(F.collect_list(summary_column),
                         lambda text: F.from_json(text, SUMMARY_TYPE))
    merged_type = SUMMARY_TYPE
    empty = F.array().cast("array<bigint>")
    start = F.struct(F.array_repeat(F.lit(0).cast("long"), workers).alias("rows"),
                     empty.alias("hot_pairs"), empty.alias("hot_keys"), empty.alias("keys"),
                     empty.alias("pairs")).cast(merged_type)

    def merge(total, summary):
        return F.struct(
            F.zip_with(total["rows"], summary["rows"], lambda a, b: a + b).alias("rows"),
            *[F.concat(total[f], summary[f]).alias(f)
              for f in ("hot_pairs", "hot_keys", "keys", "pairs")]).cast(merged_type)

    def finish(total):
        figures = [total["rows"].alias("rows"),
                   F.size(F.array_distinct(total["hot_pairs"])).alias("hot_pairs"),
                   F.size(F.array_distinct(total["hot_keys"])).alias("hot_keys")]
        if pairs:
            figures += [_distinct_estimate(total["pairs"]).alias("pairs"),
                        _distinct_estimate(total["keys"]).alias("keys")]
        return F.struct(*figures)

    return df.observe(ROWS, F.aggregate(parsed, start, merge, finish).alias(FIGURES))


def observe_partials(df, keys, rows_column):
    return df.observe(
        # Not count(*): with several aggregates a (worker, key) pair may have a partial row of
        # each, and only one of them carries the pair's row count (the others 0).
        PARTIALS, F.count_if(F.col(rows_column) > 0).alias("pairs"),
        F.approx_count_distinct(F.hash(*keys), DISTINCT_RSD).alias("keys"),
        F.max(rows_column).alias("hottest"))


# A stream's packed partial rows (``_stream_merge.packed_partials``) carry their task's figures
# on its first packed row, null on the others: a task's KMV codes of its keys and (key, worker)
# pairs, and the most rows it aggregated for one key. The packed rows are few (a task's buckets).
PACKED_SUMMARY_FIELDS = (
    T.StructField("partial_key_codes", T.ArrayType(T.LongType(), False), True),
    T.StructField("partial_pair_codes", T.ArrayType(T.LongType(), False), True),
    T.StructField("partial_hottest", T.LongType(), True),
    # The task's partition and the rows it aggregated: rows per worker where no tag counted
    # them (the spread and local plans; local's workers are the input partitions).
    T.StructField("partial_task", T.IntegerType(), True),
    T.StructField("partial_rows", T.LongType(), True))


def packed_summary(hashes, rows, packed_rows):
    """A task's figures as the ``PACKED_SUMMARY_FIELDS`` columns of its ``packed_rows`` packed
    rows: ``hashes`` its partial rows' key hashes (int64), ``rows`` the rows behind each. The
    task's partition is its worker (the routed and spread plans; the local plan's input
    partition)."""
    from pyspark import TaskContext

    partition = TaskContext.get().partitionId()
    codes = key_codes(hashes.view(np.uint64))
    worker = np.full(codes.shape[0], partition, dtype=np.int64)
    empty = np.empty(0, dtype=np.int64)
    first = [smallest(empty, codes, SKETCH_SIZE).tolist(),
             smallest(empty, pair_codes(codes, worker), SKETCH_SIZE).tolist(),
             int(rows.max()) if rows.shape[0] else 0, partition, int(rows.sum())]
    pad = [None] * (packed_rows - 1)
    return [pa.array([first[0], *pad], pa.list_(pa.int64())),
            pa.array([first[1], *pad], pa.list_(pa.int64())),
            pa.array([first[2], *pad], pa.int64()),
            pa.array([first[3], *pad], pa.int32()),
            pa.array([first[4], *pad], pa.int64())]


def observe_packed_partials(df):
    """``df`` (packed partial rows with ``PACKED_SUMMARY_FIELDS``) observed as
    ``PARTIALS``: pairs and keys estimated from the tasks' codes as the tag's are (both sample
    the same keys, so pairs / keys is 1 under key grouping), the hottest pair exact."""
    key_codes_, pair_codes_, hottest, task, rows = (f.name for f in PACKED_SUMMARY_FIELDS)
    return df.observe(
        PARTIALS,
        _distinct_estimate(F.flatten(F.collect_list(pair_codes_))).alias("pairs"),
        _distinct_estimate(F.flatten(F.collect_list(key_codes_))).alias("keys"),
        F.coalesce(F.max(hottest), F.lit(0).cast("long")).alias("hottest"),
        # (partition, rows) of each task that had rows: a null is not collected.
        F.collect_list(F.when(F.col(task).isNotNull(), F.struct(F.col(task).alias("task"),
                                                               F.col(rows).alias("rows"))))
        .alias("tasks"))


def _distinct_estimate(codes):
    """Distinct values from the tasks' ``SKETCH_SIZE`` smallest codes (63-bit uniform), all of
    them in ``codes``: the union's k-th smallest h_k estimates (k - 1) 2^63 / h_k values; fewer
    than k are exact. Native array functions only: no interpreted step per element."""
    k = SKETCH_SIZE

    def estimate(union):
        return (F.when(F.size(union) < k, F.size(union))
                .otherwise(F.round(F.lit(float((k - 1) * 2 ** 63)) / F.element_at(union, k)))
                .cast("long"))

    # The union is bound once, as a lambda's argument: written three times in the expression it
    # would be built (the codes sorted) three times.
    return F.element_at(F.transform(F.array(F.array_sort(F.array_distinct(codes))), estimate), 1)


def balance(progress):
    """Balance figures of one micro-batch from a query progress (dict or StreamingQueryProgress).

    Returns ``None`` when the batch carries no skewgroup metrics (e.g. an empty batch).
    """
    if progress is None:
        return None
    if type(progress) is not dict:  # StreamingQueryProgress: a dict subclass without .get
        progress = json.loads(progress.json if hasattr(progress, "json") else str(progress))
    metrics = progress.get("observedMetrics") or {}
    rows = (metrics.get(ROWS) or {}).get(FIGURES)
    tasks = (metrics.get(PARTIALS) or {}).get("tasks")
    if rows:
        per_worker = [int(x or 0) for x in rows.get("rows") or []]
        hot_keys = int(rows.get("hot_keys") or 0)
    elif tasks:
        # No tag (spread, local): rows per task of the partial, the tasks that had rows; the
        # hot keys are the tag's figure, not known here.
        per_worker = [0] * (1 + max(int(t["task"]) for t in tasks))
        for t in tasks:
            per_worker[int(t["task"])] += int(t["rows"])
        rows, hot_keys = {}, None
    else:
        return None
    total = sum(per_worker)
    mean = total / len(per_worker) if per_worker else 0.0
    # Built-in aggregates alone: the pair and key counts come with the rows (one observation).
    partials = metrics.get(PARTIALS) or rows
    pairs = int(partials.get("pairs") or 0)
    keys = int(partials.get("keys") or 0)
    return {
        "batch": progress.get("batchId"),
        "rows": total,
        "rows_per_worker": per_worker,
        "busiest_worker_rows": max(per_worker) if per_worker else 0,
        "load_imbalance": (max(per_worker) - mean) / mean if mean > 0 else 0.0,
        "replication_factor": pairs / keys if keys else 0.0,
        "hottest_pair_rows": int(partials.get("hottest") or 0),
        "hot_keys": hot_keys,
        "hot_key_replication": (None if hot_keys is None else
                                int(rows.get("hot_pairs") or 0) / hot_keys if hot_keys else 0.0),
        "batch_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
    }


def watch(query, interval=1.0, batches=None, out=print):
    """Print one line of balance per new micro-batch until the query stops (or ``batches``)."""
    seen = set()
    while True:
        # isActive first: a query that ends after this read still has its last progress in
        # recentProgress below, so no batch is missed.
        active = query.isActive
        for progress in query.recentProgress:
            figures = balance(progress)
            if figures is None or figures["batch"] in seen:
                continue
            seen.add(figures["batch"])
            hot = ("" if figures["hot_keys"] is None else
                   f"{figures['hot_keys']} hot keys on {figures['hot_key_replication']:.1f} "
                   f"workers each, ")
            out(f"batch {figures['batch']}: {figures['rows']} rows, "
                f"LI {figures['load_imbalance']:.3f}, busiest worker {figures['busiest_worker_rows']}, "
                f"RF {figures['replication_factor']:.2f}, {hot}{figures['batch_ms']} ms")
        if (batches is not None and len(seen) >= batches) or not active:
            return
        time.sleep(interval)
