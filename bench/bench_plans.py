"""Every plan a careful user would write by hand against skew_group's, in one grid.

    python -m pytest bench/bench_plans.py --benchmark-only -s -p no:cacheprovider
    python bench/bench_plans.py bench/results/<date>-figures.json      (the markdown table)

Cells: keys (uniform over 10^6 keys; Zipf z in {1.0, 1.4, 2.0} over 10^6 keys) x input shape
(wide: 32 input partitions in arrival order; narrow: 2; keyed: 8 partitions by a hash of the
key, as a topic keyed by the same key gives) x aggregate, ``ROWS`` = 2 M rows ``(k, x, d)``,
16 workers, local[2], AQE off (so every grouping stage keeps its 16 tasks).

Aggregates, each with integer results (compared bit for bit with groupBy's):

* ``builtin``   -- count and sum(x);
* ``expensive`` -- a vectorized custom aggregate costing about 1 µs per row in numpy:
  ``MIX_ROUNDS`` rounds of the splitmix64 finaliser on x, the top 31 bits summed per key (and
  the rows);
* ``distinct``  -- exact distinct count of d (1,000 values): per key, not a per-row map.

Plans, every one in the same run, on the same DataFrame:

* ``groupBy``   -- Spark's functions (builtin: ``agg(count, sum)``; distinct: ``count_distinct``);
  for the expensive aggregate ``repartition(16, k)`` and one vectorized ``mapInArrow`` call
  per partition (sort by key, ``np.add.reduceat``);
* ``salted``    -- hand salting with 16 salts (``rand``): the partial per (key, salt)
  (vectorized ``mapInArrow`` after ``repartition(16, k, salt)`` for the expensive one), then
  ``groupBy(k)`` merges;
* ``local-global`` -- hand-written: the partial per key inside each input partition
  (``mapInArrow``), then ``groupBy(k)`` merges;
* ``udf``       -- the expensive aggregate only: what a Spark expert writes first when the
  aggregate is a per-row function merged by a sum: a scalar ``pandas_udf`` (the same mix per
  row) inside ``groupBy("k").agg(F.sum(udf("x")), F.count(...))``; Spark combines the sum
  map-side, so the UDF runs in the input tasks and no task gets the hot key's rows;
* ``rr-udf``    -- the same after ``repartition(16)`` (round robin): the UDF over 16 even
  partitions whatever the input's shape;
* ``auto``, ``local``, ``hash``, ``split``, ``routed``, ``spread`` -- ``skew_group("k", ...,
  workers=16, plan=...)`` (routed with the default strategy). The sampling job of auto and
  split runs inside the measured job group.

Before the rounds, each aggregate runs once with groupBy and once routed, unmeasured (the JVM's
JIT, the page cache, Python workers started).

Per run, from Spark's REST API over every stage of the run's job group: the *critical path*
(sum over stages of the slowest task's ``executorRunTime``: the run's makespan on >= 16
cores), the *total* task time (the cost), the wall time on local[2], and per stage its tasks,
slowest task, rows read per task (max and max/mean: rows per worker in a grouping stage).
Each figure is the minimum over ``ROUNDS`` rounds (load only adds time), the maximum is kept as
the spread. Exactness: every plan's output gets one fingerprint (row count and the sum of a
64-bit hash of every row, in Spark), equal to groupBy's or the run fails; it is computed in the
measured action itself (one aggregation over the result rows, the same in every plan).
"""
import json
import os
import sys

import numpy as np
import pytest

import _plans_data
from _baselines import sorted_groups
from _figures import summarize, timed
from _plans_data import MIX_ROUNDS, ROWS, SHAPES, dataset, mixed
from _rest import group_stages, run_in_group
from skewgroup._aggregation.batches import table_of

