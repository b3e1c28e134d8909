"""Rows grouped by key in Arrow and a stream's bucket of keys kept as runs (skewgroup._aggregation.groups,
skewgroup._aggregation.stream_state), without Spark: the grouping against a Python dict, the bucket's merge against
the sums of every row, over micro-batches merged into stored runs in update and append mode."""
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation import stream_state
from skewgroup._aggregation.groups import group_rows
from skewgroup._aggregation.reductions import Reduction
from skewgroup._aggregation.stream_state import (RANDOM_BITS, BucketRuns, BufferState, LAYOUT,
                                                 ReducedState, StoredStateError, merge_runs)
from skewgroup.aggregators import adapt

from _aggregators import Total


class DictStore:
    """A bucket's store in a dict (run id -> (level, bytes)), as ``BucketRuns`` reads and
    writes a MapState."""

    def __init__(self):
        self.runs = {}

    def items(self):
        return [(run_id, level, blob) for run_id, (level, blob) in self.runs.items()]

    def put(self, run_id, level, blob):
        self.runs[run_id] = (level, blob)

    def remove(self, run_id):
        del self.runs[run_id]

SUM_BUFFER = pa.struct([("total", pa.int64()), ("n", pa.int64())])


def test_groups_follow_spark_keys():
    # Nulls one group; a null struct and a struct of nulls two groups; two key columns.
    window = pa.array([{"a": 1}, None, {"a": None}, {"a": 1}, None, {"a": None}],
                      pa.struct([("a", pa.int64())]))
    table = pa.table({"w": window, "k": pa.array([1, 1, 1, 1, 1, 2])})
    grouped = group_rows(table, ["w", "k"])
    expected = defaultdict(list)
    for i, (w, k) in enumerate(zip(window.to_pylist(), table.column("k").to_pylist())):
        expected[(repr(w), k)].append(i)
    got = {}
    order = grouped.order.to_pylist()
    for g, (start, stop) in enumerate(zip(grouped.offsets[:-1], grouped.offsets[1:])):
        key = (repr(grouped.keys["w"][g].as_py()), grouped.keys["k"][g].as_py())
        got[key] = sorted(order[start:stop])
    assert got == dict(expected)
    assert grouped.keys["w"].type == window.type
    assert grouped.keys["w"].null_count == 1            # the null struct stays null


def _partials(adapter, keys, values):
    """One buffer per key of ``keys``, an Arrow struct (as the partial stage writes them)."""
    keys, values = np.asarray(keys), np.asarray(values)
    order = np.argsort(keys, kind="stable")
    unique, starts = np.unique(keys[order], return_index=True)
    offsets = np.append(starts, len(keys)).astype(np.int64)
    return pa.table({"k": unique, "b": adapter.reduce_arrow(pa.table({"x": values[order]}),
                                                             offsets)})


SCHEMA = pa.schema([("k", pa.int64()), ("b", SUM_BUFFER)])


def _emitted(merged, column="b"):
    return dict(zip(merged.emitted["k"].to_pylist(), merged.emitted[column].to_pylist()))


def test_bucket_runs_equal_the_sums_of_every_row_and_write_only_touched_keys():
    # Each micro-batch: two workers' partials, a key on both of them or on one; the keys are
    # drawn from a range that moves, so old keys go untouched and the bucket holds many runs.
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    rng = np.random.default_rng(7)
    store, runs = DictStore(), BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")], fanout=4)
    totals = defaultdict(int)
    for batch in range(11):
        new, touched = [], set()
        for _ in range(2):
            keys = rng.integers(15 * batch, 15 * batch + 20, size=60)
            values = rng.integers(-1000, 1000, size=60)
            for k, v in zip(keys.tolist(), values.tolist()):
                totals[k] += v
            touched.update(keys.tolist())
            new.append(_partials(adapter, keys, values))
        before = dict(store.runs)
        merged = runs.merge(store, pa.concat_tables(new))
        assert _emitted(merged) == {k: totals[k] for k in touched}
        # The newest run counts the bucket's live keys (a call groups only the stored rows of
        # the keys it touches, so the count is carried, not recounted).
        newest_blob = store.runs[max(store.runs)][1]
        counted = pa.ipc.open_stream(newest_blob).read_all().schema.metadata[b"skewgroup.live"]
        assert int(counted) == len(totals)
        # The runs written: this micro-batch's (its touched keys only), and a merge of the
        # newest runs once `fanout` of one level exist; every other run is left as it was.
        written = {r: v for r, v in store.runs.items() if before.get(r) != v}
        newest = max(written)
        level, blob = written[newest]
        if level == 0:
            assert len(written) == 1
            assert set(pa.ipc.open_stream(blob).read_all().column("k").to_pylist()) == touched
        removed = set(before) - set(store.runs)
        assert all(before[r][0] == level - 1 for r in removed) and (level == 0) == (not removed)
    assert max(level for level, _ in store.runs.values()) == 1
    assert len(store.runs) < 11
    # A new reader of the same store (a restarted query) continues from the stored bytes.
    again = BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")], fanout=4)
    final = again.merge(store, _partials(adapter, [5, 155], [1, 1]))
    assert _emitted(final) == {5: totals[5] + 1, 155: totals[155] + 1}


