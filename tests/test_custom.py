"""A custom aggregate's partial in both calling conventions, and what it returns checked field
by field: no Spark."""
import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation.custom import partial_columns
from skewgroup._aggregation.groups import GroupedRows

TABLE = pa.table({"k": [2, 1, 2, None, 1], "x": [1.0, 2.0, 3.0, 4.0, 5.0]})


def grouped():
    return GroupedRows(TABLE, ["k"], ["k", "x"])


def test_per_key_and_vectorized_conventions_agree_group_by_group():
    rows = grouped()
    per_key = partial_columns(lambda frame: {"s": frame["x"].sum(), "n": len(frame)}, False,
                              rows, ["s", "n"], [pa.float64(), pa.int64()])
    vectorized = partial_columns(
        lambda table, offsets: {"s": np.add.reduceat(table["x"].to_numpy(), offsets[:-1]),
                                "n": np.diff(offsets)},
        True, rows, ["s", "n"], [pa.float64(), pa.int64()])
    assert [c.to_pylist() for c in per_key] == [c.to_pylist() for c in vectorized]
    keys = rows.keys["k"].to_pylist()
    totals = dict(zip(keys, per_key[0].to_pylist()))
    assert totals == {2: 4.0, 1: 7.0, None: 4.0}
    assert dict(zip(keys, per_key[1].to_pylist())) == {2: 2, 1: 2, None: 1}


def test_a_per_key_partial_sees_the_users_names_even_repeated():
    table = pa.table([pa.array([1, 1]), pa.array([5, 6])], names=["a", "b"])
    seen = []
    partial_columns(lambda frame: seen.append(list(frame.columns)) or {"v": 1}, False,
                    GroupedRows(table, ["a"], ["x", "x"]), ["v"], [pa.int64()])
    assert seen == [["x", "x"]]


def test_the_vectorized_partial_gets_its_own_copy_of_the_offsets():
    rows = grouped()
    before = rows.offsets.copy()

    def scribble(table, offsets):
        offsets[:] = 0
        return {"v": np.zeros(len(before) - 1)}

    partial_columns(scribble, True, rows, ["v"], [pa.float64()])
    assert rows.offsets.tolist() == before.tolist()


@pytest.mark.parametrize("partial, vectorized, message", [
    (lambda table, offsets: [1.0], True, "must return a dict"),
    (lambda frame: 1.0, False, "must return a dict"),
    (lambda table, offsets: {"s": np.zeros(3), "t": np.zeros(3)}, True, r"field\(s\) \['t'\]"),
    (lambda table, offsets: {}, True, "no value for field 's'"),
    (lambda frame: {"t": 1.0}, False, "no value for field 's'"),
    (lambda table, offsets: {"s": np.zeros(len(offsets))}, True, "one value per group: 3"),
    (lambda table, offsets: {"s": ["a", "b", "c"]}, True, "must be of type double"),
    (lambda table, offsets: {"s": object()}, True, "must be an array of 3 values"),
])
def test_a_bad_partial_is_named_with_what_was_allowed(partial, vectorized, message):
    with pytest.raises((TypeError, ValueError), match=message):
        partial_columns(partial, vectorized, grouped(), ["s"], [pa.float64()])
