"""Spark's aggregate functions as Arrow reductions (skewgroup._aggregation.spark_functions), without Spark:
reduce over arbitrary partial groups, merge, result, against a direct computation."""
import functools
import math

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation.spark_functions import FUNCTIONS, UnsupportedFunction, make_reduction


def split_result(reduction, args, offsets, rng, through_pandas=True):
    """Each group cut into 1-3 non-empty parts, each part reduced, the parts' states merged per
    group (through pandas, as a stream's state crosses it), the result of each merged state."""
    cuts, parts = [], []
    for start, end in zip(offsets[:-1], offsets[1:]):
        k = int(rng.integers(1, min(3, end - start) + 1))
        inner = sorted(rng.choice(np.arange(start + 1, end), k - 1, replace=False)) if k > 1 else []
        cuts += [start, *inner]
        parts.append(k)
    cuts.append(offsets[-1])
    state = reduction.reduce(args, np.array(cuts, dtype=np.int64))
    check_state(reduction, state, len(cuts) - 1)
    if through_pandas:
        state = through_pandas_frame(state, reduction.state_types)
    merged = reduction.merge(state, np.concatenate([[0], np.cumsum(parts)]).astype(np.int64))
    check_state(reduction, merged, len(offsets) - 1)
    result = reduction.result(merged)
    assert result.type == reduction.result_type
    return result.to_pylist()


def through_pandas_frame(state, types):
    """The state columns after a trip through a pandas frame, read back as the stream's merge
    reads them (skewgroup.spark._stream_merge): numbers through numpy (a NaN stays a NaN)."""
    frame = pa.table({f"s{i}": s for i, s in enumerate(state)}).to_pandas()
    out = []
    for i, t in enumerate(types):
        column = frame[f"s{i}"]
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            out.append(pa.array(column.to_numpy(), t))
        else:
            out.append(pa.Array.from_pandas(column, type=t))
    return out


def check_state(reduction, state, rows):
    assert [s.type for s in state] == reduction.state_types
    for s in state:
        assert len(s) == rows
        if pa.types.is_integer(s.type) or pa.types.is_floating(s.type):
            assert s.null_count == 0, "a number state column must never hold a null"
        assert not pa.types.is_nested(s.type)
        assert not pa.types.is_temporal(s.type), "a date or time crosses pandas as its integer"


def groups_of(rng, n_groups, max_size=12):
    sizes = rng.integers(1, max_size + 1, n_groups)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def per_group(values, offsets):
    return [values[s:e] for s, e in zip(offsets[:-1], offsets[1:])]


def close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


# --- moments ----------------------------------------------------------------------------------

def moment_reference(function, values):
    x = np.array([v for v in values if v is not None], dtype=np.float64)
    n = len(x)
    if n == 0:
        return None
    if not np.isfinite(x).all():
        if function in ("stddev", "std", "stddev_samp", "variance", "var_samp") and n == 1:
            return None
        return math.nan
    mean = x.mean()
    d = x - mean
    m2, m3, m4 = (d ** 2).sum(), (d ** 3).sum(), (d ** 4).sum()
    if np.all(x == x[0]):
        m2 = m3 = m4 = 0.0
    if function in ("stddev_pop", "var_pop"):
        v = m2 / n
        return math.sqrt(v) if function == "stddev_pop" else v
    if function in ("skewness", "kurtosis"):
        if m2 == 0.0:
            return None
        return (math.sqrt(n) * m3 / m2 ** 1.5 if function == "skewness"
                else n * m4 / (m2 * m2) - 3.0)
    if n == 1:
        return None
    v = m2 / (n - 1)
    return math.sqrt(v) if function in ("stddev", "std", "stddev_samp") else v


MOMENTS = ["stddev", "std", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
           "skewness", "kurtosis"]


