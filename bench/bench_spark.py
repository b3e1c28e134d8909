"""skew_group on local Spark: per-task balance of an expensive aggregate.

    pytest bench/bench_spark.py --benchmark-only -s      (about 12-16 minutes on 2 shared cores)

Input: 5 M rows (key, value) per stream, written once as parquet under /tmp (8 files = 8 input
partitions = 8 sources, each with its own router), keys from ``skewgroup.streams.zipf`` with
z in {1.0, 1.4, 2.0} over 10^4 keys, seeded. Spark runs local[2] with
spark.sql.shuffle.partitions = 16 and workers = 16; AQE's partition coalescing is off so the
grouping stages keep their 16 partitions (the 16 workers whose makespan we project).

Expensive aggregate: ``agg.custom`` whose partial step does ``COST_PER_ROW`` sines per row in
numpy (about 2.1 µs per row on this machine, measured alone and recorded as cost_per_row_us;
the per-(worker, key) Python overhead of the partial step is the reason for the 10^4-key
universe: the cost must follow rows, not keys). Compared per z:

* ``groupBy``  — Spark's own placement: ``df.groupBy("k").agg(score(v), n(v))`` with the same
  per-row work as pandas UDAFs (Series -> scalar); the true baseline;
* ``kg``       — ``skew_group(strategy="kg")``: key grouping through skew_group's plan. It hashes
  keys with skewgroup's hash, not Spark's murmur3, so which keys share a worker differs from
  groupBy's; it is the same law (one worker per key);
* ``pkg``, ``dchoices``, ``pdstream``, ``adaptive`` — ``skew_group`` with that strategy
  (``plan="routed"``, every row routed by it).

Measured through Spark's UI REST API: the stage that ran the partial step (found in the run's
job group as the stage with ``workers`` tasks that read every input row from the shuffle); per
task its run time (``executorRunTime``) and rows (shuffle records read; partition == worker).
The max task time is the projected makespan of the micro-batch on 16 cores (local[2] runs the
16 tasks two at a time, so the wall time is not). Other load on the machine only adds time, so
each task's time is its minimum over ``ROUNDS`` runs (SKEWGROUP_BENCH_SPARK_ROUNDS, default 2).
Batch DataFrames: the tag, the placement and the partial stage are the streaming ones (a
stream's routers continue across micro-batches, bench_streaming.py). The targets are
recorded in the figures (bench/RESULTS.md), not asserted: task times on a shared 2-core
machine are too noisy for a pass/fail bound; the results are asserted equal to groupBy's.

The last tests compare end-to-end wall time with a cheap sum, best of ``UNIFORM_ROUNDS``, written
to the noop sink: ``groupBy().agg(F.sum)`` against skew_group's default plan ("auto", which
runs built-in aggregates as Spark's own aggregation) and its routed plan (pdstream), on uniform
keys (the overhead) and on Zipf keys (per-stage task times and rows: Spark's map-side combine
already spreads a hot key's rows over the input tasks).
"""
import os
import pathlib
import sys
import tempfile
import time

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

import skewgroup  # noqa: E402
from _figures import timed, zipf_p1  # noqa: E402
from _rest import get, run_in_group, stages_and_tasks  # noqa: E402
from _session import WORKERS, local_session  # noqa: E402
from skewgroup.spark import agg, skew_group  # noqa: E402

# A smaller value makes a quick smoke run; the figures are for the default.
ROWS = int(os.environ.get("SKEWGROUP_BENCH_SPARK_ROWS", 5_000_000))
FILES = 8
UNIVERSE = 10_000
UNIFORM_UNIVERSE = 1_000_000
ZIPF = (1.0, 1.4, 2.0)
STRATEGIES = ("kg", "pkg", "dchoices", "pdstream", "adaptive")
COST_PER_ROW = 128       # sines per row in the expensive partial step
# Other work on the machine only ever adds to a task's time: each task's time is its minimum
# over ROUNDS runs of the same query (same data, so the same rows reach the same task).
ROUNDS = int(os.environ.get("SKEWGROUP_BENCH_SPARK_ROUNDS", 2))
UNIFORM_ROUNDS = int(os.environ.get("SKEWGROUP_BENCH_UNIFORM_ROUNDS", 3))
UI_PORT = 4050
DATA = pathlib.Path(tempfile.gettempdir()) / "skewgroup-bench-spark"


