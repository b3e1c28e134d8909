"""Each shipped aggregator through skew_group beside Spark's own function(s) for the same job in a
plain streaming ``groupBy``, on the same stream, in one session.

The stream is the grid's (bench_aggregators_spark: keys Zipf z = 1.4 over 10^5 keys, x float64
lognormal, 200,000 rows a micro-batch, one parquet file a micro-batch, written once under
/tmp/skewgroup-bench-aggregators and read by every method). Every method reads it through the
same projection, which adds the columns the aggregators need:
``item = bigint(floor(x * 100))`` (a skewed value with a few thousand distinct values for the
hot key) and ``f = ln(x)`` (the regressor; ``x`` is the response).

Tasks and methods (each method's output has ``k``, ``n`` = rows per key and its result):

* ``kll``      -- ``skew_group`` with ``KllQuantiles((0.5, 0.9, 0.99))`` (k = 200);
  ``kll_sketch_get_quantile_double(kll_sketch_agg_double(x), array(0.5, 0.9, 0.99))``;
  ``percentile_approx(x, [0.5, 0.9, 0.99])`` (accuracy 10000);
* ``topk``     -- ``skew_group`` with ``TopK(10, "bigint")`` (capacity 100);
  ``approx_top_k(item, 10)`` (maxItemsTracked 10000, through ``F.call_function``);
  ``mode(item)`` (the top one only);
* ``distinct`` -- ``skew_group`` with ``DistinctCount("bigint")``; ``size(collect_set(item))``
  (exact); ``approx_count_distinct(item)``; ``hll_sketch_estimate(hll_sketch_agg(item))``;
* ``lsq``      -- ``skew_group`` with ``LeastSquares(1, intercept=True)`` over (x, f);
  ``regr_intercept(x, f)`` and ``regr_slope(x, f)``;
* ``all``      -- the four shipped aggregators in one ``skew_group`` call; the four first Spark
  functions above in one ``groupBy``.

``skew_group`` runs with ``plan="auto"`` and ``sample=`` one micro-batch's file (the grid's
helper), ``workers`` = the shuffle partitions (16, as the grid's), on RocksDB's state store,
which it sets; ``groupBy`` on Spark's default (HDFS-backed) store, as its user gets it. Every
method writes to the memory sink in update mode with ``trigger(availableNow=True)``, a fresh
checkpoint per run; rounds outermost, every method of every task inside each round.

Per method: micro-batch seconds (``triggerExecution``), critical path (the slowest task of each
stage, summed) and total task time (Spark's REST API, the grid's reader), over the micro-batches
after the first; per round their median (and the minimum micro-batch), then the minimum over
rounds with the maximum in brackets.

Checks (against a numpy reference of every row of every micro-batch; the last row per key of
the memory sink): every method's keys and counts equal the reference; KLL quantiles within 2x
the sketch's 99 % rank error (exact for keys of at most k values), percentile_approx's rank error
recorded; ``TopK``'s bounds hold (count - error <= true count <= count) and ``mode`` is a most
frequent value (asserted), approx_top_k's largest count error recorded; the exact distinct
counts equal (asserted), the approximate ones' largest relative error recorded; both fits
equal the closed-form reference within 1e-6 relative on keys with at least 3 rows (asserted).

    cd /tmp && flock /tmp/skewgroup-heavy.lock python -m pytest \\
        /work/main/bench/bench_shipped_vs_spark.py --benchmark-only -s -p no:cacheprovider

Environment: SKEWGROUP_BENCH_SHIPPED_ROUNDS (2), _TASKS (kll,topk,distinct,lsq,all); the stream's
size and the workers are the grid's (SKEWGROUP_BENCH_AGGS_STREAM_ROWS, _STREAM_BATCHES,
_WORKERS).
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import pytest

pytest.importorskip("pyspark")
sys.path.insert(0, os.path.dirname(__file__))

import _aggregators_grid as grid  # noqa: E402  (the stream and its reference)
from _figures import AutoLog  # noqa: E402
from _rest import batch_stages  # noqa: E402


def _env(name, default):
    return os.environ.get(f"SKEWGROUP_BENCH_SHIPPED_{name}", default)


Z = 1.4
UNIVERSE = 100_000
ROUNDS = int(_env("ROUNDS", 2))
TASKS = tuple(_env("TASKS", "kll,topk,distinct,lsq,all").split(","))
WORKERS = grid.WORKERS
QUANTILES = grid.KLL_QUANTILES
TOP = 10
ITEM_SCALE = 100        # item = floor(x * ITEM_SCALE)
FIT_RTOL = 1e-6
UI_PORT = 4091


def project(df):
    """The columns every method reads: k, x, the item and the regressor."""
    from pyspark.sql import functions as F

    return df.select("k", "x", F.floor(F.col("x") * ITEM_SCALE).cast("long").alias("item"),
                     F.log("x").alias("f"))


def _shipped(task):
    """skew_group's aggregates of ``task``: (agg.aggregator, ...)."""
    from skewgroup.aggregators import DistinctCount, KllQuantiles, LeastSquares, TopK
    from skewgroup.spark import agg

    made = {"kll": lambda: agg.aggregator(KllQuantiles(QUANTILES), "x", name="q"),
            "topk": lambda: agg.aggregator(TopK(TOP, "bigint"), "item", name="top"),
            "distinct": lambda: agg.aggregator(DistinctCount("bigint"), "item", name="nd"),
            "lsq": lambda: agg.aggregator(LeastSquares(1, intercept=True), "x", "f",
                                          name="fit")}
    return [made[t]() for t in (("kll", "topk", "distinct", "lsq") if task == "all" else (task,))]