@pytest.mark.parametrize("function", MOMENTS)
def test_moments_match_a_direct_computation(function):
    rng = np.random.default_rng(1)
    offsets = groups_of(rng, 300)
    values = list(rng.normal(50, 20, offsets[-1]))
    for i in rng.choice(len(values), len(values) // 5, replace=False):
        values[i] = None
    # a group of nulls, a group of one value, a constant group, NaN and infinities
    special = [[None, None], [7.5], [0.1, 0.1, 0.1, 0.1], [1.0, float("nan"), 2.0],
               [float("inf"), 1.0], [float("inf")], [None, 3.0], [-0.0, 0.0]]
    for group in special:
        values += group
        offsets = np.append(offsets, offsets[-1] + len(group))
    reduction = make_reduction(function, [pa.float64()])
    assert reduction.result_type == pa.float64()
    got = split_result(reduction, [pa.array(values, pa.float64())], offsets, rng)
    want = [moment_reference(function, g) for g in per_group(values, offsets)]
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if not close(g, w)]
    assert not bad, bad[:5]
    # exact where Spark's is exact: a constant group's variance is 0.0, its skewness null
    assert got[-6] == (None if function in ("skewness", "kurtosis") else 0.0)


def test_moments_take_integers_as_doubles():
    reduction = make_reduction("var_samp", [pa.int32()])
    got = reduction.result(reduction.reduce([pa.array([1, 2, 3, None], pa.int32())],
                                            np.array([0, 4])))
    assert got.to_pylist() == [1.0]


# --- count_if, bitwise ------------------------------------------------------------------------

def test_count_if_counts_true_and_is_never_null():
    rng = np.random.default_rng(2)
    offsets = groups_of(rng, 200)
    values = [None if r < 0.2 else bool(r > 0.6) for r in rng.random(offsets[-1])]
    values += [None, None, False]
    offsets = np.append(offsets, [offsets[-1] + 2, offsets[-1] + 3])
    reduction = make_reduction("count_if", [pa.bool_()])
    got = split_result(reduction, [pa.array(values, pa.bool_())], offsets, rng)
    assert got == [sum(v is True for v in g) for g in per_group(values, offsets)]
    assert got[-2:] == [0, 0]


@pytest.mark.parametrize("function,op", [("bit_and", lambda a, b: a & b),
                                         ("bit_or", lambda a, b: a | b),
                                         ("bit_xor", lambda a, b: a ^ b)])
@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.int16(), pa.int32(), pa.int64()])
def test_bitwise_of_each_integer_type(function, op, arrow_type):
    rng = np.random.default_rng(3)
    offsets = groups_of(rng, 150)
    info = np.iinfo(arrow_type.to_pandas_dtype())
    values = [None if rng.random() < 0.25 else int(v)
              for v in rng.integers(info.min, info.max, offsets[-1], endpoint=True)]
    values += [None, None]
    offsets = np.append(offsets, offsets[-1] + 2)
    reduction = make_reduction(function, [arrow_type])
    assert reduction.result_type == arrow_type
    got = split_result(reduction, [pa.array(values, arrow_type)], offsets, rng)
    want = []
    for g in per_group(values, offsets):
        present = [v for v in g if v is not None]
        want.append(functools.reduce(op, present) if present else None)
    assert got == want
    assert got[-1] is None


# --- min_by, max_by ---------------------------------------------------------------------------

def spark_order_key(v):
    """Spark's ordering of a double: NaN above every number, -0.0 equal to 0.0."""
    if isinstance(v, float):
        return (1, 0.0) if math.isnan(v) else (0, v + 0.0)
    return v


def by_reference(largest, xs, ords):
    best, pick = None, None
    for x, o in zip(xs, ords):
        if o is None:
            continue
        k = spark_order_key(o)
        # Spark keeps the old value only when the old ord is strictly better: ties take the later
        if best is None or not (best > k if largest else best < k):
            best, pick = k, x
    return pick


