"""skew_group equals groupBy where Arrow and Spark disagree: built-ins beside a custom aggregate
(NaN, overflow, decimals), null structs, column names Spark resolves, internal names.

Each test is one input a data engineer meets; ``ROWS_N`` (a vectorized row count) is the custom
aggregate that sends the built-ins beside it through the partial stage.
"""
import datetime
import decimal
import math
import sys

import numpy as np
import pytest
from pyspark import cloudpickle
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from skewgroup.spark import agg, skew_group

cloudpickle.register_pickle_by_value(sys.modules[__name__])

PLANS = ["local", "hash", "routed", "split", "spread", "auto"]


def row_count(rows, offsets):
    return {"n": np.diff(offsets)}


ROWS_N = agg.custom(partial=row_count, merge={"n": "sum"}, schema="n long", vectorized=True)


def normalized(rows):
    """Rows as sortable tuples; NaN equal to NaN, floats to 9 digits (summation order)."""
    def value(v):
        if isinstance(v, float):
            return ("nan",) if math.isnan(v) else ("f", round(v, 9))
        if isinstance(v, (list, tuple)):
            return tuple(value(x) for x in v)
        if hasattr(v, "asDict"):
            return tuple(value(x) for x in v)
        return v

    return sorted((tuple(value(v) for v in row) for row in rows), key=repr)


def fields(df):
    """A schema as (name, type, nullability) per column."""
    return [(f.name, f.dataType, f.nullable) for f in df.schema.fields]


def outcome(df):
    """(rows, None) or (None, Spark's error class) of collecting ``df``."""
    try:
        return normalized(df.collect()), None
    except PySparkException as error:
        return None, error.getCondition()


def same_as_group_by(df, keys, builtins, plan, workers=4, their_keys=None, **kwargs):
    """skew_group(keys, *builtins, ROWS_N) against groupBy(their_keys or keys).agg(*builtins'
    Spark forms, count(1) as n): equal rows, equal schema (names, types, nullability), or the
    same error."""
    ours = df.transform(skew_group(keys, *[a for a, _ in builtins], ROWS_N, workers=workers,
                                   plan=plan, **kwargs))
    keys = their_keys or keys
    key_list = [keys] if isinstance(keys, str) else keys
    # n: the custom aggregate's merge is a sum, nullable as any sum
    theirs = df.groupBy(*key_list).agg(*[f for _, f in builtins],
                                       F.sum(F.lit(1).cast("long")).alias("n"))
    assert fields(ours) == fields(theirs)
    assert outcome(ours) == outcome(theirs)


