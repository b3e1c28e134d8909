"""The benches' hand-written ways on one aggregator (bench/bench_aggregators_spark.py and the
benches built on its grid), beside the job's in skewgroup/app/baselines.py, on which they build:
:class:`OneAggregator`, one key column ``k``, one value column ``x`` and one aggregator with the
vectorized ``reduce_groups``/``merge_groups`` (a plain per-row Aggregator gets them as the Python
loops a user writes around its ``zero``/``reduce``/``merge``: :func:`grouped_form`), its buffers
pickled. Per key in batch (a grouped-aggregate pandas UDF, ``applyInPandas``, a ``mapInArrow``
local-global); per key (``applyInPandasWithState``) and per bucket of keys
(``applyInPandasWithState``, ``transformWithStateInPandas`` with a ValueState or a MapState) on
a stream; and the job's ``partial`` way (``baselines.partial_bucketed``: the round-robin
partial, then the per-bucket ``applyInPandasWithState`` merge of :func:`bucket_state` over the
partials) and the same ``foreachBatch`` table as the job's (``baselines.foreach_batch``), each
on the code the job runs.

Spark's Python workers cannot import bench/: bench/_session.py ships this module by value.
"""
import pickle

import numpy as np

from skewgroup._aggregation.batches import table_of
from skewgroup.app.baselines import bucket_column, partial_bucketed

