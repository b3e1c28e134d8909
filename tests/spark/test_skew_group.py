"""skew_group equals groupBy/agg on batch DataFrames; route() places rows exactly."""
import math
import sys
import time

import numpy as np
import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql import types as T

import skewgroup
from skewgroup.spark import agg, route, skew_group
from skewgroup.spark._placement import placement_values, spark_int_hash


def rows_equal(a, b):
    """Same rows regardless of order; floats compared to 1e-9 relative (summation order)."""
    def norm(row):
        return tuple(round(v, 6) if isinstance(v, float) and not math.isnan(v) else v for v in row)

    key = lambda r: tuple((x is None, str(x)) for x in r)  # noqa: E731
    a = sorted((norm(r) for r in a), key=key)
    b = sorted((norm(r) for r in b), key=key)
    return a == b


@pytest.fixture(scope="module")
def zipf_df(spark):
    rng = np.random.default_rng(5)
    keys = skewgroup.streams.zipf(1.4, 30_000, universe=2_000, seed=5)
    frame = pd.DataFrame({
        "k": keys,
        "s": [f"user-{k % 50}" for k in keys],
        "v": rng.integers(-50, 50, keys.size),
        "x": rng.normal(size=keys.size),
    })
    frame.loc[rng.random(keys.size) < 0.05, "v"] = None
    frame["v"] = frame["v"].astype("Int64")
    return spark.createDataFrame(frame, "k long, s string, v long, x double").repartition(3)


def builtins():
    return [
        (agg.count(), F.count(F.lit(1))),
        (agg.count("v"), F.count("v")),
        (agg.sum("v"), F.sum("v")),
        (agg.sum("x"), F.sum("x")),
        (agg.min("s"), F.min("s")),
        (agg.max("v"), F.max("v")),
        (agg.mean("x"), F.avg("x")),
        (agg.mean("v"), F.avg("v")),
        (agg.count_distinct("s"), F.count_distinct("s")),
    ]


@pytest.mark.parametrize("strategy", ["pdstream", "pkg", "kg", "sg"])
def test_equals_group_by_on_zipf(spark, zipf_df, strategy):
    pairs = builtins()
    ours = zipf_df.transform(skew_group("k", *(a for a, _ in pairs), workers=8, plan="routed",
                                        strategy=strategy))
    theirs = zipf_df.groupBy("k").agg(*(f for _, f in pairs))
    assert ours.schema.simpleString() == theirs.schema.simpleString()
    assert ours.columns == theirs.columns
    assert rows_equal(ours.collect(), theirs.collect())


def python_stages(df):
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    return (plan.count("MapInArrow") + plan.count("ArrowEvalPython")
            + plan.count("FlatMapGroupsInPandasWithState"))


def test_auto_plan_is_sparks_aggregation_for_builtins_and_routes_custom(spark, zipf_df):
    pairs = builtins()
    ours = zipf_df.transform(skew_group("k", *(a for a, _ in pairs), workers=8))
    theirs = zipf_df.groupBy("k").agg(*(f for _, f in pairs))
    assert python_stages(ours) == 0
    assert ours.schema.simpleString() == theirs.schema.simpleString()
    assert rows_equal(ours.collect(), theirs.collect())
    routed = zipf_df.transform(skew_group("k", agg.count(), workers=8, plan="routed"))
    assert python_stages(routed) == 1  # tag; the partials are Spark's, per worker partition
    square = agg.custom(partial=lambda rows: {"s": float((rows["x"] ** 2).sum())},
                        merge={"s": "sum"}, schema="s double")
    expected = zipf_df.groupBy("k").agg((F.sum(F.col("x") ** 2)).alias("s"),
                                        F.count(F.lit(1)).alias("count(1)")).collect()
    # routed: the tag (an Arrow UDF on the keys) and the partial; the others: the partial
    for plan, stages in (("routed", 2), ("local", 1), ("hash", 1), ("split", 1), ("spread", 1),
                         ("auto", None)):
        ours = zipf_df.transform(skew_group("k", square, agg.count(), workers=8, plan=plan))
        if stages is not None:
            assert python_stages(ours) == stages, plan
        assert rows_equal(ours.collect(), expected), plan


