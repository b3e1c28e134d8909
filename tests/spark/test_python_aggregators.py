"""Python aggregators (agg.aggregator) in skew_group: Spark's Aggregator protocol and Beam's
CombineFn, in every batch plan beside built-ins and custom aggregates, and in streams (update,
windowed append with a watermark, a restart with other workers), against a single-process
reference on the same rows; bad objects get one clear error."""
import datetime
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import _aggregators
import skewgroup
from _aggregators import SumCount
from skewgroup.aggregators import DistinctCount, KllQuantiles, LeastSquares, TopK
from skewgroup.spark import agg, skew_group

cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(_aggregators)

PLANS = ["local", "hash", "split", "routed", "spread", "auto"]


class MaxSpreadFn:
    """Beam's CombineFn protocol: max - min of a column, accumulators any Python object."""

    def create_accumulator(self):
        return None

    def add_input(self, accumulator, element):
        if element is None:
            return accumulator
        if accumulator is None:
            return (element, element)
        return (min(accumulator[0], element), max(accumulator[1], element))

    def merge_accumulators(self, accumulators):
        present = [a for a in accumulators if a is not None]
        if not present:
            return None
        return (min(a[0] for a in present), max(a[1] for a in present))

    def extract_output(self, accumulator):
        return None if accumulator is None else accumulator[1] - accumulator[0]


@pytest.fixture(scope="module")
def events():
    keys = skewgroup.streams.zipf(1.4, 6_000, universe=300, seed=3)
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"k": keys, "v": rng.integers(0, 40, keys.size),
                          "x": rng.normal(size=keys.size)})
    frame["y"] = 2.0 * frame["x"] + 1.0 + (frame["k"] % 3)
    frame.loc[rng.random(keys.size) < 0.05, "v"] = None
    frame["v"] = frame["v"].astype("Int64")
    return frame


@pytest.fixture(scope="module")
def df(spark, events):
    return spark.createDataFrame(events, "k long, v long, x double, y double").repartition(3)


def reference(events):
    """Per key: (sum, count) of v, max - min of x, distinct v, top-2 v and counts."""
    out = {}
    for k, group in events.groupby("k"):
        v = group["v"].dropna().astype(int)
        counts = v.value_counts()
        out[k] = {"sums": (int(v.sum()), int(v.size)), "rows": len(group),
                  "max": float(group["x"].max()),
                  "spread": float(group["x"].max() - group["x"].min()),
                  "distinct": int(v.nunique()),
                  "counts": counts.to_dict()}
    return out


@pytest.mark.parametrize("plan", PLANS)
def test_aggregators_beside_builtins_and_custom_in_every_plan(df, events, plan):
    custom_rows = agg.custom(partial=lambda rows, offsets: {"n": np.diff(offsets)},
                             merge={"n": "sum"}, schema="n long", vectorized=True)
    out = df.transform(skew_group(
        "k", agg.aggregator(SumCount(), "v"),
        agg.aggregator(MaxSpreadFn(), "x", output_type="double"),
        agg.aggregator(DistinctCount("bigint"), "v"), agg.aggregator(TopK(2, "bigint"), "v"),
        agg.count(), agg.max("x"), custom_rows, workers=5, plan=plan))
    assert out.columns == ["k", "SumCount(v)", "MaxSpreadFn(x)", "DistinctCount(v)", "TopK(v)",
                           "count(1)", "max(x)", "n"]
    assert out.schema["SumCount(v)"].dataType.simpleString() == "struct<total:bigint,n:bigint>"
    want = reference(events)
    rows = {r["k"]: r for r in out.collect()}
    assert rows.keys() == want.keys()
    sizes = events.groupby("k").size()
    for k, row in rows.items():
        assert tuple(row["SumCount(v)"]) == want[k]["sums"]
        assert row["MaxSpreadFn(x)"] == pytest.approx(want[k]["spread"], abs=1e-12)
        assert row["DistinctCount(v)"] == want[k]["distinct"]
        # TopK's capacity (20) exceeds the 40 values only where a key has few: the counts of
        # the items it names are exact within its error bound, never below the truth.
        for item in row["TopK(v)"]:
            truth = want[k]["counts"][item["item"]]
            assert truth <= item["count"] <= truth + item["error"]
        assert row["count(1)"] == row["n"] == sizes[k]


