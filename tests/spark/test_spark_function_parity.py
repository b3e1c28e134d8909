"""skewgroup._aggregation.spark_functions against Spark itself: each key's rows cut into 2-3 partial groups,
reduced, merged, and the result compared with df.groupBy("k").agg(F.fn(...)) on the same rows."""
import math

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation.spark_functions import make_reduction

from _spark_functions import through_pandas_frame

F = pytest.importorskip("pyspark.sql.functions")

KEYS = 30


def split_merge(reduction, args, offsets, rng):
    """Each group cut into 2-3 parts (1 for a group of one row), reduced, merged, result."""
    cuts, parts = [], []
    for start, end in zip(offsets[:-1], offsets[1:]):
        k = int(min(rng.integers(2, 4), end - start))
        inner = sorted(rng.choice(np.arange(start + 1, end), k - 1, replace=False)) if k > 1 else []
        cuts += [start, *inner]
        parts.append(k)
    cuts.append(offsets[-1])
    state = reduction.reduce(args, np.array(cuts, dtype=np.int64))
    state = through_pandas_frame(state, reduction.state_types)
    merged = reduction.merge(state, np.concatenate([[0], np.cumsum(parts)]).astype(np.int64))
    result = reduction.result(merged)
    assert result.type == reduction.result_type
    return result