def test_multi_column_keys_and_null_keys(spark):
    frame = pd.DataFrame({"a": ["x", None, "x", None, "y"] * 200,
                          "b": [1, 2, 1, 2, None] * 200,
                          "v": np.arange(1000, dtype=float)})
    df = spark.createDataFrame(frame, "a string, b double, v double")
    ours = df.transform(skew_group(["a", "b"], agg.count(), agg.sum("v"), workers=5, plan="routed"))
    theirs = df.groupBy("a", "b").agg(F.count(F.lit(1)), F.sum("v"))
    assert rows_equal(ours.collect(), theirs.collect())
    assert ours.count() == 3


def test_decimal_and_int_types_follow_spark(spark):
    df = spark.createDataFrame([(1, 5, "1.50"), (1, 7, "2.25"), (2, None, None)],
                               "k int, i int, d string").withColumn("d", F.col("d").cast("decimal(10,2)"))
    ours = df.transform(skew_group("k", agg.sum("i"), agg.sum("d"), agg.max("d"), workers=3,
                                   plan="routed"))
    theirs = df.groupBy("k").agg(F.sum("i"), F.sum("d"), F.max("d"))
    assert ours.schema.simpleString() == theirs.schema.simpleString()
    assert rows_equal(ours.collect(), theirs.collect())


def test_custom_aggregate_and_aliases(spark, zipf_df):
    score = agg.custom(partial=lambda rows: {"score": float((rows["x"] ** 2).sum()),
                                             "n": int(len(rows))},
                       merge={"score": "sum", "n": "sum"}, schema="score double, n long")
    ours = zipf_df.transform(skew_group("k", score, agg.max("x").alias("top"), workers=6))
    theirs = zipf_df.groupBy("k").agg(F.sum(F.col("x") ** 2).alias("score"),
                                      F.count(F.lit(1)).alias("n"), F.max("x").alias("top"))
    assert ours.columns == ["k", "score", "n", "top"]
    assert rows_equal(ours.collect(), theirs.select("k", "score", "n", "top").collect())


def test_custom_with_finish(spark, zipf_df):
    mean_sq = agg.custom(partial=lambda rows: {"s": float((rows["x"] ** 2).sum()), "n": len(rows)},
                         merge={"s": "sum", "n": "sum"}, schema="s double, n long",
                         finish=lambda m: m["s"] / m["n"], name="mean_sq")
    ours = zipf_df.transform(skew_group("k", mean_sq, workers=4))
    theirs = zipf_df.groupBy("k").agg(F.avg(F.col("x") ** 2).alias("mean_sq"))
    assert rows_equal(ours.collect(), theirs.collect())


# The vectorized partials below are module-level functions, which Spark's Python workers cannot
# import from a test module: ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def squares(rows, offsets):
    """Vectorized partial: per group, the sum of x squared and the rows."""
    x = rows.column("x").to_numpy()
    return {"s": np.add.reduceat(x * x, offsets[:-1]), "n": np.diff(offsets)}


SQUARES = agg.custom(partial=squares, merge={"s": "sum", "n": "sum"}, schema="s double, n long",
                     vectorized=True)


@pytest.mark.parametrize("plan", ["routed", "local", "hash", "split", "spread", "auto"])
def test_vectorized_custom_and_distinct_count_in_every_plan(spark, zipf_df, plan):
    ours = zipf_df.transform(skew_group("k", SQUARES, agg.count_distinct("v"), workers=6,
                                        plan=plan))
    theirs = zipf_df.groupBy("k").agg(F.sum(F.col("x") ** 2).alias("s"),
                                      F.count(F.lit(1)).alias("n"), F.count_distinct("v"))
    assert ours.schema.simpleString() == theirs.schema.simpleString()
    assert rows_equal(ours.collect(), theirs.collect())


