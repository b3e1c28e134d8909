"""The package skewgroup._aggregation.spark_functions without Spark: the function table, the
refusals that say why, and reductions that pickle (the families' own tests are
test_spark_functions_*.py)."""
import pickle

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation.spark_functions import FUNCTIONS, UnsupportedFunction, make_reduction


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




@pytest.mark.parametrize("function, arrow_type", [
    ("kll_sketch_agg_bigint", pa.int64()), ("kll_sketch_agg_double", pa.float64()),
    ("hll_sketch_agg", pa.int64()), ("theta_sketch_agg", pa.string()),
    ("collect_set", pa.string()), ("stddev", pa.float64()), ("max_by", pa.int64())])
def test_a_reduction_pickles_and_reduces_the_same_after(function, arrow_type):
    """A reduction is shipped to Spark's executors: after a pickle it reduces as before."""
    pytest.importorskip("datasketches")
    args = [pa.array([3, 1, 2, 2], arrow_type) if not pa.types.is_string(arrow_type)
            else pa.array(["c", "a", "b", "b"])]
    if function == "max_by":
        args.append(pa.array([1, 4, 2, 3], pa.int64()))
    offsets = np.array([0, 2, 4], dtype=np.int64)
    reduction = make_reduction(function, [a.type for a in args])
    again = pickle.loads(pickle.dumps(reduction))
    assert (again.result(again.reduce(args, offsets)).to_pylist()
            == reduction.result(reduction.reduce(args, offsets)).to_pylist())
