"""The cost of ``plan="auto"``'s sampling job, against the two designs it replaced.

    python -m pytest bench/bench_auto_sample.py --benchmark-only -s -p no:cacheprovider

On three of bench/bench_plans.py's inputs (2 M rows; Zipf z = 1.4 over 32 input partitions,
uniform keys over 2, Zipf z = 1.0 over 8 partitioned by the key), 16 workers, local[2], AQE
off, each design runs ``ROUNDS`` times, interleaved; figures from Spark's REST API over the
design's job group: critical path (sum over stages of the slowest task's ``executorRunTime``),
total task time, wall time (with the driver's counting), each the minimum over the rounds and
the maximum as the spread.

* ``one stage``   -- :func:`skewgroup.spark._plans.sample`: a row kept with probability
  ``min(2 %, 2,000 / (row index + 1))`` in its input partition, collected as Arrow with its
  weight, counted on the driver;
* ``grouped``     -- the first design: a 2 % Bernoulli sample counted in Spark
  (``groupingSets`` per (input partition, hash partition) and per key), then one task ranks the
  keys (``coalesce(1)`` and a window) and only the counts come back;
* ``python stage`` -- each input task counts its own 2 % sample in a ``mapInArrow`` and returns
  its counts per hash partition and its 5n most frequent keys.
"""
import os
import sys

import pytest

from _figures import summarize
from _plans_data import dataset
from _rest import group_stages, run_in_group

ROUNDS = int(os.environ.get("SKEWGROUP_BENCH_SAMPLE_ROUNDS", 4))
WORKERS = 16
UI_PORT = 4074
INPUTS = [("zipf-1.4", "wide"), ("uniform", "narrow"), ("zipf-1.0", "keyed")]


def grouped(df, keys, workers):
    """The first design (two stages): Spark counts, one task ranks, the counts come back."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key_columns = [F.col(k) for k in keys]
    sampled = (df.sample(fraction=0.02, seed=0)
               .select(F.spark_partition_id().alias("i"),
                       F.pmod(F.hash(*key_columns), F.lit(workers)).alias("h"),
                       F.xxhash64(*key_columns).alias("kh")))
    counts = (sampled.groupingSets([["i", "h"], ["kh", "h"]], "i", "h", "kh")
              .agg(F.count(F.lit(1)).alias("c"), F.grouping_id().alias("g")).coalesce(1))
    rank = F.row_number().over(Window.partitionBy("g").orderBy(F.desc("c"), "kh"))
    return (counts.withColumn("rank", rank)
            .filter((F.col("g") == 1) | (F.col("rank") <= 5 * workers)).collect())


def python_stage(df, keys, workers):
    """Each input task counts its own sample in Python and returns its counts."""
    from pyspark.sql import functions as F

    key_columns = [F.col(k) for k in keys]

    def count(batches):
        import numpy as np
        import pyarrow as pa

        hs, khs = [np.empty(0, np.int32)], [np.empty(0, np.int64)]
        for batch in batches:
            hs.append(batch.column("h").to_numpy())
            khs.append(batch.column("kh").to_numpy())
        h, kh = np.concatenate(hs), np.concatenate(khs)
        unique, counts = np.unique(kh, return_counts=True)
        top = np.argsort(-counts, kind="stable")[:5 * workers]
        yield pa.RecordBatch.from_pydict({
            "kind": np.array([0] * workers + [1] * len(top), dtype=np.int32),
            "a": np.concatenate([np.arange(workers), unique[top]]).astype(np.int64),
            "c": np.concatenate([np.bincount(h, minlength=workers), counts[top]]).astype(np.int64)})

    return (df.sample(fraction=0.02, seed=0)
            .select(F.pmod(F.hash(*key_columns), F.lit(workers)).alias("h"),
                    F.xxhash64(*key_columns).alias("kh"))
            .mapInArrow(count, "kind int, a long, c long")).toArrow()


def one_stage(df, keys, workers):
    from skewgroup.spark import _plans

    return _plans.sample(df, keys, workers)


DESIGNS = {"one stage": one_stage, "grouped": grouped, "python stage": python_stage}


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from _session import local_session

    session = local_session(sys.modules[__name__], "skewgroup-bench-auto-sample", UI_PORT,
                            {"spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()


@pytest.mark.parametrize("keys_name, shape", INPUTS)
def test_sampling_job(benchmark, figures, spark, keys_name, shape):
    df = spark.read.parquet(str(dataset(keys_name, shape)))
    runs = {name: [] for name in DESIGNS}

    def rounds():
        for r in range(ROUNDS):
            for name, design in DESIGNS.items():
                label = f"sample-{keys_name}-{shape}-{name}-{r}"
                _, wall = run_in_group(spark, label, lambda: design(df, ["k"], WORKERS))
                runs[name].append((None, wall, group_stages(spark, label)))

    benchmark.pedantic(rounds, rounds=1, iterations=1)
    for name, got in runs.items():
        best = summarize(got)   # minima over the rounds, maxima as the spread
        figures.add(what="auto's sampling job", input=f"{keys_name} {shape}", design=name,
                    rounds=ROUNDS, stages_tasks=[s["tasks"] for s in best["stages"]],
                    critical_s={"min": best["critical_s"], "max": best["critical_max_s"]},
                    total_s={"min": best["total_s"], "max": best["total_max_s"]},
                    wall_s={"min": best["wall_s"], "max": best["wall_max_s"]})