def _spark_columns():
    """{task: {method: [Spark aggregate Column, ...]}}, each result named as the checks read."""
    from pyspark.sql import functions as F

    ranks = F.array(*(F.lit(q) for q in QUANTILES))
    kll = [F.kll_sketch_get_quantile_double(F.kll_sketch_agg_double("x"), ranks).alias("q")]
    # approx_top_k is in Spark SQL, not in pyspark.sql.functions.
    top = [F.call_function("approx_top_k", F.col("item"), F.lit(TOP)).alias("top")]
    exact_distinct = [F.size(F.collect_set("item")).alias("nd")]
    fit = [F.array(F.regr_intercept("x", "f"), F.regr_slope("x", "f")).alias("fit")]
    return {
        "kll": {"kll_sketch_agg_double": kll,
                "percentile_approx": [F.percentile_approx("x", list(QUANTILES)).alias("q")]},
        "topk": {"approx_top_k": top, "mode": [F.mode("item").alias("mode")]},
        "distinct": {"size(collect_set)": exact_distinct,
                     "approx_count_distinct": [F.approx_count_distinct("item").alias("nd")],
                     "hll_sketch_agg": [F.hll_sketch_estimate(F.hll_sketch_agg("item"))
                                        .alias("nd")]},
        "lsq": {"regr_intercept+regr_slope": fit},
        "all": {"groupBy(kll_sketch, approx_top_k, size(collect_set), regr)":
                kll + top + exact_distinct + fit},
    }


def methods(task):
    return ["skew_group"] + list(_spark_columns()[task])


def query(spark, source, task, method, sample):
    from pyspark.sql import functions as F

    from skewgroup.spark import agg, skew_group

    if method == "skew_group":
        return source.transform(skew_group("k", agg.count().alias("n"), *_shipped(task),
                                           workers=WORKERS, plan="auto", sample=sample))
    return source.groupBy("k").agg(F.count("*").alias("n"), *_spark_columns()[task][method])


@pytest.fixture(scope="module")
def spark():
    from _session import aggregator_stream_session

    session = aggregator_stream_session(sys.modules[__name__], "skewgroup-bench-shipped",
                                        UI_PORT, WORKERS)
    yield session
    session.stop()


def _last_per_key(table):
    """The memory sink's rows in order of arrival: the last row of every key, by key."""
    keys = table.column("k").to_numpy()
    _, first = np.unique(keys[::-1], return_index=True)   # sorted keys, last arrivals
    return table.take(len(keys) - 1 - first)


