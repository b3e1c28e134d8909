"""The Arrow helpers the reductions share (skewgroup._aggregation.arrow_columns): the one
fill_nulls, whose coverage each caller keeps as before (reductions: numbers, booleans and
timestamps; spark_functions: every fixed-width type)."""
import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation.arrow_columns import fill_nulls, segment_sum, storage_type

FILLED_ALWAYS = [(pa.int8(), 0), (pa.int64(), 0), (pa.float64(), 0.0), (pa.bool_(), False),
                 (pa.timestamp("us", tz="UTC"), datetime.datetime(1970, 1, 1,
                                                                 tzinfo=datetime.timezone.utc))]
FILLED_FOR_SPARK_FUNCTIONS = [(pa.date32(), datetime.date(1970, 1, 1)),
                              (pa.time64("us"), datetime.time(0)),
                              (pa.duration("us"), datetime.timedelta(0)),
                              (pa.decimal128(10, 2), decimal.Decimal("0.00"))]


@pytest.mark.parametrize("arrow_type, zero", FILLED_ALWAYS + FILLED_FOR_SPARK_FUNCTIONS)
def test_a_fixed_width_null_becomes_its_types_zero(arrow_type, zero):
    filled = fill_nulls(pa.array([None, None], arrow_type))
    assert filled.type == arrow_type and filled.null_count == 0
    assert filled.to_pylist() == [zero, zero]


@pytest.mark.parametrize("arrow_type, zero", FILLED_ALWAYS)
def test_the_reductions_coverage_fills_numbers_booleans_and_timestamps(arrow_type, zero):
    assert fill_nulls(pa.array([None], arrow_type),
                      dates_times_decimals=False).to_pylist() == [zero]


@pytest.mark.parametrize("arrow_type", [t for t, _ in FILLED_FOR_SPARK_FUNCTIONS])
def test_the_reductions_coverage_keeps_a_dates_null(arrow_type):
    # a built-in reduction's stored state holds a null there, as its checkpoints do
    array = pa.array([None], arrow_type)
    assert fill_nulls(array, dates_times_decimals=False) is array


@pytest.mark.parametrize("array", [pa.array(["a", None]), pa.array([b"x", None]),
                                   pa.array([[1], None], pa.list_(pa.int64()))])
def test_a_type_without_a_zero_keeps_its_nulls(array):
    assert fill_nulls(array) is array


def test_an_array_without_nulls_is_returned_as_is():
    array = pa.array([1, 2])
    assert fill_nulls(array) is array


def test_sums_per_group_and_storage_types():
    assert segment_sum(np.array([1, 2, 3]), np.array([0, 2, 3])).tolist() == [3, 3]
    assert segment_sum(np.array([], dtype=np.int64), np.array([0])).tolist() == []
    assert storage_type(pa.date32()) == pa.int32() and storage_type(pa.timestamp("ns")) == pa.int64()
    assert storage_type(pa.string()) == pa.string()