def test_hash_plan_with_custom_aggregates_alone_needs_no_merge(spark, zipf_df):
    # Every key in one partition and one partial row per key: the partial is the result, so
    # no shuffle of the partials (one Exchange: the repartition); the merge's types are kept.
    counted = agg.custom(partial=lambda rows, offsets: {"c": np.diff(offsets).astype(np.int32)},
                         merge={"c": "sum"}, schema="c int", vectorized=True)
    mean_sq = agg.custom(partial=squares, merge={"s": "sum", "n": "sum"},
                         schema="s double, n long", vectorized=True,
                         finish=lambda m: m["s"] / m["n"], name="mean_sq")
    theirs = zipf_df.groupBy("k").agg(F.sum(F.col("x") ** 2).alias("s"),
                                      F.count(F.lit(1)).alias("n"),
                                      F.count(F.lit(1)).alias("c"),
                                      F.avg(F.col("x") ** 2).alias("mean_sq"))
    ours = zipf_df.transform(skew_group("k", SQUARES, counted, mean_sq, workers=6, plan="hash"))
    plan = ours._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1, plan
    assert dict(ours.dtypes)["c"] == "bigint"                     # sum of an int, as merged
    got = {r["k"]: r for r in ours.collect()}
    want = {r["k"]: r for r in theirs.collect()}
    assert got.keys() == want.keys()
    for k, row in want.items():
        assert (got[k]["n"], got[k]["c"]) == (row["n"], row["c"])
        assert got[k]["s"] == pytest.approx(row["s"]) and \
            got[k]["mean_sq"] == pytest.approx(row["mean_sq"])
    # Float keys keep the merge: groupBy takes -0.0 and 0.0 as one key, repartition does not.
    floats = spark.createDataFrame([(0.0, 1.0), (-0.0, 2.0), (float("nan"), 3.0),
                                    (float("nan"), 4.0)] * 50, "k double, x double")
    merged = floats.transform(skew_group("k", SQUARES, workers=7, plan="hash"))
    assert merged.count() == floats.groupBy("k").count().count() == 2


def test_vectorized_partial_sees_each_key_once_per_partition(spark, zipf_df):
    def keys_seen(rows, offsets):
        keys = rows.column("k").to_numpy()[offsets[:-1]]
        # every group is one key, and no key is split over two groups of one call
        same = [bool((rows.column("k").to_numpy()[a:b] == k).all())
                for k, a, b in zip(keys, offsets[:-1], offsets[1:])]
        return {"groups": np.ones(len(keys), dtype=np.int64) * all(same)
                * (len(set(keys.tolist())) == len(keys))}

    seen = agg.custom(partial=keys_seen, merge={"groups": "min"}, schema="groups long",
                      vectorized=True)
    out = zipf_df.transform(skew_group("k", seen, workers=5, plan="routed")).collect()
    assert out and all(row["groups"] == 1 for row in out)


@pytest.mark.parametrize("result, words", [
    (lambda rows, offsets: [1.0], "must return a dict"),
    (lambda rows, offsets: {}, "no value for field 's'"),
    (lambda rows, offsets: {"s": np.zeros(len(offsets))}, "field 's' must hold one value per"),
    (lambda rows, offsets: {"s": ["a"] * (len(offsets) - 1)}, "field 's' must be of type double"),
    (lambda rows, offsets: {"s": np.zeros(len(offsets) - 1), "t": 1}, "field(s) ['t']"),
])
def test_vectorized_partial_bad_results_name_the_field(spark, zipf_df, result, words):
    bad = agg.custom(partial=result, merge={"s": "sum"}, schema="s double", vectorized=True)
    with pytest.raises(Exception) as error:
        zipf_df.transform(skew_group("k", bad, workers=3, plan="local")).collect()
    assert words in str(error.value)


def slow_squares(rows, offsets):
    """``squares`` at 25 µs a row more (a sleep: the same on a loaded machine)."""
    time.sleep(25e-6 * rows.num_rows)
    return squares(rows, offsets)


SLOW_SQUARES = agg.custom(partial=slow_squares, merge={"s": "sum", "n": "sum"},
                          schema="s double, n long", vectorized=True)