@pytest.fixture(scope="module")
def data():
    """Seeded rows of KEYS keys, grouped by key (offsets), as an Arrow table."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 40, KEYS)
    sizes[:3] = [1, 2, 3]
    n = int(sizes.sum())
    k = np.repeat(np.arange(KEYS), sizes)

    def nulls(values, p=0.2):
        return [None if rng.random() < p else v for v in values]

    x = nulls([float(v) for v in rng.normal(10, 5, n)])
    for i in rng.choice(n, 6, replace=False):
        x[i] = float("nan")
    x[sizes[0]:sizes[0] + 2] = [None, None]   # key 1: only nulls
    i32 = nulls([int(v) for v in rng.integers(-2 ** 31, 2 ** 31, n)])
    i64 = nulls([int(v) for v in rng.integers(-2 ** 62, 2 ** 62, n)])
    i8 = nulls([int(v) for v in rng.integers(-128, 128, n)])
    flag = nulls([bool(v) for v in rng.integers(0, 2, n)])
    # orderings without ties (Spark's choice among ties depends on its partitions' order)
    order = [float(v) for v in rng.permutation(n)]
    for i in rng.choice(n, 8, replace=False):
        order[i] = None
    text = nulls([f"s{v:03d}" for v in rng.permutation(n)])
    few = nulls([float(v) for v in rng.choice([1.5, -0.0, 0.0, float("nan"), 2.0, -1.0], n)])
    word = nulls([str(v) for v in rng.choice(["a", "", "é", "b"], n)])
    arrays = nulls([[int(v) for v in rng.integers(0, 9, rng.integers(0, 3))] for _ in range(n)])
    table = pa.table({"k": pa.array(k, pa.int32()), "x": pa.array(x, pa.float64()),
                      "i32": pa.array(i32, pa.int32()), "i64": pa.array(i64, pa.int64()),
                      "i8": pa.array(i8, pa.int8()), "flag": pa.array(flag, pa.bool_()),
                      "o": pa.array(order, pa.float64()), "s": pa.array(text, pa.string()),
                      "d": pa.array(few, pa.float64()), "w": pa.array(word, pa.string()),
                      "arr": pa.array(arrays, pa.list_(pa.field("element", pa.int64())))})
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return table, offsets


def spark_frame(spark, table):
    schema = ("k int, x double, i32 int, i64 bigint, i8 tinyint, flag boolean, o double, "
              "s string, d double, w string, arr array<bigint>")
    rows = list(zip(*[table.column(c).to_pylist() for c in table.column_names]))
    return spark.createDataFrame(rows, schema).repartition(3)


def spark_results(spark, table, exprs):
    """Spark's aggregates per key, ordered by key, as an Arrow table (its types Spark's)."""
    frame = spark_frame(spark, table)
    return frame.groupBy("k").agg(*[e.alias(name) for name, e in exprs]).orderBy("k").toArrow()


def same(a, b, as_set=False, rel=1e-9):
    if as_set:   # a set, in no specified order: by repr, so -0.0 and each NaN count
        return sorted(map(repr, a)) == sorted(map(repr, b))
    if isinstance(a, list) or isinstance(b, list):
        return repr(a) == repr(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)
    return a == b


# (result name, Spark function name, its argument columns, the Spark Column)
CASES = [
    ("stddev", "stddev", ["x"], lambda: F.stddev("x")),
    ("std", "std", ["x"], lambda: F.std("x")),
    ("stddev_samp", "stddev_samp", ["x"], lambda: F.stddev_samp("x")),
    ("stddev_pop", "stddev_pop", ["x"], lambda: F.stddev_pop("x")),
    ("variance", "variance", ["x"], lambda: F.variance("x")),
    ("var_samp", "var_samp", ["x"], lambda: F.var_samp("x")),
    ("var_pop", "var_pop", ["x"], lambda: F.var_pop("x")),
    ("skewness", "skewness", ["x"], lambda: F.skewness("x")),
    ("kurtosis", "kurtosis", ["x"], lambda: F.kurtosis("x")),
    ("count_if", "count_if", ["flag"], lambda: F.count_if("flag")),
    ("max_by_x", "max_by", ["x", "o"], lambda: F.max_by("x", "o")),
    ("min_by_x", "min_by", ["x", "o"], lambda: F.min_by("x", "o")),
    ("max_by_s", "max_by", ["s", "x"], lambda: F.max_by("s", "x")),
    ("min_by_i", "min_by", ["i64", "s"], lambda: F.min_by("i64", "s")),
    ("max_by_arr", "max_by", ["arr", "o"], lambda: F.max_by("arr", "o")),
    ("bit_and", "bit_and", ["i32"], lambda: F.bit_and("i32")),
    ("bit_or", "bit_or", ["i64"], lambda: F.bit_or("i64")),
    ("bit_xor", "bit_xor", ["i8"], lambda: F.bit_xor("i8")),
    ("sum", "sum", ["i32"], lambda: F.sum("i32")),
    ("avg", "avg", ["x"], lambda: F.avg("x")),
    ("max", "max", ["x"], lambda: F.max("x")),
    ("min_s", "min", ["s"], lambda: F.min("s")),
    ("count", "count", ["x"], lambda: F.count("x")),
    ("every", "every", ["flag"], lambda: F.every("flag")),
    ("some", "some", ["flag"], lambda: F.some("flag")),
    ("bool_or", "bool_or", ["flag"], lambda: F.bool_or("flag")),
    ("set_d", "collect_set", ["d"], lambda: F.collect_set("d")),
    ("set_w", "collect_set", ["w"], lambda: F.collect_set("w")),
    ("set_i8", "collect_set", ["i8"], lambda: F.collect_set("i8")),
    ("set_float", "collect_set", ["f"], lambda: F.collect_set(F.col("d").cast("float"))),
]


def test_functions_match_spark(spark, data):
    table, offsets = data
    want = spark_results(spark, table, [(name, make()) for name, _, _, make in CASES])
    assert want.column("k").to_pylist() == list(range(KEYS))
    rng = np.random.default_rng(12)
    table = table.append_column("f", table.column("d").cast(pa.float32()))
    for name, function, columns, _ in CASES:
        reduction = make_reduction(function, [table.schema.field(c).type for c in columns])
        assert reduction.result_type == want.schema.field(name).type, name
        got = split_merge(reduction, [table.column(c) for c in columns], offsets, rng).to_pylist()
        spark_values = want.column(name).to_pylist()
        bad = [(key, g, w) for key, (g, w) in enumerate(zip(got, spark_values))
               if not same(g, w, as_set=name.startswith("set_"))]
        assert not bad, (name, bad[:5])


# (name, Spark function, argument columns, params, the Spark Column): exact percentiles, over
# NaN, -0.0, nulls, a key of only nulls, longs past 2^53 and a frequency
PERCENTILES = [
    ("median_x", "median", ["x"], (), lambda: F.median("x")),
    ("median_d", "median", ["d"], (), lambda: F.median("d")),
    ("p_i64", "percentile", ["i64"], (0.3, 1), lambda: F.percentile("i64", 0.3)),
    ("p_x", "percentile", ["x"], (0.9, 2), lambda: F.percentile("x", 0.9, 2)),
    ("p_i8", "percentile", ["i8"], (0.0, 1), lambda: F.percentile("i8", 0.0)),
    ("p_i32", "percentile", ["i32"], (1.0, 1), lambda: F.percentile("i32", 1.0)),
    ("p_d", "percentile", ["d"], (0.45, 1), lambda: F.percentile("d", 0.45)),
]


def test_percentiles_match_spark_exactly(spark, data):
    table, offsets = data
    want = spark_results(spark, table, [(name, make()) for name, *_, make in PERCENTILES])
    rng = np.random.default_rng(13)
    for name, function, columns, params, _ in PERCENTILES:
        reduction = make_reduction(function, [table.schema.field(c).type for c in columns],
                                   params)
        assert reduction.result_type == want.schema.field(name).type, name
        got = split_merge(reduction, [table.column(c) for c in columns], offsets, rng).to_pylist()
        spark_values = want.column(name).to_pylist()
        bad = [(key, g, w) for key, (g, w) in enumerate(zip(got, spark_values))
               if not same(g, w, rel=0.0)]
        assert not bad, (name, bad[:5])


def test_extremum_by_ties_take_the_last_row_as_spark_does(spark):
    rows = [(1, "a", 1.0), (1, "b", 2.0), (1, "c", 2.0), (1, "d", 0.5),
            (2, "a", float("nan")), (2, "b", 3.0), (2, "c", float("nan")),
            (3, "a", 0.0), (3, "b", -0.0), (3, "c", None), (4, "a", None)]
    frame = spark.createDataFrame(rows, "k int, x string, o double").coalesce(1)
    want = frame.groupBy("k").agg(F.max_by("x", "o").alias("mx"),
                                  F.min_by("x", "o").alias("mn")).orderBy("k").collect()
    offsets = np.array([0, 4, 7, 10, 11])
    xs = pa.array([r[1] for r in rows])
    orders = pa.array([r[2] for r in rows], pa.float64())
    for function, column in (("max_by", "mx"), ("min_by", "mn")):
        reduction = make_reduction(function, [pa.string(), pa.float64()])
        got = reduction.result(reduction.reduce([xs, orders], offsets)).to_pylist()
        assert got == [r[column] for r in want], function
    # Spark's answers: ties take the later row, NaN is the largest, -0.0 ties with 0.0
    assert [r["mx"] for r in want] == ["c", "c", "b", None]


# --- DataSketches: my bytes read by Spark's own functions -------------------------------------

RANKS = (0.0, 0.1, 0.5, 0.9, 1.0)


def readers(kind, column):
    """Spark's functions that read a sketch of ``kind``: (name suffix, Column)."""
    col = F.col(column)
    if kind == "hll":
        return [("est", F.hll_sketch_estimate(col))]
    if kind == "theta":
        return [("est", F.theta_sketch_estimate(col))]
    item = kind.split("_")[1]
    n = getattr(F, f"kll_sketch_get_n_{item}")(col)
    quantile = getattr(F, f"kll_sketch_get_quantile_{item}")
    # an empty sketch has no quantile (Spark fails on it): null there
    return [("n", n)] + [(f"q{r}", F.when(n > 0, quantile(col, F.lit(r)))) for r in RANKS]