def run(spark, directory, task, method):
    """(per micro-batch after the first: (seconds, critical s, total task s)), the last row
    per key as a pyarrow table)."""
    source = project(spark.readStream.schema(grid.SCHEMA).option("maxFilesPerTrigger", 1)
                     .parquet(str(directory / "input")))
    sample = project(grid.one_batch_sample(spark, directory, grid.SCHEMA))
    # Each method on the state store its user gets (skew_group sets RocksDB itself).
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", grid.HDFS)
    checkpoint = tempfile.mkdtemp(prefix="sg-bench-shipped-")
    name = f"shipped_{task}_{abs(hash(method))}"
    try:
        q = (query(spark, source, task, method, sample).writeStream.format("memory")
             .queryName(name).outputMode("update").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None, q.exception()
        progress = [json.loads(p.json) for p in q.recentProgress if p.numInputRows]
        assert len(progress) == grid.STREAM_BATCHES, (task, method, len(progress))
        stages = batch_stages(spark, q.runId)
        result = _last_per_key(spark.table(name).toArrow())
        spark.catalog.dropTempView(name)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    batches = []
    for p in progress[1:]:
        batch = stages[p["batchId"]]
        batches.append((p["durationMs"]["triggerExecution"] / 1000,
                        sum(s["max_task_s"] for s in batch), sum(s["total_s"] for s in batch)))
    return batches, result


# --- the reference and the checks -------------------------------------------------------------


class Reference:
    """Per key of the stream's every row: the count, the quantile ranks (the grid's
    reference), the exact count of every (key, item), the distinct items, the closed-form fit."""

    def __init__(self, directory):
        self.grid = grid.Reference(directory, ())
        with np.load(directory / "_data.npz") as data:
            keys, x = data["keys"], data["x"]
        self.keys, self.counts = self.grid.keys, self.grid.counts
        index = np.searchsorted(self.keys, keys)
        item = np.floor(x * ITEM_SCALE).astype(np.int64)
        self.span = int(item.max()) + 1
        self.pairs, self.pair_counts = np.unique(index * self.span + item, return_counts=True)
        pair_key = self.pairs // self.span
        self.distinct = np.bincount(pair_key, minlength=len(self.keys))
        self.top_count = np.maximum.reduceat(
            self.pair_counts, np.searchsorted(pair_key, np.arange(len(self.keys))))
        f = np.log(x)
        n = self.counts.astype(np.float64)
        sf, sx, sff, sfx = (np.bincount(index, weights=w, minlength=len(self.keys))
                            for w in (f, x, f * f, f * x))
        with np.errstate(invalid="ignore", divide="ignore"):   # a key of one row: no fit
            self.slope = (n * sfx - sf * sx) / (n * sff - sf * sf)
            self.intercept = (sx - self.slope * sf) / n
        self.fitted = self.counts >= 3

    def true_count(self, key_index, items):
        """The exact count of each (key index, item) pair, 0 where absent."""
        codes = np.asarray(key_index, np.int64) * self.span + np.asarray(items, np.int64)
        at = np.minimum(np.searchsorted(self.pairs, codes), len(self.pairs) - 1)
        return np.where(self.pairs[at] == codes, self.pair_counts[at], 0)

    def rank_errors(self, values):
        """Per key and quantile, how far (in rank) each value's rank interval is from q."""
        g = self.grid
        got = np.array(values, dtype=np.float64)
        base = (np.arange(len(self.keys), dtype=np.int64) * (g.rows + 1))[:, None]
        below = np.searchsorted(g.codes, base + np.searchsorted(g.all_x, got, "left"))
        upto = np.searchsorted(g.codes, base + np.searchsorted(g.all_x, got, "right"))
        n = self.counts[:, None].astype(np.float64)
        q = np.array(QUANTILES)[None, :]
        return np.maximum(0.0, np.maximum((below - g.starts[:, None]) / n - q,
                                          q - (upto - g.starts[:, None]) / n))


def check(reference, table, method):
    """The checks of one result (asserted where the method promises it); figures of them."""
    from skewgroup.aggregators import KllQuantiles

    keys = table.column("k").to_numpy()
    assert np.array_equal(keys, reference.keys), (method, "keys differ")
    counts = table.column("n").to_numpy()
    assert np.array_equal(counts, reference.counts), (method, "counts differ")
    out = {"counts": "equal"}
    names = table.column_names
    if "q" in names:
        error = reference.rank_errors(table.column("q").to_pylist())
        bound = KllQuantiles(QUANTILES).rank_error
        out["q_max_rank_error"] = round(float(error.max()), 5)
        if method != "percentile_approx":      # the KLL sketches: the grid's bound
            small = reference.counts <= KllQuantiles(QUANTILES).k
            assert (error[small] == 0).all(), (method, "a quantile of a small key not exact")
            assert error.max() <= 2 * bound, (method, float(error.max()), bound)
    if "top" in names:
        lists = table.column("top").to_pylist()
        index = np.repeat(np.arange(len(keys)), [len(v) for v in lists])
        items = np.array([e["item"] for v in lists for e in v], dtype=np.int64)
        claimed = np.array([e["count"] for v in lists for e in v], dtype=np.int64)
        true = reference.true_count(index, items)
        first = np.array([v[0]["item"] for v in lists], dtype=np.int64)
        first_true = reference.true_count(np.arange(len(keys)), first)
        out["top1_is_a_mode"] = round(float((first_true == reference.top_count).mean()), 4)
        out["top_max_count_error"] = int(np.abs(claimed - true).max())
        if method == "skew_group":
            errors = np.array([e["error"] for v in lists for e in v], dtype=np.int64)
            assert ((claimed - errors <= true) & (true <= claimed)).all(), "TopK bounds"
    if "mode" in names:
        mode = table.column("mode").to_numpy()
        assert (reference.true_count(np.arange(len(keys)), mode) == reference.top_count).all()
        out["mode"] = "a most frequent value"
    if "nd" in names:
        nd = table.column("nd").to_numpy()
        relative = np.abs(nd - reference.distinct) / reference.distinct
        out["nd_max_relative_error"] = round(float(relative.max()), 4)
        if method in ("skew_group", "size(collect_set)") or method.startswith("groupBy("):
            assert np.array_equal(nd, reference.distinct), (method, "distinct counts differ")
    if "fit" in names:
        fit = table.column("fit").to_pylist()
        ok = reference.fitted
        got = np.array([fit[i] for i in np.flatnonzero(ok)], dtype=np.float64)
        want = np.column_stack([reference.intercept[ok], reference.slope[ok]])
        # relative to the key's larger coefficient: an intercept near 0 has no relative error
        relative = np.abs(got - want) / np.abs(want).max(axis=1, keepdims=True)
        out["fit_max_relative_error"] = float(f"{relative.max():.2e}")
        assert relative.max() <= FIT_RTOL, (method, float(relative.max()))
    return out


# --- the benchmark ---------------------------------------------------------------------------


def _summary(rounds):
    """Per round: median micro-batch, min micro-batch, median critical, median total; then the
    minimum over rounds and the maximum."""
    per_round = np.array([[np.median([b[0] for b in r]), min(b[0] for b in r),
                           np.median([b[1] for b in r]), np.median([b[2] for b in r])]
                          for r in rounds])
    return [(round(float(lo), 3), round(float(hi), 3))
            for lo, hi in zip(per_round.min(axis=0), per_round.max(axis=0))]


def test_shipped_vs_spark(benchmark, figures, spark):
    directory = grid.stream_dataset(Z, UNIVERSE)
    reference = Reference(directory)
    runs = {(t, m): [] for t in TASKS for m in methods(t)}
    checks = {}
    log = AutoLog()

    def every_method():
        for _ in range(ROUNDS):     # interleaved: a slow minute hits every method
            for task, method in runs:
                log.current = task
                batches, result = run(spark, directory, task, method)
                runs[task, method].append(batches)
                checks[task, method] = check(reference, result, method)

    with log:
        benchmark.pedantic(every_method, rounds=1, iterations=1)
    print(f"\nz={Z} universe={UNIVERSE} rows/batch={grid.STREAM_ROWS} "
          f"batches={grid.STREAM_BATCHES} (first not measured) workers={WORKERS} "
          f"rounds={ROUNDS}: min (max) over rounds of each round's median")
    print("| task | method | micro-batch median s | micro-batch min s | critical path s | "
          "total task s | check |")
    print("|---|---|---:|---:|---:|---:|---|")
    for (task, method), rounds in runs.items():
        cells = " | ".join(f"{lo:.2f} ({hi:.2f})" for lo, hi in _summary(rounds))
        said = checks[task, method]
        print(f"| {task} | {method} | {cells} | "
              + ", ".join(f"{k} {v}" for k, v in said.items()) + " |")
        figures.add(what="shipped vs spark", z=Z, universe=UNIVERSE, rows=grid.STREAM_ROWS,
                    batches=grid.STREAM_BATCHES, workers=WORKERS, rounds=ROUNDS, task=task,
                    method=method, auto_said=log.said.get(task, "") if method == "skew_group"
                    else "", check=said,
                    per_round=[[[round(v, 3) for v in b] for b in r] for r in rounds])
    for task in TASKS:
        if log.said.get(task):
            print(f"auto ({task}): {log.said[task]}")