def test_auto_says_which_plan_and_why(spark, caplog):
    """auto times the partial: on a narrow input of skewed keys an expensive partial is dealt
    to the workers (spread) and a cheap one stays in the input tasks (local: spreading 40,000
    rows of a cheap partial saves less than the stage it adds); on a wide even input both stay."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"k": skewgroup.streams.zipf(2.0, 40_000, universe=1_000, seed=3),
                          "x": rng.normal(size=40_000)})
    df = spark.createDataFrame(frame, "k long, x double")
    expected = df.groupBy("k").agg(F.sum(F.col("x") ** 2).alias("s"),
                                   F.count(F.lit(1)).alias("n")).collect()
    cases = [("spread", SLOW_SQUARES, df.repartition(2)), ("local", SQUARES, df.repartition(2)),
             ("local", SLOW_SQUARES, df.repartition(64))]
    for plan, aggregate, shaped in cases:
        caplog.clear()
        with caplog.at_level("INFO", logger="skewgroup.spark"):
            ours = shaped.transform(skew_group("k", aggregate, workers=8))
        lines = [r.getMessage() for r in caplog.records if r.name == "skewgroup.spark"]
        assert len(lines) == 1 and lines[0].startswith(f"skew_group plan={plan}:"), lines
        assert "largest input partition" in lines[0] and "µs a row" in lines[0]
        assert rows_equal(ours.collect(), expected)


def test_auto_on_a_stream_times_the_partial_on_a_sample_or_says_what_it_assumed(
        spark, caplog, tmp_path):
    """On a stream auto cannot see the rows before the query starts: given sample= (a batch
    read of the stream's source) it samples and times the partial there, as in batch (an
    expensive partial over skewed keys in one file is dealt to the workers, a cheap one stays
    in the input task); without one it times the partial on rows made from the stream's schema
    and weighs it on a micro-batch in one input partition (the same two picks). The result
    equals groupBy's either way."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"k": skewgroup.streams.zipf(2.0, 40_000, universe=1_000, seed=5),
                          "x": rng.normal(size=40_000)})
    source = tmp_path / "in"
    source.mkdir()
    frame.to_parquet(source / "part-0.parquet", index=False)
    stream = spark.readStream.schema("k long, x double").parquet(str(source))
    batch = spark.read.schema("k long, x double").parquet(str(source))
    want = {r["k"]: (pytest.approx(r["s"]), r["n"]) for r in batch.groupBy("k").agg(
        F.sum(F.col("x") ** 2).alias("s"), F.count(F.lit(1)).alias("n")).collect()}
    for number, (plan, aggregate, sample) in enumerate([
            ("spread", SLOW_SQUARES, batch), ("local", SQUARES, batch),
            ("spread", SLOW_SQUARES, None), ("local", SQUARES, None)]):
        caplog.clear()
        with caplog.at_level("INFO", logger="skewgroup.spark"):
            ours = stream.transform(skew_group("k", aggregate, workers=8, sample=sample))
        lines = [r.getMessage() for r in caplog.records if r.name == "skewgroup.spark"
                 and "plan=" in r.getMessage()]
        assert len(lines) == 1 and lines[0].startswith(f"skew_group plan={plan}:"), lines
        if sample is None:
            assert "without sample=" in lines[0] and "rows made from the stream's schema" \
                in lines[0] and "µs a row" in lines[0]
        else:
            assert "from sample=" in lines[0] and "µs a row" in lines[0]
        name = f"auto_stream_{number}"
        query = (ours.writeStream.outputMode("update").format("memory").queryName(name)
                 .option("checkpointLocation", str(tmp_path / name))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        got = {r["k"]: (r["s"], r["n"]) for r in spark.table(name).collect()}
        assert got == want


def test_sample_is_checked_before_the_query(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    pd.DataFrame({"k": [1], "x": [1.0]}).to_parquet(source / "part-0.parquet", index=False)
    stream = spark.readStream.schema("k long, x double").parquet(str(source))
    batch = spark.read.schema("k long, x double").parquet(str(source))
    with pytest.raises(ValueError, match="read by plan='auto' only; got plan='routed'"):
        skew_group("k", SQUARES, plan="routed", sample=batch)
    with pytest.raises(TypeError, match="must be a pyspark DataFrame .* Got list"):
        stream.transform(skew_group("k", SQUARES, sample=[1]))
    with pytest.raises(ValueError, match="is for streams"):
        batch.transform(skew_group("k", SQUARES, sample=batch))
    with pytest.raises(ValueError, match="must be a batch DataFrame"):
        stream.transform(skew_group("k", SQUARES, sample=stream))
    with pytest.raises(ValueError, match=r"the stream's columns.*\('x', 'double'\).*Got"):
        stream.transform(skew_group("k", SQUARES, sample=batch.select("k")))


def test_split_plan_spreads_hot_keys_and_hashes_the_tail(spark):
    from skewgroup.spark import _plans

    keys = skewgroup.streams.zipf(2.0, 200_000, universe=1_000, seed=4)
    df = spark.createDataFrame(pd.DataFrame({"k": keys}), "k long").repartition(4)
    stats = _plans.sample(df, ["k"], 8)
    assert 1 <= len(stats.hot) <= 40 and stats.sampled > 2_000
    assert stats.total == pytest.approx(200_000, rel=0.05)     # the weights count all rows
    assert sum(stats.by_input.values()) == pytest.approx(stats.total)
    loads, slots = stats.split_slots()
    assert loads.max() < 1.1 / 8           # planned: every worker near its share
    assert loads.sum() == pytest.approx(1.0)
    placed = df.withColumn("w", _plans.split_worker(["k"], stats))
    rows = placed.groupBy("w").count().toPandas()["count"]
    assert len(rows) == 8 and rows.max() / rows.mean() < 1.1     # measured: balanced
    per_key = placed.groupBy("k").agg(F.count_distinct("w").alias("d")).toPandas()
    assert (per_key["d"] > 1).sum() <= len(stats.hot)           # only hot keys are split
    assert per_key.loc[per_key["k"] == 1, "d"].item() > 1        # the hottest key is


def test_work_is_spread_where_group_by_is_not(spark, zipf_df):
    placed = route(zipf_df, "k", workers=8, strategy="pdstream")
    counts = placed.groupBy(F.spark_partition_id().alias("p")).count().toPandas()["count"]
    assert counts.max() / counts.mean() < 1.05
    kg = route(zipf_df, "k", workers=8, strategy="kg")
    kg_counts = kg.groupBy(F.spark_partition_id().alias("p")).count().toPandas()["count"]
    assert kg_counts.max() / kg_counts.mean() > 1.5


def test_route_places_every_row_in_its_worker_partition(spark, zipf_df):
    placed = route(zipf_df, ["k", "s"], workers=7, strategy="pkg")
    assert placed.rdd.getNumPartitions() == 7
    check = placed.withColumn("p", F.spark_partition_id())
    assert check.filter(F.col("p") != F.col("worker")).count() == 0
    assert check.count() == zipf_df.count()
    assert set(placed.columns) == set(zipf_df.columns) | {"worker"}


def test_placement_values_match_spark_hash(spark):
    values = placement_values(37)
    df = spark.createDataFrame([(int(v),) for v in values], "v int")
    got = [r[0] for r in df.select(F.expr("pmod(hash(v), 37)")).collect()]
    assert got == list(range(37))
    assert [r[0] for r in df.select(F.hash("v")).collect()] == [spark_int_hash(v) for v in values]


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda df: skew_group("nope", agg.count())(df), ValueError, "'nope'"),
        (lambda df: skew_group("k", agg.sum("nope"))(df), ValueError, "'nope'"),
        (lambda df: skew_group("k", agg.sum("s"))(df), TypeError, "numeric"),
        (lambda df: skew_group("k", agg.count(), strategy="zzz")(df), ValueError, "'strategy'"),
        (lambda df: skew_group("k", agg.count(), workers=0)(df), ValueError, "'workers'"),
        (lambda df: skew_group("k")(df), ValueError, "at least one aggregate"),
        (lambda df: skew_group("k", "v")(df), TypeError, "Spark aggregate Column"),
        (lambda df: skew_group(["k", "k"], agg.count())(df), ValueError, "repeats"),
        (lambda df: skew_group("k", agg.count(), agg.count())(df), ValueError, "alias"),
        (lambda df: skew_group("arr", agg.count())(df.withColumn("arr", F.array("k"))),
         TypeError, "array"),
        (lambda df: route(df, "k", workers=-1), ValueError, "'workers'"),
        (lambda df: route(df, "nope"), ValueError, "'nope'"),
        (lambda df: skew_group("k", agg.count(), sources=0), ValueError, "'sources'"),
        (lambda df: skew_group("k", agg.count(), plan="fast"), ValueError, "'plan'"),
        (lambda df: skew_group("k", agg.count(), strategy="pkg", window=4), TypeError, "'window'"),
        (lambda df: skew_group("k", agg.min("m"))(df.withColumn("m", F.create_map("k", "v"))),
         TypeError, "orderable"),
        (lambda df: skew_group("k", agg.custom(partial=len, merge={"a": "sum"},
                                               schema="a double, b long"))(df),
         ValueError, "'b'"),
        (lambda df: skew_group("nope", agg.count())(
            df.sparkSession.readStream.format("rate").load()), ValueError, "'nope'"),
    ],
)
def test_bad_input_fails_before_the_query(zipf_df, make, error, words):
    with pytest.raises(error) as info:
        make(zipf_df)
    assert words in str(info.value)


