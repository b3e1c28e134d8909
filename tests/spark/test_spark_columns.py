"""Spark's own aggregate Columns in skew_group, as groupBy().agg() takes them: alone (Spark's
groupBy), beside a Python aggregator in every batch plan (Spark's groupBy joined on the keys),
and on a stream beside a Python aggregator (merged in the stateful Python step with Spark's
semantics), each against groupBy on the same rows; what the stream cannot keep is refused
before the query, naming the function."""
import math
import sys

import numpy as np
import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F

import _aggregators
from _aggregators import RowCount
from skewgroup.aggregators import KllQuantiles
from skewgroup.spark import agg, skew_group

cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(_aggregators)

PLANS = ["local", "hash", "split", "routed", "spread", "auto"]
SCHEMA = "k int, x double, y int, b boolean, s string, `a.b` double"


def rows(seed, n=600):
    """Skewed keys (with nulls), doubles with nulls and NaN, ints whose order within a key is
    unique (max_by/min_by have no ties), booleans, strings."""
    rng = np.random.default_rng(seed)
    keys = rng.choice([1, 1, 1, 1, 2, 3, 4, 0], n).tolist()
    x = (rng.normal(size=n) * 10).tolist()
    unique = (rng.permutation(n) * 7 + seed).tolist()
    flags = (rng.random(n) < 0.6).tolist()
    texts = rng.choice(["a", "b", "c", "dd", ""], n).tolist()
    ab = rng.random(n).tolist()
    chance = rng.random((n, 4)).tolist()
    return [(None if keys[i] == 0 else keys[i],
             None if chance[i][0] < 0.1 else (math.nan if chance[i][0] < 0.15 else x[i]),
             None if chance[i][1] < 0.05 else unique[i],
             None if chance[i][2] < 0.1 else flags[i],
             None if chance[i][3] < 0.1 else texts[i], ab[i]) for i in range(n)]


# Spark's functions with results that do not depend on the order of the rows (max_by/min_by
# over unique orderings) (Columns need the session: a function).
def spark_columns():
    return [
        F.stddev("x"), F.var_pop("x"), F.variance("y"), F.avg("x"), F.sum("y"), F.min("s"),
        F.count(F.lit(1)), F.count("x"), F.count_if("b"), F.bool_or("b"), F.every("b"),
        F.bit_and("y"), F.bit_or("y"), F.bit_xor("y"), F.max_by("x", "y").alias("x at max y"),
        F.min_by("s", "y"), F.stddev(F.col("`a.b`")), F.skewness("x"),
    ]


def close(a, b):
    """Floats within a relative 1e-9 (NaN equal to NaN), lists as sorted lists, else equal."""
    if isinstance(b, float):
        return a is not None and (math.isnan(a) and math.isnan(b)
                                  or abs(a - b) <= 1e-9 * max(1.0, abs(b)))
    if isinstance(b, list):
        order = lambda v: (v is None, isinstance(v, float) and math.isnan(v), v)  # noqa: E731
        return len(a) == len(b) and all(close(x, y) for x, y in zip(sorted(a, key=order),
                                                                     sorted(b, key=order)))
    return a == b


def same(got, expected):
    """Rows by key, each value :func:`close` to groupBy's."""
    got, expected = {r[0]: r for r in got}, {r[0]: r for r in expected}
    assert got.keys() == expected.keys()
    for key, reference in expected.items():
        mine = got[key]
        assert mine.__fields__ == reference.__fields__
        for name, a, b in zip(reference.__fields__, mine, reference):
            assert close(a, b), (key, name, a, b)


@pytest.fixture(scope="module")
def df(spark):
    return spark.createDataFrame(rows(1), SCHEMA).repartition(3)


def test_spark_columns_alone_are_spark_groupby(df):
    # percentile_approx exact here (accuracy 10^4 above a key's rows): its merge order differs
    columns = [F.stddev("x"), F.percentile_approx("x", [0.5, 0.9], 10000).alias("p"),
               F.sum(F.col("x") + F.col("y")), F.collect_set("s")]
    ours = df.transform(skew_group("k", *columns))
    theirs = df.groupBy("k").agg(*columns)
    assert ours.schema == theirs.schema
    same(ours.collect(), theirs.collect())