ROUNDS = int(os.environ.get("SKEWGROUP_BENCH_PLANS_ROUNDS", 2))
WORKERS = 16
SALTS = 16
UI_PORT = 4060
KEYS = ("uniform", "zipf-1.0", "zipf-1.4", "zipf-2.0")
# SKEWGROUP_BENCH_PLANS_AGGREGATES=expensive re-measures one aggregate (every plan of it).
AGGREGATES = tuple(os.environ.get("SKEWGROUP_BENCH_PLANS_AGGREGATES",
                                  "builtin,expensive,distinct").split(","))
PLANS = ("groupBy", "salted", "local-global", "udf", "rr-udf", "auto", "local", "hash", "split",
         "routed", "spread")
EXPERT = ("udf", "rr-udf")   # a per-row function then Spark's aggregate: the expensive one only


def plans_of(aggregate):
    """The plans measured for ``aggregate``: the expert's per-row plans need a per-row cost."""
    return [p for p in PLANS if aggregate == "expensive" or p not in EXPERT]


# --- the expensive aggregate: numpy, vectorized over a partition -----------------------------


def expensive_partial(rows, offsets):
    """skew_group's vectorized partial: rows grouped by key, one call per partition."""
    values = mixed(rows.column("x").to_numpy())
    return {"score": np.add.reduceat(values, offsets[:-1]), "n": np.diff(offsets)}


def hand_expensive(batches):
    """mapInArrow: the expensive aggregate per key of the whole partition (k, score, n)."""
    import pyarrow as pa

    table = table_of(batches)
    if table is None:
        return
    keys = table.column("k").to_numpy()
    order, offsets = sorted_groups(keys)
    values = mixed(table.column("x").to_numpy()[order])
    yield pa.RecordBatch.from_arrays(
        [pa.array(keys[order][offsets[:-1]]), pa.array(np.add.reduceat(values, offsets[:-1])),
         pa.array(np.diff(offsets))], names=["k", "score", "n"])


def hand_builtin(batches):
    """mapInArrow: count and sum per key of the partition, in Arrow (local-global's partial)."""
    table = table_of(batches)
    if table is not None:
        table = table.select(["k", "x"])
        grouped = table.group_by("k", use_threads=False).aggregate([("x", "count"), ("x", "sum")])
        grouped = grouped.select(["k", "x_count", "x_sum"]).rename_columns(["k", "n", "s"])
        yield from grouped.to_batches()


def hand_distinct(batches):
    """mapInArrow: the distinct (k, d) pairs of the partition (local-global's partial)."""
    table = table_of(batches)
    if table is not None:
        table = table.select(["k", "d"])
        yield from table.group_by(["k", "d"], use_threads=False).aggregate([]).to_batches()


# --- the plans ---------------------------------------------------------------------------------


