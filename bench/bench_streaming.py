"""Streaming micro-batches through skew_group's routed plan.

    cd /tmp && flock /tmp/skewgroup-bench.lock python -m pytest \\
        /work/wt-streaming/bench/bench_streaming.py --benchmark-only -s -p no:cacheprovider

(about 12 minutes on 2 shared cores; SKEWGROUP_BENCH_STREAMING_ROUNDS, default 2, and ``-k``
pick less). The source is the job's own generated stream (``skewgroup.app.workload``: Zipf keys
over 10^5 keys drawn by a counter-based hash of the row number from Spark's rate-micro-batch
source, 2 input partitions), on local[2], written to the noop sink in update mode, every query
on a fresh checkpoint. Each figure is the minimum over ``ROUNDS`` rounds (load on the shared
machine only adds time), the maximum kept as the spread; the methods of one test run
interleaved in every round.

* ``test_micro_batch_time`` -- the target's workload: z = 1.4, 200,000 rows per micro-batch,
  count + sum, 8 workers. Median of the micro-batch time (``durationMs.triggerExecution``)
  over batches 3-6: ``groupBy("key").agg(count, sum)`` against ``skew_group(..., plan="routed")``
  with pdstream, adaptive and kg. Target: routed <= 1.3 x groupBy.
* ``test_expensive_critical_path`` -- z = 1.4, 100,000 rows per micro-batch over 4 input
  partitions, an expensive vectorized custom aggregate (``COST_ROUNDS`` splitmix64 rounds per
  row, about 30 µs), routed pdstream and adaptive against the same query with
  ``strategy="kg"`` (Spark refuses pandas aggregates in streaming, so groupBy is no baseline),
  8 and 16 workers. Per micro-batch the critical path, the sum over its stages of the slowest
  task's ``executorRunTime``, and the total task time, the sum of every task's (Spark's REST
  API; a streaming query's jobs carry its run id as job group and ``batch = b`` in their
  description), median over batches 2-4 (of 0-4: each batch is 3 s of CPU). Target:
  kg / pdstream >= 2.5. KG's busiest worker has the hottest key, p1 = 0.32 of the rows: with
  8 workers the partial stage alone can gain at most 0.32 x 8 = 2.6.
* ``test_restart_cold_vs_warm`` -- LI of the first five micro-batches after a restart on the
  same checkpoint, the routers restored from their snapshots (warm) or lost (cold: the
  snapshot directory removed, as on a new executor), against the same batches uninterrupted;
  on the Zipf stream and on the drifting one (the hot keys replaced every 100,000 rows), 50,000
  rows per batch, 8 workers.
* ``test_elastic_moves`` (no Spark) -- per strategy, the share of rows and of keys whose worker
  changes when a router that has routed a Zipf stream at n workers goes on at n + 1 or 2n
  (resized where the strategy can, FISH; else a fresh router, as skew_group does on a restart
  with other ``workers``), against the same router going on at n.
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pytest

import _plans_data
from _figures import spread
from _plans_data import mixed   # shipped by value with this module (the spark fixture)
from _rest import batch_critical_paths

ROUNDS = int(os.environ.get("SKEWGROUP_BENCH_STREAMING_ROUNDS", 2))
BATCHES = 7                 # batches 0..6 run; 3..6 are measured (0-2 warm the JVM and caches)
MEASURED = slice(3, 7)
UI_PORT = 4070
COST_ROUNDS = 27_000        # splitmix64 rounds per row in the expensive aggregate (~30 µs here)
EXPENSIVE_BATCHES = 5       # batches 0..4 run, 2..4 measured: each costs ~3 s of CPU
SNAPSHOTS = os.path.join(tempfile.gettempdir(), "skewgroup-bench-streaming-routers")


# --- the expensive aggregate ---------------------------------------------------------------


def expensive_partial(rows, offsets):
    """COST_ROUNDS rounds of bench_plans' splitmix64 mix per row, summed per key."""
    values = mixed(rows.column("key").to_numpy(), COST_ROUNDS)
    return {"score": np.add.reduceat(values, offsets[:-1]), "n": np.diff(offsets)}


# --- Spark -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from _session import local_session

    # the mix (_plans_data) runs in the Python workers: shipped by value too
    session = local_session(sys.modules[__name__], "skewgroup-bench-streaming", UI_PORT,
                            {"spark.sql.shuffle.partitions": "8",
                             "spark.skewgroup.routerSnapshots": SNAPSHOTS},
                            by_value=(_plans_data,))
    yield session
    session.stop()


