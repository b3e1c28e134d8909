"""Spark's one-value folds as Arrow reductions (spark_functions.folds), without Spark: count_if,
bit_and/bit_or/bit_xor and the wrapped built-ins, against a direct computation."""
import functools

import numpy as np
import pyarrow as pa
import pytest

from _spark_functions import close, groups_of, per_group, split_result
from skewgroup._aggregation.spark_functions import make_reduction


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