@pytest.mark.parametrize("plan", PLANS)
def test_spark_columns_beside_an_aggregator_equal_groupby_in_every_plan(df, plan):
    columns = spark_columns() + [F.percentile_approx("x", 0.5, 10000), F.collect_set("s"),
                               F.sum(F.col("x") * F.col("y")).alias("xy")]
    ours = df.transform(skew_group("k", *columns, agg.aggregator(RowCount(), "x"),
                                   agg.sum("y").alias("sum y"), plan=plan, workers=4))
    theirs = df.groupBy("k").agg(*columns, F.count(F.lit(1)).alias("RowCount(x)"),
                                 F.sum("y").alias("sum y"))
    assert [(f.name, f.dataType) for f in ours.schema.fields] == \
        [(f.name, f.dataType) for f in theirs.schema.fields]
    same(ours.collect(), theirs.collect())


def test_a_batch_sketch_beside_an_aggregator_is_sparks_own(df):
    """The join runs Spark's own function: Spark's functions read its sketches as their own.
    The KLL sketch keeps every value (k above a key's rows): Spark's compaction is random."""
    ours = df.transform(skew_group(
        "k", F.hll_sketch_agg("y").alias("h"), F.kll_sketch_agg_double("x", 1000).alias("q"),
        agg.aggregator(KllQuantiles((0.5,)), "x")))
    ours = ours.select("k", F.hll_sketch_estimate("h").alias("h"),
                       F.kll_sketch_get_quantile_double("q", F.lit(0.5)).alias("q"))
    theirs = df.groupBy("k").agg(F.hll_sketch_estimate(F.hll_sketch_agg("y")).alias("h"),
                                 F.kll_sketch_get_quantile_double(
                                     F.kll_sketch_agg_double("x", 1000), F.lit(0.5)).alias("q"))
    same(ours.collect(), theirs.collect())


def write_stream(spark, tmp_path, batches=2):
    source = str(tmp_path / "in")
    for batch in range(batches):
        spark.createDataFrame(rows(10 + batch, 400), SCHEMA).coalesce(1).write.mode(
            "append").parquet(source)
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(source)
    return stream, spark.read.schema(SCHEMA).parquet(source)


def run_update(spark, result, tmp_path, name):
    """Each key's latest row of ``result`` run in update mode to the end of its files."""
    query = (result.writeStream.outputMode("update").format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / ("ck_" + name))).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return spark.table(name)


def test_spark_columns_beside_an_aggregator_on_a_stream_merge_as_groupby(spark, tmp_path):
    stream, batch = write_stream(spark, tmp_path)
    columns = spark_columns()
    ours = stream.transform(skew_group("k", *columns, agg.aggregator(RowCount(), "x"),
                                       workers=3, plan="routed"))
    theirs = batch.groupBy("k").agg(*columns, F.count(F.lit(1)).alias("RowCount(x)"))
    assert [(f.name, f.dataType) for f in ours.schema.fields] == \
        [(f.name, f.dataType) for f in theirs.schema.fields]
    got = run_update(spark, ours, tmp_path, "spark_columns_stream")
    # update mode: the latest micro-batch's row of each key holds its whole aggregate
    same(_latest(got), theirs.collect())


def _latest(table):
    """The rows of an update-mode memory sink, the last written row of each key (the sink
    appends each micro-batch's rows in order)."""
    latest = {}
    for row in table.collect():
        latest[row[0]] = row
    return list(latest.values())


def test_spark_columns_beside_a_custom_aggregate_on_a_stream_merge_as_groupby(spark, tmp_path):
    stream, batch = write_stream(spark, tmp_path)
    rows_n = agg.custom(partial=lambda rows, offsets: {"n": np.diff(offsets)},
                        merge={"n": "sum"}, schema="n long", vectorized=True)
    columns = [F.stddev("x"), F.bit_xor("y"), F.count_if("b")]
    ours = stream.transform(skew_group("k", *columns, rows_n, workers=2))
    got = run_update(spark, ours, tmp_path, "spark_columns_custom")
    theirs = batch.groupBy("k").agg(*columns, F.count(F.lit(1)).alias("n"))
    same(_latest(got), theirs.collect())


