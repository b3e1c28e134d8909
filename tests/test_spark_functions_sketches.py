"""Spark's DataSketches aggregates as Arrow reductions (spark_functions.sketches), without
Spark: exact at small cardinality, the unions, the refusals."""
import numpy as np
import pyarrow as pa
import pytest

from _spark_functions import groups_of, per_group, set_key, split_result
from skewgroup._aggregation.spark_functions import UnsupportedFunction, make_reduction


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
