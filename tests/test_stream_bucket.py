"""A stream's bucket of keys kept as runs in a store (skewgroup._aggregation.stream.bucket),
without Spark: the bucket's merge against the sums of every row, over micro-batches merged into
stored runs in update and append mode; the runs a process keeps."""
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._aggregation.groups import group_rows
from skewgroup._aggregation.stream.bucket import BucketRuns
from skewgroup._aggregation.stream.cache import RunCache
from skewgroup._aggregation.stream.states import BufferState
from skewgroup.aggregators import adapt

from _aggregators import Total
from _stream_buckets import (SCHEMA, SUM_BUFFER, DictStore, ScopedStore, emitted_of,
                             partials_of)


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
            new.append(partials_of(adapter, keys, values))
        before = dict(store.runs)
        merged = runs.merge(store, pa.concat_tables(new))
        assert emitted_of(merged) == {k: totals[k] for k in touched}
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
    final = again.merge(store, partials_of(adapter, [5, 155], [1, 1]))
    assert emitted_of(final) == {5: totals[5] + 1, 155: totals[155] + 1}


@pytest.mark.parametrize("schema", [SCHEMA, pa.schema([pa.field("k", pa.int64(), False),
                                                       ("b", SUM_BUFFER)])],
                         ids=["nullable key", "key not null"])
def test_a_hot_key_compacts_the_bucket_once_superseded_rows_are_twice_the_live_keys(schema):
    # A key Spark types as not null: the merged runs' fields, nullable, still concatenate.
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    store, runs = DictStore(), BucketRuns(schema, ["k"], [BufferState(adapter, "b")])
    runs.merge(store, partials_of(adapter, [1, 2, 3], [1, 1, 1]).cast(schema))
    sizes = []
    for batch in range(9):
        merged = runs.merge(store, partials_of(adapter, [1], [10]).cast(schema))
        assert emitted_of(merged) == {1: 1 + 10 * (batch + 1)}
        sizes.append(len(store.runs))
    # Runs of key 1 pile up until its superseded rows exceed twice the 3 live keys: one run.
    assert sizes == [2, 3, 4, 5, 6, 7, 1, 2, 3]
    level, blob = next(iter(store.runs.values())) if len(store.runs) == 1 else (None, None)
    table = pa.concat_tables(pa.ipc.open_stream(b).read_all() for _, b in store.runs.values())
    assert sorted(set(table.column("k").to_pylist())) == [1, 2, 3]


def test_a_process_reads_a_run_once_and_a_rolled_back_write_is_never_read():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    states = [BufferState(adapter, "b")]
    first = RunCache()      # each process keeps its own runs
    store = ScopedStore(("query", 3))
    runs = BucketRuns(SCHEMA, ["k"], states, fanout=64, cache=first)
    totals = defaultdict(int)
    rng = np.random.default_rng(11)

    for batch in range(6):
        # New keys each micro-batch beside a hot key 0, so no compaction rewrites the runs.
        keys = np.concatenate([[0, 0], 20 * batch + 1 + rng.integers(0, 20, size=30)])
        values = rng.integers(-9, 9, size=len(keys))
        for k, v in zip(keys.tolist(), values.tolist()):
            totals[k] += v
        merged = runs.merge(store, partials_of(adapter, keys, values))
        assert emitted_of(merged) == {k: totals[k] for k in set(keys.tolist())}
    # Every run this process wrote it kept: no call fetched a run's bytes.
    assert store.given == 0 and len(store.runs) > 1
    # A micro-batch fails after its write in this process: the state store goes back to the
    # version before it. Its replay runs in another process (other rows here, as a
    # nondeterministic source gives) and the next micro-batch here again: the run this
    # process kept from the failed attempt is never read in place of the replay's.
    committed = dict(store.runs)
    runs.merge(store, partials_of(adapter, [1, 2], [1000, 1000]))
    store.runs = dict(committed)
    for process in (RunCache(), first):
        runs = BucketRuns(SCHEMA, ["k"], states, fanout=64, cache=process)
        keys, values = rng.integers(0, 130, size=40), rng.integers(-9, 9, size=40)
        for k, v in zip(keys.tolist(), values.tolist()):
            totals[k] += v
        merged = runs.merge(store, partials_of(adapter, keys, values))
        assert emitted_of(merged) == {k: totals[k] for k in set(keys.tolist())}
    # A third process (nothing kept) reads the whole bucket once, then only what is new to it.
    runs = BucketRuns(SCHEMA, ["k"], states, fanout=64, cache=RunCache())
    store.given, stored = 0, len(store.runs)
    assert emitted_of(runs.merge(store, partials_of(adapter, [7], [1]))) == {7: totals[7] + 1}
    assert emitted_of(runs.merge(store, partials_of(adapter, [7], [1]))) == {7: totals[7] + 2}
    assert store.given == stored


def test_bucket_runs_close_keys_and_forget_them():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    store, runs = DictStore(), BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")])
    runs.merge(store, partials_of(adapter, [1, 2, 3], [10, 20, 30]))
    runs.merge(store, partials_of(adapter, [2], [5]))
    # Keys below 3 are final: 1 and 2 are emitted though this batch did not touch 1.
    merged = runs.merge(store, partials_of(adapter, [3, 4], [5, 6]),
                        closed=lambda keys: pa.compute.less(keys.column("k"), 3))
    assert emitted_of(merged) == {1: 10, 2: 25}
    assert merged.live_keys.column("k").to_pylist() == [3, 4]
    (level, blob), = store.runs.values()             # rewritten without the closed keys
    kept = pa.ipc.open_stream(blob).read_all()
    assert kept.column("k").to_pylist() == [3, 4]
    assert adapter.finish_arrow(kept.column("b")).to_pylist() == [35, 6]
    merged = runs.merge(store, SCHEMA.empty_table(), closed=lambda keys: pa.compute.less(
        keys.column("k"), 10))
    assert emitted_of(merged) == {3: 35, 4: 6} and store.runs == {}


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