def test_spark_sketches_beside_an_aggregator_on_a_stream_read_as_sparks(spark, tmp_path):
    """The stateful step's sketches are the datasketches package's bytes, which Spark's own
    functions read: every estimate here is exact (fewer values a key than a sketch keeps whole),
    so each equals Spark's on its own sketch of the same rows."""
    stream, batch = write_stream(spark, tmp_path)
    sketches = [F.hll_sketch_agg("y").alias("h"), F.theta_sketch_agg("s").alias("t"),
                F.kll_sketch_agg_double("x", 1000).alias("q"),
                F.kll_sketch_agg_bigint("y", 1000).alias("b"),
                F.collect_set("s").alias("set")]
    ours = stream.transform(skew_group("k", *sketches, agg.aggregator(RowCount(), "x"),
                                       workers=3))
    got = run_update(spark, ours, tmp_path, "spark_sketches_stream")

    def read(df):
        return df.select(
            "k", F.hll_sketch_estimate("h").alias("h"), F.theta_sketch_estimate("t").alias("t"),
            F.kll_sketch_get_n_double("q").alias("n"),
            *[F.kll_sketch_get_quantile_double("q", F.lit(p)).alias(f"q{p}")
              for p in (0.0, 0.5, 1.0)],
            F.kll_sketch_get_quantile_bigint("b", F.lit(0.5)).alias("b"), "set")

    theirs = batch.groupBy("k").agg(*sketches)
    # the stream's groupBy types (a stream's collect_set may hold nulls, a file's may not)
    assert [(f.name, f.dataType) for f in ours.schema.fields][:6] == \
        [(f.name, f.dataType) for f in stream.groupBy("k").agg(*sketches).schema.fields]
    mine = spark.createDataFrame(_latest(got), got.schema)
    same(read(mine).collect(), read(theirs).collect())


# The shapes a groupBy().agg() moved into skew_group has: expressions inside an aggregate,
# scalar functions around one, arithmetic between two, and DISTINCT (Columns need the
# session: a function). Each sketch keeps every value (k above a key's rows), so its estimate
# is exact and does not depend on the merge order.
def shapes():
    x, y, b = F.col("x"), F.col("y"), F.col("b")
    return [
        F.count_if(x > 1.0), F.sum(F.when(b, y).otherwise(0)).alias("when"),
        F.sum(F.when(x > 0, 1)), F.avg(x * y), F.max_by("x", y + 1), F.min(F.length("s")),
        F.sum(y.cast("long") * 3000000000), F.stddev(x / 2),
        F.round(F.avg("x"), 2), F.coalesce(F.sum("x"), F.lit(0.0)).alias("c"),
        (F.sum("y") / F.count("x")).alias("ratio"), F.sum("x") + F.max("y") * 2,
        F.hll_sketch_estimate(F.hll_sketch_agg("y")),
        F.kll_sketch_get_quantile_double(F.kll_sketch_agg_double("x", 1000), F.lit(0.5)),
        F.count_distinct("y"), F.sum_distinct("y").alias("sd"), F.count_distinct("s"),
        F.expr("count(DISTINCT x)").alias("dx"), F.sum_distinct(x * 2),
        F.median("x"), F.percentile(y, 0.3).alias("p30"), F.percentile(x * 2, 0.9, 3),
    ]


@pytest.mark.parametrize("plan", ["local", "routed"])
def test_shapes_beside_an_aggregator_equal_groupby_in_batch(df, plan):
    ours = df.transform(skew_group("k", *shapes(), agg.aggregator(RowCount(), "x"), plan=plan,
                                   workers=3))
    theirs = df.groupBy("k").agg(*shapes(), F.count(F.lit(1)).alias("RowCount(x)"))
    assert [(f.name, f.dataType) for f in ours.schema.fields] == \
        [(f.name, f.dataType) for f in theirs.schema.fields]
    same(ours.collect(), theirs.collect())


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_shapes_beside_an_aggregator_on_a_stream_merge_as_groupby(spark, tmp_path, ansi):
    """Each expression inside an aggregate is a column before the partial; each aggregate
    merges in the stateful step; what is around them runs in Spark after the merge."""
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        stream, batch = write_stream(spark, tmp_path)
        ours = stream.transform(skew_group("k", *shapes(), agg.aggregator(RowCount(), "x"),
                                           workers=3, plan="routed"))
        theirs = batch.groupBy("k").agg(*shapes(), F.count(F.lit(1)).alias("RowCount(x)"))
        assert [(f.name, f.dataType) for f in ours.schema.fields] == \
            [(f.name, f.dataType) for f in theirs.schema.fields]
        got = run_update(spark, ours, tmp_path, f"spark_shapes_stream_{ansi}")
        same(_latest(got), theirs.collect())
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


