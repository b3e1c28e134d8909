"""Per micro-batch balance in the query's progress (``observedMetrics``), and a live view of it.

``skew_group`` attaches two observations:

* ``skewgroup_rows``: ``w0 .. w{n-1}``, rows each worker (partition) received in the batch,
  and ``hot_pairs`` / ``hot_keys``: distinct (worker, key) pairs and keys over the rows whose
  key is hot, i.e. in the head of the batch it was routed in (f_k / m >= 1 / (5n),
  ``_plan.head_rows``);
* ``skewgroup_partials``: ``pairs`` (partial rows, i.e. distinct (worker, key) pairs),
  ``keys`` (approximate distinct keys) and ``hottest`` (most rows one worker aggregated for
  one key). With built-in aggregates alone Spark computes the partials inside its own
  aggregation, where they cannot be observed: ``pairs`` and ``keys`` are then approximate
  distinct counts (HyperLogLog at a relative standard deviation of 1 %, ``DISTINCT_RSD``)
  over the placed rows, and ``hottest`` is absent.

:func:`balance` turns a progress into rows per worker, LI = (max - mean) / mean, the batch's
replication factor pairs / keys, the hot keys' replication (workers per hot key), and
:func:`watch` prints it while a query runs.
"""
import time

from pyspark.sql import functions as F

ROWS = "skewgroup_rows"
# HyperLogLog's relative standard deviation for distinct keys: Spark's default 5 % printed an
# RF of 0.91 for key grouping (RF >= 1 by definition); 1 % costs 2^14 registers a batch.
DISTINCT_RSD = 0.01
PARTIALS = "skewgroup_partials"


def observe_rows(df, workers, keys, worker_column, hot_column):
    """``df`` (placed: partition == worker) observed with rows per worker and the hot keys'
    replication."""
    pid = F.spark_partition_id()
    counts = [F.count_if(pid == w).alias(f"w{w}") for w in range(workers)]
    hot = F.col(hot_column)
    key = F.hash(*keys)
    # Exact distinct sets, not HyperLogLog: the sets are small (a batch of m rows has at most
    # 1/theta = 5n hot keys, each on at most n workers) and a sketch's error on a handful of
    # keys would blur the figure that matters, 1 vs 2 vs n workers per hot key.
    return df.observe(
        ROWS, *counts,
        F.size(F.collect_set(F.when(hot, F.hash(key, worker_column)))).alias("hot_pairs"),
        F.size(F.collect_set(F.when(hot, key))).alias("hot_keys"))


def observe_partials(df, keys, rows_column):
    return df.observe(
        # Not count(*): with several aggregates a (worker, key) pair may have a partial row of
        # each, and only one of them carries the pair's row count (the others 0).
        PARTIALS, F.count_if(F.col(rows_column) > 0).alias("pairs"),
        F.approx_count_distinct(F.hash(*keys), DISTINCT_RSD).alias("keys"),
        F.max(rows_column).alias("hottest"))


def observe_pairs(df, keys, worker_column):
    """``df`` (placed) observed with approximate distinct (worker, key) pairs and keys."""
    key_hash = F.hash(*keys)
    return df.observe(
        PARTIALS,
        F.approx_count_distinct(F.hash(key_hash, worker_column), DISTINCT_RSD).alias("pairs"),
        F.approx_count_distinct(key_hash, DISTINCT_RSD).alias("keys"))


def balance(progress):
    """Balance figures of one micro-batch from a query progress (dict or StreamingQueryProgress).

    Returns ``None`` when the batch carries no skewgroup metrics (e.g. an empty batch).
    """
    if progress is None:
        return None
    if type(progress) is not dict:  # StreamingQueryProgress: a dict subclass without .get
        import json

        progress = json.loads(progress.json if hasattr(progress, "json") else str(progress))
    metrics = progress.get("observedMetrics") or {}
    rows = metrics.get(ROWS)
    if not rows:
        return None
    workers = sum(1 for name in rows if name.startswith("w"))
    per_worker = [int(rows[f"w{w}"] or 0) for w in range(workers)]
    hot_keys = int(rows.get("hot_keys") or 0)
    total = sum(per_worker)
    mean = total / len(per_worker) if per_worker else 0.0
    partials = metrics.get(PARTIALS) or {}
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
        "hot_key_replication": int(rows.get("hot_pairs") or 0) / hot_keys if hot_keys else 0.0,
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
            out(f"batch {figures['batch']}: {figures['rows']} rows, "
                f"LI {figures['load_imbalance']:.3f}, busiest worker {figures['busiest_worker_rows']}, "
                f"RF {figures['replication_factor']:.2f}, "
                f"{figures['hot_keys']} hot keys on {figures['hot_key_replication']:.1f} workers "
                f"each, {figures['batch_ms']} ms")
        if (batches is not None and len(seen) >= batches) or not active:
            return
        time.sleep(interval)
