"""Spark's min_by and max_by as Arrow reductions (spark_functions.extremum_by), without Spark:
ties, null ords and every value type carried, against a direct computation."""
import math

import numpy as np
import pyarrow as pa
import pytest

from _spark_functions import groups_of, per_group, split_result
from skewgroup._aggregation.spark_functions import make_reduction


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