def row_work(values):
    """COST_PER_ROW sines per value, in chunks so memory stays small: cost ∝ rows."""
    total = 0.0
    multipliers = np.arange(1, COST_PER_ROW + 1, dtype=np.float64)
    for start in range(0, len(values), 4096):
        total += float(np.sin(np.multiply.outer(values[start:start + 4096], multipliers)).sum())
    return total


def expensive_partial(rows):
    return {"score": row_work(rows["v"].to_numpy()), "n": len(rows)}


def _grouped_udfs():
    """The same aggregate as Spark pandas UDAFs (Series -> scalar), for plain groupBy().agg()."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("double")
    def score(values: pd.Series) -> float:
        return row_work(values.to_numpy())

    @pandas_udf("long")
    def n(values: pd.Series) -> int:
        return len(values)

    return score, n


EXPENSIVE = agg.custom(partial=expensive_partial, merge={"score": "sum", "n": "sum"},
                       schema="score double, n long")


def write_stream(directory, keys, seed):
    """keys and a uniform value column as FILES parquet files (done once, reused)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = directory / "_done"
    if done.exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    values = np.random.default_rng(seed).random(keys.size)
    for i, part in enumerate(np.array_split(np.arange(keys.size), FILES)):
        pq.write_table(pa.table({"k": keys[part], "v": values[part]}),
                       directory / f"part-{i}.parquet")
    done.write_text(f"{keys.size} rows, seed {seed}\n")
    return directory


def zipf_dir(z):
    directory = DATA / f"zipf-{z}-{ROWS}-{UNIVERSE}"
    if (directory / "_done").exists():
        return directory
    return write_stream(directory, skewgroup.streams.zipf(z, ROWS, universe=UNIVERSE, seed=7), 7)


def uniform_dir(universe):
    directory = DATA / f"uniform-{ROWS}-{universe}"
    if (directory / "_done").exists():
        return directory
    keys = np.random.default_rng(8).integers(0, universe, ROWS, dtype=np.int64)
    return write_stream(directory, keys, 8)


@pytest.fixture(scope="module")
def spark():
    # The aggregate's functions live in this module, which Spark's Python workers cannot import.
    session = local_session(sys.modules[__name__], "skewgroup-bench-spark", UI_PORT,
                            {"spark.sql.adaptive.coalescePartitions.enabled": "false"})
    yield session
    session.stop()


# --- Spark's REST API: the partial stage ------------------------------------------------------


def partial_stage_tasks(spark, group, rows):
    """Tasks of the stage that ran the per-worker step of job group ``group``: WORKERS tasks
    that read all ``rows`` input rows from the shuffle (the merge stage reads partials only,
    the scan stage reads files)."""
    for _ in range(60):  # the UI's listener is asynchronous: wait for the stage to be complete
        stage_ids = {s for job in get(spark, "jobs") if job.get("jobGroup") == group
                     for s in job["stageIds"]}
        found = []
        for stage_id in sorted(stage_ids):
            for stage in get(spark, f"stages/{stage_id}"):
                if (stage["status"] == "COMPLETE" and stage["numTasks"] == WORKERS
                        and stage["shuffleReadRecords"] == rows):
                    found.append(stage)
        if len(found) == 1:
            stage = found[0]
            tasks = get(spark, f"stages/{stage['stageId']}/{stage['attemptId']}/taskList"
                                f"?length={10 * WORKERS}")
            tasks = [t for t in tasks if t["status"] == "SUCCESS"]
            if len(tasks) == WORKERS:
                return sorted(tasks, key=lambda t: t["index"])
        if len(found) > 1:
            raise RuntimeError(f"{len(found)} stages of job group {group} look like the partial "
                               f"stage: {[s['stageId'] for s in found]}")
        time.sleep(0.5)
    raise RuntimeError(f"No complete partial stage in job group {group}.")