def test_timestamp_key_without_an_explicit_session_time_zone(spark):
    """Arrow needs the session's zone for timestamp fields; a session that never set
    spark.sql.session.timeZone must still work (the module fixture sets it, so unset it here)."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.unset("spark.sql.session.timeZone")
    try:
        df = spark.sql("select id % 3 as k, cast(id as double) as v, "
                       "timestamp_seconds(id * 7) as ts from range(200)")
        ours = df.transform(skew_group(["ts", "k"], agg.sum("v"), agg.max("ts"), workers=3,
                                       plan="routed"))
        theirs = df.groupBy("ts", "k").agg(F.sum("v"), F.max("ts"))
        assert rows_equal(ours.collect(), theirs.collect())
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_custom_aggregate_on_a_window_key_with_null_keys(spark):
    # The custom partial groups in Arrow like the built-ins: a window (struct) key and null
    # keys are one group each, as in Spark's groupBy.
    import datetime

    start = datetime.datetime(2026, 1, 1)
    rows = [(i % 7 if i % 5 else None, float(i), start + datetime.timedelta(seconds=7 * i))
            for i in range(400)]
    df = (spark.createDataFrame(rows, "k long, x double, ts timestamp")
          .withColumn("w", F.window("ts", "1 minute")))
    score = agg.custom(partial=lambda r: {"s": float(r["x"].sum()), "n": len(r)},
                       merge={"s": "sum", "n": "sum"}, schema="s double, n long")
    ours = df.transform(skew_group(["w", "k"], score, workers=3))
    theirs = df.groupBy("w", "k").agg(F.sum("x").alias("s"), F.count(F.lit(1)).alias("n"))
    assert rows_equal(ours.collect(), theirs.collect())


def test_spread_deals_every_input_partition_evenly(spark):
    from skewgroup.spark._columns import internal
    from skewgroup.spark._placement import deal

    keys = skewgroup.streams.zipf(2.0, 30_001, universe=100, seed=6)
    df = spark.createDataFrame(pd.DataFrame({"k": keys}), "k long").repartition(3)
    names = internal(df.columns)
    dealt = deal(df, 7, names)
    per_partition = (dealt.select(F.spark_partition_id().alias("p"), names.worker)
                     .groupBy("p", names.worker).count().toPandas())
    assert (per_partition["p"] == per_partition[names.worker]).all()   # placed exactly
    rows = per_partition.groupby("p")["count"].sum()
    assert len(rows) == 7 and rows.max() - rows.min() <= 3             # within a row per input
    hottest = dealt.filter(F.col("k") == 1).select(names.worker).distinct().count()
    assert hottest == 7                                                 # the hot key everywhere