def sorted_groups(keys):
    """(row order sorting by key, group offsets): how a careful user groups in numpy."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    return order, np.r_[starts, len(keys)]


def encode(buffers):
    return [pickle.dumps(b, protocol=5) for b in buffers]


def decode(blobs):
    return [pickle.loads(b) for b in blobs]


def grouped_form(obj):
    """``obj`` when it has the vectorized ``reduce_groups`` and ``merge_groups``; else (a plain
    per-row Aggregator: ``zero``/``reduce``/``merge``/``finish`` only) :class:`_Loop` over it,
    the loops an expert writes around those methods."""
    if callable(getattr(obj, "reduce_groups", None)) and callable(
            getattr(obj, "merge_groups", None)):
        return obj
    return _Loop(obj)


class _Loop:
    """A plain Spark-protocol Aggregator's ``reduce_groups``/``merge_groups`` as the Python
    loops a user writes around its methods: per group ``zero()`` and one ``reduce(buffer,
    value)`` call per row (``value`` the tuple of the row's column values, as Spark passes it),
    and per group of buffers the first merged with each further one (``zero()`` for an empty
    group). Its own code, not skewgroup's adapter: the baselines stand apart from the layer they
    are measured against."""

    def __init__(self, obj):
        self.obj = obj
        self.outputType = obj.outputType

    def reduce_groups(self, rows, offsets):
        values = list(zip(*(column.to_pylist() for column in rows.columns)))
        offsets = np.asarray(offsets, dtype=np.int64).tolist()
        zero, reduce = self.obj.zero, self.obj.reduce
        buffers = []
        for start, stop in zip(offsets[:-1], offsets[1:]):
            buffer = zero()
            for value in values[start:stop]:
                buffer = reduce(buffer, value)
            buffers.append(buffer)
        return buffers

    def merge_groups(self, buffers, offsets):
        offsets = np.asarray(offsets, dtype=np.int64).tolist()
        merge = self.obj.merge
        merged = []
        for start, stop in zip(offsets[:-1], offsets[1:]):
            buffer = buffers[start] if stop > start else self.obj.zero()
            for other in buffers[start + 1:stop]:
                buffer = merge(buffer, other)
            merged.append(buffer)
        return merged

    def finish(self, buffer):
        return self.obj.finish(buffer)


class OneAggregator:
    """The benches' hand-written ways for ``obj`` (Spark's Aggregator protocol, with or without
    the vectorized ``reduce_groups``/``merge_groups``: a plain per-row one runs through
    :func:`grouped_form`'s Python loops) over rows (k long, x double): result columns (k, a),
    ``output`` (default ``k long, a <obj.outputType>``) and ``output_type`` (the Arrow type of a;
    default from ``obj.outputType``). For ``baselines.foreach_batch``: a micro-batch as it comes,
    partials (k, pickled buffer), a state table read with the schema its files hold."""

    keys = ["k"]
    partials = "k long, buf binary"

    def __init__(self, obj, output=None, output_type=None):
        self.obj = grouped_form(obj)
        self.output = output or f"k long, a {obj.outputType}"
        self._output_type = output_type

    @property
    def output_type(self):
        """The Arrow type Spark expects for the result column (driver side)."""
        if self._output_type is None:
            from pyspark.sql import types as T
            from pyspark.sql.pandas.types import to_arrow_type

            self._output_type = to_arrow_type(T._parse_datatype_string(self.obj.outputType))
        return self._output_type

    # --- batch: one result per key -------------------------------------------------------------

    def pandas_udf(self, df):
        """Spark's grouped-aggregate pandas UDF (``pd.Series -> list``): one call per key after
        a shuffle by key, the key's whole Series."""
        import pandas as pd
        from pyspark.sql.functions import pandas_udf

        obj = self.obj

        @pandas_udf(obj.outputType)
        def aggregate_udf(x: pd.Series) -> list:   # Series -> scalar: GROUPED_AGG
            return whole(obj, x.to_numpy())

        return df.groupBy("k").agg(aggregate_udf("x").alias("a"))

    def apply_in_pandas(self, df):
        """``groupBy("k").applyInPandas``: the same per key on its pandas DataFrame."""
        import pandas as pd

        obj = self.obj

        def per_key(frame):
            return pd.DataFrame({"k": [frame["k"].iloc[0]],
                                 "a": [whole(obj, frame["x"].to_numpy())]})

        return df.groupBy("k").applyInPandas(per_key, f"k long, a {obj.outputType}")

    def local_global(self, df, workers):
        """``mapInArrow`` partial per key inside each input partition, ``repartition(workers,
        "k")``, one ``mapInArrow`` merge per partition."""
        import pyarrow as pa

        obj = self.obj
        target = pa.schema([("k", pa.int64()), ("a", self.output_type)])
        return (df.mapInArrow(partial_buffers(obj), self.partials)
                .repartition(workers, "k")
                .mapInArrow(merge_and_finish(obj, target), f"k long, a {obj.outputType}"))

    # --- a stream: the state per key or per bucket of keys --------------------------------------

    def per_key(self, source):
        """``groupBy("k").applyInPandasWithState`` over the raw rows, state the key's pickled
        buffer."""
        from pyspark.sql.streaming.state import GroupStateTimeout

        return source.groupBy("k").applyInPandasWithState(
            per_key_state(self.obj), self.output, "buf binary", "update",
            GroupStateTimeout.NoTimeout)

    def bucketed(self, source):
        """``applyInPandasWithState`` per bucket of keys (``baselines.bucket_column``), the bucket's
        state one Arrow IPC blob (k, pickled buffer)."""
        from pyspark.sql.streaming.state import GroupStateTimeout

        return source.select("k", "x", bucket_column("k")).groupBy(
            "bucket").applyInPandasWithState(bucket_state(self.obj, self.output_type),
                                             self.output, "blob binary", "update",
                                             GroupStateTimeout.NoTimeout)

    def partial_bucketed(self, source, workers):
        """The job's ``partial`` way (``baselines.partial_bucketed``) over rows (k, x): round robin
        into ``workers`` partitions, the ``mapInArrow`` partial (:func:`partial_buffers`: one
        (k, pickled buffer) row per partition and key), then the bucketed method's merge
        (:func:`bucket_state`) over those partials: the per-row work is balanced before the
        shuffle by key, and a hot key reaches its bucket's call as one partial a partition."""
        return partial_bucketed(self, source, workers)

    def tws(self, source, method):
        """``transformWithStateInPandas`` per bucket of keys (:func:`tws_processor`)."""
        return source.select("k", "x", bucket_column("k")).groupBy(
            "bucket").transformWithStateInPandas(
            tws_processor(self.obj, self.output_type, method), self.output, "Update", "None")

    # --- the parts of foreach_batch and partial_bucketed --------------------------------------

    def rows(self, batch):
        return batch

    def read_state(self, spark, path):
        return spark.read.parquet(str(path))

    def partial(self):
        return partial_buffers(self.obj)

    def merger(self):
        return merge_buffers(self.obj)

    def partial_merge(self):
        return bucket_state(self.obj, self.output_type, incoming=_merge_partial_frames)


def whole(obj, values):
    """The aggregate of one key's whole value Series: finish(reduce_groups(rows, [0, n])[0])."""
    import pyarrow as pa

    values = np.asarray(values, dtype=np.float64)
    buffer = obj.reduce_groups(pa.table({"x": values}),
                               np.array([0, len(values)], dtype=np.int64))[0]
    return obj.finish(buffer)


def partial_buffers(obj):
    """mapInArrow: (k, pickled buffer) per key of the partition, one reduce_groups call."""
    def partial(batches):
        import pyarrow as pa

        table = table_of(batches)
        if table is None:
            return
        keys = table.column("k").to_numpy()
        order, offsets = sorted_groups(keys)
        buffers = obj.reduce_groups(table.select(["x"]).take(order), offsets)
        yield pa.RecordBatch.from_arrays(
            [pa.array(keys[order][offsets[:-1]]), pa.array(encode(buffers), pa.binary())],
            names=["k", "buf"])

    return partial


def _merge_several(obj, items, offsets, load=list, store=list):
    """One item per group [offsets[g], offsets[g + 1]) of ``items`` (sorted by key): a group of
    one item passes through as it is; the others are merged in one ``merge_groups`` call over
    ``load(their items)``, its buffers turned back into items by ``store``."""
    sizes = np.diff(offsets)
    merged = [items[i] for i in offsets[:-1].tolist()]
    several = np.flatnonzero(sizes > 1)
    if several.size:
        picked = [items[j] for g in several.tolist()
                  for j in range(offsets[g], offsets[g + 1])]
        sub = np.concatenate([[0], np.cumsum(sizes[several])]).astype(np.int64)
        for g, item in zip(several.tolist(), store(obj.merge_groups(load(picked), sub))):
            merged[g] = item
    return merged


def _merge_grouped(obj, keys, blobs):
    """(distinct keys, their merged blobs): keys with one blob pass through undecoded."""
    order, offsets = sorted_groups(keys)
    blobs = [blobs[i] for i in order.tolist()]
    return keys[order][offsets[:-1]], _merge_several(obj, blobs, offsets, decode, encode)


def merge_and_finish(obj, target):
    """mapInArrow: the partition's (k, buf) rows merged per key and finished: (k, a)."""
    def merge(batches):
        import pyarrow as pa

        table = table_of(batches)
        if table is None:
            return
        keys = table.column("k").to_numpy()
        order, offsets = sorted_groups(keys)
        buffers = decode(table.column("buf").take(order).to_pylist())
        merged = obj.merge_groups(buffers, offsets)
        yield pa.RecordBatch.from_arrays(
            [pa.array(keys[order][offsets[:-1]]),
             pa.array([obj.finish(b) for b in merged], target.field("a").type)],
            schema=target)

    return merge


def merge_buffers(obj):
    """mapInArrow: the partition's (k, buf) rows merged per key, still encoded."""
    def merge(batches):
        import pyarrow as pa

        table = table_of(batches)
        if table is None:
            return
        keys, blobs = _merge_grouped(obj, table.column("k").to_numpy(),
                                     table.column("buf").to_pylist())
        yield pa.RecordBatch.from_arrays([pa.array(keys), pa.array(blobs, pa.binary())],
                                         names=["k", "buf"])

    return merge


def per_key_state(obj):
    def update(key, frames, state):
        import pandas as pd

        values = np.concatenate([f["x"].to_numpy() for f in frames])
        buffer = obj.reduce_groups(_x_table(values), np.array([0, len(values)]))[0]
        if state.exists:
            buffer = obj.merge_groups([pickle.loads(state.get[0]), buffer],
                                      np.array([0, 2]))[0]
        state.update((pickle.dumps(buffer, protocol=5),))
        yield pd.DataFrame({"k": [key[0]], "a": [obj.finish(buffer)]})

    return update


def _x_table(values):
    import pyarrow as pa

    return pa.table({"x": np.asarray(values, dtype=np.float64)})


def _reduce_frames(obj, frames):
    """(the keys, sorted, and one new buffer per key) of a stateful call's raw (k, x) frames,
    or None when they hold no row."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    keys = np.concatenate([f["k"].to_numpy() for f in frames]).astype(np.int64)
    values = np.concatenate([f["x"].to_numpy() for f in frames])
    order, offsets = sorted_groups(keys)
    return keys[order][offsets[:-1]], obj.reduce_groups(_x_table(values[order]), offsets)


def _merge_partial_frames(obj, frames):
    """(the keys, sorted, and one buffer per key) of a stateful call's (k, pickled buffer)
    partials, decoded: the keys with several partials merged in one ``merge_groups`` call; or
    None when the frames hold no row."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    keys = np.concatenate([f["k"].to_numpy() for f in frames]).astype(np.int64)
    blobs = [blob for f in frames for blob in f["buf"].tolist()]
    order, offsets = sorted_groups(keys)
    buffers = decode([blobs[i] for i in order.tolist()])
    return keys[order][offsets[:-1]], _merge_several(obj, buffers, offsets)


def bucket_state(obj, output_type, incoming=_reduce_frames):
    """applyInPandasWithState's function over a bucket of keys: ``incoming(obj, frames)``
    gives the call's keys and one new buffer per key (by default :func:`_reduce_frames`: the
    bucket's raw rows reduced per key in one ``reduce_groups`` call; for partials
    :func:`_merge_partial_frames`), merged into the stored buffers of the keys they touch (only
    those decoded); state one Arrow IPC blob (k, pickled buffer) sorted by key; emits the
    touched keys."""
    def update(_, frames, state):
        import pyarrow as pa

        reduced = incoming(obj, frames)
        if reduced is None:
            return
        new_keys, new = reduced
        if state.exists:
            stored = pa.ipc.open_stream(state.get[0]).read_all()
            stored_keys = stored.column("k").to_numpy()
            stored_blobs = stored.column("buf").to_pylist()
        else:
            stored_keys, stored_blobs = np.empty(0, np.int64), []
        # Only the touched keys' stored buffers are decoded and merged.
        at = np.searchsorted(stored_keys, new_keys)
        found = at < len(stored_keys)
        found[found] = stored_keys[at[found]] == new_keys[found]
        merged = list(new)
        hit = np.flatnonzero(found)
        if hit.size:
            pairs = [b for i in hit.tolist()
                     for b in (pickle.loads(stored_blobs[at[i]]), new[i])]
            for i, buffer in zip(hit.tolist(), obj.merge_groups(
                    pairs, np.arange(0, 2 * hit.size + 1, 2, dtype=np.int64))):
                merged[i] = buffer
        merged_blobs = encode(merged)
        blobs = list(stored_blobs)
        for i, j in enumerate(at.tolist()):
            if found[i]:
                blobs[j] = merged_blobs[i]
        fresh = np.flatnonzero(~found)
        all_keys = np.concatenate([stored_keys, new_keys[fresh]])
        all_blobs = blobs + [merged_blobs[i] for i in fresh.tolist()]
        ordering = np.argsort(all_keys, kind="stable")      # stored sorted by key
        table = pa.table({"k": all_keys[ordering],
                          "buf": pa.array([all_blobs[i] for i in ordering.tolist()],
                                          pa.binary())})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        state.update((sink.getvalue().to_pybytes(),))
        out = pa.table({"k": new_keys,
                        "a": pa.array([obj.finish(b) for b in merged], output_type)})
        yield out.to_pandas()

    return update


class _ValueAsGroupState:
    """A transformWithState ValueState seen through applyInPandasWithState's GroupState calls
    (``exists``, ``get``, ``update``): the bucketed method's function runs unchanged."""

    def __init__(self, value):
        self._value = value

    @property
    def exists(self):
        return self._value.exists()

    @property
    def get(self):
        return self._value.get()

    def update(self, value):
        self._value.update(value)


def tws_processor(obj, output_type, method):
    """transformWithStateInPandas per bucket of key hashes. ``tws-blob``: the bucketed
    method's state (one Arrow IPC blob per bucket, a ValueState). ``tws-map``: a MapState per
    bucket from key to pickled buffer, so only the keys a batch touches are read and written,
    each with one getValue and one updateValue (a request to the JVM each)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    update_blob = bucket_state(obj, output_type)

    class Blob(StatefulProcessor):
        def init(self, handle):
            self.state = _ValueAsGroupState(handle.getValueState("blob", "blob binary"))

        def handleInputRows(self, key, rows, timerValues):
            yield from update_blob(key, rows, self.state)

        def close(self):
            pass

    class Map(StatefulProcessor):
        def init(self, handle):
            self.buffers = handle.getMapState("buffers", "k long", "buf binary")

        def handleInputRows(self, key, rows, timerValues):
            import pyarrow as pa

            reduced = _reduce_frames(obj, rows)
            if reduced is None:
                return
            new_keys, merged = reduced[0], list(reduced[1])
            for i, k in enumerate(new_keys.tolist()):
                stored = self.buffers.getValue((k,))
                if stored is not None:
                    merged[i] = obj.merge_groups([pickle.loads(stored[0]), merged[i]],
                                                 np.array([0, 2]))[0]
                self.buffers.updateValue((k,), (pickle.dumps(merged[i], protocol=5),))
            yield pa.table({"k": new_keys, "a": pa.array([obj.finish(b) for b in merged],
                                                         output_type)}).to_pandas()

        def close(self):
            pass

    return Blob() if method == "tws-blob" else Map()