def stage_figures(rounds):
    """Figures of the partial stage from its tasks in each round (lists ordered by partition)."""
    rows = np.array([t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in rounds[0]],
                    dtype=float)
    for tasks in rounds[1:]:
        assert [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in tasks] == list(rows)
    run_ms = np.min([[t["taskMetrics"]["executorRunTime"] for t in tasks] for tasks in rounds],
                    axis=0).astype(float)
    return {
        "max_task_s": round(run_ms.max() / 1000, 2),
        "mean_task_s": round(run_ms.mean() / 1000, 2),
        "task_max_over_mean": round(run_ms.max() / run_ms.mean(), 3),
        "max_rows": int(rows.max()),
        "rows_max_over_mean": round(rows.max() / rows.mean(), 3),
        "task_s": [round(x / 1000, 2) for x in run_ms],
        "rows_per_worker": [int(x) for x in rows],
    }


# --- expensive aggregate on Zipf keys ----------------------------------------------------------


def expensive_query(df, method):
    if method == "groupBy":
        score, n = _grouped_udfs()
        return df.groupBy("k").agg(score("v").alias("score"), n("v").alias("n"))
    # plan="routed": the strategies' own placement (the default plan, "auto", could pick
    # local-global or split for a batch DataFrame, which routes no row).
    return df.transform(skew_group("k", EXPENSIVE, workers=WORKERS, strategy=method,
                                   plan="routed"))


@pytest.fixture(scope="module")
def cost_per_row_us():
    values = np.random.default_rng(0).random(200_000)
    best = min(timed(row_work, values) for _ in range(3))
    return round(best / values.size * 1e6, 2)


@pytest.mark.parametrize("z", ZIPF)
def test_expensive_aggregate_balance(benchmark, figures, spark, cost_per_row_us, z):
    df = spark.read.parquet(str(zipf_dir(z)))
    assert df.rdd.getNumPartitions() == FILES  # one source (router) per file
    tasks = {method: [] for method in ("groupBy",) + STRATEGIES}
    walls = {method: [] for method in tasks}
    outputs = {}

    def run_every_method():
        for round_ in range(ROUNDS):  # rounds outermost: a burst of load hits one run per method
            for method in tasks:
                group = f"skewgroup-bench-z{z}-{method}-r{round_}"
                out, wall = run_in_group(spark, group, expensive_query(df, method).toPandas)
                tasks[method].append(partial_stage_tasks(spark, group, ROWS))
                walls[method].append(wall)
                outputs[method] = out.sort_values("k").reset_index(drop=True)

    benchmark.pedantic(run_every_method, rounds=1, iterations=1)
    results = {method: stage_figures(tasks[method]) for method in tasks}
    baseline = outputs["groupBy"]
    for method, row in results.items():
        out = outputs[method]
        # Same answer as groupBy: per-key row counts exactly, scores up to summation order.
        assert out["k"].tolist() == baseline["k"].tolist()
        assert out["n"].tolist() == baseline["n"].tolist()
        assert np.allclose(out["score"], baseline["score"], rtol=1e-9, atol=1e-6)
        row.update(what="expensive custom aggregate, partial stage", z=z, method=method,
                   rows=ROWS, workers=WORKERS, keys=UNIVERSE, rounds=ROUNDS,
                   p1_times_n=round(zipf_p1(z, UNIVERSE) * WORKERS, 2),
                   cost_per_row_us=cost_per_row_us,
                   best_wall_s_local2=round(min(walls[method]), 1),
                   makespan_vs_kg=round(results["kg"]["max_task_s"] / row["max_task_s"], 2),
                   makespan_vs_groupBy=round(results["groupBy"]["max_task_s"]
                                             / row["max_task_s"], 2))
        figures.add(**row)
    benchmark.extra_info.update({m: r["max_task_s"] for m, r in results.items()})


# --- cheap sum on uniform keys: overhead against groupBy ---------------------------------------

CHEAP_SUM = {
    "groupBy": lambda df: df.groupBy("k").agg(F.sum("v")),
    # the default plan ("auto"): built-in aggregates run as Spark's two-phase aggregation
    "skew_group": lambda df: df.transform(skew_group("k", agg.sum("v"), workers=WORKERS)),
    "skew_group routed": lambda df: df.transform(
        skew_group("k", agg.sum("v"), workers=WORKERS, strategy="pdstream", plan="routed")),
}