@pytest.mark.parametrize("schema", [SCHEMA, pa.schema([pa.field("k", pa.int64(), False),
                                                       ("b", SUM_BUFFER)])],
                         ids=["nullable key", "key not null"])
def test_a_hot_key_compacts_the_bucket_once_superseded_rows_are_twice_the_live_keys(schema):
    # A key Spark types as not null: the merged runs' fields, nullable, still concatenate.
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    store, runs = DictStore(), BucketRuns(schema, ["k"], [BufferState(adapter, "b")])
    runs.merge(store, _partials(adapter, [1, 2, 3], [1, 1, 1]).cast(schema))
    sizes = []
    for batch in range(9):
        merged = runs.merge(store, _partials(adapter, [1], [10]).cast(schema))
        assert _emitted(merged) == {1: 1 + 10 * (batch + 1)}
        sizes.append(len(store.runs))
    # Runs of key 1 pile up until its superseded rows exceed twice the 3 live keys: one run.
    assert sizes == [2, 3, 4, 5, 6, 7, 1, 2, 3]
    level, blob = next(iter(store.runs.values())) if len(store.runs) == 1 else (None, None)
    table = pa.concat_tables(pa.ipc.open_stream(b).read_all() for _, b in store.runs.values())
    assert sorted(set(table.column("k").to_pylist())) == [1, 2, 3]


class ScopedStore(DictStore):
    """A DictStore read run by run (``ids``, ``get``), as the Spark layer's MapState is with a
    ``scope``; it counts the runs whose bytes it gave."""

    def __init__(self, scope):
        super().__init__()
        self.scope, self.given = scope, 0

    def items(self):
        self.given += len(self.runs)
        return super().items()

    def ids(self):
        return list(self.runs)

    def get(self, run_id):
        self.given += 1
        return self.runs[run_id]


def test_a_process_reads_a_run_once_and_a_rolled_back_write_is_never_read(monkeypatch):
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    monkeypatch.setattr(stream_state, "KEPT_RUNS", stream_state.RunCache())
    store = ScopedStore(("query", 3))
    runs = BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")], fanout=64)
    totals = defaultdict(int)
    rng = np.random.default_rng(11)

    for batch in range(6):
        # New keys each micro-batch beside a hot key 0, so no compaction rewrites the runs.
        keys = np.concatenate([[0, 0], 20 * batch + 1 + rng.integers(0, 20, size=30)])
        values = rng.integers(-9, 9, size=len(keys))
        for k, v in zip(keys.tolist(), values.tolist()):
            totals[k] += v
        merged = runs.merge(store, _partials(adapter, keys, values))
        assert _emitted(merged) == {k: totals[k] for k in set(keys.tolist())}
    # Every run this process wrote it kept: no call fetched a run's bytes.
    assert store.given == 0 and len(store.runs) > 1
    # A micro-batch fails after its write in this process: the state store goes back to the
    # version before it. Its replay runs in another process (other rows here, as a
    # nondeterministic source gives) and the next micro-batch here again: the run this
    # process kept from the failed attempt is never read in place of the replay's.
    first, second = stream_state.KEPT_RUNS, stream_state.RunCache()
    committed = dict(store.runs)
    runs.merge(store, _partials(adapter, [1, 2], [1000, 1000]))
    store.runs = dict(committed)
    monkeypatch.setattr(stream_state, "KEPT_RUNS", second)
    for process in (second, first):
        monkeypatch.setattr(stream_state, "KEPT_RUNS", process)
        keys, values = rng.integers(0, 130, size=40), rng.integers(-9, 9, size=40)
        for k, v in zip(keys.tolist(), values.tolist()):
            totals[k] += v
        merged = runs.merge(store, _partials(adapter, keys, values))
        assert _emitted(merged) == {k: totals[k] for k in set(keys.tolist())}
    # A third process (nothing kept) reads the whole bucket once, then only what is new to it.
    monkeypatch.setattr(stream_state, "KEPT_RUNS", stream_state.RunCache())
    store.given, stored = 0, len(store.runs)
    assert _emitted(runs.merge(store, _partials(adapter, [7], [1]))) == {7: totals[7] + 1}
    assert _emitted(runs.merge(store, _partials(adapter, [7], [1]))) == {7: totals[7] + 2}
    assert store.given == stored


