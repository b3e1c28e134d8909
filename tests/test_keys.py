import numpy as np
import pyarrow as pa
import pytest

from skewgroup import hash_keys
from skewgroup._routing._hash import null_hash


def test_same_value_same_hash_across_containers():
    expected = hash_keys(np.array([1, 2, 3], dtype=np.int64))
    assert np.array_equal(hash_keys([1, 2, 3]), expected)
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint32, np.uint64):
        assert np.array_equal(hash_keys(np.array([1, 2, 3], dtype=dtype)), expected)
    assert np.array_equal(hash_keys(pa.array([1, 2, 3], pa.int16())), expected)
    assert np.array_equal(hash_keys(pa.chunked_array([[1], [2, 3]])), expected)


def test_strings_from_list_arrow_large_and_dictionary_agree():
    values = ["a", "bb", "", "a", "ünï"]
    expected = hash_keys(values)
    assert expected[0] == expected[3] and len(set(expected.tolist())) == 4
    assert np.array_equal(hash_keys(pa.array(values, pa.large_string())), expected)
    assert np.array_equal(hash_keys(pa.array(values).dictionary_encode()), expected)
    assert np.array_equal(hash_keys(np.array(values, dtype=object)), expected)
    assert np.array_equal(hash_keys(np.array(values)), expected)
    assert np.array_equal(hash_keys(pa.array(["x"] + values).slice(1)), expected)
    assert np.array_equal(hash_keys([v.encode() for v in values]), expected)


def test_floats_fold_negative_zero_and_nans():
    nans = np.array([np.nan, -np.nan, float("nan")], dtype=np.float64)
    h = hash_keys(nans)
    assert h[0] == h[1] == h[2]
    z = hash_keys(np.array([0.0, -0.0]))
    assert z[0] == z[1]
    assert np.array_equal(hash_keys(np.array([1.5], np.float32)), hash_keys([1.5]))


def test_nulls_are_one_documented_key():
    seed = 5
    h = hash_keys([1, None, 2, None], seed)
    assert h[1] == h[3] == null_hash(seed)
    assert hash_keys(["a", None], seed)[1] == null_hash(seed)
    assert hash_keys([None, None], seed)[0] == null_hash(seed)
    assert hash_keys(pa.array([1.0, None]), seed)[1] == null_hash(seed)


def test_seed_changes_hashes():
    assert not np.array_equal(hash_keys([1, 2], 0), hash_keys([1, 2], 1))


def test_bool_and_dates():
    assert np.array_equal(hash_keys([True, False]), hash_keys([1, 0]))
    days = pa.array([0, 1], pa.date32())
    assert np.array_equal(hash_keys(days), hash_keys([0, 1]))


def test_empty_input():
    assert hash_keys([]).shape == (0,)
    assert hash_keys(np.array([], dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (np.zeros((2, 2)), ValueError, "one-dimensional"),
        ([1, "a"], TypeError, "one type"),
        ("abc", TypeError, "single str"),
        (5, TypeError, "single int"),
        ({"a": 1}, TypeError, "dict"),
        (np.array([1 + 2j]), TypeError, "complex"),
        ([[1], [2]], TypeError, "scalar keys"),
    ],
)
def test_bad_keys_name_the_parameter(bad, error, words):
    with pytest.raises(error, match="keys") as info:
        hash_keys(bad)
    assert words in str(info.value)