def query(df, aggregate, plan):
    """The result of ``plan`` for ``aggregate``, columns (k, a, b) or (k, a)."""
    from pyspark.sql import functions as F

    from skewgroup.spark import agg, skew_group

    if plan in ("auto", "local", "hash", "split", "routed", "spread"):
        aggregates = {
            "builtin": [agg.count().alias("a"), agg.sum("x").alias("b")],
            "expensive": [agg.custom(partial=expensive_partial, merge={"score": "sum", "n": "sum"},
                                     schema="score long, n long", vectorized=True)],
            "distinct": [agg.count_distinct("d").alias("a")],
        }[aggregate]
        out = df.transform(skew_group("k", *aggregates, workers=WORKERS, plan=plan))
        if aggregate == "expensive":
            return out.select("k", F.col("score").alias("a"), F.col("n").alias("b"))
        return out
    salted = df.withColumn("salt", (F.rand(seed=1) * SALTS).cast("int"))
    if aggregate == "builtin":
        if plan == "groupBy":
            return df.groupBy("k").agg(F.count(F.lit(1)).alias("a"), F.sum("x").alias("b"))
        if plan == "salted":
            partial = salted.groupBy("k", "salt").agg(F.count(F.lit(1)).alias("n"),
                                                      F.sum("x").alias("s"))
        else:
            partial = df.mapInArrow(hand_builtin, "k long, n long, s long")
        return partial.groupBy("k").agg(F.sum("n").alias("a"), F.sum("s").alias("b"))
    if aggregate == "expensive":
        if plan in EXPERT:
            rows = df.repartition(WORKERS) if plan == "rr-udf" else df
            return rows.groupBy("k").agg(F.sum(_mixed_udf()("x")).alias("a"),
                                         F.count(F.lit(1)).alias("b"))
        schema = "k long, score long, n long"
        if plan == "groupBy":
            out = df.repartition(WORKERS, "k").mapInArrow(hand_expensive, schema)
            return out.select("k", F.col("score").alias("a"), F.col("n").alias("b"))
        if plan == "salted":
            partial = salted.repartition(WORKERS, "k", "salt").mapInArrow(hand_expensive, schema)
        else:
            partial = df.mapInArrow(hand_expensive, schema)
        return partial.groupBy("k").agg(F.sum("score").alias("a"), F.sum("n").alias("b"))
    if plan == "groupBy":
        return df.groupBy("k").agg(F.count_distinct("d").alias("a"))
    if plan == "salted":
        sets = salted.groupBy("k", "salt").agg(F.collect_set("d").alias("ds"))
        return sets.groupBy("k").agg(
            F.size(F.array_distinct(F.flatten(F.collect_list("ds")))).cast("long").alias("a"))
    pairs = df.mapInArrow(hand_distinct, "k long, d long")
    return pairs.groupBy("k").agg(F.count_distinct("d").alias("a"))


