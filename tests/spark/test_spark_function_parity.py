"""skewgroup._spark_functions against Spark itself: each key's rows cut into 2-3 partial groups,
reduced, merged, and the result compared with df.groupBy("k").agg(F.fn(...)) on the same rows."""
import math

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._spark_functions import make_reduction

from test_spark_functions import through_pandas_frame

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
    table = pa.table({"k": pa.array(k, pa.int32()), "x": pa.array(x, pa.float64()),
                      "i32": pa.array(i32, pa.int32()), "i64": pa.array(i64, pa.int64()),
                      "i8": pa.array(i8, pa.int8()), "flag": pa.array(flag, pa.bool_()),
                      "o": pa.array(order, pa.float64()), "s": pa.array(text, pa.string()),
                      "d": pa.array(few, pa.float64()), "w": pa.array(word, pa.string())})
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return table, offsets


def spark_frame(spark, table):
    schema = ("k int, x double, i32 int, i64 bigint, i8 tinyint, flag boolean, o double, "
              "s string, d double, w string")
    rows = list(zip(*[table.column(c).to_pylist() for c in table.column_names]))
    return spark.createDataFrame(rows, schema).repartition(3)


def spark_results(spark, table, exprs):
    """Spark's aggregates per key, ordered by key, as an Arrow table (its types Spark's)."""
    frame = spark_frame(spark, table)
    return frame.groupBy("k").agg(*[e.alias(name) for name, e in exprs]).orderBy("k").toArrow()


def same(a, b, rel=1e-9):
    if isinstance(a, list) and isinstance(b, list):   # sets, in no specified order: by repr,
        return sorted(map(repr, a)) == sorted(map(repr, b))   # so -0.0 and each NaN count
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
        bad = [(key, g, w) for key, (g, w) in enumerate(zip(got, spark_values)) if not same(g, w)]
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