# (name, Spark function, argument columns, params, Spark Column, reader kind)
SKETCHES = [
    ("hll_i32", "hll_sketch_agg", ["i32"], (), lambda: F.hll_sketch_agg("i32"), "hll"),
    ("hll_i64", "hll_sketch_agg", ["i64"], (10,), lambda: F.hll_sketch_agg("i64", 10), "hll"),
    ("hll_w", "hll_sketch_agg", ["w"], (), lambda: F.hll_sketch_agg("w"), "hll"),
    ("hll_s", "hll_sketch_agg", ["s"], (), lambda: F.hll_sketch_agg("s"), "hll"),
    ("theta_i32", "theta_sketch_agg", ["i32"], (), lambda: F.theta_sketch_agg("i32"), "theta"),
    ("theta_d", "theta_sketch_agg", ["d"], (), lambda: F.theta_sketch_agg("d"), "theta"),
    ("theta_f", "theta_sketch_agg", ["f"], (), lambda: F.theta_sketch_agg(F.col("d").cast("float")), "theta"),
    ("theta_w", "theta_sketch_agg", ["w"], (8,), lambda: F.theta_sketch_agg("w", 8), "theta"),
    ("kll_i8", "kll_sketch_agg_bigint", ["i8"], (), lambda: F.kll_sketch_agg_bigint("i8"), "kll_bigint"),
    ("kll_i64", "kll_sketch_agg_bigint", ["i64"], (), lambda: F.kll_sketch_agg_bigint("i64"), "kll_bigint"),
    ("kll_f", "kll_sketch_agg_float", ["f"], (), lambda: F.kll_sketch_agg_float(F.col("d").cast("float")), "kll_float"),
    ("kll_x", "kll_sketch_agg_double", ["x"], (), lambda: F.kll_sketch_agg_double("x"), "kll_double"),
    ("kll_xf", "kll_sketch_agg_double", ["f"], (50,), lambda: F.kll_sketch_agg_double(F.col("d").cast("float"), 50), "kll_double"),
]

