"""Faults in Spark: a Python worker killed in the middle of a routed task.

Routing is soft state and every stage is a deterministic function of its input, so when Spark
retries the task the result is still exactly ``groupBy(...).agg(...)``. The executor lost on a
real standalone cluster is in test_cluster.py.
"""
import os

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

import skewgroup
from skewgroup.spark import agg, skew_group

# Local mode retries a failed task only with a second number in the master: local[N, F] gives
# each task F attempts (spark.task.maxFailures is ignored in local mode).
SPARK_MASTER = "local[2, 4]"

WORKERS = 4
DOOMED_WORKER = 1       # the partial task of this worker dies in its first attempt


def dies_once(marker, calls_before_death=3):
    """A custom aggregate's partial (an integer sum and a count) whose Python worker exits, as
    an OOM-killed or crashed worker would, in the first attempt of the DOOMED_WORKER's task,
    after it has done part of that task's work. The marker file records that it happened."""
    calls = [0]

    def partial(rows):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.attemptNumber() == 0 and context.partitionId() == DOOMED_WORKER:
            calls[0] += 1
            if calls[0] == calls_before_death:
                with open(marker, "x"):
                    pass
                os._exit(1)
        return {"v_sum": int(rows["v"].sum()), "n": len(rows)}

    return agg.custom(partial=partial, merge={"v_sum": "sum", "n": "sum"},
                      schema="v_sum long, n long")


def test_python_worker_killed_mid_routed_task_is_retried_and_exact(spark, tmp_path):
    rng = np.random.default_rng(21)
    keys = skewgroup.streams.zipf(1.4, 40_000, universe=3_000, seed=21)
    frame = pd.DataFrame({"k": keys, "v": rng.integers(-1000, 1000, keys.size)})
    df = spark.createDataFrame(frame, "k long, v long").repartition(3)
    marker = tmp_path / "worker-killed"

    ours = df.transform(skew_group("k", dies_once(str(marker)), agg.count(), agg.sum("v"),
                                   agg.max("v"), workers=WORKERS, plan="routed",
                                   strategy="pdstream"))
    got = ours.orderBy("k").collect()

    assert marker.exists(), "the fault was not injected: the test proves nothing"
    expected = (df.groupBy("k").agg(F.sum("v").alias("v_sum"), F.count(F.lit(1)).alias("n"),
                                    F.count(F.lit(1)), F.sum("v"), F.max("v"))
                .orderBy("k").collect())
    assert len(got) == len(expected) == len(np.unique(keys))
    assert [tuple(r) for r in got] == [tuple(r) for r in expected]