def job_stream(spark, *options):
    """The job's generated source (``--source zipf|drift``), built here from the job's
    counter-based ``draw_keys`` so the benchmark does not depend on the job's option parser.
    ``options``: ``--source``, ``--rows-per-batch``, ``--z``, ``--partitions``,
    ``--drift-every`` (others ignored)."""
    import pyarrow as pa
    from pyspark.sql import types as T

    from skewgroup.app.workload import draw_keys

    given = dict(zip(options[::2], options[1::2]))
    source = given.get("--source", "zipf")
    z = float(given.get("--z", 1.4))
    drift_every = int(given.get("--drift-every", 500_000)) if source == "drift" else None
    rows = (spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", int(given.get("--rows-per-batch", 100_000)))
            .option("numPartitions", int(given.get("--partitions", 2))).load())

    def draw(batches):
        for batch in batches:
            keys, amounts = draw_keys(batch.column("value").to_numpy(), z, 100_000, 0,
                                      drift_every)
            yield pa.RecordBatch.from_arrays(
                [batch.column("timestamp"), pa.array(keys), pa.array(amounts)],
                names=["ts", "key", "amount"])

    schema = T.StructType([T.StructField("ts", T.TimestampType()),
                           T.StructField("key", T.LongType(), False),
                           T.StructField("amount", T.DoubleType(), False)])
    return rows.mapInArrow(draw, schema)