# the union aggregates over Spark's own sketches of (key, part) groups
UNIONS = [
    ("hll_union", "hll_union_agg", "hll_i64", (), lambda c: F.hll_union_agg(c), "hll"),
    ("theta_union", "theta_union_agg", "theta_i32", (), lambda c: F.theta_union_agg(c), "theta"),
    ("kll_merge_x", "kll_merge_agg_double", "kll_x", (), lambda c: F.kll_merge_agg_double(c), "kll_double"),
    ("kll_merge_i", "kll_merge_agg_bigint", "kll_i64", (), lambda c: F.kll_merge_agg_bigint(c), "kll_bigint"),
    ("kll_merge_f", "kll_merge_agg_float", "kll_f", (100,), lambda c: F.kll_merge_agg_float(c, 100), "kll_float"),
]


def read_both(spark, keys, mine, theirs, kinds):
    """Spark's readers over my sketches and over Spark's, per key: {name: (mine, Spark's)}."""
    names = list(mine)
    table = pa.table({"k": pa.array(keys, pa.int32()),
                      **{f"m_{n}": mine[n] for n in names},
                      **{f"s_{n}": theirs[n] for n in names}})
    frame = spark.createDataFrame(table.to_pandas())
    exprs = []
    for n in names:
        for who in ("m", "s"):
            exprs += [e.alias(f"{who}_{n}_{suffix}") for suffix, e in readers(kinds[n], f"{who}_{n}")]
    # a sketch's estimate is exact at small cardinality whatever its hash: the union of mine
    # with Spark's must count no more than Spark's alone, which it does only if each value
    # hashes as in Spark
    unions = {"hll": lambda a, b: F.hll_sketch_estimate(F.hll_union(a, b)),
              "theta": lambda a, b: F.theta_sketch_estimate(F.theta_union(a, b))}
    for n in names:
        if kinds[n] in unions:
            exprs.append(unions[kinds[n]](F.col(f"m_{n}"), F.col(f"s_{n}")).alias(f"u_{n}"))
    out = frame.select("k", *exprs).orderBy("k").toArrow()
    readings = {n: [(suffix, out.column(f"m_{n}_{suffix}").to_pylist(),
                     out.column(f"s_{n}_{suffix}").to_pylist())
                    for suffix, _ in readers(kinds[n], "x")] for n in names}
    for n in names:
        if kinds[n] in unions:
            readings[n].append(("union", out.column(f"u_{n}").to_pylist(),
                                out.column(f"s_{n}_est").to_pylist()))
    return readings


def test_sketches_read_back_as_spark_s(spark, data):
    table, offsets = data
    frame = spark_frame(spark, table)
    table = table.append_column("f", table.column("d").cast(pa.float32()))
    theirs = frame.groupBy("k").agg(*[make().alias(name) for name, _, _, _, make, _ in SKETCHES])
    # Spark's own sketches of each key's rows in 3 parts, for the union aggregates
    parts = frame.withColumn("part", F.pmod(F.hash("x", "s", "i32"), F.lit(3)))
    part_sketches = parts.groupBy("k", "part").agg(
        *[make().alias(name) for name, _, _, _, make, _ in SKETCHES
          if name in {u[2] for u in UNIONS}]).orderBy("k", "part")
    unions = part_sketches.groupBy("k").agg(*[make(F.col(source)).alias(name)
                                             for name, _, source, _, make, _ in UNIONS])
    spark_sketches = theirs.join(unions, "k").orderBy("k").toArrow()
    part_table = part_sketches.toArrow()
    part_offsets = np.concatenate([[0], np.cumsum(np.bincount(
        part_table.column("k").to_numpy(), minlength=KEYS))]).astype(np.int64)

    rng = np.random.default_rng(13)
    mine, kinds = {}, {}
    for name, function, columns, params, _, kind in SKETCHES:
        reduction = make_reduction(function, [table.schema.field(c).type for c in columns], params)
        mine[name] = split_merge(reduction, [table.column(c) for c in columns], offsets, rng)
        kinds[name] = kind
    for name, function, source, params, _, kind in UNIONS:
        reduction = make_reduction(function, [pa.binary()], params)
        mine[name] = split_merge(reduction, [part_table.column(source)], part_offsets, rng)
        kinds[name] = kind
    theirs = {n: spark_sketches.column(n) for n in mine}
    for name, readings in read_both(spark, list(range(KEYS)), mine, theirs, kinds).items():
        for suffix, got, want in readings:
            # every key here has at most 40 distinct values and rows: each sketch is exact
            assert [repr(v) for v in got] == [repr(v) for v in want], (name, suffix)
    assert table.column("x").slice(offsets[1], 2).null_count == 2
    assert mine["kll_x"][1] == theirs["kll_x"][1], "a group of nulls: Spark's empty sketch"