ORD_CASES = {
    "double": (pa.float64(), lambda rng, n: [float(v) for v in rng.choice(
        [1.5, -0.0, 0.0, 2.0, float("nan"), -3.0, float("inf"), -float("inf")], n)]),
    "long": (pa.int64(), lambda rng, n: [int(v) for v in rng.integers(-5, 5, n)]),
    "string": (pa.string(), lambda rng, n: [str(v) for v in rng.choice(["a", "b", "ab", "é", ""], n)]),
    "binary": (pa.binary(), lambda rng, n: [bytes(v, "utf8") for v in rng.choice(["\x00", "a", "\xff"], n)]),
    "bool": (pa.bool_(), lambda rng, n: [bool(v) for v in rng.integers(0, 2, n)]),
    "date": (pa.date32(), lambda rng, n: [int(v) for v in rng.integers(0, 4, n)]),
    "timestamp": (pa.timestamp("us", tz="UTC"), lambda rng, n: [int(v) for v in rng.integers(-2, 2, n)]),
}


@pytest.mark.parametrize("function", ["max_by", "min_by"])
@pytest.mark.parametrize("ord_case", list(ORD_CASES))
def test_extremum_by_takes_the_last_tie_and_skips_null_ords(function, ord_case):
    rng = np.random.default_rng(4)
    offsets = groups_of(rng, 200)
    ord_type, draw = ORD_CASES[ord_case]
    n = int(offsets[-1])
    ords = [None if rng.random() < 0.2 else v for v in draw(rng, n)]
    xs = [None if rng.random() < 0.2 else i for i in range(n)]
    ords += [None, None]
    xs += [1, 2]
    offsets = np.append(offsets, offsets[-1] + 2)
    reduction = make_reduction(function, [pa.int64(), ord_type])
    assert reduction.result_type == pa.int64()
    got = split_result(reduction, [pa.array(xs, pa.int64()), pa.array(ords, ord_type)],
                       offsets, rng)
    raw = pa.array(ords, ord_type).to_pylist()
    ords_py = [None if o is None else (o if not isinstance(o, (bytes, str)) or ord_case != "binary" else o)
               for o in raw]
    if ord_case in ("date", "timestamp"):
        ords_py = [None if o is None else int(o) for o in ords]
    want = [by_reference(function == "max_by", x, o)
            for x, o in zip(per_group(xs, offsets), per_group(ords_py, offsets))]
    assert got == want
    assert got[-1] is None


@pytest.mark.parametrize("x_type,xs", [
    (pa.string(), ["a", None, "c", "d", "e", None]),
    (pa.float64(), [1.0, None, float("nan"), 2.0, -0.0, 3.0]),
    (pa.bool_(), [True, None, False, True, None, False]),
    (pa.decimal128(10, 2), [None, 1, 2, 3, 4, 5]),
    (pa.timestamp("us", tz="UTC"), [1, 2, None, 4, 5, 6]),
    (pa.binary(), [b"a", b"", None, b"\xff", b"x", None]),
    (pa.list_(pa.int64()), [[1], None, [], [2, None], [3], None]),
    (pa.struct([("a", pa.float64()), ("b", pa.string())]),
     [{"a": 1.0, "b": "x"}, None, {"a": float("nan"), "b": None}, None, {"a": None, "b": "y"},
      {"a": 2.0, "b": "z"}]),
    (pa.map_(pa.string(), pa.int32()), [[("a", 1)], None, [], [("b", 2)], None, [("c", 3)]])])
def test_extremum_by_carries_each_value_type(x_type, xs):
    rng = np.random.default_rng(5)
    ords = [3, 1, 3, None, 2, 2]
    offsets = np.array([0, 3, 6])
    array = pa.array(xs if not pa.types.is_decimal(x_type) else
                     [None if v is None else __import__("decimal").Decimal(v) for v in xs], x_type)
    for function in ("max_by", "min_by"):
        reduction = make_reduction(function, [x_type, pa.int32()])
        got = split_result(reduction, [array, pa.array(ords, pa.int32())], offsets, rng)
        py = array.to_pylist()
        want = [by_reference(function == "max_by", py[s:e], ords[s:e])
                for s, e in zip(offsets[:-1], offsets[1:])]
        assert [repr(v) for v in got] == [repr(v) for v in want]


# --- the wrapped built-ins --------------------------------------------------------------------

