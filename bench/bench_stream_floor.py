"""The floor of a stream's stateful Python stage: what each stateful API costs a micro-batch
before any work, beside the grid's expert method and skew_group, in one session.

A Python merge of state in a stream needs one stateful stage of ``spark.sql.shuffle.partitions``
tasks. Its cost before any work decides how close any plan on it can come to another. Each
method below reads the same stream (bench_aggregators_spark's: 200,000 rows a micro-batch, keys
Zipf over a universe) and groups the rows into 64 buckets of key hashes, as the grid does:

* ``groupBy``       -- Spark's ``groupBy("k").agg(count, sum)``: the JVM's own floor (HDFS store);
* ``aipws-nothing`` -- ``applyInPandasWithState`` per bucket, reading the rows, no state, no
  output (HDFS store, Spark's default): the floor of the expert's bucketed method;
* ``tws-nothing``   -- ``transformWithStateInPandas`` the same (RocksDB store, which it needs);
* ``tws-runs-nothing`` -- the same, plus what skew_group's runs need a call, and nothing else:
  one MapState iterator over the bucket's runs and one ``updateValue`` of a small run (two
  requests to the JVM a bucket);
* ``bucketed``      -- the grid's expert method with the cheap reduce (bench_aggregators_spark);
* ``sampled``       -- skew_group with ``plan="auto"`` and ``sample=``, the cheap reduce.

Per method: micro-batch time (``triggerExecution``), critical path (the slowest task of each
stage, summed) and total task time, each the minimum over the micro-batches after the first and
over rounds, the maximum in brackets; and the stateful stage's own slowest and total task time.

    cd /tmp && python -m pytest /path/to/bench/bench_stream_floor.py --benchmark-only -s \\
        -p no:cacheprovider

Environment: SKEWGROUP_BENCH_FLOOR_Z (1.4), _UNIVERSE (100000), _ROUNDS (2), _METHODS (all of
the above); the shuffle partitions, skew_group's workers and the stream's size are
bench_aggregators_spark's (SKEWGROUP_BENCH_AGGS_WORKERS, 16; _STREAM_ROWS; _STREAM_BATCHES).
"""
import json
import os
import shutil
import sys
import tempfile

import pytest

pytest.importorskip("pyspark")
sys.path.insert(0, os.path.dirname(__file__))

import _aggregators_grid as grid  # noqa: E402  (the grid's data and methods)
from _rest import batch_stages  # noqa: E402
from skewgroup.app.baselines import bucket_column  # noqa: E402


def _env(name, default):
    return os.environ.get(f"SKEWGROUP_BENCH_FLOOR_{name}", default)


WORKERS = grid.WORKERS     # SKEWGROUP_BENCH_AGGS_WORKERS, as the grid's
Z = float(_env("Z", 1.4))
UNIVERSE = int(_env("UNIVERSE", 100_000))
ROUNDS = int(_env("ROUNDS", 2))
METHODS = tuple(_env("METHODS", "groupBy,aipws-nothing,tws-nothing,tws-runs-nothing,"
                                "bucketed,sampled").split(","))
UI_PORT = 4083


def _nothing_per_bucket(_, frames, state):
    for _frame in frames:      # the rows are read, as every method reads them
        pass
    return iter(())


def _processors():
    from pyspark.sql import types as T
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Nothing(StatefulProcessor):
        def init(self, handle):
            self.handle = handle

        def handleInputRows(self, key, rows, timerValues):
            for _frame in rows:
                pass
            return iter(())

        def close(self):
            pass

    class RunsNothing(Nothing):
        """The two requests a call of skew_group's runs makes, and no work."""

        def init(self, handle):
            self.runs = handle.getMapState(
                "runs", T.StructType([T.StructField("run", T.LongType(), False)]),
                T.StructType([T.StructField("level", T.IntegerType(), False),
                              T.StructField("arrow", T.BinaryType(), False)]))

        def handleInputRows(self, key, rows, timerValues):
            for _frame in rows:
                pass
            stored = list(self.runs.iterator())
            self.runs.updateValue((len(stored),), (0, b"\0" * 64))
            return iter(())

    return {"tws-nothing": Nothing, "tws-runs-nothing": RunsNothing}


