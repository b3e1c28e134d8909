"""The adapter (skewgroup._aggregation.python_aggregator) without Spark: both protocols, the wire
format, and the shipped aggregators (skewgroup._aggregation.shipped) through it against
single-process references, over random partials merged in random order (as a cluster would run
them)."""
import pickle
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa
import pytest

from _aggregators import Mean
from skewgroup import hash_keys
from skewgroup._aggregation import shipped
from skewgroup.aggregators import (DistinctCount, KllQuantiles, LeastSquares, PythonAggregator,
                                   RowSample, TopK, adapt)

MEAN_BUFFER = pa.struct([("total", pa.float64()), ("n", pa.int64())])


class MeanFn:
    """Beam's CombineFn protocol, as Beam's docs write AverageFn (add_input only)."""

    def __init__(self):
        self.setups = 0
        self.compacted = 0

    def setup(self):
        self.setups += 1

    def create_accumulator(self):
        return (0.0, 0)

    def add_input(self, sum_count, element):
        (total, count) = sum_count
        return total + element, count + 1

    def merge_accumulators(self, accumulators):
        sums, counts = zip(*accumulators)
        return sum(sums), sum(counts)

    def extract_output(self, sum_count):
        (total, count) = sum_count
        return total / count if count else float("nan")

    def compact(self, accumulator):
        self.compacted += 1
        return accumulator


class MeanFnBatched(MeanFn):
    """The same with add_inputs only, and a mutable accumulator (Beam allows both)."""

    add_input = None

    def create_accumulator(self):
        return [0.0, 0]

    def add_inputs(self, accumulator, elements):
        accumulator[0] += sum(elements)
        accumulator[1] += len(elements)
        return accumulator

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        return [sum(a[0] for a in accumulators), sum(a[1] for a in accumulators)]


class WeightedMeanFn(MeanFn):
    """Two columns: an element is the tuple (value, weight)."""

    def add_input(self, sum_count, element):
        value, weight = element
        return sum_count[0] + value * weight, sum_count[1] + weight


class ScalarOnly:
    """A shipped aggregator's scalar protocol alone, so the adapter takes its Python loop."""

    def __init__(self, inner):
        self.inner = inner
        self.bufferSchema, self.outputType = inner.bufferSchema, inner.outputType

    def zero(self):
        return self.inner.zero()

    def reduce(self, buffer, value):
        return self.inner.reduce(buffer, value)

    def merge(self, buffer1, buffer2):
        return self.inner.merge(buffer1, buffer2)

    def finish(self, buffer):
        return self.inner.finish(buffer)


def mean_adapter():
    return adapt(Mean(), ["x"], buffer_type=MEAN_BUFFER, output_type=pa.float64())


def grouped_offsets(keys):
    """(distinct keys, offsets) of ``keys``, already sorted."""
    distinct, starts = np.unique(keys, return_index=True)
    return distinct, np.append(starts, len(keys)).astype(np.int64)


def _per_worker(keys, rng, workers):
    """(rows, their distinct keys, offsets) per random worker, rows grouped by key."""
    worker = rng.integers(0, workers, len(keys))
    for w in range(workers):
        rows = np.flatnonzero(worker == w)
        rows = rows[np.argsort(keys[rows], kind="stable")]
        yield (rows, *grouped_offsets(keys[rows]))


def _merge_order(partial_keys, rng):
    """(the partials' order for the merge: shuffled, then grouped by key; distinct keys,
    offsets)."""
    shuffle = rng.permutation(len(partial_keys))
    owners = np.asarray(partial_keys)[shuffle]
    order = np.argsort(owners, kind="stable")
    return (shuffle[order], *grouped_offsets(owners[order]))


def run_adapter(aggregator, table, keys, rng, workers=4):
    """key -> result: partials per (random worker, key), encoded and decoded, merged per key
    in a random order."""
    partial_keys, partials = [], []
    for rows, distinct, offsets in _per_worker(keys, rng, workers):
        buffers = aggregator.reduce_groups(table.take(rows), offsets)
        partial_keys += distinct.tolist()
        partials += aggregator.decode(aggregator.encode(buffers))
    order, distinct, offsets = _merge_order(partial_keys, rng)
    merged = aggregator.merge_groups([partials[i] for i in order], offsets)
    return dict(zip(distinct.tolist(), aggregator.finish(merged).to_pylist()))