def run_stream(df, batches, checkpoint):
    """Run ``df`` to the noop sink until ``batches`` non-empty micro-batches are done; their
    progress (dicts) and the query."""
    import json

    query = (df.writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", checkpoint).start())
    try:
        while query.isActive and _done(query) < batches:
            time.sleep(0.1)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    progress = [json.loads(p.json) if hasattr(p, "json") else p for p in query.recentProgress]
    return [p for p in progress if p["numInputRows"]][:batches], query


def _done(query):
    return sum(1 for p in query.recentProgress if p["numInputRows"])


# --- target 1: micro-batch time against groupBy ----------------------------------------------


def builtin_query(spark, method):
    from pyspark.sql import functions as F

    from skewgroup.spark import agg, skew_group

    df = job_stream(spark, "--rows-per-batch", "200000", "--z", "1.4", "--workers", "8")
    if method == "groupBy":
        return df.groupBy("key").agg(F.count(F.lit(1)).alias("count"),
                                     F.sum("amount").alias("sum_amount"))
    return df.transform(skew_group("key", agg.count(), agg.sum("amount"), plan="routed",
                                   workers=8, strategy=method))


def test_micro_batch_time(benchmark, figures, spark):
    from skewgroup.spark import balance

    methods = ("groupBy", "pdstream", "adaptive", "kg")
    medians = {m: [] for m in methods}
    lis = {m: [] for m in methods}
    rfs = {m: [] for m in methods}

    def rounds():
        for _ in range(ROUNDS):
            for method in methods:
                progress, _ = run_stream(builtin_query(spark, method), BATCHES,
                                         tempfile.mkdtemp(prefix="sg-bench-ck-"))
                times = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
                medians[method].append(statistics.median(times[MEASURED]))
                lis[method].append([round(balance(p)["load_imbalance"], 4)
                                    for p in progress if balance(p)])
                rfs[method].append([round(balance(p)["replication_factor"], 4)
                                    for p in progress if balance(p)])

    benchmark.pedantic(rounds, rounds=1, iterations=1)
    best = {m: min(v) for m, v in medians.items()}
    for method in methods:
        figures.add(what="streaming micro-batch time, median of batches 3-6 (s)",
                    workload="job zipf z=1.4, 200k rows/batch, count+sum, 8 workers, noop, "
                             "local[2]", method=method, rounds=ROUNDS,
                    median_s=spread(medians[method]),
                    vs_groupBy=round(best[method] / best["groupBy"], 2),
                    load_imbalance=lis[method][0] if lis[method] else None,
                    replication_factor=rfs[method][0] if rfs[method] else None)


# --- target 2: critical path with an expensive aggregate against kg ---------------------------


@pytest.mark.parametrize("workers", [8, 16])
def test_expensive_critical_path(benchmark, figures, spark, workers):
    from skewgroup.spark import agg, balance, skew_group

    expensive = agg.custom(partial=expensive_partial, merge={"score": "sum", "n": "sum"},
                           schema="score long, n long", vectorized=True)
    methods = ("pdstream", "adaptive", "kg")
    paths = {m: [] for m in methods}
    totals = {m: [] for m in methods}
    walls = {m: [] for m in methods}
    lis = {m: [] for m in methods}
    rfs = {m: [] for m in methods}

    def rounds():
        for _ in range(ROUNDS):
            for method in methods:
                df = job_stream(spark, "--rows-per-batch", "100000", "--z", "1.4",
                                "--partitions", "4")
                out = df.transform(skew_group("key", expensive, plan="routed", workers=workers,
                                              strategy=method))
                progress, query = run_stream(out, EXPENSIVE_BATCHES,
                                             tempfile.mkdtemp(prefix="sg-bench-ck-"))
                by_batch = batch_critical_paths(spark, query.runId)
                measured = [by_batch[p["batchId"]] for p in progress[2:]]
                paths[method].append(statistics.median(c for c, _ in measured))
                totals[method].append(statistics.median(t for _, t in measured))
                walls[method].append(statistics.median(
                    p["durationMs"]["triggerExecution"] / 1000 for p in progress[2:]))
                lis[method].append([round(balance(p)["load_imbalance"], 3)
                                    for p in progress if balance(p)])
                rfs[method].append([round(balance(p)["replication_factor"], 4)
                                    for p in progress if balance(p)])

    benchmark.pedantic(rounds, rounds=1, iterations=1)
    for method in methods:
        figures.add(what="streaming, expensive custom aggregate: critical path, median of "
                         "batches 3-6 (s)",
                    workload=f"job zipf z=1.4, 100k rows/batch, 4 input partitions, "
                             f"{COST_ROUNDS} mix rounds/row, {workers} workers, batches 2-4",
                    method=method, workers=workers, rounds=ROUNDS,
                    critical_s=spread(paths[method]), total_task_s=spread(totals[method]),
                    wall_s=spread(walls[method]),
                    kg_over_this=round(min(paths["kg"]) / min(paths[method]), 2),
                    load_imbalance=lis[method][0], replication_factor=rfs[method][0])


# --- restart: routers restored (warm) or lost (cold) -------------------------------------------


@pytest.mark.parametrize("source", ["zipf", "drift"])
@pytest.mark.parametrize("strategy", ["pdstream", "dchoices"])
def test_restart_cold_vs_warm(benchmark, figures, spark, source, strategy):
    from skewgroup.spark import agg, balance, skew_group

    def query():
        df = job_stream(spark, "--source", source, "--rows-per-batch", "50000",
                        "--drift-every", "100000")
        return df.transform(skew_group("key", agg.count(), plan="routed", workers=8,
                                       strategy=strategy))

    after = {}

    def runs():
        whole, _ = run_stream(query(), 10, tempfile.mkdtemp(prefix="sg-bench-ck-"))
        after["uninterrupted"] = [balance(p)["load_imbalance"] for p in whole[5:10]]
        for mode in ("warm", "cold"):
            checkpoint = tempfile.mkdtemp(prefix="sg-bench-ck-")
            _, first = run_stream(query(), 5, checkpoint)
            done = _done(first)
            if mode == "cold":
                shutil.rmtree(os.path.join(SNAPSHOTS, str(first.id)), ignore_errors=True)
            second, _ = run_stream(query(), 5, checkpoint)
            # The restart replays the batch the stop interrupted, if any: the five batches
            # after the last committed one.
            after[mode] = [balance(p)["load_imbalance"] for p in second[:5]]
            after[mode + "_first_batch"] = second[0]["batchId"] if second else None
            after[mode + "_batches_before"] = done

    benchmark.pedantic(runs, rounds=1, iterations=1)
    figures.add(what="LI of the first five micro-batches after a restart", source=source,
                strategy=strategy, workload="job source, 50k rows/batch, 8 workers, count",
                **{k: ([round(x, 4) for x in v] if isinstance(v, list) else v)
                   for k, v in after.items()})


# --- elastic workers: rows and keys that change worker -----------------------------------------


@pytest.mark.parametrize("change", ["n+1", "2n"])
def test_elastic_moves(benchmark, figures, change):
    import skewgroup
    from skewgroup._routing.partitioner import Partitioner
    from skewgroup.spark import _routers

    n = 8
    new_n = n + 1 if change == "n+1" else 2 * n
    keys = skewgroup.streams.zipf(1.4, 400_000, universe=100_000, seed=3)
    before, after = keys[:200_000], keys[200_000:]
    hashes = skewgroup.hash_keys(after, 0)
    rows = {}

    def measure():
        for strategy in sorted(skewgroup.STRATEGIES):
            kept = skewgroup.partitioner(strategy, n)
            kept.route(before)
            changed = Partitioner.from_bytes(kept.to_bytes())
            changed = _routers._fit(changed, changed.config, new_n, 0) or \
                Partitioner(changed.config, new_n, 0)
            resized = changed.workers == new_n and changed.stats()["routed"] > 0
            same = kept.route_hashes(hashes)
            moved = changed.route_hashes(hashes) != same
            moved_keys = np.unique(after[moved]).size / np.unique(after).size
            rows[strategy] = {"rows_moved": round(float(moved.mean()), 3),
                              "keys_moved": round(float(moved_keys), 3),
                              "router": "resized" if resized else "fresh"}

    benchmark.pedantic(measure, rounds=1, iterations=1)
    figures.add(what="share of rows / keys whose worker changes", change=f"{n} -> {new_n}",
                stream="zipf z=1.4, 10^5 keys, 200k rows before and after", **rows)
