"""A bucket's runs as stored and read back (skewgroup._aggregation.stream.stored), without
Spark: untrusted bytes checked before anything reads them, the previous layout migrated."""
import pyarrow as pa
import pytest

from skewgroup._aggregation.stream.bucket import RANDOM_BITS, BucketRuns
from skewgroup._aggregation.stream.states import BufferState
from skewgroup._aggregation.stream.stored import LAYOUT, StoredStateError
from skewgroup.aggregators import adapt

from _aggregators import Total
from _stream_buckets import SCHEMA, SUM_BUFFER, DictStore, emitted_of, partials_of, stored_bytes


def test_stored_runs_are_checked_before_anything_reads_them():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    runs = BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")])
    new = partials_of(adapter, [1], [1])
    for blob, message in [(b"not arrow", "not an Arrow table of skewgroup's state layout"),
                          (stored_bytes(pa.table({"key": [1], "b": [b""]})), "with the columns"),
                          (stored_bytes(pa.table({"k": ["x"], "b": pa.array([(1, 1)], SUM_BUFFER)}),
                                LAYOUT), "of other types")]:
        store = DictStore()
        store.put(0, 0, blob)
        with pytest.raises(StoredStateError, match=message):
            runs.merge(store, new)
    with pytest.raises(ValueError, match="fanout must be at least 2, got 1"):
        BucketRuns(SCHEMA, ["k"], [], fanout=1)


def test_a_run_of_the_previous_layout_is_migrated_and_an_unknown_layout_refused():
    adapter = adapt(Total(), ["x"], buffer_type=SUM_BUFFER, output_type=pa.int64())
    runs = BucketRuns(SCHEMA, ["k"], [BufferState(adapter, "b")])
    # The previous layout: no layout in the metadata, each buffer one pickle.
    previous = pa.table({"k": [1, 2], "b": adapter.encode([(5, 1), (7, 2)])})
    store = DictStore()
    store.put(0, 0, stored_bytes(previous))
    assert emitted_of(runs.merge(store, partials_of(adapter, [1], [10]))) == {1: 15}
    assert emitted_of(runs.merge(store, partials_of(adapter, [2], [1]))) == {2: 8}
    # The old run stays as it is (read and migrated at each call until a merge rewrites it);
    # what the merges wrote is of this layout.
    # Their ids count the writes above random bits: newer than the old layout's run 0.
    assert [(run_id >> RANDOM_BITS, (pa.ipc.open_stream(blob).read_all().schema.metadata or {})
             .get(b"skewgroup.layout")) for run_id, (_, blob) in sorted(store.runs.items())] == [
        (0, None), (1, LAYOUT.encode()), (2, LAYOUT.encode())]
    for blob, message in [
            (stored_bytes(pa.table({"k": [1], "b": [b"not a pickle"]})),
             "run 0 of state layout 'runs-1' whose column 'b' cannot be migrated to 'runs-2'"),
            (stored_bytes(pa.table({"k": ["one"], "b": adapter.encode([(1, 1)])})),
             "run 0 of state layout 'runs-1' whose columns cannot be migrated to 'runs-2'"),
            (stored_bytes(pa.table({"k": [1], "b": pa.array([(1, 1)], SUM_BUFFER)}), "runs-9"),
             "layout 'runs-9'; this version of skewgroup reads 'runs-2' and migrates 'runs-1'")]:
        store = DictStore()
        store.put(0, 0, blob)
        with pytest.raises(StoredStateError, match=message):
            runs.merge(store, partials_of(adapter, [1], [1]))