def test_a_group_of_nulls_gives_spark_s_empty_sketch_bytes(spark):
    frame = spark.createDataFrame([(1, None, None, None)], "k int, i bigint, d double, b binary")
    exprs = [("hll", "hll_sketch_agg", pa.int64(), F.hll_sketch_agg("i")),
             ("theta", "theta_sketch_agg", pa.float64(), F.theta_sketch_agg("d")),
             ("kll_i", "kll_sketch_agg_bigint", pa.int64(), F.kll_sketch_agg_bigint("i")),
             ("kll_d", "kll_sketch_agg_double", pa.float64(), F.kll_sketch_agg_double("d")),
             ("hll_u", "hll_union_agg", pa.binary(), F.hll_union_agg("b")),
             ("theta_u", "theta_union_agg", pa.binary(), F.theta_union_agg("b")),
             ("kll_m", "kll_merge_agg_double", pa.binary(), F.kll_merge_agg_double("b"))]
    want = frame.groupBy("k").agg(*[e.alias(n) for n, _, _, e in exprs]).collect()[0]
    for name, function, arrow_type, _ in exprs:
        reduction = make_reduction(function, [arrow_type])
        got = reduction.result(reduction.reduce([pa.nulls(1, arrow_type)], np.array([0, 1])))
        assert got.to_pylist() == [bytes(want[name])], name


def test_sketches_in_estimation_mode_stay_within_their_error(spark):
    rows = 20000
    frame = spark.range(rows).select(
        F.lit(1).alias("k"), (F.col("id") * 7919 % 100003).alias("v")).withColumn(
        "d", F.col("v") / 3.0).repartition(3)
    values = frame.toArrow()
    spark_row = frame.groupBy("k").agg(
        F.hll_sketch_agg("v").alias("hll"), F.theta_sketch_agg("v").alias("theta"),
        F.kll_sketch_agg_bigint("v").alias("kll_bigint"),
        F.kll_sketch_agg_double("d").alias("kll_double")).toArrow()
    distinct = len(set(values.column("v").to_pylist()))
    rng = np.random.default_rng(14)
    offsets = np.array([0, rows], dtype=np.int64)
    mine = {}
    for name, function, column in (("hll", "hll_sketch_agg", "v"),
                                   ("theta", "theta_sketch_agg", "v"),
                                   ("kll_bigint", "kll_sketch_agg_bigint", "v"),
                                   ("kll_double", "kll_sketch_agg_double", "d")):
        reduction = make_reduction(function, [values.schema.field(column).type])
        mine[name] = split_merge(reduction, [values.column(column)], offsets, rng)
    kinds = {n: n for n in mine}
    readings = read_both(spark, [1], mine, {n: spark_row.column(n) for n in mine}, kinds)
    # HLL_8 at lgConfigK 12 and theta at 4096 entries: a relative standard error under 1.7%
    for name in ("hll", "theta"):
        (_, [got], [want]), (_, [union], _) = readings[name]
        assert abs(union - distinct) <= 0.05 * distinct, (name, union, distinct)
        assert abs(got - distinct) <= 0.05 * distinct, (name, got, distinct)
        assert abs(want - distinct) <= 0.05 * distinct, (name, want, distinct)
    # KLL at k = 200: n exact, each quantile's rank within 4% (its normalized rank error is
    # 1.65% at 99% confidence)
    for name, column in (("kll_bigint", "v"), ("kll_double", "d")):
        data = np.sort(values.column(column).to_numpy())
        (_, [n], [spark_n]), *quantiles = readings[name]
        assert n == spark_n == rows
        for suffix, [got], _ in quantiles:
            rank = float(suffix[1:])
            low = np.searchsorted(data, got, "left") / rows
            high = np.searchsorted(data, got, "right") / rows
            assert low - 0.04 <= rank <= high + 0.04, (name, rank, got, low, high)