def run_arrow(aggregator, table, keys, rng, workers=4):
    """``run_adapter`` with the buffers as Arrow arrays throughout (the Spark layer's path)."""
    partial_keys, partials = [], []
    for rows, distinct, offsets in _per_worker(keys, rng, workers):
        partial_keys += distinct.tolist()
        partials.append(aggregator.reduce_arrow(table.take(rows), offsets))
    partials = pa.concat_arrays(partials)
    assert partials.type == aggregator.wire_type
    order, distinct, offsets = _merge_order(partial_keys, rng)
    merged = aggregator.merge_arrow(partials.take(pa.array(order)), offsets)
    return dict(zip(distinct.tolist(), aggregator.finish_arrow(merged).to_pylist()))


def run_scalar(obj, table, keys, rng, parts=3):
    """key -> result through zero/reduce/merge/finish alone, partials merged in random order."""
    rows = list(zip(*(column.to_pylist() for column in table.columns)))
    part = rng.integers(0, parts, len(keys))
    partials = defaultdict(list)
    for p in range(parts):
        buffers = {}
        for i in np.flatnonzero(part == p).tolist():
            key = keys[i].item()
            buffers[key] = obj.reduce(buffers[key] if key in buffers else obj.zero(), rows[i])
        for key, buffer in buffers.items():
            partials[key].append(buffer)
    results = {}
    for key, buffers in partials.items():
        buffer = buffers[rng.integers(len(buffers))]
        others = [b for b in buffers if b is not buffer]
        for other in (others[i] for i in rng.permutation(len(others))):
            buffer = obj.merge(buffer, other)
        results[key] = obj.finish(buffer)
    return results


def all_paths(obj, table, keys, seed):
    """key -> result by the scalar methods, the adapter's loop and the vectorized methods."""
    columns = table.column_names
    scalar = adapt(ScalarOnly(obj), columns, buffer_type=obj.arrow_buffer_type,
                   output_type=obj.arrow_output_type)
    return {
        "scalar methods": run_scalar(obj, table, keys, np.random.default_rng(seed)),
        "adapter loop": run_adapter(scalar, table, keys, np.random.default_rng(seed + 1)),
        "vectorized": run_adapter(adapt(obj, columns), table, keys,
                                  np.random.default_rng(seed + 2)),
        "adapter loop, Arrow buffers": run_arrow(scalar, table, keys,
                                                 np.random.default_rng(seed + 3)),
        "batch form, Arrow buffers": run_arrow(adapt(obj, columns), table, keys,
                                               np.random.default_rng(seed + 4)),
    }


def by_key(keys, *columns):
    """key -> list of rows (tuples of the columns' values, None for null)."""
    groups = defaultdict(list)
    for key, *values in zip(keys.tolist(), *(column.to_pylist() for column in columns)):
        groups[key].append(tuple(values))
    return groups


def with_nulls(values, rng, fraction=0.05):
    return pa.array(values, mask=rng.random(len(values)) < fraction)


# --- protocols and errors ------------------------------------------------------------------


def test_spark_protocol_mean_matches_reference():
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 50, 5_000)
    x = with_nulls(rng.normal(size=5_000), rng)
    got = run_adapter(mean_adapter(), pa.table({"x": x}), keys, rng)
    for key, rows in by_key(keys, x).items():
        values = [v for (v,) in rows if v is not None]
        assert got[key] == pytest.approx(np.mean(values))


@pytest.mark.parametrize("fn", [MeanFn, MeanFnBatched])
def test_beam_combinefn_mean_matches_reference(fn):
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 40, 4_000)
    x = rng.normal(size=4_000)
    aggregator = adapt(fn(), "x", output_type=pa.float64())
    assert aggregator.protocol == "Beam CombineFn"
    got = run_adapter(aggregator, pa.table({"x": x}), keys, rng)
    for key in np.unique(keys).tolist():
        assert got[key] == pytest.approx(x[keys == key].mean())
    assert aggregator.obj.setups == 1
    assert aggregator.obj.compacted > 0


def test_beam_element_is_a_tuple_for_several_columns():
    aggregator = adapt(WeightedMeanFn(), ["v", "w"], output_type=pa.float64())
    table = pa.table({"v": [1.0, 3.0, 10.0], "w": [1, 3, 2]})
    buffers = aggregator.reduce_groups(table, np.array([0, 2, 3]))
    assert aggregator.finish(buffers).to_pylist() == [2.5, 10.0]


def test_empty_groups_get_the_zero_buffer():
    aggregator = mean_adapter()
    buffers = aggregator.reduce_groups(pa.table({"x": [1.0, 2.0]}), np.array([0, 0, 2, 2]))
    assert buffers == [(0.0, 0), (3.0, 2), (0.0, 0)]
    assert aggregator.merge_groups(buffers, np.array([0, 0, 3])) == [(0.0, 0), (3.0, 2)]