def _mixed_udf():
    """The expensive aggregate's per-row mix as a scalar pandas UDF (Series -> Series)."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("long")
    def mix(x: pd.Series) -> pd.Series:
        return pd.Series(mixed(x.to_numpy()))

    return mix


def fingerprint(result):
    """(rows, sum of a 31-bit hash of every row): equal outputs give equal fingerprints."""
    from pyspark.sql import functions as F

    row = result.select(F.pmod(F.xxhash64(*result.columns), F.lit(2_147_483_647)).alias("h")) \
        .agg(F.count(F.lit(1)).alias("rows"), F.sum("h").alias("h")).collect()[0]
    return int(row["rows"]), int(row["h"] or 0)


# --- Spark -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from _session import local_session

    # AQE off: every grouping stage keeps its WORKERS tasks, the workers whose makespan counts.
    # The mix (_plans_data) runs in the Python workers: shipped by value too.
    session = local_session(sys.modules[__name__], "skewgroup-bench-plans", UI_PORT,
                            {"spark.sql.adaptive.enabled": "false"}, by_value=(_plans_data,))
    yield session
    session.stop()


def run_once(spark, df, aggregate, plan, label):
    """One measured run: (fingerprint, wall s, stages)."""
    # The query is built inside the job group: auto's and split's sampling job counts too.
    result, wall = run_in_group(spark, label, lambda: fingerprint(query(df, aggregate, plan)))
    return result, wall, group_stages(spark, label)


@pytest.fixture(scope="module")
def cost_per_row_us():
    x = np.random.default_rng(0).integers(0, 1 << 40, 200_000, dtype=np.int64)
    best = min(timed(mixed, x) for _ in range(3))
    return round(best / x.size * 1e6, 3)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("keys_name", KEYS)
def test_plans(benchmark, figures, spark, cost_per_row_us, keys_name, shape):
    import logging

    df = spark.read.parquet(str(dataset(keys_name, shape)))
    assert df.rdd.getNumPartitions() == SHAPES[shape]
    chosen = {}

    class _Plans(logging.Handler):   # auto's log line: which plan it picked and why
        def emit(self, record):
            chosen[current[0]] = record.getMessage()

    current = [None]
    handler = _Plans()
    logger = logging.getLogger("skewgroup.spark")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    runs = {(a, p): [] for a in AGGREGATES for p in plans_of(a)}

    def every_plan():
        for aggregate in AGGREGATES:   # warm-up, not measured: the JVM, the page cache, workers
            fingerprint(query(df, aggregate, "groupBy"))
            fingerprint(query(df, aggregate, "routed"))
        for round_ in range(ROUNDS):   # rounds outermost: a burst of load hits one run per plan
            for aggregate, plan in runs:
                current[0] = aggregate
                label = f"plans-{keys_name}-{shape}-{aggregate}-{plan}-{round_}"
                runs[aggregate, plan].append(run_once(spark, df, aggregate, plan, label))

    try:
        benchmark.pedantic(every_plan, rounds=1, iterations=1)
    finally:
        logger.removeHandler(handler)
    for aggregate in AGGREGATES:
        expected = runs[aggregate, "groupBy"][0][0]
        cell = {}
        for plan in plans_of(aggregate):
            outputs = {r[0] for r in runs[aggregate, plan]}
            assert outputs == {expected}, (keys_name, shape, aggregate, plan, outputs, expected)
            cell[plan] = summarize(runs[aggregate, plan])
        figures.add(what="plans grid", keys=keys_name, shape=shape, aggregate=aggregate,
                    rows=ROWS, workers=WORKERS, rounds=ROUNDS, cost_per_row_us=cost_per_row_us,
                    mix_rounds=MIX_ROUNDS, exact=True, auto_said=chosen.get(aggregate, ""),
                    plans=cell)


# --- the table ---------------------------------------------------------------------------------

HAND = ("groupBy", "salted", "local-global") + EXPERT


def table(rows):
    """Markdown: per cell, critical path and total per plan, auto's choice and ratios."""
    lines = ["| keys | input | aggregate | " + " | ".join(PLANS)
             + " | auto picked | auto / best hand (critical) | auto / groupBy (total) "
             "| groupBy / auto (critical) |",
             "|---|---|---|" + "---:|" * len(PLANS) + "---|---:|---:|---:|"]
    for row in rows:
        if row.get("what") != "plans grid":
            continue
        plans = row["plans"]
        best_hand = min(plans[p]["critical_s"] for p in HAND if p in plans)
        cells = [f"{plans[p]['critical_s']:.2f} / {plans[p]['total_s']:.2f}" if p in plans
                 else "-" for p in PLANS]
        said = row["auto_said"].split(":")[0].replace("skew_group plan=", "") or "?"
        lines.append(
            f"| {row['keys']} | {row['shape']} | {row['aggregate']} | " + " | ".join(cells)
            + f" | {said} | {plans['auto']['critical_s'] / best_hand:.2f} | "
            f"{plans['auto']['total_s'] / plans['groupBy']['total_s']:.2f} | "
            f"{plans['groupBy']['critical_s'] / plans['auto']['critical_s']:.2f} |")
    return "\n".join(lines)


def stage_shares(rows, aggregate="expensive",
                 plans=("split", "routed", "spread", "local", "hash", "rr-udf")):
    """Markdown: each stage's share of the critical path and of the total, per skew_group plan."""
    lines = ["| keys | input | plan | stages: tasks, slowest task s (share of critical), "
             "total s (share of total), max rows per task, max/mean rows |", "|---|---|---|---|"]
    for row in rows:
        if row.get("what") != "plans grid" or row["aggregate"] != aggregate:
            continue
        for plan in plans:
            figures = row["plans"][plan]
            parts = [f"{s['tasks']}: {s['max_task_s']:.2f} "
                     f"({s['max_task_s'] / figures['critical_s']:.0%}), {s['total_s']:.2f} "
                     f"({s['total_s'] / figures['total_s']:.0%}), {s['max_rows']:,}, "
                     f"{s['rows_max_over_mean']}" for s in figures["stages"]]
            lines.append(f"| {row['keys']} | {row['shape']} | {plan} | "
                         + " · ".join(parts) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        rows = json.load(f)["rows"]
    print(table(rows))
    print()
    print(stage_shares(rows))