def _walls(spark, df, queries, rounds, label):
    """Best-of-``rounds`` wall time per query, the queries interleaved in every round so all of
    them see the same background load; each run in job group ``<label>-<name>-<round>``."""
    walls = {name: [] for name in queries}
    for r in range(rounds):
        for name, query in queries.items():
            _, wall = run_in_group(spark, f"{label}-{name}-{r}",
                                   lambda: query(df).write.format("noop").mode("overwrite").save())
            walls[name].append(wall)
    return walls


@pytest.mark.parametrize("universe", [UNIFORM_UNIVERSE, UNIVERSE])
def test_uniform_cheap_sum_overhead(benchmark, figures, spark, universe):
    df = spark.read.parquet(str(uniform_dir(universe)))
    walls = {}
    benchmark.pedantic(lambda: walls.update(_walls(spark, df, CHEAP_SUM, UNIFORM_ROUNDS,
                                                   f"uniform-{universe}")),
                       rounds=1, iterations=1)
    best = {name: min(w) for name, w in walls.items()}
    figures.add(what="uniform keys, cheap sum, end-to-end wall (noop sink)", rows=ROWS,
                keys=universe, workers=WORKERS, rounds=UNIFORM_ROUNDS,
                best_s={name: round(b, 2) for name, b in best.items()},
                slowdown_vs_groupBy={name: round(b / best["groupBy"] - 1, 3)
                                     for name, b in best.items()},
                all_s={name: [round(x, 2) for x in w] for name, w in walls.items()})
    benchmark.extra_info.update(best)


# --- built-in sum on skewed keys: Spark's map-side combine already spreads the hot key --------


def _stage_balance(rounds):
    """Per stage of a query, over its rounds: tasks, max/mean task time (each task's minimum
    over the rounds), rows read per task (input or shuffle) max and max/mean."""
    figures = []
    for per_round in zip(*rounds):
        tasks = [t for _, t in per_round]
        if len({len(t) for t in tasks}) != 1:
            raise RuntimeError("a stage ran a different number of tasks in different rounds")
        run_ms = np.min([[t["taskMetrics"]["executorRunTime"] for t in ts] for ts in tasks],
                        axis=0).astype(float)
        metrics = [t["taskMetrics"] for t in tasks[0]]
        rows = np.array([m["shuffleReadMetrics"]["recordsRead"] or m["inputMetrics"]["recordsRead"]
                         for m in metrics], dtype=float)
        figures.append({"tasks": len(run_ms), "max_task_s": round(run_ms.max() / 1000, 3),
                        "task_max_over_mean": round(run_ms.max() / run_ms.mean(), 2),
                        "rows_read": int(rows.sum()), "max_rows": int(rows.max()),
                        "rows_max_over_mean": round(rows.max() / rows.mean(), 2)})
    return figures


@pytest.mark.parametrize("z", (1.4, 2.0))
def test_builtin_sum_on_skewed_keys(benchmark, figures, spark, z):
    """Why the "auto" plan leaves built-in aggregates to Spark: groupBy's merge stage reads
    at most one partial row per (input task, key), so the hot key costs it FILES rows."""
    df = spark.read.parquet(str(zipf_dir(z)))
    label = f"skewed-sum-{z}"
    walls = {}
    benchmark.pedantic(lambda: walls.update(_walls(spark, df, CHEAP_SUM, UNIFORM_ROUNDS, label)),
                       rounds=1, iterations=1)
    expected = CHEAP_SUM["groupBy"](df).toPandas().sort_values("k", ignore_index=True)
    for name, query in CHEAP_SUM.items():
        out = query(df).toPandas().sort_values("k", ignore_index=True)
        assert out["k"].tolist() == expected["k"].tolist()
        assert np.allclose(out["sum(v)"], expected["sum(v)"], rtol=1e-9)
        stages = _stage_balance([stages_and_tasks(spark, f"{label}-{name}-{r}")
                                 for r in range(UNIFORM_ROUNDS)])
        figures.add(what="built-in sum on Zipf keys: stages and wall (noop sink)", z=z,
                    method=name, rows=ROWS, keys=UNIVERSE, workers=WORKERS,
                    p1_times_n=round(zipf_p1(z, UNIVERSE) * WORKERS, 2),
                    best_wall_s=round(min(walls[name]), 2),
                    all_wall_s=[round(x, 2) for x in walls[name]], stages=stages)
    benchmark.extra_info.update({name: min(w) for name, w in walls.items()})