def test_builtins_wrap_reduction():
    rng = np.random.default_rng(6)
    offsets = groups_of(rng, 100)
    values = [None if rng.random() < 0.3 else int(v) for v in rng.integers(-100, 100, offsets[-1])]
    array = pa.array(values, pa.int32())
    groups = per_group(values, offsets)
    present = [[v for v in g if v is not None] for g in groups]
    assert split_result(make_reduction("sum", [pa.int32()]), [array], offsets, rng) == [
        sum(p) if p else None for p in present]
    for alias in ("avg", "mean"):
        got = split_result(make_reduction(alias, [pa.int32()]), [array], offsets, rng)
        assert all(close(g, sum(p) / len(p) if p else None) for g, p in zip(got, present))
    assert split_result(make_reduction("max", [pa.int32()]), [array], offsets, rng) == [
        max(p) if p else None for p in present]
    assert split_result(make_reduction("count", [pa.int32()]), [array], offsets, rng) == [
        len(p) for p in present]
    flags = pa.array([None if v is None else v > 0 for v in values], pa.bool_())
    for alias, fn in (("every", all), ("bool_and", all), ("some", any), ("any", any),
                      ("bool_or", any)):
        got = split_result(make_reduction(alias, [pa.bool_()]), [flags], offsets, rng)
        assert got == [fn(v > 0 for v in p) if p else None for p in present]


def test_count_of_several_columns_counts_rows_without_nulls():
    reduction = make_reduction("count", [pa.int64(), pa.string()])
    state = reduction.reduce([pa.array([1, None, 3, 4]), pa.array(["a", "b", None, "d"])],
                             np.array([0, 2, 4]))
    assert reduction.result(state).to_pylist() == [1, 1]


def test_sum_overflow_fails_under_ansi_and_wraps_otherwise():
    big = pa.array([2 ** 62, 2 ** 62], pa.int64())
    with pytest.raises(ArithmeticError, match="ARITHMETIC_OVERFLOW"):
        make_reduction("sum", [pa.int64()]).reduce([big], np.array([0, 2]))
    wrapping = make_reduction("sum", [pa.int64()], ansi=False)
    assert wrapping.result(wrapping.reduce([big], np.array([0, 2]))).to_pylist() == [-2 ** 63]


# --- refusals and the interface ---------------------------------------------------------------

@pytest.mark.parametrize("function,arg_types,params,match", [
    ("mode", [pa.float64()], (), "no Python reduction"),
    ("median", [pa.string()], (), "integers, floats and doubles"),
    ("percentile", [pa.float64()], ([0.5, 0.9], 1), "one literal percentage"),
    ("percentile", [pa.float64()], (0.5, 0), "frequency"),
    ("percentile", [pa.float64(), pa.int64()], (0.5,), "frequency column"),
    ("stddev", [pa.string()], (), "number"),
    ("count_if", [pa.int32()], (), "boolean"),
    ("bit_and", [pa.float64()], (), "byte, short, int or long"),
    ("max_by", [pa.null(), pa.int64()], (), "cannot be kept"),
    ("min_by", [pa.int64(), pa.list_(pa.int64())], (), "ordering argument"),
    ("sum", [pa.string()], (), "Spark's semantics"),
    ("sum", [pa.decimal128(10, 2)], (), "Spark's semantics"),
    ("max_by", [pa.int64()], (), "2 column argument"),
    ("stddev", [pa.float64()], (3,), "literal parameter"),
])
def test_refusals_say_why(function, arg_types, params, match):
    with pytest.raises(UnsupportedFunction, match=match):
        make_reduction(function, arg_types, params)
    assert issubclass(UnsupportedFunction, TypeError)


def test_interface():
    reduction = make_reduction("STDDEV_POP", [pa.float64()], name="sd")
    assert (reduction.kind, reduction.name) == ("stddev_pop", "sd")
    assert make_reduction("max_by", [pa.string(), pa.int64()]).name == "max_by"
    for function in ("stddev", "count_if", "max_by", "bit_or", "every", "avg"):
        assert function in FUNCTIONS