@pytest.mark.parametrize("plan", PLANS)
def test_aggregators_alone_merge_after_a_hash_repartition(df, events, plan):
    """Aggregators alone: no collect_list (Spark's map-side object aggregation), the partial
    rows hashed by key to one mapInArrow call per partition; the same results."""
    out = df.transform(skew_group("k", agg.aggregator(SumCount(), "v"),
                                  agg.aggregator(MaxSpreadFn(), "x", output_type="double"),
                                  workers=5, plan=plan))
    optimized = out._jdf.queryExecution().optimizedPlan().toString()
    assert "collect_list" not in optimized
    if plan == "hash":          # each key whole in its partition already: no second shuffle
        assert optimized.count("RepartitionByExpression") == 1
    want = reference(events)
    rows = {r["k"]: r for r in out.collect()}
    assert rows.keys() == want.keys()
    for k, row in rows.items():
        assert tuple(row["SumCount(v)"]) == want[k]["sums"]
        assert row["MaxSpreadFn(x)"] == pytest.approx(want[k]["spread"], abs=1e-12)


def test_aggregators_alone_on_float_keys_merge_as_groupby_does(spark):
    """-0.0 and 0.0 are one key to groupBy, every NaN another, though a hash repartition puts
    them apart: with float keys the buffers are collected by Spark's groupBy first."""
    frame = pd.DataFrame({"k": [0.0, -0.0, float("nan"), float("nan"), 1.5] * 40,
                          "v": np.arange(200, dtype=np.int64)})
    df = spark.createDataFrame(frame, "k double, v long").repartition(4)
    out = df.transform(skew_group("k", agg.aggregator(SumCount(), "v"), workers=3,
                                  plan="spread"))
    assert "collect_list" in out._jdf.queryExecution().optimizedPlan().toString()
    theirs = {(None if r["k"] != r["k"] else r["k"]): (r["t"], r["n"]) for r in
              df.groupBy("k").agg(F.sum("v").alias("t"), F.count("v").alias("n")).collect()}
    ours = {(None if r["k"] != r["k"] else r["k"]): tuple(r["SumCount(v)"])
            for r in out.collect()}
    assert len(ours) == 3 and ours == theirs


def test_quantiles_and_least_squares_against_numpy(df, events):
    out = df.transform(skew_group("k", agg.aggregator(KllQuantiles((0.5, 0.9)), "x"),
                                  agg.aggregator(LeastSquares(1, intercept=True), "y", "x"),
                                  workers=4, plan="routed"))
    kll = KllQuantiles((0.5, 0.9))
    for row in out.collect():
        x = events.loc[events["k"] == row["k"], "x"].to_numpy()
        y = events.loc[events["k"] == row["k"], "y"].to_numpy()
        ranks = [np.mean(x <= q) for q in row["KllQuantiles(x)"]]
        assert all(abs(r - p) <= kll.rank_error + 1 / len(x) for r, p in zip(ranks, (0.5, 0.9)))
        if len(x) >= 3 and np.ptp(x) > 0:
            slope, intercept = np.polyfit(x, y, 1)
            coefficients = row["LeastSquares(y, x)"]
            assert coefficients == pytest.approx([intercept, slope], rel=1e-6, abs=1e-9) or \
                coefficients == pytest.approx([slope, intercept], rel=1e-6, abs=1e-9)