def test_neither_protocol_names_the_missing_methods_of_both():
    class NoFinish(Mean):
        finish = None

    with pytest.raises(TypeError) as error:
        adapt(NoFinish(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    message = str(error.value)
    assert "'NoFinish'" in message and "missing: finish" in message
    assert "zero, reduce, merge, finish" in message
    assert "create_accumulator, add_input or add_inputs, merge_accumulators, extract_output" \
        in message
    with pytest.raises(TypeError, match="'custom'"):
        adapt(object(), "x", output_type=pa.float64(), name="custom")


def test_output_type_is_required():
    with pytest.raises(TypeError, match="'MeanFn'.*pass output_type="):
        adapt(MeanFn(), "x")
    with pytest.raises(TypeError, match="'buffer_type'.*Got NoneType"):
        adapt(Mean(), "x", output_type=pa.float64())
    with pytest.raises(TypeError, match="'buffer_type'.*Beam CombineFn 'MeanFn'.*Got str"):
        adapt(MeanFn(), "x", buffer_type="total double, n bigint", output_type=pa.float64())


def test_a_combine_fn_that_declares_its_type_travels_as_arrow_not_pickles():
    declared = adapt(MeanFn(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    pickled = adapt(MeanFn(), "x", output_type=pa.float64())
    assert declared.wire_type == MEAN_BUFFER and pickled.wire_type == pa.binary()
    rows, offsets = pa.table({"x": [1.0, 2.0, 4.0]}), np.array([0, 2, 3])
    for adapter in (declared, pickled):
        wire = adapter.reduce_arrow(rows, offsets)
        assert wire.type == adapter.wire_type
        merged = adapter.merge_arrow(pa.concat_arrays([wire, wire]), np.array([0, 1, 4]))
        assert adapter.finish_arrow(merged).to_pylist() == [1.5, 11.0 / 4]
    bad = adapt(MeanFn(), "x", buffer_type=pa.struct([("total", pa.string())]),
                output_type=pa.float64())
    with pytest.raises(TypeError, match="add_input.*does not convert to its buffer_type"):
        bad.reduce_arrow(rows, offsets)


class ListReduce(Mean):
    def reduce(self, buffer, value):
        return [buffer[0] + value[0], buffer[1] + 1]


class StringReduce(Mean):
    def reduce(self, buffer, value):
        return ("x" * 200, buffer[1] + 1)


class BadZero(Mean):
    def zero(self):
        return (0.0, "none")


class BadFinish(Mean):
    def finish(self, buffer):
        return f"mean {buffer}"


class ShortReduceGroups(Mean):
    def reduce_groups(self, rows, offsets):
        return [(0.0, 0)]


def test_reduce_returning_a_wrong_shape_is_named():
    aggregator = adapt(ListReduce(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    with pytest.raises(TypeError) as error:
        aggregator.reduce_groups(pa.table({"x": [1.0]}), np.array([0, 1]))
    message = str(error.value)
    assert "'ListReduce' method reduce" in message
    assert "expected a tuple of 2 fields (total: double, n: int64)" in message
    assert "got list [1.0, 1]" in message


def test_a_wrong_field_type_is_named_with_a_short_repr():
    aggregator = adapt(StringReduce(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    with pytest.raises(TypeError) as error:
        aggregator.reduce_groups(pa.table({"x": [1.0, 2.0]}), np.array([0, 2]))
    message = str(error.value)
    assert "'StringReduce' method reduce" in message and "got tuple ('xxx" in message
    assert "..." in message and len(message) < 400


class ListZero(Mean):
    def zero(self):
        return [0.0, 0]


def test_a_loop_that_fails_is_replayed_to_name_the_call_that_made_the_bad_buffer():
    # An empty last group of a merge is replayed from zero (it has no buffer); a reduce whose
    # bad buffer makes the next reduce raise is named, not the next call's own error.
    listed = adapt(ListZero(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    buffers = mean_adapter().reduce_arrow(pa.table({"x": [1.0, 2.0]}), np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="'ListZero' method zero returned.*got list"):
        listed.merge_arrow(buffers, np.array([0, 2, 2]))

    class Crashing(Mean):
        def reduce(self, buffer, value):
            if buffer[1] == 1:
                return {"total": buffer[0]}          # the next call trips over it
            return (buffer[0] + value[0], buffer[1] + 1)

    crashing = adapt(Crashing(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    with pytest.raises(TypeError, match="'Crashing' method reduce returned.*got dict"):
        crashing.reduce_arrow(pa.table({"x": [1.0, 2.0, 3.0]}), np.array([0, 3]))


def test_a_bad_zero_is_named_for_an_empty_group():
    aggregator = adapt(BadZero(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    with pytest.raises(TypeError, match="'BadZero' method zero"):
        aggregator.merge_groups([], np.array([0, 0]))


def test_finish_returning_the_wrong_type_is_named():
    aggregator = adapt(BadFinish(), "x", buffer_type=MEAN_BUFFER, output_type=pa.float64())
    with pytest.raises(TypeError) as error:
        aggregator.finish([(1.0, 1)])
    message = str(error.value)
    assert "'BadFinish' method finish" in message and "expected double" in message
    assert "got str 'mean (1.0, 1)'" in message


def test_beam_extract_output_is_checked_too():
    aggregator = adapt(MeanFn(), "x", output_type=pa.list_(pa.float64()))
    with pytest.raises(TypeError, match="'MeanFn' method extract_output.*got float 2.0"):
        aggregator.finish([(2.0, 1)])


def test_vectorized_count_mismatch_is_named():
    aggregator = adapt(ShortReduceGroups(), "x", buffer_type=MEAN_BUFFER,
                       output_type=pa.float64())
    with pytest.raises(TypeError, match="'ShortReduceGroups' method reduce_groups.*expected 2, "
                                        "got 1"):
        aggregator.reduce_groups(pa.table({"x": [1.0, 2.0]}), np.array([0, 1, 2]))


def test_rows_and_offsets_are_checked():
    aggregator = mean_adapter()
    with pytest.raises(ValueError, match="columns \\['x'\\].*without \\['x'\\]"):
        aggregator.reduce_groups(pa.table({"y": [1.0]}), np.array([0, 1]))
    with pytest.raises(ValueError, match="'offsets'.*from 0 to the length of 'rows' \\(2\\)"):
        aggregator.reduce_groups(pa.table({"x": [1.0, 2.0]}), np.array([0, 1]))
    with pytest.raises(TypeError, match="'offsets'"):
        aggregator.reduce_groups(pa.table({"x": [1.0]}), np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match="'columns'"):
        adapt(Mean(), [], buffer_type=MEAN_BUFFER, output_type=pa.float64())


# --- wire format and pickling --------------------------------------------------------------


def test_encode_decode_round_trip_and_bytes_per_buffer():
    aggregator = mean_adapter()
    buffers = [(1.5, 2), (0.0, 0)]
    encoded = aggregator.encode(buffers)
    assert encoded.type == pa.binary()
    assert aggregator.decode(encoded) == buffers
    assert aggregator.decode(pa.chunked_array([encoded])) == buffers
    assert aggregator.buffer_bytes(encoded) == pytest.approx(
        np.mean([len(pickle.dumps(b, protocol=5)) for b in buffers]))


def test_damaged_bytes_give_a_value_error_naming_the_aggregator():
    aggregator = mean_adapter()
    blob = aggregator.encode([(1.5, 2)])[0].as_py()
    for damaged in (blob[:-3], b"\x00" + blob[1:], b"not a pickle"):
        with pytest.raises(ValueError, match="'Mean' cannot decode buffer 0"):
            aggregator.decode(pa.array([damaged]))
    with pytest.raises(ValueError, match="null"):
        aggregator.decode(pa.array([None], type=pa.binary()))
    with pytest.raises(ValueError, match="'Mean' decoded a buffer that does not match"):
        aggregator.decode(pa.array([pickle.dumps(("a", "b"))]))


def test_the_adapter_pickles_and_cloudpickles():
    from pyspark import cloudpickle

    class Local(Mean):  # defined here: cloudpickle ships it by value
        pass

    table, offsets = pa.table({"x": [1.0, 2.0, 4.0]}), np.array([0, 1, 3])
    for aggregator, dumps in [(mean_adapter(), pickle.dumps), (mean_adapter(), cloudpickle.dumps),
                              (adapt(Local(), "x", buffer_type=MEAN_BUFFER,
                                     output_type=pa.float64()), cloudpickle.dumps),
                              (adapt(KllQuantiles(), "x"), pickle.dumps)]:
        copy = pickle.loads(dumps(aggregator))
        assert isinstance(copy, PythonAggregator) and copy.columns == ("x",)
        assert copy.finish(copy.reduce_groups(table, offsets)) == \
            aggregator.finish(aggregator.reduce_groups(table, offsets))


def test_beam_setup_runs_again_in_an_unpickled_copy():
    aggregator = adapt(MeanFn(), "x", output_type=pa.float64())
    aggregator.reduce_groups(pa.table({"x": [1.0]}), np.array([0, 1]))
    copy = pickle.loads(pickle.dumps(aggregator))
    copy.reduce_groups(pa.table({"x": [1.0]}), np.array([0, 1]))
    assert aggregator.obj.setups == 1 and copy.obj.setups == 2


# --- shipped aggregators -------------------------------------------------------------------


def skewed_keys(rng, n, hot=0.3, keys=200):
    """Keys with one hot key holding ``hot`` of the rows, the rest uniform."""
    return np.where(rng.random(n) < hot, 0, rng.integers(1, keys, n))


def test_kll_quantiles_within_rank_error():
    rng = np.random.default_rng(3)
    keys = skewed_keys(rng, 30_000)
    x = with_nulls(rng.lognormal(size=30_000), rng)
    keys = np.append(keys, 999)                              # a key with only a null
    x = pa.concat_arrays([x, pa.array([None], pa.float64())])
    kll = KllQuantiles(quantiles=(0.1, 0.5, 0.99), k=200)
    assert kll.bufferSchema == "sketch: binary" and kll.outputType == "array<double>"
    rows = by_key(keys, x)
    for path, got in all_paths(kll, pa.table({"x": x}), keys, seed=30).items():
        assert got[999] is None, path
        for key, values in rows.items():
            if key == 999:
                continue
            values = np.sort([v for (v,) in values if v is not None])
            for q, estimate in zip(kll.quantiles, got[key]):
                below = np.searchsorted(values, estimate, "left") / len(values)
                at_most = np.searchsorted(values, estimate, "right") / len(values)
                assert below - kll.rank_error <= q <= at_most + kll.rank_error, (path, key, q)


def test_kll_needs_datasketches(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_datasketches(name, *args, **kwargs):
        if name == "datasketches":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasketches)
    with pytest.raises(ImportError, match="pip install datasketches"):
        KllQuantiles()


def exact_top(values):
    """value -> count of the non-null values."""
    return Counter(v for (v,) in values if v is not None)


def test_top_k_exact_when_distinct_values_fit():
    rng = np.random.default_rng(4)
    keys = skewed_keys(rng, 20_000)
    items = with_nulls([f"item{v}" for v in rng.zipf(1.5, 20_000) % 60], rng)
    top = TopK(k=5, item_type="string", capacity=60)
    assert top.outputType == "array<struct<item: string, count: bigint, error: bigint>>"
    rows = by_key(keys, items)
    for path, got in all_paths(top, pa.table({"item": items}), keys, seed=40).items():
        for key, values in rows.items():
            counts = exact_top(values)
            result = got[key]
            assert len(result) == min(5, len(counts)), path
            assert [r["count"] for r in result] == sorted(counts.values(), reverse=True)[:5]
            assert all(r["count"] == counts[r["item"]] and r["error"] == 0 for r in result)


def test_top_k_within_the_spacesaving_bound():
    rng = np.random.default_rng(5)
    keys = skewed_keys(rng, 40_000, hot=0.5, keys=20)
    items = pa.array((rng.zipf(1.3, 40_000) % 5_000).astype(np.int64))
    top = TopK(k=10, item_type="bigint", capacity=50)
    rows = by_key(keys, items)
    for path, got in all_paths(top, pa.table({"item": items}), keys, seed=50).items():
        for key, values in rows.items():
            counts, n = exact_top(values), len(values)
            ranked = counts.most_common(2)
            for r in got[key]:
                true = counts[r["item"]]
                assert r["count"] - r["error"] <= true <= r["count"], path
                assert r["error"] * top.capacity <= n
            if ranked[0][1] - ranked[1][1] > 2 * n / top.capacity:
                assert got[key][0]["item"] == ranked[0][0], (path, key)


def test_top_k_hashes_a_value_alike_in_both_paths():
    top = TopK(k=3, item_type="int", capacity=3)
    aggregator = adapt(top, "item")
    table = pa.table({"item": pa.array([7, 7, 8], pa.int32())})
    vectorized = aggregator.reduce_groups(table, np.array([0, 3]))[0]
    scalar = top.zero()
    for value in (7, 7, 8):
        scalar = top.reduce(scalar, (value,))
    assert vectorized == scalar
    with pytest.raises(ValueError, match="'item_type'.*Got 'map<string,int>'"):
        TopK(item_type="map<string,int>")


@pytest.mark.parametrize("item_type, make", [
    ("bigint", lambda rng, n: rng.integers(0, 300, n)),
    ("string", lambda rng, n: [f"s{v}" for v in rng.integers(0, 300, n)]),
])
def test_distinct_count_is_exact(item_type, make):
    rng = np.random.default_rng(6)
    keys = skewed_keys(rng, 15_000)
    items = with_nulls(make(rng, 15_000), rng)
    distinct = DistinctCount(item_type)
    rows = by_key(keys, items)
    for path, got in all_paths(distinct, pa.table({"item": items}), keys, seed=60).items():
        assert got == {key: len(exact_top(values)) for key, values in rows.items()}, path


@pytest.mark.parametrize("intercept", [False, True])
def test_least_squares_matches_lstsq(intercept):
    rng = np.random.default_rng(7)
    keys = np.append(skewed_keys(rng, 10_000, keys=50), [900, 901, 901])   # too few rows
    n = len(keys)
    x = rng.normal(size=(n, 2))
    beta = rng.normal(size=(1000, 3))[keys]
    y = beta[:, 0] * intercept + (x * beta[:, 1:]).sum(axis=1) + rng.normal(scale=0.1, size=n)
    table = pa.table({"y": with_nulls(y, rng), "x1": x[:, 0], "x2": with_nulls(x[:, 1], rng)})
    fit = LeastSquares(features=2, intercept=intercept)
    rows = by_key(keys, *table.columns)
    for path, got in all_paths(fit, table, keys, seed=70).items():
        for key, values in rows.items():
            kept = np.array([v for v in values if None not in v], dtype=np.float64)
            design = kept[:, 1:]
            if intercept:
                design = np.column_stack([np.ones(len(kept)), design])
            if np.linalg.matrix_rank(design) < design.shape[1]:
                assert got[key] is None, (path, key)
                continue
            reference = np.linalg.lstsq(design, kept[:, 0], rcond=None)[0]
            np.testing.assert_allclose(got[key], reference, rtol=1e-6, atol=1e-9,
                                       err_msg=f"{path} {key}")


def test_shipped_parameters_are_checked():
    with pytest.raises(ValueError, match="'quantiles'.*\\[0.0, 1.0\\]"):
        KllQuantiles(quantiles=(0.5, 1.5))
    with pytest.raises(ValueError, match="'k'"):
        KllQuantiles(k=4)
    with pytest.raises(ValueError, match="'capacity'.*\\[10, "):
        TopK(k=10, capacity=5)
    with pytest.raises(ValueError, match="'features'"):
        LeastSquares(features=0)


# --- RowSample --------------------------------------------------------------------------------


def brute_force_sample(rows, k):
    """The values of the k rows of smallest unsigned 64-bit hash of their id (ties by id), one
    row at a time, rows with a null id skipped: RowSample's definition, written apart from it."""
    ranked = [(int(hash_keys([row_id], shipped._SAMPLE_SEED)[0]), row_id, value)
              for value, row_id in rows if row_id is not None]
    return [value for _, _, value in sorted(ranked, key=lambda r: r[:2])[:k]]


def sample_table(rng, n, ids=None):
    """Values (some null) and ids (unique, shuffled, some null) of ``n`` rows."""
    ids = rng.permutation(n).astype(np.int64) * 7 - n if ids is None else ids
    return pa.table({"value": with_nulls(rng.normal(size=n), rng),
                     "id": with_nulls(ids, rng, fraction=0.03)})


@pytest.mark.parametrize("k", [1, 5, 40])
def test_row_sample_is_the_k_smallest_hashes_of_each_key(k):
    """Every path (scalar methods, the adapter's loop, the batch form, Arrow or Python
    buffers), partials over random workers merged in random order, equals the brute force:
    hot keys with more rows than k, cold keys with fewer (the sample is all their rows), a
    key whose only row has a null id (an empty sample), null values sampled as rows."""
    rng = np.random.default_rng(11 + k)
    keys = np.append(skewed_keys(rng, 6_000, keys=400), [5_000, 5_001, 5_001])
    table = sample_table(rng, len(keys))
    table = table.set_column(1, "id", pa.concat_arrays([
        table["id"].combine_chunks()[:-3], pa.array([None, 3, 4], pa.int64())]))
    sample = RowSample(k=k)
    assert (sample.bufferSchema, sample.outputType) == (
        "hashes: array<bigint>, values: array<double>", "array<double>")
    rows = by_key(keys, *table.columns)
    expected = {key: brute_force_sample(values, k) for key, values in rows.items()}
    assert expected[5_000] == [] and len(expected[5_001]) == min(k, 2)
    assert max(map(len, expected.values())) == k
    assert k == 1 or min(len(v) for v in expected.values() if v) < k    # groups below k
    assert any(None in v for v in expected.values())        # null values are sampled
    for path, got in all_paths(sample, table, keys, seed=80 + k).items():
        assert got == expected, path


def test_row_sample_is_uniform():
    """Each row of a key is sampled with probability k / n whatever its place in the stream:
    over 4,000 keys of 20 rows (ids in arrival order), every arrival place is sampled about
    k / n = 25 % of the time (the binomial's standard deviation is 0.7 %)."""
    keys = np.repeat(np.arange(4_000), 20)
    table = pa.table({"value": np.tile(np.arange(20.0), 4_000), "id": np.arange(80_000)})
    sample = RowSample(k=5)
    offsets = np.arange(0, 80_001, 20)
    places = np.concatenate(sample.finish_arrow(sample.reduce_arrow(table, offsets))
                            .to_numpy(zero_copy_only=False)).astype(int)
    frequency = np.bincount(places, minlength=20) / 4_000
    assert len(places) == 4_000 * 5 and np.abs(frequency - 0.25).max() < 0.03, frequency


def test_row_sample_merges_in_any_split_to_the_sample_of_all_rows():
    """Reduce any split of a key's rows, merge the partials in any grouping and order: the
    buffer is the reduce of all the rows, bit for bit (associative and commutative)."""
    rng = np.random.default_rng(12)
    sample = RowSample(k=6)
    keys = np.sort(skewed_keys(rng, 3_000, keys=30))
    table = sample_table(rng, len(keys))
    distinct, offsets = grouped_offsets(keys)
    whole = sample.reduce_arrow(table, offsets)
    for trial in range(5):
        # Cut the rows into 3 parts at random (keys stay sorted within each part).
        part = rng.integers(0, 3, len(keys))
        partials, owners = [], []
        for p in range(3):
            rows = np.flatnonzero(part == p)
            part_keys, part_offsets = grouped_offsets(keys[rows])
            partials.append(sample.reduce_arrow(table.take(rows), part_offsets))
            owners.append(part_keys)
        # (a + b) + c, in a shuffled order within each key, against a + (b + c).
        def merged(buffers, buffer_keys):
            order = rng.permutation(len(buffer_keys))
            order = order[np.argsort(buffer_keys[order], kind="stable")]
            merged_keys, merged_offsets = grouped_offsets(buffer_keys[order])
            return sample.merge_arrow(buffers.take(pa.array(order)), merged_offsets), merged_keys

        ab, ab_keys = merged(pa.concat_arrays(partials[:2]), np.concatenate(owners[:2]))
        left, left_keys = merged(pa.concat_arrays([ab, partials[2]]),
                                 np.concatenate([ab_keys, owners[2]]))
        bc, bc_keys = merged(pa.concat_arrays(partials[1:]), np.concatenate(owners[1:]))
        right, right_keys = merged(pa.concat_arrays([partials[0], bc]),
                                   np.concatenate([owners[0], bc_keys]))
        assert (left_keys == distinct).all() and (right_keys == distinct).all()
        assert left.equals(whole) and right.equals(whole), trial


def test_row_sample_scalar_and_batch_forms_make_the_same_buffers():
    rng = np.random.default_rng(13)
    sample = RowSample(k=4, item_type="bigint")
    keys = np.sort(rng.integers(0, 50, 2_000))
    table = pa.table({"value": with_nulls(rng.integers(0, 10**12, 2_000), rng),
                      "id": with_nulls(rng.permutation(2_000).astype(np.int32), rng)})
    distinct, offsets = grouped_offsets(keys)
    batch = sample.reduce_arrow(table, offsets).to_pylist()
    rows = list(zip(*(column.to_pylist() for column in table.columns)))
    scalar = []
    for start, stop in zip(offsets[:-1], offsets[1:]):
        buffer = sample.zero()
        for row in rows[start:stop]:
            buffer = sample.reduce(buffer, row)
        scalar.append({"hashes": buffer[0], "values": buffer[1]})
    assert batch == scalar
    # Merges agree too: two halves of each key, merged by merge and by merge_arrow.
    halves = [sample.reduce_arrow(table.slice(0, 1_000), grouped_offsets(keys[:1_000])[1]),
              sample.reduce_arrow(table.slice(1_000), grouped_offsets(keys[1_000:])[1])]
    first, second = (dict(zip(np.unique(k).tolist(), h.to_pylist()))
                     for k, h in ((keys[:1_000], halves[0]), (keys[1_000:], halves[1])))
    for key, buffer in zip(distinct.tolist(), batch):
        a, b = first.get(key, {"hashes": [], "values": []}), second.get(
            key, {"hashes": [], "values": []})
        merged = sample.merge((a["hashes"], a["values"]), (b["hashes"], b["values"]))
        assert {"hashes": merged[0], "values": merged[1]} == buffer, key
        assert sample.finish(merged) == buffer["values"]


def test_row_sample_of_empty_groups_and_no_rows():
    sample = RowSample(k=3)
    table = pa.table({"value": [1.0, 2.0], "id": pa.array([1, 2], pa.int64())})
    buffers = sample.reduce_arrow(table, np.array([0, 0, 2, 2]))
    assert buffers.to_pylist()[0] == buffers.to_pylist()[2] == {"hashes": [], "values": []}
    assert sample.finish_arrow(buffers).to_pylist()[::2] == [[], []]
    empty = sample.reduce_arrow(table.slice(0, 0), np.array([0]))
    assert len(empty) == 0 and empty.type == sample.arrow_buffer_type
    merged = sample.merge_arrow(buffers, np.array([0, 0, 3]))   # an empty group, then all
    assert merged.to_pylist()[0] == {"hashes": [], "values": []}
    assert sorted(sample.finish_arrow(merged).to_pylist()[1]) == [1.0, 2.0]
    assert sample.merge(sample.zero(), sample.zero()) == ([], [])


def test_row_sample_pickles_and_continues_alike():
    sample = RowSample(k=7, item_type="string")
    copy = pickle.loads(pickle.dumps(sample))
    assert repr(copy) == repr(sample) == "RowSample(k=7, item_type=DataType(string))"
    rng = np.random.default_rng(14)
    table = pa.table({"value": [f"v{i}" for i in range(500)], "id": rng.permutation(500)})
    offsets = np.array([0, 100, 500])
    buffers = sample.reduce_arrow(table, offsets)
    assert copy.reduce_arrow(table, offsets).equals(buffers)
    adapter = adapt(sample, ["value", "id"])
    again = pickle.loads(pickle.dumps(adapter))
    assert again.finish_arrow(again.merge_arrow(buffers, np.array([0, 2]))).equals(
        adapter.finish_arrow(adapter.merge_arrow(buffers, np.array([0, 2]))))


def test_row_sample_errors_name_the_parameter_and_what_was_given():
    for k in (0, RowSample.MAX_K + 1):
        with pytest.raises(ValueError, match=r"The 'k' parameter must be an int in "
                                             r"\[1, 100000\]. Got " + str(k)):
            RowSample(k=k)
    with pytest.raises(TypeError, match=r"'k' parameter .* Got '5' of type str"):
        RowSample(k="5")
    with pytest.raises(ValueError, match=r"'item_type' .* Got 'decimal' instead"):
        RowSample(item_type="decimal")
    sample = RowSample()
    with pytest.raises(TypeError, match=r"row id as its second column, an integer column. Got "
                                        r"a column of double"):
        sample.reduce_arrow(pa.table({"value": [1.0], "id": [1.5]}), np.array([0, 1]))
    with pytest.raises(TypeError, match=r"row id .* Got '7' of type str"):
        sample.reduce(sample.zero(), (1.0, "7"))
    damaged = pa.array([{"hashes": [1, 2], "values": [1.0]}], sample.arrow_buffer_type)
    with pytest.raises(ValueError, match="buffer 0 holds 2 hashes and 1 values"):
        sample.merge_arrow(damaged, np.array([0, 1]))


def test_row_sample_sorts_by_group_then_rank_as_lexsort():
    """RowSample's one-key sort gives lexsort's permutation: distinct ranks, ranks repeated in a
    group and across groups, ranks alike in their top bits, negative ranks, one group, many."""
    from skewgroup._aggregation.shipped import _by_group_then_rank

    rng = np.random.default_rng(3)
    for trial in range(300):
        n = int(rng.integers(0, 300))
        count = int(rng.choice([1, 2, 7, 1000, 70_000]))
        groups = np.sort(rng.integers(0, count, n)).astype(np.int64)
        kind = trial % 3
        if kind == 0:
            ranks = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
        elif kind == 1:
            ranks = rng.integers(-3, 3, n).astype(np.int64)           # many equal ranks
        else:                                                      # equal top bits only
            ranks = (rng.integers(-4, 4, n).astype(np.int64) << 40) + rng.integers(0, 8, n)
        assert np.array_equal(_by_group_then_rank(groups, ranks, count),
                              np.lexsort((ranks, groups))), trial