# --- collect_set ------------------------------------------------------------------------------

def set_key(v):
    """A comparable stand-in of a value (NaN as one value, -0.0 as 0.0), as Spark's set has."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else ("num", v + 0.0)
    return ("v", v)


SET_CASES = {
    "double": (pa.float64(), lambda rng, n: [float(v) for v in rng.choice(
        [1.5, -0.0, 0.0, float("nan"), -3.0, float("inf"), 2.0 ** 60], n)]),
    "float": (pa.float32(), lambda rng, n: [float(v) for v in rng.choice(
        [1.5, -0.0, 0.0, float("nan"), -3.0], n)]),
    "int": (pa.int32(), lambda rng, n: [int(v) for v in rng.integers(-4, 4, n)]),
    "long": (pa.int64(), lambda rng, n: [int(v) for v in rng.integers(-2 ** 63, 2 ** 63 - 1, n) % 7 - 3]),
    "string": (pa.string(), lambda rng, n: [str(v) for v in rng.choice(["a", "", "é", "ab", "b"], n)]),
    "binary": (pa.binary(), lambda rng, n: [bytes(v, "latin1") for v in rng.choice(["\x00", "", "\xff"], n)]),
    "bool": (pa.bool_(), lambda rng, n: [bool(v) for v in rng.integers(0, 2, n)]),
    "date": (pa.date32(), lambda rng, n: [int(v) for v in rng.integers(-3, 3, n)]),
    "timestamp": (pa.timestamp("us", tz="UTC"), lambda rng, n: [int(v) for v in rng.integers(-3, 3, n)]),
}


@pytest.mark.parametrize("case", list(SET_CASES))
def test_collect_set_is_the_distinct_non_null_values(case):
    rng = np.random.default_rng(7)
    arrow_type, draw = SET_CASES[case]
    offsets = groups_of(rng, 150)
    values = [None if rng.random() < 0.2 else v for v in draw(rng, int(offsets[-1]))]
    values += [None, None]
    offsets = np.append(offsets, offsets[-1] + 2)
    reduction = make_reduction("collect_set", [arrow_type])
    assert reduction.result_type == pa.list_(pa.field("element", arrow_type, nullable=False))
    got = split_result(reduction, [pa.array(values, arrow_type)], offsets, rng)
    py = pa.array(values, arrow_type).to_pylist()
    for got_set, group in zip(got, per_group(py, offsets)):
        assert len(got_set) == len({set_key(v) for v in got_set}), "a value twice"
        assert sorted(map(set_key, got_set)) == sorted({set_key(v) for v in group if v is not None})
    assert got[-1] == []
    if case in ("double", "float"):
        assert not any(math.copysign(1, v) < 0 for s in got for v in s if v == 0), "-0.0 kept"


def test_collect_set_refuses_nested_values():
    with pytest.raises(UnsupportedFunction, match="collect_set of list"):
        make_reduction("collect_set", [pa.list_(pa.int64())])


# --- DataSketches -----------------------------------------------------------------------------

ds = pytest.importorskip("datasketches")


def sketch_groups(rng, arrow_type, draw):
    offsets = groups_of(rng, 60, max_size=50)
    values = [None if rng.random() < 0.2 else v for v in draw(rng, int(offsets[-1]))]
    values += [None, None]
    return pa.array(values, arrow_type), np.append(offsets, offsets[-1] + 2)


@pytest.mark.parametrize("function,arrow_type,draw,estimate", [
    ("hll_sketch_agg", pa.int32(), lambda rng, n: [int(v) for v in rng.integers(-50, 50, n)],
     lambda b: ds.hll_sketch.deserialize(b).get_estimate()),
    ("hll_sketch_agg", pa.string(), lambda rng, n: [str(v) if v % 7 else "" for v in rng.integers(0, 30, n)],
     lambda b: ds.hll_sketch.deserialize(b).get_estimate()),
    ("theta_sketch_agg", pa.float64(), lambda rng, n: [float(v) for v in rng.choice(
        [0.0, -0.0, float("nan"), 1.5, 2.5, -7.0], n)],
     lambda b: ds.compact_theta_sketch.deserialize(b).get_estimate()),
    ("theta_sketch_agg", pa.int64(), lambda rng, n: [int(v) for v in rng.integers(-40, 40, n)],
     lambda b: ds.compact_theta_sketch.deserialize(b).get_estimate()),
])
def test_distinct_count_sketches_are_exact_at_small_cardinality(function, arrow_type, draw,
                                                                estimate):
    rng = np.random.default_rng(8)
    values, offsets = sketch_groups(rng, arrow_type, draw)
    reduction = make_reduction(function, [arrow_type])
    assert (reduction.state_types, reduction.result_type) == ([pa.binary()], pa.binary())
    got = split_result(reduction, [values], offsets, rng)
    for blob, group in zip(got, per_group(values.to_pylist(), offsets)):
        # theta canonicalizes doubles as Java does: -0.0 is 0.0, every NaN one value
        distinct = {set_key(v) for v in group if v is not None and v != ""}
        assert round(estimate(blob)) == len(distinct)


def test_the_empty_string_is_not_counted():
    for function in ("hll_sketch_agg", "theta_sketch_agg"):
        reduction = make_reduction(function, [pa.string()])
        state = reduction.reduce([pa.array(["", "a", ""])], np.array([0, 3]))
        blob = reduction.result(state)[0].as_py()
        read = (ds.hll_sketch if function.startswith("hll") else ds.compact_theta_sketch)
        assert read.deserialize(blob).get_estimate() == 1.0


@pytest.mark.parametrize("function,arrow_type,dtype", [
    ("kll_sketch_agg_bigint", pa.int16(), np.int64),
    ("kll_sketch_agg_float", pa.float32(), np.float32),
    ("kll_sketch_agg_double", pa.float32(), np.float64),
])
def test_kll_sketches_keep_every_value_up_to_k(function, arrow_type, dtype):
    rng = np.random.default_rng(9)
    offsets = groups_of(rng, 40, max_size=60)
    values = [None if rng.random() < 0.2 else v for v in rng.integers(-1000, 1000, offsets[-1])]
    if arrow_type != pa.int16():
        values = [v if v is None or rng.random() > 0.05 else float("nan") for v in values]
    values = pa.array([v if v is None else (int(v) if arrow_type == pa.int16() else float(v))
                       for v in values], arrow_type)
    reduction = make_reduction(function, [arrow_type], (100,))
    got = split_result(reduction, [values], offsets, rng)
    if function.endswith("bigint"):
        load = lambda b: ds.kll_items_sketch.deserialize(b, ds.PyLongsSerDe())
    else:
        load = (ds.kll_floats_sketch if function.endswith("float") else ds.kll_doubles_sketch).deserialize
    for blob, group in zip(got, per_group(values.to_pylist(), offsets)):
        present = np.sort(np.array([v for v in group if v is not None and v == v], dtype=dtype))
        sketch = load(blob)
        assert sketch.n == len(present) and sketch.k == 100   # NaN skipped, as Spark's
        if len(present):   # exact up to k: the inclusive median is the ceil(n/2)-th value
            assert sketch.get_quantile(0.5, True) == present[int(np.ceil(0.5 * len(present))) - 1]
            assert (sketch.get_min_value(), sketch.get_max_value()) == (present[0], present[-1])


def test_union_aggregates_merge_sketches():
    hll = [ds.hll_sketch(12, ds.HLL_8) for _ in range(3)]
    theta = [ds.update_theta_sketch(12) for _ in range(3)]
    kll = [ds.kll_doubles_sketch(200) for _ in range(3)]
    for i, (h, t, k) in enumerate(zip(hll, theta, kll)):
        for v in range(i * 10, i * 10 + 15):
            h.update(v)
            t.update(v)
            k.update(float(v))
    offsets = np.array([0, 4, 5])
    cases = [("hll_union_agg", [h.serialize_updatable() for h in hll],
              lambda b: ds.hll_sketch.deserialize(b).get_estimate(), 35),
             ("theta_union_agg", [t.compact().serialize() for t in theta],
              lambda b: ds.compact_theta_sketch.deserialize(b).get_estimate(), 35),
             ("kll_merge_agg_double", [k.serialize() for k in kll],
              lambda b: ds.kll_doubles_sketch.deserialize(b).n, 45)]
    for function, blobs, read, whole in cases:
        reduction = make_reduction(function, [pa.binary()])
        column = pa.array(blobs[:2] + [None, blobs[2], None], pa.binary())
        got = split_result(reduction, [column], offsets, np.random.default_rng(10))
        assert round(read(got[0])) == whole, function
        assert read(got[1]) == 0, function   # a group of nulls: an empty sketch


def test_hll_union_refuses_sketches_of_another_lg_k_unless_allowed():
    small, large = ds.hll_sketch(10, ds.HLL_8), ds.hll_sketch(12, ds.HLL_8)
    for v in range(20):
        small.update(v)
        large.update(v + 10)
    column = pa.array([small.serialize_updatable(), large.serialize_updatable()])
    with pytest.raises(ValueError, match="HLL_UNION_DIFFERENT_LG_K"):
        make_reduction("hll_union_agg", [pa.binary()]).reduce([column], np.array([0, 2]))
    allowed = make_reduction("hll_union_agg", [pa.binary()], (True,))
    blob = allowed.result(allowed.reduce([column], np.array([0, 2])))[0].as_py()
    sketch = ds.hll_sketch.deserialize(blob)
    assert sketch.lg_config_k == 10 and round(sketch.get_estimate()) == 30


@pytest.mark.parametrize("function,arg_types,params,error,match", [
    ("hll_sketch_agg", [pa.binary()], (), UnsupportedFunction, "raw bytes"),
    ("hll_sketch_agg", [pa.float64()], (), UnsupportedFunction, "int, a long or a string"),
    ("hll_sketch_agg", [pa.int64()], (22,), ValueError, "lgConfigK must be an integer from 4 to 21"),
    ("theta_sketch_agg", [pa.list_(pa.int32())], (), UnsupportedFunction, "array"),
    ("theta_sketch_agg", [pa.int64()], (3,), ValueError, "lgNomEntries"),
    ("kll_sketch_agg_float", [pa.float64()], (), UnsupportedFunction, "float"),
    ("kll_sketch_agg_bigint", [pa.int64()], (7,), ValueError, "k must be an integer from 8 to 65535"),
    ("kll_merge_agg_bigint", [pa.int64()], (), UnsupportedFunction, "binary sketch"),
    ("hll_union_agg", [pa.binary()], ("yes",), ValueError, "boolean"),
])
def test_sketch_refusals(function, arg_types, params, error, match):
    with pytest.raises(error, match=match):
        make_reduction(function, arg_types, params)


@pytest.mark.parametrize("function, arrow_type", [
    ("kll_sketch_agg_bigint", pa.int64()), ("kll_sketch_agg_double", pa.float64()),
    ("hll_sketch_agg", pa.int64()), ("theta_sketch_agg", pa.string()),
    ("collect_set", pa.string()), ("stddev", pa.float64()), ("max_by", pa.int64())])
def test_a_reduction_pickles_and_reduces_the_same_after(function, arrow_type):
    """A reduction is shipped to Spark's executors: after a pickle it reduces as before."""
    import pickle
    args = [pa.array([3, 1, 2, 2], arrow_type) if not pa.types.is_string(arrow_type)
            else pa.array(["c", "a", "b", "b"])]
    if function == "max_by":
        args.append(pa.array([1, 4, 2, 3], pa.int64()))
    offsets = np.array([0, 2, 4], dtype=np.int64)
    reduction = make_reduction(function, [a.type for a in args])
    again = pickle.loads(pickle.dumps(reduction))
    assert (again.result(again.reduce(args, offsets)).to_pylist()
            == reduction.result(reduction.reduce(args, offsets)).to_pylist())