def write_batches(spark, events, directory, batches):
    """``events`` as ``batches`` parquet files, one per micro-batch (maxFilesPerTrigger 1)."""
    import os

    for i, part in enumerate(np.array_split(np.arange(len(events)), batches)):
        path = directory / f"part-{i:03d}.parquet"
        events.iloc[part].to_parquet(path, index=False)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def run_stream(spark, directory, checkpoint, workers, aggregates, seen, **options):
    """One availableNow run; ``seen`` gets each key's latest row (foreachBatch on the driver:
    a memory sink cannot restart from a checkpoint)."""
    stream = (spark.readStream.schema("k long, v long, x double, y double")
              .option("maxFilesPerTrigger", 1).parquet(str(directory)))

    def keep(batch, batch_id):
        for row in batch.collect():
            seen[row["k"]] = row

    query = (stream.transform(skew_group("k", *aggregates, workers=workers, **options))
             .writeStream.outputMode("update").foreachBatch(keep)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return query


def test_stream_update_mode_and_restart_with_other_workers(spark, events, tmp_path):
    """Three micro-batches with 4 workers, then three more on the same checkpoint with 7: each
    key's last update equals the reference on all rows (the merge is keyed by key, its state by
    a fixed bucket of the key), the built-ins and a custom aggregate beside the aggregators
    included (one stateful merge holds them all)."""
    source = tmp_path / "in"
    source.mkdir()
    halves = np.array_split(np.arange(len(events)), 2)
    write_batches(spark, events.iloc[halves[0]], source, 3)
    spread = agg.custom(partial=lambda rows: {"hi": rows["x"].max(), "lo": rows["x"].min()},
                        merge={"hi": "max", "lo": "min"}, schema="hi double, lo double",
                        finish=lambda m: m["hi"] - m["lo"], name="spread")
    aggregates = [agg.aggregator(SumCount(), "v"), agg.count(), agg.sum("v"), agg.max("x"),
                  agg.aggregator(DistinctCount("bigint"), "v"), spread]
    rows = {}
    first = run_stream(spark, source, tmp_path / "ck", 4, aggregates, rows)
    assert len(first.recentProgress) >= 3
    import os

    for i, part in enumerate(np.array_split(halves[1], 3)):
        path = source / f"part-{3 + i:03d}.parquet"
        events.iloc[part].to_parquet(path, index=False)
        os.utime(path, (1_700_000_100 + i, 1_700_000_100 + i))
    second = run_stream(spark, source, tmp_path / "ck", 7, aggregates, rows)
    assert second.recentProgress[0]["batchId"] >= 3     # continued, not started over
    want = reference(events)
    assert rows.keys() == want.keys()
    for k, row in rows.items():
        assert tuple(row["SumCount(v)"]) == want[k]["sums"]
        assert row["DistinctCount(v)"] == want[k]["distinct"]
        assert row["sum(v)"] == (want[k]["sums"][0] if want[k]["sums"][1] else None)
        assert row["count(1)"] == want[k]["rows"]
        assert row["max(x)"] == want[k]["max"]
        assert row["spread"] == pytest.approx(want[k]["spread"])


def late_row_stream(spark, source):
    """Four files, one micro-batch each, of keys in one-minute windows under a one-minute
    watermark; the last file's row of window [0, 60) comes after that window closed."""
    import os

    start = datetime.datetime(2026, 1, 1)
    source.mkdir()
    batches = [                                    # (key, second, value)
        [(1, 5, 1), (1, 20, 2), (2, 30, 3), (1, 65, 4)],
        [(1, 70, 5), (2, 130, 6), (1, 10, 7)],     # (1, 10): window [0, 60) still open
        [(2, 400, 8), (1, 15, 9)],                 # watermark 70 s: [0, 60) takes 15, closes
        [(2, 800, 10), (1, 20, 11)],               # [0, 60) closed before: dropped
    ]
    for i, rows in enumerate(batches):
        rows = [(k, start + datetime.timedelta(seconds=s), v) for k, s, v in rows]
        path = source / f"part-{i}.parquet"
        schema = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us", "UTC")),
                            ("v", pa.int64())])
        pq.write_table(pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows],
                                            schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return (spark.readStream.schema("k long, ts timestamp, v long")
            .option("maxFilesPerTrigger", 1).parquet(str(source))
            .withWatermark("ts", "1 minute").withColumn("w", F.window("ts", "1 minute")))


