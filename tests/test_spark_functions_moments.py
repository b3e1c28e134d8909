"""Spark's central moments as Arrow reductions (spark_functions.moments), without Spark: reduce
over arbitrary partial groups, merge, result, against a direct computation."""
import math

import numpy as np
import pyarrow as pa
import pytest

from _spark_functions import close, groups_of, per_group, split_result
from skewgroup._aggregation.spark_functions import make_reduction


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
