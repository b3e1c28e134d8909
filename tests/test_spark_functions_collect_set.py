"""Spark's collect_set as an Arrow reduction (spark_functions.collect_set), without Spark."""
import math

import numpy as np
import pyarrow as pa
import pytest

from _spark_functions import groups_of, per_group, set_key, split_result
from skewgroup._aggregation.spark_functions import UnsupportedFunction, make_reduction


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
