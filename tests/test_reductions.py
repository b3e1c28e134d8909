"""Spark's reductions in Python (skewgroup._aggregation.reductions), without Spark: each kind against a
reference in plain Python over random groups with nulls, NaN and extremes; a reduce then a
merge of its states in any grouping equals one reduce; ANSI overflow fails, else wraps."""
import math

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation.reductions import KINDS, Reduction, reducible

LONG = 1 << 63


def spark_reference(kind, values):
    """What Spark's function gives for one key's values (None for null)."""
    present = [v for v in values if v is not None]
    if kind == "count":
        return len(present)
    if not present:
        return None
    if kind == "sum":
        if isinstance(present[0], float):
            return math.fsum(present) if not any(map(math.isnan, present)) else math.nan
        return (sum(present) + LONG) % (2 * LONG) - LONG    # Java's long wraps
    if kind == "mean":
        return sum(present) / len(present)
    if kind in ("first", "last"):
        return present[0] if kind == "first" else present[-1]
    if isinstance(present[0], float) and kind in ("min", "max"):
        numbers = [v for v in present if not math.isnan(v)]
        if kind == "max":
            return math.nan if len(numbers) < len(present) else max(numbers)
        return min(numbers) if numbers else math.nan
    return min(present) if kind in ("min", "bool_and") else max(present)


def draw(rng, arrow_type, size, kind):
    if pa.types.is_floating(arrow_type):
        # Sums of values exact in binary: the same in any order, as Spark's order is not fixed.
        huge = [] if kind in ("sum", "mean") else [1e300, -1e300]
        pool = [0.5, -2.25, math.nan, math.inf, 3.0, None] + huge
    elif pa.types.is_boolean(arrow_type):
        pool = [True, False, None]
    elif pa.types.is_string(arrow_type):
        pool = ["a", "b", "ab", "", "é", None]
    else:
        # A mean sums doubles: values exact in a double keep it the same in any order.
        big = 2**62 if arrow_type.bit_width == 64 and kind != "mean" else 2**30
        pool = [1, -7, 40, None, big, -big]
    return [pool[i] for i in rng.integers(0, len(pool), size)]


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-9)
    return a == b


CASES = [(kind, t) for kind in KINDS
         for t in (pa.int64(), pa.int32(), pa.float64(), pa.bool_(), pa.string())
         if reducible(kind, t)]


@pytest.mark.parametrize("kind,arrow_type", CASES, ids=[f"{k}-{t}" for k, t in CASES])
def test_reduce_then_merge_equals_spark_per_key(kind, arrow_type):
    rng = np.random.default_rng(3)
    reduction = Reduction(kind, arrow_type, ansi=False)
    for _ in range(20):
        sizes = rng.integers(1, 6, size=rng.integers(1, 8))
        values = draw(rng, arrow_type, int(sizes.sum()), kind)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        state = reduction.reduce(pa.array(values, arrow_type), offsets)
        # A number's nulls travel in n, never as nulls (pandas would turn them into floats).
        assert all(a.null_count == 0 for a in state
                   if pa.types.is_integer(a.type) or pa.types.is_floating(a.type))
        # Every state of a key merged again (a key's partials from several workers).
        merged = reduction.merge(state, np.array([0, len(sizes)]))
        got = reduction.result(state).to_pylist() + reduction.result(merged).to_pylist()
        groups = [values[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
        want = [spark_reference(kind, g) for g in groups] + [spark_reference(kind, values)]
        assert all(same(g, w) for g, w in zip(got, want)), (values, got, want)


def test_long_sum_fails_on_overflow_under_ansi_and_wraps_otherwise():
    values = pa.array([LONG - 1, 1, -5], pa.int64())
    offsets = np.array([0, 2, 3])
    with pytest.raises(ArithmeticError, match="ARITHMETIC_OVERFLOW.*sum"):
        Reduction("sum", pa.int64(), ansi=True).reduce(values, offsets)
    wrapped = Reduction("sum", pa.int64(), ansi=False).reduce(values, offsets)
    assert wrapped[0].to_pylist() == [-LONG, -5]
    # Exact at the edge: no float in between.
    edge = Reduction("sum", pa.int64()).reduce(pa.array([LONG - 2, 1], pa.int64()),
                                               np.array([0, 2]))
    assert edge[0].to_pylist() == [LONG - 1]


def test_a_kind_without_an_exact_reduction_is_refused():
    assert not reducible("sum", pa.decimal128(10, 2))
    with pytest.raises(TypeError, match="sum of decimal"):
        Reduction("sum", pa.decimal128(10, 2))
    with pytest.raises(ValueError, match="'kind' parameter must be one of"):
        Reduction("median", pa.int64())