def test_the_kept_runs_stay_within_their_bound_and_only_an_idle_bucket_is_dropped():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    table = _partials(adapter, np.arange(100), np.ones(100, np.int64))
    run, size = (0, table, 100), table.get_total_buffer_size()
    cache = stream_state.RunCache(limit=int(2.5 * size))
    for scope in ("a", "b", "c"):
        cache.bucket(scope, [])
        cache.add(scope, 1, run)
    # Full: the buckets are read in turn, so none is dropped for "c", whose run is not kept.
    assert cache.bucket("c", [1]) == {} and cache.size == 2 * size
    assert cache.bucket("a", [1]) == {1: run} and cache.bucket("b", [1]) == {1: run}
    # "a" not read for four rounds of the kept buckets (a stopped query's): dropped for "c".
    for _ in range(6):
        cache.bucket("b", [1])
        cache.bucket("c", [])
    cache.add("c", 1, run)
    assert set(cache.buckets) == {"b", "c"} and cache.size == 2 * size
    # A run removed from the store is dropped when its bucket is read.
    assert cache.bucket("c", [2]) == {} and cache.size == size


def test_bucket_runs_close_keys_and_forget_them():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    store, runs = DictStore(), BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")])
    runs.merge(store, _partials(adapter, [1, 2, 3], [10, 20, 30]))
    runs.merge(store, _partials(adapter, [2], [5]))
    # Keys below 3 are final: 1 and 2 are emitted though this batch did not touch 1.
    merged = runs.merge(store, _partials(adapter, [3, 4], [5, 6]),
                        closed=lambda keys: pa.compute.less(keys.column("k"), 3))
    assert _emitted(merged) == {1: 10, 2: 25}
    assert merged.live_keys.column("k").to_pylist() == [3, 4]
    (level, blob), = store.runs.values()             # rewritten without the closed keys
    kept = pa.ipc.open_stream(blob).read_all()
    assert kept.column("k").to_pylist() == [3, 4]
    assert adapter.finish_arrow(kept.column("b")).to_pylist() == [35, 6]
    merged = runs.merge(store, SCHEMA.empty_table(), closed=lambda keys: pa.compute.less(
        keys.column("k"), 10))
    assert _emitted(merged) == {3: 35, 4: 6} and store.runs == {}


def test_stored_runs_are_checked_before_anything_reads_them():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    runs = BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")])
    new = _partials(adapter, [1], [1])
    for blob, message in [(b"not arrow", "not an Arrow table of skewgroup's state layout"),
                          (_ipc(pa.table({"key": [1], "b": [b""]})), "with the columns"),
                          (_ipc(pa.table({"k": ["x"], "b": pa.array([(1, 1)], SUM_BUFFER)}),
                                LAYOUT), "of other types")]:
        store = DictStore()
        store.put(0, 0, blob)
        with pytest.raises(StoredStateError, match=message):
            runs.merge(store, new)
    with pytest.raises(ValueError, match="fanout must be at least 2, got 1"):
        BucketRuns(SCHEMA, ["k"], [], fanout=1)