@pytest.fixture
def ansi(spark, request):
    """Run the test with spark.sql.ansi.enabled set to ``request.param``."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", str(request.param).lower())
    yield request.param
    spark.conf.set("spark.sql.ansi.enabled", before)


@pytest.mark.parametrize("plan", PLANS)
def test_max_and_min_of_doubles_order_nan_as_spark(spark, plan):
    df = spark.createDataFrame([(1, 1.0), (1, float("nan")), (2, -0.0), (2, 0.0), (3, None)],
                               "k int, x double")
    same_as_group_by(df, "k", [(agg.max("x"), F.max("x")), (agg.min("x"), F.min("x")),
                               (agg.sum("x"), F.sum("x"))], plan)


@pytest.mark.parametrize("ansi", [True, False], indirect=True)
@pytest.mark.parametrize("plan", PLANS)
def test_long_sum_overflow_as_spark(spark, ansi, plan):
    df = spark.createDataFrame([(1, 2 ** 62), (1, 2 ** 62), (2, 5)], "k int, v long")
    same_as_group_by(df, "k", [(agg.sum("v"), F.sum("v"))], plan)


@pytest.mark.parametrize("ansi", [True, False], indirect=True)
@pytest.mark.parametrize("plan", PLANS)
def test_decimal_sum_overflow_as_spark(spark, ansi, plan):
    big = decimal.Decimal("9" * 28 + ".5")
    df = spark.createDataFrame([(1, big)] * 30 + [(2, decimal.Decimal("1.25"))],
                               "k int, d decimal(38,10)")
    same_as_group_by(df, "k", [(agg.sum("d"), F.sum("d")), (agg.mean("d"), F.avg("d"))], plan)


@pytest.mark.parametrize("plan", PLANS)
def test_a_null_struct_key_and_a_struct_of_nulls_are_two_groups(spark, plan):
    df = spark.createDataFrame([(None, 1.0), ((None, None), 2.0), ((None, None), 3.0),
                                ((1, "a"), 4.0), (None, 5.0)],
                               "s struct<a:int,b:string>, x double")
    same_as_group_by(df, "s", [(agg.sum("x"), F.sum("x"))], plan)


@pytest.mark.parametrize("plan", PLANS)
def test_mean_of_large_longs(spark, plan):
    micros = 1_764_000_000_000_000   # epoch microseconds of late 2025: six pass 2^53
    df = spark.createDataFrame([(1, micros + i) for i in range(6)] + [(2, 3)], "k int, t long")
    same_as_group_by(df, "k", [(agg.mean("t"), F.avg("t")), (agg.sum("t"), F.sum("t"))], plan)


@pytest.mark.parametrize("plan", PLANS)
def test_dotted_columns_and_keys(spark, plan):
    df = spark.createDataFrame([(1, 2, 3.0), (1, 4, 5.0), (2, 6, 7.0)],
                               "k int, `a.b` int, `c.d` double")
    same_as_group_by(df, "k", [(agg.sum("`a.b`"), F.sum("`a.b`"))], plan)
    same_as_group_by(df, "`a.b`", [(agg.max("`c.d`"), F.max("`c.d`"))], plan)
    same_as_group_by(df, ["k", "`a.b`"], [(agg.count(), F.count(F.lit(1)))], plan)


@pytest.mark.parametrize("plan", PLANS)
def test_a_column_named_with_a_dot_or_a_space_unquoted(spark, plan):
    # "a.b" names the column whose own name has a dot (no struct a is there), as groupBy
    # would take its backquoted name; the result's columns are named as groupBy names them.
    df = spark.createDataFrame([(1, 2, 3.0), (1, 4, 5.0), (2, 6, 7.0)],
                               "k int, `a.b` int, `c d` double")
    same_as_group_by(df, "a.b", [(agg.max("c d"), F.max("`c d`")),
                                 (agg.sum("a.b"), F.sum("`a.b`"))], plan, their_keys="`a.b`")
    same_as_group_by(df, ["c d", "k"], [(agg.mean("a.b"), F.avg("`a.b`"))], plan)


@pytest.mark.parametrize("plan", PLANS)
def test_duplicate_column_names_after_a_join(spark, plan):
    left = spark.createDataFrame([(1, 10, 1.0), (1, 11, 2.0), (2, 12, 3.0)], "k int, id int, v double")
    right = spark.createDataFrame([(10, 5.0), (11, 6.0), (12, 7.0)], "id int, v double")
    df = left.join(right, left["id"] == right["id"]).select(left["k"], left["v"], right["v"])
    assert df.columns == ["k", "v", "v"]
    ours = df.transform(skew_group("k", ROWS_N, workers=3, plan=plan))
    assert normalized(ours.collect()) == [(1, 2), (2, 1)]


@pytest.mark.parametrize("merge", [lambda c: F.collect_list(c), "count"])
@pytest.mark.parametrize("plan", ["hash"])
def test_merges_that_change_the_partial_are_applied_in_the_hash_plan(spark, plan, merge):
    df = spark.range(400).select((F.col("id") % 40).alias("k"), F.col("id").cast("double").alias("x"))
    summed = agg.custom(partial=lambda rows: {"s": float(rows["x"].sum())}, merge={"s": merge},
                        schema="s double")
    got = {r["k"]: r["s"] for r in df.transform(skew_group("k", summed, workers=4, plan=plan))
           .collect()}
    sums = {r["k"]: r["s"] for r in df.groupBy("k").agg(F.sum("x").alias("s")).collect()}
    assert got.keys() == sums.keys()
    for k, s in sums.items():
        # one partial per (partition, key): a merge of one value in the hash plan
        assert got[k] == ([s] if callable(merge) else 1)


@pytest.mark.parametrize("name", ["__row", "__r0", "__sg_worker", "__sg_rows", "__k_k_0"])
@pytest.mark.parametrize("plan", PLANS)
def test_columns_named_like_internal_ones(spark, plan, name):
    df = spark.createDataFrame([(1, 2, 3.0), (1, 4, 5.0), (2, 6, 7.0)],
                               f"k int, `{name}` int, x double")
    same_as_group_by(df, "k", [(agg.sum(f"`{name}`"), F.sum(f"`{name}`"))], plan)
    same_as_group_by(df, f"`{name}`", [(agg.sum("x"), F.sum("x"))], plan)


@pytest.mark.parametrize("plan", PLANS)
def test_names_resolve_case_insensitively_as_spark(spark, plan):
    df = spark.createDataFrame([(1, 2, 3.0), (1, 4, 5.0), (2, 6, 7.0)], "k_int int, v int, x double")
    same_as_group_by(df, "K_INT", [(agg.sum("V"), F.sum("V")), (agg.count("X"), F.count("X"))],
                     plan)


@pytest.mark.parametrize("plan", PLANS)
def test_types_group_by_accepts(spark, plan):
    df = spark.sql("select id % 3 as k, cast(id / 7 as decimal(12, 3)) as d, "
                   "named_struct('a', id % 2, 'b', cast(id as string)) as s, "
                   "make_dt_interval(id % 4, 0, 0, 0) as dt, "
                   "make_ym_interval(0, cast(id % 5 as int)) as ym from range(60)")
    same_as_group_by(df, "k", [(agg.mean("d"), F.avg("d")), (agg.min("s"), F.min("s")),
                               (agg.max("s"), F.max("s"))], plan)
    same_as_group_by(df, "dt", [(agg.count(), F.count(F.lit(1))), (agg.max("dt"), F.max("dt"))],
                     plan)
    same_as_group_by(df, ["ym", "k"], [(agg.sum("k"), F.sum("k"))], plan)


def test_streams_match_group_by_schema_and_refuse_distinct(spark, tmp_path):
    stream = (spark.readStream.format("rate").option("rowsPerSecond", 10).load()
              .withColumn("k", F.col("value") % 3))
    ours = stream.transform(skew_group("k", agg.count(), agg.sum("value"), ROWS_N, workers=2))
    theirs = stream.groupBy("k").agg(F.count(F.lit(1)), F.sum("value"),
                                     F.sum(F.lit(1).cast("long")).alias("n"))
    assert fields(ours) == fields(theirs)
    for aggregates in ([agg.count_distinct("value")], [agg.count_distinct("value"), ROWS_N]):
        with pytest.raises(ValueError, match="count_distinct"):
            stream.transform(skew_group("k", *aggregates, workers=2))


def test_a_struct_key_with_a_null_struct_in_a_stream(spark, tmp_path):
    """The streaming merge groups the null struct apart from the struct of nulls too."""
    rows = [(None, 1.0), ((None, None), 2.0), ((1, "a"), 4.0), (None, 5.0)]
    source = tmp_path / "in"
    spark.createDataFrame(rows, "s struct<a:int,b:string>, x double").write.parquet(str(source))
    stream = spark.readStream.schema("s struct<a:int,b:string>, x double").parquet(str(source))
    query = (stream.transform(skew_group("s", agg.sum("x"), ROWS_N, workers=2))
             .writeStream.outputMode("complete").format("memory").queryName("struct_keys")
             .start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    got = normalized(spark.table("struct_keys").collect())
    assert got == normalized([(None, 6.0, 2), ((None, None), 2.0, 1), ((1, "a"), 4.0, 1)])


def test_timestamps_and_dates_beside_a_custom_aggregate(spark):
    start = datetime.datetime(2026, 1, 1)
    df = spark.createDataFrame([(i % 3, start + datetime.timedelta(hours=i),
                                 (start + datetime.timedelta(days=i)).date()) for i in range(30)],
                               "k int, ts timestamp, d date")
    same_as_group_by(df, "k", [(agg.min("ts"), F.min("ts")), (agg.max("d"), F.max("d"))],
                     "routed")