def test_an_overflow_inside_an_aggregate_fails_as_groupby_under_ansi(spark, tmp_path):
    """The expression runs before the partial, with the session's ANSI mode: its overflow is
    groupBy's error."""
    stream, batch = write_stream(spark, tmp_path, batches=1)
    huge = F.sum(F.col("y").cast("long") * F.lit(2 ** 62))
    ours = stream.transform(skew_group("k", huge, agg.aggregator(RowCount(), "x")))
    with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):
        batch.groupBy("k").agg(huge).collect()
    with pytest.raises(Exception, match="ARITHMETIC_OVERFLOW"):
        run_update(spark, ours, tmp_path, "spark_shapes_overflow")


def test_a_column_is_read_as_its_calls_and_the_expression_around_them(spark):
    from skewgroup.spark._function_calls import read_aggregation
    frame = spark.createDataFrame([(1, 2.0, 3, True, "a")], SCHEMA.replace(", `a.b` double", ""))
    read = read_aggregation(frame, F.round(F.sum(F.when(F.col("s") == "a'b,)", F.col("x")))
                                           / F.count_distinct("y"), 2))
    assert [(c.function, c.input_texts, c.distinct) for c in read.calls] == [
        ("sum", ("CASE WHEN =(s, 'a\\'b,)') THEN x END",), False), ("count", ("y",), True)]
    assert read.around is not None
    one = read_aggregation(frame, F.percentile("x", 0.5))
    assert [(c.function, c.params) for c in one.calls] == [("percentile", (0.5, 1))]
    assert one.around is None


def test_names_no_identifier_spells_are_read_as_the_columns_they_are(spark, tmp_path):
    """Spark prints a column as its name, unquoted (``max_by(日付,  lead)``): a name that is
    no identifier (other letters, a space of its own) is read as that column, not as SQL."""
    from skewgroup.spark._function_calls import read_aggregation
    schema = "k int, `日付` int, ` lead` int"
    data = [(i % 3, i * 7 % 11, (i * 5) % 13 - 6) for i in range(40)]
    frame = spark.createDataFrame(data, schema)
    read = read_aggregation(frame, F.max_by("日付", " lead"))
    assert [(c.function, c.input_texts) for c in read.calls] == [
        ("max_by", ("`日付`", "` lead`"))]

    def columns():
        return [F.max_by("日付", F.col(" lead") * 13 + F.col("日付")).alias("m"),
                F.avg(F.col("日付") * 2), F.bit_xor(" lead"), F.count_if(F.col(" lead") > 0),
                F.sum("日付")]

    source = str(tmp_path / "in")
    for half in (data[:20], data[20:]):
        spark.createDataFrame(half, schema).coalesce(1).write.mode("append").parquet(source)
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
    ours = stream.transform(skew_group("k", *columns(), agg.aggregator(RowCount(), "k"),
                                       workers=2, plan="routed"))
    theirs = frame.groupBy("k").agg(*columns(), F.count(F.lit(1)).alias("RowCount(k)"))
    same(_latest(run_update(spark, ours, tmp_path, "spark_columns_names")), theirs.collect())


@pytest.mark.parametrize("column, says", [
    (lambda: F.percentile_approx("x", 0.5), "kll_sketch_agg_double"),
    (lambda: F.approx_count_distinct("y"), "hll_sketch_agg"),
    (lambda: F.percentile("x", [0.5, 0.9]), "its input is array<double>"),
    (lambda: F.count_distinct("x", "y"), "count(DISTINCT ...) of 2 columns"),
    (lambda: F.expr("sum(y) FILTER (WHERE b)"), "FILTER"),
    (lambda: F.max_by("y", F.collate("s", "UTF8_LCASE")), "UTF8_LCASE"),
], ids=["percentile_approx", "approx_count_distinct", "percentiles",
        "a distinct count of two columns", "a filter", "a collated string"])
def test_what_the_stream_cannot_keep_is_refused_before_the_query(spark, tmp_path, column, says):
    stream, _ = write_stream(spark, tmp_path, batches=1)
    with pytest.raises(ValueError, match="cannot run beside Python code on a stream") as error:
        stream.transform(skew_group("k", column(), agg.aggregator(RowCount(), "x")))
    assert says in str(error.value)


def test_a_column_groupby_refuses_is_refused_naming_it(df):
    with pytest.raises(TypeError, match=r"refused by Spark's groupBy too.*\bx\b"):
        df.transform(skew_group("k", F.col("x"), agg.aggregator(RowCount(), "x")))
    with pytest.raises(TypeError, match="Spark aggregate Column"):
        df.transform(skew_group("k", "x"))