def _ipc(table, layout=None):
    """``table`` as a stored run: of ``layout`` (written in its metadata), or without one
    (the previous layout)."""
    if layout is not None:
        table = table.replace_schema_metadata({b"skewgroup.layout": layout.encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_a_run_of_the_previous_layout_is_migrated_and_an_unknown_layout_refused():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    runs = BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")])
    # The previous layout: no layout in the metadata, each buffer one pickle.
    previous = pa.table({"k": [1, 2], "b": adapter.encode([(5, 1), (7, 2)])})
    store = DictStore()
    store.put(0, 0, _ipc(previous))
    assert _emitted(runs.merge(store, _partials(adapter, [1], [10]))) == {1: 15}
    assert _emitted(runs.merge(store, _partials(adapter, [2], [1]))) == {2: 8}
    # The old run stays as it is (read and migrated at each call until a merge rewrites it);
    # what the merges wrote is of this layout.
    # Their ids count the writes above random bits: newer than the old layout's run 0.
    assert [(run_id >> RANDOM_BITS, (pa.ipc.open_stream(blob).read_all().schema.metadata or {})
             .get(b"skewgroup.layout")) for run_id, (_, blob) in sorted(store.runs.items())] == [
        (0, None), (1, LAYOUT.encode()), (2, LAYOUT.encode())]
    for blob, message in [
            (_ipc(pa.table({"k": [1], "b": [b"not a pickle"]})),
             "run 0 of state layout 'runs-1' whose column 'b' cannot be migrated to 'runs-2'"),
            (_ipc(pa.table({"k": ["one"], "b": adapter.encode([(1, 1)])})),
             "run 0 of state layout 'runs-1' whose columns cannot be migrated to 'runs-2'"),
            (_ipc(pa.table({"k": [1], "b": pa.array([(1, 1)], SUM_BUFFER)}), "runs-9"),
             "layout 'runs-9'; this version of skewgroup reads 'runs-2' and migrates 'runs-1'")]:
        store = DictStore()
        store.put(0, 0, blob)
        with pytest.raises(StoredStateError, match=message):
            runs.merge(store, _partials(adapter, [1], [1]))


def test_bucket_merge_mixes_reductions_with_an_aggregator():
    # A micro-batch's partial rows carry a count, a sum's (value, n) and a buffer side by side;
    # the bucket merges each with its own rule and emits Spark's results (null for a key whose
    # values were all null).
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    count, total = Reduction("count", pa.int64()), Reduction("sum", pa.int64())
    states = [ReducedState(count, ["n"], "count"), ReducedState(total, ["s", "sn"], "sum"),
              BufferState(adapter, "b")]

    def partials(keys, values):
        order = np.argsort(keys, kind="stable")
        keys = np.asarray(keys)[order]
        values = pa.array([values[i] for i in order], pa.int64())
        unique, starts = np.unique(keys, return_index=True)
        offsets = np.append(starts, len(keys)).astype(np.int64)
        s, sn = total.reduce(values, offsets)
        buffers = adapter.reduce_arrow(pa.table({"x": values.fill_null(0)}), offsets)
        return pa.table({"k": unique, "n": count.reduce(values, offsets)[0], "s": s, "sn": sn,
                         "b": buffers})

    first = partials([1, 1, 2], [5, None, None])
    result = merge_runs([], first, ["k"], states)
    second = partials([2, 1], [7, 3])
    result = merge_runs([result.run], second, ["k"], states)
    emitted = {k: (n, s, b) for k, n, s, b in zip(
        *(result.emitted[c].to_pylist() for c in ("k", "count", "sum", "b")))}
    assert emitted == {1: (2, 8, 8), 2: (1, 7, 7)}
    # Key 2's sum of one null is null.
    emitted = merge_runs([], first, ["k"], states).emitted
    assert emitted["sum"].to_pylist() == [5, None]


@pytest.mark.parametrize("kind", ["long", "double", "string", "two columns", "struct"])
def test_a_bucket_in_update_mode_equals_a_dictionary_over_many_micro_batches(kind):
    # Each call groups only the stored rows whose keys the micro-batch may touch; with nulls,
    # NaNs, struct keys, hot keys (compactions) and fanout 3 (cascades), every emitted result
    # equals a plain dictionary's running totals, across a restarted reader.
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    rng = np.random.default_rng(11)

    def key_columns(ids):
        nulls = ids % 17 == 0
        if kind == "long":
            return {"k": pa.array(ids, pa.int64(), mask=nulls)}
        if kind == "double":
            values = np.where(ids % 13 == 0, np.nan, ids / 4)
            return {"k": pa.array(values, pa.float64(), mask=nulls)}
        if kind == "string":
            return {"k": pa.array([f"key{i}" for i in ids], pa.string(), mask=nulls)}
        if kind == "two columns":
            return {"k": pa.array(ids % 7, pa.int64()),
                    "j": pa.array([f"j{i // 7}" for i in ids], pa.string(), mask=nulls)}
        return {"k": pa.StructArray.from_arrays(
            [pa.array(ids % 5, pa.int64(), mask=ids % 11 == 0), pa.array(ids // 5, pa.int64())],
            names=["a", "b"], mask=pa.array(nulls))}

    def reference_key(row):
        return repr(row)          # nan and None print alike each time: one key each

    probe = key_columns(np.arange(1))
    keys = list(probe)
    schema = pa.schema([*[(k, probe[k].type) for k in keys], ("b", SUM_BUFFER)])
    store = DictStore()
    totals = defaultdict(int)
    for batch in range(40):
        if batch == 25:
            runs = None                       # a restarted query reads the same store
        if batch in (0, 25):
            runs = BucketRuns(schema, keys, [BufferState(adapter, "b")], fanout=3)
        hot = np.zeros(20, np.int64)
        ids = np.concatenate([hot, rng.integers(0, 40 + 8 * batch, size=40)])
        values = rng.integers(-100, 100, size=len(ids))
        table = pa.table({**key_columns(ids), "x": values})
        groups = group_rows(table, keys)
        new = pa.table({**groups.keys, "b": adapter.reduce_arrow(
            table.select(["x"]).take(groups.order), groups.offsets)})
        expected = {}
        for row, value in zip(table.select(keys).to_pylist(), values.tolist()):
            totals[reference_key(row)] += value
            expected[reference_key(row)] = totals[reference_key(row)]
        merged = runs.merge(store, new)
        emitted = pa.table({k: merged.emitted[k] for k in keys}).to_pylist()
        assert dict(zip(map(reference_key, emitted), merged.emitted["b"].to_pylist())) == \
            expected, f"micro-batch {batch}"
    assert len(store.runs) < 12