def appended(df, name, checkpoint):
    query = (df.writeStream.outputMode("append").format("memory").queryName(name)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    return query


def test_windowed_append_with_a_watermark(spark, tmp_path):
    """Windows close when the watermark passes their end: each emitted once, equal to the
    batch result; a late row of a closed window is dropped, as groupBy's append drops it."""
    stream = late_row_stream(spark, tmp_path / "in")
    sums = agg.aggregator(SumCount(), "v")
    appended(stream.transform(skew_group(["w", "k"], sums, workers=3, output_mode="append")),
             "windows_ours", tmp_path / "ck1")
    appended(stream.groupBy("w", "k").agg(F.sum("v").alias("total"), F.count("v").alias("n")),
             "windows_theirs", tmp_path / "ck2")
    got = sorted((r["w"]["start"], r["k"], tuple(r["SumCount(v)"]))
                 for r in spark.table("windows_ours").collect())
    want = sorted((r["w"]["start"], r["k"], (r["total"], r["n"]))
                  for r in spark.table("windows_theirs").collect())
    assert got == want
    assert len(got) == len({(s, k) for s, k, _ in got}) >= 3


@pytest.mark.parametrize("plan,aggregator", [
    ("local", False), ("hash", False), ("routed", False), ("spread", False), ("auto", False),
    ("routed", True), ("spread", True), ("local", True)])
def test_windowed_append_of_builtins_and_custom_beside_or_without_an_aggregator(
        spark, tmp_path, plan, aggregator):
    """Built-ins and a custom aggregate in windowed append equal groupBy's, the late row
    dropped: merged by Spark's aggregation (the window key carries the watermark), or beside a
    Python aggregator in the stream's stateful Python merge."""
    stream = late_row_stream(spark, tmp_path / "in")
    custom = agg.custom(partial=lambda rows: {"s": int(rows["v"].sum()), "lo": rows["v"].min()},
                        merge={"s": "sum", "lo": "min"}, schema="s long, lo long",
                        finish=lambda m: m["s"] * 100 + m["lo"], name="c")
    aggregates = [agg.count(), agg.sum("v"), agg.max("v"), agg.mean("v"), custom]
    aggregates += [agg.aggregator(SumCount(), "v", name="sc")] if aggregator else []
    name = f"app_{plan}_{int(aggregator)}"
    appended(stream.transform(skew_group(["w", "k"], *aggregates, workers=3, plan=plan,
                                         output_mode="append")), name, tmp_path / "ck1")
    appended(stream.groupBy("w", "k").agg(
        F.count(F.lit(1)), F.sum("v"), F.max("v"), F.avg("v"),
        (F.sum("v") * 100 + F.min("v")).alias("c"), F.struct(F.sum("v"), F.count("v"))
        .alias("sc")), name + "_theirs", tmp_path / "ck2")
    columns = ["count(1)", "sum(v)", "max(v)", "avg(v)", "c"] + (["sc"] if aggregator else [])
    got = sorted((r["w"]["start"], r["k"], *[tuple(r[c]) if c == "sc" else r[c]
                                             for c in columns])
                 for r in spark.table(name).collect())
    want = sorted((r["w"]["start"], r["k"], *[tuple(r[c]) if c == "sc" else r[c]
                                              for c in columns])
                  for r in spark.table(name + "_theirs").collect())
    assert got == want
    # Window [0, 60) of key 1: four rows, its late fifth dropped.
    assert len(got) >= 3 and got[0][1:3] == (1, 4)


def two_micro_batches(tmp_path, schema, rows, split):
    """``rows`` as two parquet files under ``tmp_path / "in"``: ``rows[:split]`` the first
    micro-batch, the rest the second (maxFilesPerTrigger 1, files taken by modification time)."""
    import os

    source = tmp_path / "in"
    source.mkdir()
    for i, part in enumerate((rows[:split], rows[split:])):
        path = source / f"part-{i}.parquet"
        pq.write_table(pa.Table.from_pylist([dict(zip(schema.names, r)) for r in part],
                                            schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return source


def latest_rows(ours, tmp_path, key, rows=lambda batch: batch.collect()):
    """Each key's latest output row of the stream ``ours`` in update mode (a checkpoint under
    ``tmp_path``), keyed by ``key(row)``; ``rows`` reads a micro-batch's rows."""
    latest = {}

    def keep(batch, batch_id):
        for row in rows(batch):
            latest[key(row)] = tuple(row)

    query = (ours.writeStream.outputMode("update").foreachBatch(keep)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    query.processAllAvailable()
    query.stop()
    return latest


def test_stream_merge_keeps_numeric_keys_and_values_as_groupby(spark, tmp_path):
    """Beside an aggregator a stream's keys and built-ins cross pandas: a null long key and
    one above 2^53, a NaN, -0.0, 0.0 and null double key, a NaN value and a null one all come
    out as groupBy gives them, over two micro-batches."""
    big = (1 << 61) + 1      # thrice below 2^63: the aggregator's long sum of k fits
    rows = [(big, 1.0, 2.0), (None, -0.0, None), (big, 0.0, float("nan")),
            (7, float("nan"), 1.5), (None, None, 4.0), (7, float("nan"), None),
            (big, -0.0, 3.0), (None, None, None)]
    schema = pa.schema([("k", pa.int64()), ("d", pa.float64()), ("x", pa.float64())])
    source = two_micro_batches(tmp_path, schema, rows, 4)
    stream = spark.readStream.schema("k long, d double, x double").option(
        "maxFilesPerTrigger", 1).parquet(str(source))
    ours = stream.transform(skew_group(
        ["k", "d"], agg.count(), agg.sum("x"), agg.max("x"), agg.min("x"), agg.mean("x"),
        agg.aggregator(SumCount(), "k", name="sc"), workers=3, plan="routed"))
    latest = latest_rows(ours, tmp_path, lambda row: repr((row["k"], row["d"])))
    batch = spark.read.schema("k long, d double, x double").parquet(str(source))
    want = batch.groupBy("k", "d").agg(F.count(F.lit(1)), F.sum("x"), F.max("x"), F.min("x"),
                                       F.avg("x"), F.struct(F.coalesce(F.sum("k"), F.lit(0)),
                                                                 F.count("k")))
    expected = {repr((r[0], r[1])): tuple(r) for r in want.collect()}

    def canonical(row):
        return tuple("nan" if isinstance(v, float) and v != v else
                     tuple(v) if isinstance(v, tuple) else v for v in row)

    got = {k: canonical(v) for k, v in latest.items()}
    want = {k: canonical(v) for k, v in expected.items()}
    assert got == want, "\n".join(f"{k}: {got.get(k)} != {want.get(k)}" for k in
                                   sorted(set(got) | set(want)) if got.get(k) != want.get(k))


def test_bad_objects_and_modes_fail_with_one_clear_error(spark, df):
    class NoMerge:
        def zero(self):
            return (0,)

        def reduce(self, buffer, value):
            return buffer

        def finish(self, buffer):
            return 1

    with pytest.raises(TypeError, match=r"NoMerge.*merge"):
        agg.aggregator(NoMerge(), "v", output_type="bigint")
    with pytest.raises(TypeError, match="output_type"):
        agg.aggregator(MaxSpreadFn(), "x")

    class WrongBuffer(SumCount):
        def reduce(self, buffer, value):
            return [0, "oops"]

    with pytest.raises(PySparkException, match=r"WrongBuffer\(v\).*reduce.*bufferSchema"):
        df.transform(skew_group("k", agg.aggregator(WrongBuffer(), "v"), workers=2,
                                plan="routed")).collect()

    class WrongOutput(SumCount):
        def finish(self, buffer):
            return "not a struct"

    with pytest.raises(PySparkException, match=r"WrongOutput\(v\).*finish"):
        df.transform(skew_group("k", agg.aggregator(WrongOutput(), "v"), workers=2,
                                plan="hash")).collect()
    stream = spark.readStream.format("rate").load().withColumn("k", F.col("value") % 3)
    with pytest.raises(ValueError, match="complete"):
        skew_group("k", agg.aggregator(SumCount(), "value"), output_mode="complete")
    # Beside an aggregator on a stream every aggregate merges in Python: what cannot keep
    # Spark's semantics there is refused before the query, naming it and what to do.
    decimals = stream.withColumn("d", F.col("value").cast("decimal(10,2)"))
    with pytest.raises(TypeError, match=r"sum\(d\).*decimal\(10,2\).*own skew_group call"):
        decimals.transform(skew_group("k", agg.aggregator(SumCount(), "value"), agg.sum("d")))
    by_column = agg.custom(partial=lambda rows: {"s": 1.0}, merge={"s": F.sum},
                           schema="s double")
    with pytest.raises(TypeError, match=r"field 's' with a callable.*own skew_group call"):
        stream.transform(skew_group("k", agg.aggregator(SumCount(), "value"), by_column))
    with pytest.raises(ValueError, match="window"):
        stream.transform(skew_group("k", agg.aggregator(SumCount(), "value"),
                                    output_mode="append"))
    spark.conf.set("spark.skewgroup.keptRunsBytes", "lots")
    try:
        with pytest.raises(ValueError, match=r"spark.skewgroup.keptRunsBytes must be a whole "
                                             r"number of bytes, 0 or more.*got 'lots'"):
            stream.transform(skew_group("k", agg.aggregator(SumCount(), "value")))
    finally:
        spark.conf.unset("spark.skewgroup.keptRunsBytes")


class MaxFn:
    """Beam's CombineFn: a double's max in Spark's order (NaN above every number), None
    without a value."""

    def create_accumulator(self):
        return None

    def add_input(self, accumulator, element):
        if element is None:
            return accumulator
        if accumulator is None or element != element:
            return element
        return accumulator if accumulator != accumulator or accumulator >= element else element

    def merge_accumulators(self, accumulators):
        merged = None
        for accumulator in accumulators:
            merged = self.add_input(merged, accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


class LongSumFn(MaxFn):
    """Beam's CombineFn: a long's exact sum, None without a value."""

    def add_input(self, accumulator, element):
        if element is None:
            return accumulator
        return element if accumulator is None else accumulator + element


def test_an_aggregators_numeric_result_leaves_the_stream_merge_as_it_is(spark, tmp_path):
    """An aggregator's double result that is NaN, or null, and its long result above 2^53 or
    null come out of a stream's stateful merge as the aggregator gave them (pandas alone would
    make the NaN a null and the long a float), over two micro-batches."""
    big = (1 << 55) + 1
    rows = [(1, float("nan"), big), (2, None, None), (3, 1.5, 5), (1, 2.0, big),
            (2, None, None), (3, float("nan"), None), (4, -1.0, big)]
    schema = pa.schema([("k", pa.int64()), ("x", pa.float64()), ("v", pa.int64())])
    source = two_micro_batches(tmp_path, schema, rows, 3)
    stream = spark.readStream.schema("k long, x double, v long").option(
        "maxFilesPerTrigger", 1).parquet(str(source))
    ours = stream.transform(skew_group(
        "k", agg.aggregator(MaxFn(), "x", name="mx", output_type="double"),
        agg.aggregator(LongSumFn(), "v", name="sv", output_type="bigint"),
        workers=3, plan="routed"))
    latest = latest_rows(ours, tmp_path, lambda row: row["k"])
    batch = spark.read.schema("k long, x double, v long").parquet(str(source))
    expected = {r[0]: tuple(r) for r in batch.groupBy("k").agg(F.max("x"), F.sum("v")).collect()}

    def canonical(row):
        return tuple("nan" if isinstance(v, float) and v != v else v for v in row)

    assert {k: canonical(v) for k, v in latest.items()} == {
        k: canonical(v) for k, v in expected.items()}
    assert canonical(latest[1]) == (1, "nan", 2 * big) and latest[2] == (2, None, None)


class SeenFn(MaxFn):
    """Beam's CombineFn: the distinct longs of a key, sorted, a null among them as None."""

    def create_accumulator(self):
        return frozenset()

    def add_input(self, accumulator, element):
        return accumulator | {element}

    def merge_accumulators(self, accumulators):
        return frozenset().union(*accumulators)

    def extract_output(self, accumulator):
        return sorted(accumulator, key=lambda v: (v is not None, v or 0))


def test_rows_leave_the_stream_merge_unpacked_as_groupby_gives_them(spark, tmp_path):
    """Outputs of numbers, strings, binary and integer arrays leave the stateful stage as rows,
    not packed (``_stream_merge._crosses_pandas_exactly``): a null, empty and non-ASCII string
    key, a null and empty binary key, -0.0, NaN and null doubles, and an array holding a null
    come out as groupBy gives them, over two micro-batches. (Not -0.0 beside 0.0 in one key:
    which of the two a max keeps depends on the merge order, in Spark too.)"""
    from skewgroup.spark import _stream_merge
    from pyspark.sql import types as T

    assert _stream_merge._crosses_pandas_exactly(T.ArrayType(T.LongType()))
    assert not _stream_merge._crosses_pandas_exactly(T.ArrayType(T.DoubleType()))
    assert not _stream_merge._crosses_pandas_exactly(T.TimestampType())
    rows = [("a", b"x", -0.0, 1), (None, None, float("nan"), None), ("", b"", None, 2),
            ("é", b"x", 2.5, 1), ("a", b"x", None, None), (None, None, -1.0, 3),
            ("", b"", float("nan"), 2), ("é", b"y", None, None)]
    schema = pa.schema([("s", pa.string()), ("b", pa.binary()), ("x", pa.float64()),
                        ("v", pa.int64())])
    source = two_micro_batches(tmp_path, schema, rows, 4)
    ddl = "s string, b binary, x double, v long"
    stream = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(str(source))
    ours = stream.transform(skew_group(
        ["s", "b"], agg.count(), agg.min("x"), agg.max("x"),
        agg.aggregator(SeenFn(), "v", name="seen", output_type="array<bigint>"),
        workers=3, plan="routed"))
    latest = latest_rows(ours, tmp_path, lambda row: repr((row["s"], row["b"])))
    batch = spark.read.schema(ddl).parquet(str(source))
    want = batch.groupBy("s", "b").agg(F.count(F.lit(1)), F.min("x"), F.max("x"))
    seen = {}
    for s_, b_, _, v in rows:
        seen.setdefault(repr((s_, b_)), set()).add(v)

    def canonical(row):
        return tuple(("nan" if v != v else (v, str(v))) if isinstance(v, float) else
                     bytes(v) if isinstance(v, (bytes, bytearray)) else
                     tuple(v) if isinstance(v, list) else v for v in row)

    expected = {repr((r[0], None if r[1] is None else bytes(r[1]))):
                canonical((*r, sorted(seen[repr((r[0], None if r[1] is None else bytes(r[1])))],
                                      key=lambda v: (v is not None, v or 0))))
                for r in want.collect()}
    got = {key: canonical(v) for key, v in latest.items()}
    assert got == expected, "\n".join(f"{k}: {got.get(k)} != {expected.get(k)}" for k in
                                       sorted(set(got) | set(expected))
                                       if got.get(k) != expected.get(k))


def test_struct_keys_with_float_fields_group_as_groupby_in_the_stream_merge(spark, tmp_path):
    """A struct key's float fields beside an aggregator: NaN and a null field are two keys,
    -0.0 and 0.0 one, every NaN one, a null struct one more, as groupBy groups them, over two
    micro-batches."""
    rows = [(float("nan"), 1), (None, 2), (-0.0, 3), (0.0, 4), (float("nan"), 5),
            (None, 6), (1.5, 7), (-0.0, 8)]
    schema = pa.schema([("d", pa.float64()), ("v", pa.int64())])
    source = two_micro_batches(tmp_path, schema, rows, 4)

    def keyed(df):
        # v == 8 has a null struct: a fifth key.
        return df.withColumn("s", F.when(F.col("v") != 8, F.struct(F.col("d").alias("a"))))

    stream = keyed(spark.readStream.schema("d double, v long").option(
        "maxFilesPerTrigger", 1).parquet(str(source)))
    latest = {}
    ours = stream.transform(skew_group(
        "s", agg.count(), agg.aggregator(SumCount(), "v", name="sc"), workers=3, plan="routed"))

    def canonical(value):
        if value is None:
            return None
        a = value["a"]
        return ("nan" if a is not None and a != a else a,)

    def keep(batch, batch_id):
        for row in batch.collect():
            latest[canonical(row["s"])] = (row[1], tuple(row[2]))

    query = (ours.writeStream.outputMode("update").foreachBatch(keep)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    query.processAllAvailable()
    query.stop()
    batch = keyed(spark.read.schema("d double, v long").parquet(str(source)))
    expected = {canonical(r[0]): (r[1], tuple(r[2])) for r in batch.groupBy("s").agg(
        F.count(F.lit(1)), F.struct(F.sum("v"), F.count("v"))).collect()}
    assert latest == expected
    assert len(latest) == 5 and latest[("nan",)] == (2, (6, 2))


def test_min_max_of_timestamps_without_zone_order_as_groupby_in_the_stream_merge(
        spark, tmp_path):
    """min and max of a TIMESTAMP_NTZ beside an aggregator merge in time order, years before 0
    and after 9999 too (their strings do not sort as time does), over two micro-batches."""
    rows = [(1, -44), (1, -100), (2, 2020), (1, 12000), (2, 999), (2, None)]
    schema = pa.schema([("k", pa.int64()), ("y", pa.int64())])
    source = two_micro_batches(tmp_path, schema, rows, 3)

    def with_time(df):
        return df.withColumn("t", F.make_timestamp_ntz(F.col("y"), F.lit(3), F.lit(15),
                                                       F.lit(12), F.lit(30), F.lit(0)))

    stream = with_time(spark.readStream.schema("k long, y long").option(
        "maxFilesPerTrigger", 1).parquet(str(source)))
    ours = stream.transform(skew_group(
        "k", agg.min("t"), agg.max("t"), agg.aggregator(SumCount(), "y", name="sc"),
        workers=3, plan="routed"))
    latest = latest_rows(ours, tmp_path, lambda row: row[0], lambda batch: batch.select(
        "k", *[F.col(c).cast("string") for c in batch.columns[1:3]], "sc").collect())
    batch = with_time(spark.read.schema("k long, y long").parquet(str(source)))
    want = batch.groupBy("k").agg(F.min("t").cast("string"), F.max("t").cast("string"),
                                  F.struct(F.sum("y"), F.count("y")))
    assert latest == {r[0]: tuple(r) for r in want.collect()}
    assert latest[1][1].startswith("-0100") and latest[1][2].startswith("+12000")


def test_a_stream_merge_over_many_more_state_partitions_than_cores_says_what_to_set(
        spark, caplog):
    """Spark ships 200 shuffle partitions: the stateful merge would run 200 tasks a
    micro-batch, each at a fixed cost, on the session's cores. skew_group says so when the
    query is built, naming the conf and the value to set; at the cores it says nothing."""
    stream = spark.readStream.format("rate").load().withColumn("k", F.col("value") % 3)
    cores = spark.sparkContext.defaultParallelism
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        for partitions, warned in ((200, True), (cores, False)):
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
            caplog.clear()
            with caplog.at_level("WARNING", logger="skewgroup.spark"):
                stream.transform(skew_group("k", agg.aggregator(SumCount(), "value"),
                                            plan="local"))
            lines = [r.getMessage() for r in caplog.records
                     if r.name == "skewgroup.spark" and r.levelname == "WARNING"]
            if warned:
                assert len(lines) == 1, lines
                assert "spark.sql.shuffle.partitions is 200" in lines[0]
                assert f"'spark.sql.shuffle.partitions', {cores})" in lines[0]
            else:
                assert lines == []
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