def query(spark, source, method, sample):
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    if method == "groupBy":
        return source.groupBy("k").agg(F.count("*"), F.sum("x"))
    if method in ("bucketed", "sampled"):
        return grid.stream_query(spark, source, "cheap", method, sample)
    buckets = source.select("k", "x", bucket_column("k"))
    if method == "aipws-nothing":
        return buckets.groupBy("bucket").applyInPandasWithState(
            _nothing_per_bucket, "k long", "blob binary", "update", GroupStateTimeout.NoTimeout)
    processor = _processors()[method]()
    return buckets.groupBy("bucket").transformWithStateInPandas(processor, "k long", "Update",
                                                                "None")


@pytest.fixture(scope="module")
def spark():
    from _session import aggregator_stream_session

    session = aggregator_stream_session(sys.modules[__name__], "skewgroup-bench-floor",
                                        UI_PORT, WORKERS)
    yield session
    session.stop()


def run(spark, directory, method):
    """(per micro-batch after the first: seconds, critical s, total s, the last stage's
    (slowest, total) task s)."""
    from skewgroup.spark._python_merge import CHANGELOG, PROVIDER, ROCKSDB

    source = (spark.readStream.schema(grid.SCHEMA).option("maxFilesPerTrigger", 1)
              .parquet(str(directory / "input")))
    sample = grid.one_batch_sample(spark, directory, grid.SCHEMA)
    stateful_api = method.startswith("tws")
    # Each method on the state store its user gets (skew_group sets RocksDB itself).
    spark.conf.set(PROVIDER, ROCKSDB if stateful_api else grid.HDFS)
    spark.conf.set(CHANGELOG, "true")
    checkpoint = tempfile.mkdtemp(prefix="sg-bench-floor-")
    try:
        q = (query(spark, source, method, sample).writeStream.format("noop")
             .option("checkpointLocation", checkpoint).outputMode("update")
             .trigger(availableNow=True).start())
        q.awaitTermination()
        progress = [json.loads(p.json) for p in q.recentProgress if p.numInputRows]
        stages = batch_stages(spark, q.runId)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    out = []
    for p in progress[1:]:
        batch = stages[p["batchId"]]
        out.append((p["durationMs"]["triggerExecution"] / 1000,
                    sum(s["max_task_s"] for s in batch), sum(s["total_s"] for s in batch),
                    (batch[-1]["max_task_s"], batch[-1]["total_s"])))
    return out


def _spread(values):
    return f"{min(values):.2f} ({max(values):.2f})"


def test_stream_floor(benchmark, figures, spark):
    directory = grid.stream_dataset(Z, UNIVERSE)
    runs = {m: [] for m in METHODS}

    def every_method():
        for _ in range(ROUNDS):            # interleaved: a slow minute hits every method
            for method in METHODS:
                runs[method].extend(run(spark, directory, method))

    benchmark.pedantic(every_method, rounds=1, iterations=1)
    print(f"\nz={Z} universe={UNIVERSE} workers={WORKERS} rounds={ROUNDS}: min (max) s over "
          f"{len(runs[METHODS[0]])} micro-batches")
    print("| method | micro-batch | critical | total task | stateful stage slowest | "
          "stateful stage total |")
    print("|---|---:|---:|---:|---:|---:|")
    for method, batches in runs.items():
        columns = list(zip(*batches))
        last = list(zip(*columns[3]))
        print(f"| {method} | " + " | ".join(_spread(c) for c in (*columns[:3], *last)) + " |")
        figures.add(what="stream floor", z=Z, universe=UNIVERSE, workers=WORKERS,
                    rounds=ROUNDS, method=method,
                    batches=[[round(b, 3), round(c, 3), round(t, 3), list(s)]
                             for b, c, t, s in batches])
