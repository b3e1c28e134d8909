"""Python aggregators whose merge is Python (Spark cannot combine them): skew_group against what a
Spark user or expert writes, batch and streaming, every plan of a cell in the same run.

    cd /tmp && python -m pytest /work/main/bench/bench_aggregators_spark.py --benchmark-only \\
        -s -p no:cacheprovider                                  (the whole grid)
    ... -k batch / -k streaming / -k "batch and 1.4"            (a part)
    python /work/main/bench/bench_aggregators_spark.py bench/results/<date>-figures.json
                                                                (the markdown tables)

Run it from outside the checkout (Spark's Python workers import the installed skewgroup). The
sizes and the grid come from the environment (defaults in brackets):

* ``SKEWGROUP_BENCH_AGGS_BATCH_ROWS`` [2000000] rows of the batch DataFrame;
  ``SKEWGROUP_BENCH_AGGS_FILES`` [8] its input partitions (parquet files, arrival order);
* ``SKEWGROUP_BENCH_AGGS_STREAM_ROWS`` [200000] rows per micro-batch;
  ``SKEWGROUP_BENCH_AGGS_STREAM_BATCHES`` [5] micro-batches (the first is not measured);
  ``SKEWGROUP_BENCH_AGGS_FILES_PER_BATCH`` [1] parquet files per micro-batch (input partitions);
* ``SKEWGROUP_BENCH_AGGS_ROUNDS`` [2] rounds of the batch plans,
  ``SKEWGROUP_BENCH_AGGS_STREAM_ROUNDS`` [1] of the streaming methods;
* ``SKEWGROUP_BENCH_AGGS_Z`` [1.0,1.4,2.0], ``SKEWGROUP_BENCH_AGGS_UNIVERSES`` [100000,1000000];
* ``SKEWGROUP_BENCH_AGGS_AGGREGATES`` [cheap,expensive,kll];
  ``SKEWGROUP_BENCH_AGGS_BATCH_PLANS`` / ``SKEWGROUP_BENCH_AGGS_STREAM_METHODS`` [all] subsets;
* ``SKEWGROUP_BENCH_AGGS_WORKERS`` [16] skew_group's workers and the shuffle partitions;
* ``SKEWGROUP_BENCH_AGGS_CHEAP_WIDTH`` [48] / ``SKEWGROUP_BENCH_AGGS_EXPENSIVE_WIDTH`` [8700]
  lanes of the mix per row of the two reduce costs.

Workload. Keys ``skewgroup.streams.zipf(z, rows, universe=U, seed=21)``, z in {1.0, 1.4, 2.0},
U in {10^5, 10^6}; a value column x (float64, lognormal). 16 workers (``workers=16`` and 16
shuffle partitions), local[2], AQE off. Three aggregators, each a Python object with Spark's
Aggregator protocol and the vectorized ``reduce_groups``/``merge_groups``:

* ``cheap``     -- ``MixSum(48)``: per row the splitmix64 finaliser over 48 lanes of x's 64
  bits (``wide_mix``: the value plus lane x golden ratio, xor-reduced, top 31 bits), summed per
  key (numpy ``reduceat``), and the rows: about 0.1 µs/row. Buffer (score, n), merge in Python
  (numpy over the buffers' tuples); result ``array<bigint>`` [score, n]: integers, checked bit
  for bit;
* ``expensive`` -- ``MixSum(8700)``: the same at about 10 µs/row. The width comes from the
  ratio to bench_plans' ``mixed`` (900 rounds = 0.957 µs/row on a quiet machine, RESULTS.md)
  measured interleaved on this machine; the µs/row of each aggregate's reduce alone (numpy,
  20,000 rows in groups of 10, best of 3) is measured at the start and recorded per row as
  ``cost_per_row_us``. Not ``mixed`` itself: its cost is ``rounds`` numpy calls per call, about
  0.1 s per call at 10 µs/row however few rows, which every per-key baseline would pay per key
  (the first smoke run: 228 s of task time for 1,483 keys and 20,000 rows);
* ``kll``       -- ``skewgroup.aggregators.KllQuantiles((0.5, 0.9, 0.99))`` (k = 200): a
  realistic sketch. Not bit for bit (merge order changes a sketch): each returned quantile's
  true rank among the key's values is checked, exactly (error 0) for keys of at most k values
  (the sketch is exact there), within 2x the sketch's 99 % rank error for the others (the
  maximum error, over its rank error, and the share beyond 1x are recorded).

Exactness: every run's result is collected (``toArrow``, the measured action of every plan) and
compared with a single-process numpy reference of the same data (per-key sums of the same mix
and row counts; for the stream, of every row of every micro-batch): keys, scores and counts
equal, or the test fails.

Batch plans (``test_batch``), per (z, U) cell, every aggregator and plan in the same run, rounds
outermost, after an unmeasured warm-up (the cheap aggregator once routed, once as pandas UDF):

* ``auto``, ``local``, ``hash``, ``split``, ``routed`` -- ``skew_group("k",
  agg.aggregator(obj, "x", name="a"), workers=16, plan=...)``; routed with the default strategy
  (adaptive); auto's log line (which plan and why) is recorded;
* ``pandas_udf``    -- Spark's grouped-aggregate pandas UDF (``pd.Series -> list``, i.e.
  ``PandasUDFType.GROUPED_AGG``) in ``groupBy("k").agg(udf("x"))``: the aggregate of a key's
  whole Series, ``finish(reduce_groups(rows, [0, n])[0])``, one call per key after a shuffle by
  key (no partial aggregation: Spark cannot combine it);
* ``applyInPandas`` -- ``groupBy("k").applyInPandas(fn, "k long, a <type>")``: the same per key
  on its pandas DataFrame;
* ``local-global``  -- what an expert writes: ``mapInArrow`` partial per key inside each input
  partition (argsort the keys, one ``reduce_groups`` call, buffers pickled as skew_group pickles
  them), then ``repartition(16, "k")`` and one ``mapInArrow`` merge per partition (one
  ``merge_groups`` call, ``finish``).

Per run, from Spark's REST API over the run's job group (bench_plans' readers): the critical
path (sum over stages of the slowest task's ``executorRunTime``), the total task time, the wall
time; min over rounds, max kept as the spread; per stage its tasks, slowest task and rows.

Streaming methods (``test_streaming``), per (z, U) cell: a parquet file source, one file per
micro-batch (``maxFilesPerTrigger``), ``trigger(availableNow=True)``, a fresh checkpoint per
run; the same files for every method. Each method runs on the state store its user gets:
RocksDB for skew_group (which sets it) and the tws methods, Spark's default for the others.
Stateful methods write to the memory sink in update mode
(every batch's updated keys collected, the same for the three; the last row per key is checked
against the reference):

* ``skew_group``   -- ``skew_group("k", agg.aggregator(obj, "x", name="a"), workers=16)``: auto
  on a stream without ``sample=`` = routed, default strategy (adaptive); the merge
  ``transformWithStateInPandas`` over 64 buckets of key hashes, each bucket's keys as runs in
  RocksDB (docs/stream.md);
* ``sampled``      -- the same with ``sample=`` the batch read of the stream's first file (one
  micro-batch's rows): auto samples it and times the partial as in batch;
* ``spread``       -- the same with ``plan="spread"`` (round robin on a stream, no tag stage);
* ``local``        -- the same with ``plan="local"``: the partial inside the input tasks (the
  read stage), no shuffle before it, so one Python stage fewer; a hot key's rows stay in the
  input task that read them;
* ``per-key``      -- ``groupBy("k").applyInPandasWithState`` over the raw rows, one call per key
  and micro-batch, state the key's pickled buffer;
* ``bucketed``     -- the expert's: ``groupBy(pmod(xxhash64(k), 64)).applyInPandasWithState``,
  one call per bucket: the bucket's new rows reduced per key in one ``reduce_groups`` call, then
  merged into the stored buffers of the keys they touch (only those decoded), state one Arrow
  IPC blob (k, pickled buffer) per bucket; emits the touched keys;
* ``tws-blob``     -- the bucketed method in ``transformWithStateInPandas`` (Spark >= 4.1;
  RocksDB's state store, which it requires): the same function, the
  bucket's blob a ValueState;
* ``tws-map``      -- ``transformWithStateInPandas`` per bucket with a MapState from key to
  pickled buffer: only the keys a batch touches are read and written, one ``getValue`` and
  one ``updateValue`` per key (each a request to the JVM). These two answer which stateful API
  the merge should use; not in the default methods (``SKEWGROUP_BENCH_AGGS_STREAM_METHODS``);
* ``foreachBatch`` -- each micro-batch as a batch DataFrame: ``repartition(16)`` (round robin:
  the batch is one input partition), ``mapInArrow`` partial, union with the previous state table,
  ``repartition(16, "k")``, ``mapInArrow`` merge (keys with one buffer pass through undecoded),
  written as the next version of a parquet state table (the MERGE pattern without Delta, one
  directory per batch id, so a replayed batch rewrites its own version). No rows are emitted:
  the table is the result (finished on the driver for the check).

Per method: micro-batch time (progress ``durationMs.triggerExecution``) min over the batches
after the first (and over rounds), max kept as the spread; per batch the critical path and total
task time (REST API: a stream's jobs carry its run id as job group and ``batch = N``, also
the jobs foreachBatch starts); distinct keys per batch (from the data); state bytes per key:
for the three stateful methods ``stateOperators[0].customMetrics.stateOnCurrentVersionSizeBytes``
of the last batch (the state store's current version, blob bytes and row overhead) over the
keys seen so far (``memoryUsedBytes``, which also counts the versions cached in memory, and
``numRowsTotal`` are recorded too); for foreachBatch the last state table's parquet bytes on disk
over its rows. Also recorded: each batch of the first round (micro-batch, critical path, total
task time: a cost that grows with the state shows there) and the stages of the fastest batch.

The targets (recorded, not asserted: task times on a shared 2-core machine are noise-prone):
batch critical path >= 3x shorter than pandas_udf's at z >= 1.4; stream micro-batch >= 3x
shorter than per-key's where a batch holds >= 5,000 distinct keys, and never longer; stream
critical path <= 1.1x bucketed's at z = 1.0 and >= 2.5x shorter at z >= 1.4 with the expensive
reduce.

Runtime (extrapolated from a 1/10-size run of the z = 1.0, 10^6-key cell on 2 cores at load
average 7-10): about 3 h 10 min for the batch cells (z = 1.0 over 10^6 keys alone ~100 min: its
342,000 keys cost pandas_udf and applyInPandas milliseconds each; 10^5 keys ~35 min; z = 1.4
~18 min; z = 2.0 ~10 min per cell, 2 rounds) and 1 h 40 min for the streaming cells (z = 1.0:
~42 and ~26 min, per-key applyInPandasWithState most of it; z = 1.4 ~9 min, z = 2.0 ~6 min
per cell); perhaps half on a quiet machine. ``SKEWGROUP_BENCH_AGGS_BATCH_PLANS`` without
applyInPandas roughly halves the z = 1.0 batch cells; the data and the references are written
once under /tmp/skewgroup-bench-aggregators (the expensive reference: 2 M rows of the mix, ~1 min).
"""
import json
import logging
import os
import pathlib
import pickle
import shutil
import sys
import tempfile
import time

import numpy as np
import pytest

from bench_plans import _sorted_groups   # shipped by value (the spark fixture)

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def _env(name, default):
    return os.environ.get(f"SKEWGROUP_BENCH_AGGS_{name}", default)


BATCH_ROWS = int(_env("BATCH_ROWS", 2_000_000))
FILES = int(_env("FILES", 8))
STREAM_ROWS = int(_env("STREAM_ROWS", 200_000))
STREAM_BATCHES = int(_env("STREAM_BATCHES", 5))
FILES_PER_BATCH = int(_env("FILES_PER_BATCH", 1))
ROUNDS = int(_env("ROUNDS", 2))
STREAM_ROUNDS = int(_env("STREAM_ROUNDS", 1))
ZS = tuple(float(z) for z in _env("Z", "1.0,1.4,2.0").split(","))
UNIVERSES = tuple(int(u) for u in _env("UNIVERSES", "100000,1000000").split(","))
AGGREGATES = tuple(_env("AGGREGATES", "cheap,expensive,kll").split(","))
SKEW_PLANS = ("auto", "local", "hash", "split", "routed", "spread")
HAND_PLANS = ("pandas_udf", "applyInPandas", "local-global")
BATCH_PLANS = tuple(_env("BATCH_PLANS", ",".join(SKEW_PLANS + HAND_PLANS)).split(","))
STREAM_METHODS = tuple(_env("STREAM_METHODS", "skew_group,spread,per-key,bucketed,foreachBatch")
                       .split(","))
# wide_mix lanes per row: ~1.15 ns a lane on a quiet machine (calibrated against bench_plans'
# 900 rounds of mixed = 0.957 µs/row, measured interleaved): about 0.1 and 10 µs/row.
CHEAP_WIDTH = int(_env("CHEAP_WIDTH", 48))
EXPENSIVE_WIDTH = int(_env("EXPENSIVE_WIDTH", 8_700))
KLL_QUANTILES = (0.5, 0.9, 0.99)
WORKERS = int(_env("WORKERS", 16))   # the partial's workers and the shuffle partitions
BUCKETS = 64
SEED = 21
UI_PORT = 4080
DATA = pathlib.Path(tempfile.gettempdir()) / "skewgroup-bench-aggregators"
SNAPSHOTS = pathlib.Path(tempfile.gettempdir()) / "skewgroup-bench-aggregators-routers"
SCHEMA = "k long, x double"


# --- the aggregators ---------------------------------------------------------------------------


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def wide_mix(bits, width):
    """Per value (uint64): the splitmix64 finaliser of ``width`` lanes (the value plus
    lane * golden ratio), xor-reduced, top 31 bits (int64). bench_plans' ``mixed`` loops
    ``rounds`` times over numpy calls, so one call costs rounds x numpy's call overhead
    (~0.1 s at 9,400 rounds) however few rows it gets: a per-key caller (pandas UDF,
    applyInPandas, per-key state) would pay that per key. Here a call is a few numpy calls per
    chunk of 2^16 lanes: the cost follows rows x width, tens of µs at least."""
    out = np.empty(len(bits), dtype=np.int64)
    step = max(1, (1 << 16) // width)
    lanes = np.arange(1, width + 1, dtype=np.uint64) * _GOLDEN
    for start in range(0, len(bits), step):
        z = np.asarray(bits[start:start + step], dtype=np.uint64)[:, None] + lanes[None, :]
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
        out[start:start + len(z)] = (np.bitwise_xor.reduce(z, axis=1)
                                     >> np.uint64(33)).astype(np.int64)
    return out


class MixSum:
    """Spark's Aggregator protocol with the vectorized form: per row ``wide_mix`` of x's 64
    bits over ``width`` lanes (cost proportional to rows x width), summed per key, and the
    rows. Buffer (score, n); result [score, n]; the merge is Python (numpy over the buffers'
    tuples), so Spark cannot combine it."""

    bufferSchema = "score bigint, n bigint"
    outputType = "array<bigint>"

    def __init__(self, width):
        self.width = width

    def _mix(self, x):
        return wide_mix(np.ascontiguousarray(x, dtype=np.float64).view(np.uint64), self.width)

    def zero(self):
        return (0, 0)

    def reduce(self, buffer, value):
        return (buffer[0] + int(self._mix(np.array([value[0]]))[0]), buffer[1] + 1)

    def merge(self, buffer1, buffer2):
        return (buffer1[0] + buffer2[0], buffer1[1] + buffer2[1])

    def finish(self, buffer):
        return [buffer[0], buffer[1]]

    def reduce_groups(self, rows, offsets):
        offsets = np.asarray(offsets, dtype=np.int64)
        values = self._mix(rows.column(0).to_numpy())
        sums = _group_sums(values, offsets)
        return list(zip(sums.tolist(), np.diff(offsets).tolist()))

    def merge_groups(self, buffers, offsets):
        offsets = np.asarray(offsets, dtype=np.int64)
        pairs = np.array(buffers, dtype=np.int64).reshape(-1, 2)
        return [tuple(pair) for pair in _group_sums(pairs, offsets).tolist()]


def _group_sums(values, offsets):
    """Per group [offsets[i], offsets[i+1]) the sum of ``values`` (axis 0); empty groups 0."""
    padded = np.concatenate([values, np.zeros((1,) + values.shape[1:], values.dtype)])
    sums = np.add.reduceat(padded, offsets[:-1], axis=0)
    sums[offsets[:-1] == offsets[1:]] = 0
    return sums


def make_aggregator(name):
    from skewgroup.aggregators import KllQuantiles

    if name == "cheap":
        return MixSum(CHEAP_WIDTH)
    if name == "expensive":
        return MixSum(EXPENSIVE_WIDTH)
    if name == "kll":
        return KllQuantiles(KLL_QUANTILES)
    raise ValueError(f"unknown aggregate {name!r}")


def whole(obj, values):
    """The aggregate of one key's whole value Series: finish(reduce_groups(rows, [0, n])[0])."""
    import pyarrow as pa

    values = np.asarray(values, dtype=np.float64)
    buffer = obj.reduce_groups(pa.table({"x": values}),
                               np.array([0, len(values)], dtype=np.int64))[0]
    return obj.finish(buffer)


def _arrow_output(obj):
    """The Arrow type Spark expects for ``obj.outputType`` (driver side)."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(T._parse_datatype_string(obj.outputType))


def _encode(buffers):
    return [pickle.dumps(b, protocol=5) for b in buffers]


def _decode(blobs):
    return [pickle.loads(b) for b in blobs]


# --- batch plans -------------------------------------------------------------------------------


def batch_query(df, aggregate, plan):
    """The result (k, a) of ``plan`` for ``aggregate``."""
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql.functions import pandas_udf

    from skewgroup.spark import agg, skew_group

    obj = make_aggregator(aggregate)
    if plan in SKEW_PLANS:
        return df.transform(skew_group("k", agg.aggregator(obj, "x", name="a"),
                                       workers=WORKERS, plan=plan)).select("k", "a")
    if plan == "pandas_udf":
        @pandas_udf(obj.outputType)
        def aggregate_udf(x: pd.Series) -> list:   # Series -> scalar: GROUPED_AGG
            return whole(obj, x.to_numpy())

        return df.groupBy("k").agg(aggregate_udf("x").alias("a"))
    if plan == "applyInPandas":
        def per_key(frame):
            return pd.DataFrame({"k": [frame["k"].iloc[0]],
                                 "a": [whole(obj, frame["x"].to_numpy())]})

        return df.groupBy("k").applyInPandas(per_key, f"k long, a {obj.outputType}")
    if plan == "local-global":
        target = pa.schema([("k", pa.int64()), ("a", _arrow_output(obj))])
        return (df.mapInArrow(partial_buffers(obj), "k long, buf binary")
                .repartition(WORKERS, "k")
                .mapInArrow(merge_and_finish(obj, target), f"k long, a {obj.outputType}"))
    raise ValueError(f"unknown plan {plan!r}")


def partial_buffers(obj):
    """mapInArrow: (k, pickled buffer) per key of the partition, one reduce_groups call."""
    def partial(batches):
        import pyarrow as pa

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        keys = table.column("k").to_numpy()
        order, offsets = _sorted_groups(keys)
        buffers = obj.reduce_groups(table.select(["x"]).take(order), offsets)
        yield pa.RecordBatch.from_arrays(
            [pa.array(keys[order][offsets[:-1]]), pa.array(_encode(buffers), pa.binary())],
            names=["k", "buf"])

    return partial


def _merge_grouped(obj, keys, blobs):
    """(distinct keys, their merged blobs): keys with one blob pass through undecoded."""
    order, offsets = _sorted_groups(keys)
    blobs = [blobs[i] for i in order.tolist()]
    sizes = np.diff(offsets)
    merged = list(blobs[i] for i in offsets[:-1].tolist())
    several = np.flatnonzero(sizes > 1)
    if several.size:
        picked = [blobs[j] for g in several.tolist()
                  for j in range(offsets[g], offsets[g + 1])]
        sub = np.concatenate([[0], np.cumsum(sizes[several])]).astype(np.int64)
        for g, blob in zip(several.tolist(),
                           _encode(obj.merge_groups(_decode(picked), sub))):
            merged[g] = blob
    return keys[order][offsets[:-1]], merged


def merge_and_finish(obj, target):
    """mapInArrow: the partition's (k, buf) rows merged per key and finished: (k, a)."""
    def merge(batches):
        import pyarrow as pa

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        keys = table.column("k").to_numpy()
        order, offsets = _sorted_groups(keys)
        buffers = _decode(table.column("buf").take(order).to_pylist())
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

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        keys, blobs = _merge_grouped(obj, table.column("k").to_numpy(),
                                     table.column("buf").to_pylist())
        yield pa.RecordBatch.from_arrays([pa.array(keys), pa.array(blobs, pa.binary())],
                                         names=["k", "buf"])

    return merge


# --- streaming methods -------------------------------------------------------------------------


def stream_query(spark, source, aggregate, method, sample=None):
    """The streaming DataFrame (k, a) of ``method`` (not foreachBatch); ``sample``: a batch
    read of one micro-batch's rows, which ``sampled`` (auto with ``sample=``) hands skew_group."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from skewgroup.spark import agg, skew_group

    obj = make_aggregator(aggregate)
    output = f"k long, a {obj.outputType}"
    if method in SKEW_METHODS:
        plan = "auto" if method in ("skew_group", "sampled") else method
        return source.transform(skew_group(
            "k", agg.aggregator(obj, "x", name="a"), workers=WORKERS, plan=plan,
            sample=sample if method == "sampled" else None)).select("k", "a")
    if method == "per-key":
        return source.groupBy("k").applyInPandasWithState(
            per_key_state(obj), output, "buf binary", "update", GroupStateTimeout.NoTimeout)
    bucket = F.pmod(F.xxhash64("k"), F.lit(BUCKETS)).alias("bucket")
    if method == "bucketed":
        return source.select("k", "x", bucket).groupBy("bucket").applyInPandasWithState(
            bucket_state(obj, _arrow_output(obj)), output, "blob binary", "update",
            GroupStateTimeout.NoTimeout)
    if method in TWS_METHODS:
        return source.select("k", "x", bucket).groupBy("bucket").transformWithStateInPandas(
            tws_processor(obj, _arrow_output(obj), method), output, "Update", "None")
    raise ValueError(f"unknown method {method!r}")


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
    order, offsets = _sorted_groups(keys)
    return keys[order][offsets[:-1]], obj.reduce_groups(_x_table(values[order]), offsets)


def bucket_state(obj, output_type):
    def update(_, frames, state):
        import pyarrow as pa

        reduced = _reduce_frames(obj, frames)
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
        merged_blobs = _encode(merged)
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


TWS_METHODS = ("tws-blob", "tws-map")
SKEW_METHODS = ("skew_group", "sampled", "routed", "spread", "local")
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


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


def foreach_batch(spark, obj, state_dir, workers=WORKERS):
    """The foreachBatch function of the MERGE pattern for the aggregator ``obj``: state table
    version per batch id, ``workers`` partitions for the partial and the merge."""

    def process(batch, batch_id):
        partial = batch.repartition(workers).mapInArrow(partial_buffers(obj),
                                                        "k long, buf binary")
        previous = _state_version(state_dir, batch_id - 1)
        if previous is not None:
            partial = partial.unionByName(spark.read.parquet(str(previous)))
        merged = partial.repartition(workers, "k").mapInArrow(merge_buffers(obj),
                                                              "k long, buf binary")
        merged.write.mode("overwrite").parquet(str(state_dir / f"v{batch_id:06d}"))

    return process


def one_batch_sample(spark, directory, schema):
    """``sample=`` for auto on the stream in ``directory``: a batch read of its first file, one
    micro-batch's rows, as docs/plans.md asks."""
    first = sorted((directory / "input").glob("*.parquet"))[0]
    return spark.read.schema(schema).parquet(str(first))


def _state_version(state_dir, batch_id):
    """The latest state table written for a batch id <= ``batch_id`` (a batch with no rows
    writes none), or None."""
    if batch_id < 0 or not state_dir.exists():
        return None
    versions = sorted(p for p in state_dir.iterdir()
                      if p.name.startswith("v") and int(p.name[1:]) <= batch_id
                      and (p / "_SUCCESS").exists())
    return versions[-1] if versions else None


# --- data and references -------------------------------------------------------------------


def _draw(z, universe, rows, seed):
    import skewgroup

    keys = skewgroup.streams.zipf(z, rows, universe=universe, seed=seed)
    x = np.random.default_rng(seed + 1).lognormal(0.0, 1.0, rows)
    return keys.astype(np.int64), x


def batch_dataset(z, universe):
    """BATCH_ROWS rows (k, x) as FILES parquet files in arrival order (written once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = DATA / f"batch-z{z}-u{universe}-{BATCH_ROWS}-f{FILES}"
    if not (directory / "_done").exists():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        keys, x = _draw(z, universe, BATCH_ROWS, SEED)
        for i, rows in enumerate(np.array_split(np.arange(BATCH_ROWS), FILES)):
            pq.write_table(pa.table({"k": keys[rows], "x": x[rows]}),
                           directory / f"part-{i:03d}.parquet")
        np.savez(directory / "_data.npz", keys=keys, x=x)
        (directory / "_done").write_text(f"{BATCH_ROWS} rows\n")
    return directory


def stream_dataset(z, universe):
    """STREAM_BATCHES micro-batches of STREAM_ROWS rows, FILES_PER_BATCH files each, their
    modification times increasing (the file source's order). The input is ``input/``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = (DATA / f"stream-z{z}-u{universe}-{STREAM_ROWS}x{STREAM_BATCHES}"
                        f"-f{FILES_PER_BATCH}")
    if not (directory / "_done").exists():
        shutil.rmtree(directory, ignore_errors=True)
        (directory / "input").mkdir(parents=True)
        keys, x = _draw(z, universe, STREAM_ROWS * STREAM_BATCHES, SEED + 100)
        start = time.time() - 10 * STREAM_BATCHES * FILES_PER_BATCH
        for b in range(STREAM_BATCHES):
            rows = np.arange(b * STREAM_ROWS, (b + 1) * STREAM_ROWS)
            for i, part in enumerate(np.array_split(rows, FILES_PER_BATCH)):
                path = directory / "input" / f"batch-{b:04d}-{i:03d}.parquet"
                pq.write_table(pa.table({"k": keys[part], "x": x[part]}), path)
                stamp = start + 10 * (b * FILES_PER_BATCH + i)
                os.utime(path, (stamp, stamp))
        np.savez(directory / "_data.npz", keys=keys, x=x)
        (directory / "_done").write_text(f"{STREAM_BATCHES} x {STREAM_ROWS} rows\n")
    return directory


class Reference:
    """The single-process answer for every aggregate over (keys, x), and its checks."""

    def __init__(self, directory, aggregates):
        with np.load(directory / "_data.npz") as data:
            keys, x = data["keys"], data["x"]
        self.rows = len(keys)
        order = np.lexsort((x, keys))                      # by key, then value
        sorted_keys, xs = keys[order], x[order]
        self.keys, starts, self.counts = np.unique(sorted_keys, return_index=True,
                                                   return_counts=True)
        self.starts = starts.astype(np.int64)
        self.expected = {}
        for name in aggregates:
            if name == "kll":
                continue
            width = CHEAP_WIDTH if name == "cheap" else EXPENSIVE_WIDTH
            cache = directory / f"_reference-{width}.npy"
            if cache.exists():
                scores = np.load(cache)
            else:
                values = wide_mix(x.view(np.uint64), width)[order]
                scores = np.add.reduceat(values, self.starts)
                np.save(cache, scores)
            self.expected[name] = np.column_stack([scores, self.counts])
        # KLL: a value's rank among its key's values, through one sorted code per row:
        # key index * (rows + 1) + the value's rank among all values (increasing within a key).
        self.all_x = np.sort(x)
        group = np.repeat(np.arange(len(self.keys), dtype=np.int64), self.counts)
        self.codes = group * (self.rows + 1) + np.searchsorted(self.all_x, xs)

    def distinct(self):
        return int(len(self.keys))

    def check(self, aggregate, keys, values):
        """Compare a result (keys, list values) with the reference; figures of the check, or
        AssertionError."""
        order = np.argsort(keys, kind="stable")
        keys = np.asarray(keys)[order]
        assert len(keys) == len(self.keys) and np.array_equal(keys, self.keys), (
            f"{aggregate}: {len(keys)} result keys, {len(self.keys)} expected; "
            f"first differences {np.setxor1d(keys, self.keys)[:5]}")
        values = [values[i] for i in order.tolist()]
        if aggregate != "kll":
            got = np.array(values, dtype=np.int64).reshape(-1, 2)
            bad = np.flatnonzero((got != self.expected[aggregate]).any(axis=1))
            assert bad.size == 0, (f"{aggregate}: {bad.size} keys differ, e.g. key "
                                   f"{self.keys[bad[0]]}: {got[bad[0]]} != "
                                   f"{self.expected[aggregate][bad[0]]}")
            return {"exact": "bit for bit"}
        return self._check_kll(values)

    def _check_kll(self, values):
        from skewgroup.aggregators import KllQuantiles

        assert all(v is not None and len(v) == len(KLL_QUANTILES) for v in values), \
            "kll: a key without quantiles"
        got = np.array(values, dtype=np.float64)                     # [keys, quantiles]
        q = np.array(KLL_QUANTILES)[None, :]
        base = (np.arange(len(self.keys), dtype=np.int64) * (self.rows + 1))[:, None]
        below = np.searchsorted(self.codes, base + np.searchsorted(self.all_x, got, "left"))
        upto = np.searchsorted(self.codes, base + np.searchsorted(self.all_x, got, "right"))
        n = self.counts[:, None].astype(np.float64)
        low = (below - self.starts[:, None]) / n
        high = (upto - self.starts[:, None]) / n
        error = np.maximum(0.0, np.maximum(low - q, q - high))
        sketch = KllQuantiles(KLL_QUANTILES)
        small = self.counts <= sketch.k
        assert (error[small] == 0).all(), (
            f"kll: {int((error[small] > 0).sum())} quantiles of keys with <= k values are "
            f"not exact (max rank error {error[small].max():.4f})")
        bound = sketch.rank_error
        large = error[~small]
        worst = float(large.max()) if large.size else 0.0
        assert worst <= 2 * bound, f"kll: rank error {worst:.4f} > 2 x {bound:.4f}"
        return {"exact": "rank", "keys_over_k": int((~small).sum()),
                "max_rank_error_over_bound": round(worst / bound, 3),
                "share_beyond_bound": round(float((large > bound).mean()) if large.size
                                            else 0.0, 4)}


def _result_columns(table):
    """(keys as numpy, values as a Python list) of a collected (k, a) table."""
    return table.column("k").to_numpy(), table.column("a").to_pylist()


def _last_per_key(table):
    """The memory sink's rows in order of arrival: the last row of every key."""
    keys, values = _result_columns(table)
    if not len(keys):
        return keys, values
    reverse = keys[::-1]
    _, first = np.unique(reverse, return_index=True)
    last = len(keys) - 1 - first
    return keys[last], [values[i] for i in last.tolist()]


# --- Spark -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    from bench_spark import local_session
    from pyspark import cloudpickle

    import bench_plans

    cloudpickle.register_pickle_by_value(bench_plans)   # its mix runs in the Python workers
    session = local_session(sys.modules[__name__], "skewgroup-bench-aggregators", UI_PORT,
                            {"spark.sql.adaptive.enabled": "false",
                             "spark.sql.shuffle.partitions": str(WORKERS),
                             "spark.skewgroup.routerSnapshots": str(SNAPSHOTS)})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def costs():
    """µs per row of each aggregate's vectorized reduce alone (numpy, one process): 20,000
    rows in 2,000 groups, best of 3."""
    import pyarrow as pa

    from bench_spark import _timed

    rng = np.random.default_rng(0)
    rows = pa.table({"x": rng.lognormal(0.0, 1.0, 20_000)})
    offsets = np.arange(0, 20_001, 10, dtype=np.int64)
    out = {}
    for name in AGGREGATES:
        obj = make_aggregator(name)
        best = min(_timed(obj.reduce_groups, rows, offsets) for _ in range(3))
        out[name] = round(best / rows.num_rows * 1e6, 3)
    return out


def _p1(z, universe):
    return 1.0 / float(np.sum(np.arange(1, universe + 1, dtype=np.float64) ** -z))


class _AutoLog(logging.Handler):
    """skew_group's plan choice (auto's INFO line), per aggregate."""

    def __init__(self):
        super().__init__()
        self.current, self.said = None, {}

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("skew_group plan="):     # not the state store's line
            self.said[self.current] = message


def _cells():
    return [(z, u) for z in ZS for u in UNIVERSES]


def _cell_id(cell):
    return f"z{cell[0]}-u{cell[1]}"


@pytest.mark.parametrize("cell", _cells(), ids=_cell_id)
def test_batch(benchmark, figures, spark, costs, cell):
    from bench_plans import group_stages, summarize
    from bench_spark import run_in_group

    z, universe = cell
    directory = batch_dataset(z, universe)
    reference = Reference(directory, AGGREGATES)
    df = spark.read.parquet(str(directory))
    assert df.rdd.getNumPartitions() == FILES
    runs = {(a, p): [] for a in AGGREGATES for p in BATCH_PLANS}
    checks = {}
    log = _AutoLog()
    logger = logging.getLogger("skewgroup.spark")
    logger.addHandler(log)
    logger.setLevel(logging.INFO)

    def every_plan():
        for plan in ("routed", "pandas_udf"):   # warm-up: the JVM, the page cache, workers
            batch_query(df, "cheap", plan).toArrow()
        for round_ in range(ROUNDS):   # rounds outermost: a burst of load hits one run per plan
            for aggregate, plan in runs:
                log.current = aggregate
                label = f"aggs-z{z}-u{universe}-{aggregate}-{plan}-{round_}"
                table, wall = run_in_group(spark, label,
                                           lambda: batch_query(df, aggregate, plan).toArrow())
                runs[aggregate, plan].append((None, wall, group_stages(spark, label)))
                checks[aggregate, plan] = reference.check(aggregate, *_result_columns(table))

    try:
        benchmark.pedantic(every_plan, rounds=1, iterations=1)
    finally:
        logger.removeHandler(log)
    for aggregate in AGGREGATES:
        figures.add(what="aggregators batch", z=z, universe=universe, aggregate=aggregate,
                    rows=BATCH_ROWS, files=FILES, workers=WORKERS, rounds=ROUNDS,
                    distinct_keys=reference.distinct(), p1=round(_p1(z, universe), 4),
                    cost_per_row_us=costs[aggregate],
                    mix_width={"cheap": CHEAP_WIDTH,
                               "expensive": EXPENSIVE_WIDTH}.get(aggregate),
                    auto_said=log.said.get(aggregate, ""),
                    exact={p: checks[aggregate, p] for p in BATCH_PLANS},
                    plans={p: summarize(runs[aggregate, p]) for p in BATCH_PLANS})


# --- streaming ---------------------------------------------------------------------------------


def batch_stages(spark, run_id):
    """{batch id: [per completed stage: name, tasks, slowest task s, total s]} of a stream's
    run (its jobs carry the run id as job group and ``batch = N`` in their description; the
    same reader as bench_streaming's ``batch_critical_paths``, per stage)."""
    from bench_spark import _get

    jobs = []
    for _ in range(60):   # the UI's listener is asynchronous
        jobs = [j for j in _get(spark, "jobs") if j.get("jobGroup") == str(run_id)]
        if jobs and all(j["status"] != "RUNNING" for j in jobs):
            break
        time.sleep(0.5)
    stage_ids = {}
    for job in jobs:
        description = job.get("description") or ""
        if job["status"] != "SUCCEEDED" or "batch = " not in description:
            continue
        batch = int(description.rsplit("batch = ", 1)[1].split()[0])
        stage_ids.setdefault(batch, set()).update(job["stageIds"])
    out = {}
    for batch, ids in stage_ids.items():
        stages = []
        for stage_id in sorted(ids):
            for stage in _get(spark, f"stages/{stage_id}"):
                if stage["status"] != "COMPLETE":
                    continue
                tasks = _get(spark, f"stages/{stage_id}/{stage['attemptId']}/taskList"
                                    f"?length=1000")
                times = [t["taskMetrics"]["executorRunTime"] / 1000 for t in tasks
                         if t["status"] == "SUCCESS"]
                stages.append({"name": stage["name"][:40], "tasks": len(times),
                               "max_task_s": round(max(times), 3),
                               "total_s": round(sum(times), 3)})
        out[batch] = stages
    return out


def run_stream(spark, directory, aggregate, method, label):
    """One run of ``method`` over the stream in ``directory``: (non-empty progresses, per-batch
    stages from the REST API, final (keys, values), state figures)."""
    source = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", FILES_PER_BATCH)
              .parquet(str(directory / "input")))
    checkpoint = tempfile.mkdtemp(prefix="sg-bench-aggs-ck-")
    state_dir = pathlib.Path(tempfile.mkdtemp(prefix="sg-bench-aggs-state-"))
    name = label.replace("-", "_").replace(".", "_")
    try:
        provider = "spark.sql.streaming.stateStore.providerClass"
        # Each method on the state store its user gets: skew_group sets RocksDB for the
        # session (its transformWithStateInPandas needs it), so the others are set back to
        # Spark's default before they start.
        spark.conf.set(provider, ROCKSDB if method in TWS_METHODS else HDFS)
        if method == "foreachBatch":
            writer = source.writeStream.foreachBatch(
                foreach_batch(spark, make_aggregator(aggregate), state_dir))
        else:
            sample = one_batch_sample(spark, directory, SCHEMA)
            writer = (stream_query(spark, source, aggregate, method, sample).writeStream
                      .format("memory").queryName(name).outputMode("update"))
        used = spark.conf.get(provider)
        query = (writer.option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None, query.exception()
        progress = [json.loads(p.json) for p in query.recentProgress]
        progress = [p for p in progress if p["numInputRows"]]
        paths = batch_stages(spark, query.runId)
        state = {}
        if method == "foreachBatch":
            last = _state_version(state_dir, 1 << 30)
            table = spark.read.parquet(str(last)).toArrow()
            obj = make_aggregator(aggregate)
            keys = table.column("k").to_numpy()
            values = [obj.finish(b) for b in _decode(table.column("buf").to_pylist())]
            disk = sum(f.stat().st_size for f in last.glob("*.parquet"))
            state = {"state_bytes": disk, "state_rows": table.num_rows,
                     "state_bytes_source": "parquet bytes on disk of the last state table"}
        else:
            keys, values = _last_per_key(spark.table(name).toArrow())
            spark.catalog.dropTempView(name)
            operator = progress[-1]["stateOperators"][0]
            custom = operator.get("customMetrics") or {}
            state = {"state_bytes": custom.get("stateOnCurrentVersionSizeBytes",
                                               operator["memoryUsedBytes"]),
                     "memory_used_bytes": operator["memoryUsedBytes"],
                     "state_rows": operator["numRowsTotal"],
                     "state_bytes_source": "stateOnCurrentVersionSizeBytes"
                     if "stateOnCurrentVersionSizeBytes" in custom else "memoryUsedBytes"}
        state["state_store"] = used.rsplit(".", 1)[-1]
        return progress, paths, (keys, values), state
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
        shutil.rmtree(state_dir, ignore_errors=True)


def _spread(values):
    return {"min": round(min(values), 3), "max": round(max(values), 3)}


@pytest.mark.parametrize("cell", _cells(), ids=_cell_id)
def test_streaming(benchmark, figures, spark, costs, cell):
    z, universe = cell
    directory = stream_dataset(z, universe)
    reference = Reference(directory, AGGREGATES)
    with np.load(directory / "_data.npz") as data:
        keys = data["keys"]
    per_batch = [np.unique(keys[b * STREAM_ROWS:(b + 1) * STREAM_ROWS])
                 for b in range(STREAM_BATCHES)]
    distinct = [int(len(k)) for k in per_batch]
    seen = [int(len(np.unique(keys[:(b + 1) * STREAM_ROWS]))) for b in range(STREAM_BATCHES)]
    runs = {(a, m): [] for a in AGGREGATES for m in STREAM_METHODS}
    checks = {}

    log = _AutoLog()
    logger = logging.getLogger("skewgroup.spark")
    logger.addHandler(log)
    logger.setLevel(logging.INFO)

    def every_method():
        for round_ in range(STREAM_ROUNDS):
            for aggregate, method in runs:
                log.current = (aggregate, method)
                label = f"aggs-stream-z{z}-u{universe}-{aggregate}-{method}-{round_}"
                progress, paths, result, state = run_stream(spark, directory, aggregate,
                                                            method, label)
                assert len(progress) == STREAM_BATCHES, (method, len(progress))
                runs[aggregate, method].append((progress, paths, state))
                checks[aggregate, method] = reference.check(aggregate, *result)

    try:
        benchmark.pedantic(every_method, rounds=1, iterations=1)
    finally:
        logger.removeHandler(log)
    for aggregate in AGGREGATES:
        methods = {}
        for method in STREAM_METHODS:
            batch_s, critical, total, stages = [], [], [], []
            for progress, paths, _ in runs[aggregate, method]:
                for p in progress[1:]:          # after the first micro-batch
                    batch_s.append(p["durationMs"]["triggerExecution"] / 1000)
                    critical.append(sum(s["max_task_s"] for s in paths[p["batchId"]]))
                    total.append(sum(s["total_s"] for s in paths[p["batchId"]]))
                    stages.append(paths[p["batchId"]])
            state = runs[aggregate, method][0][2]
            keys_so_far = seen[-1]
            methods[method] = {
                "batch_s": _spread(batch_s), "critical_s": _spread(critical),
                "total_s": _spread(total),
                "first_batch_s": round(min(r[0][0]["durationMs"]["triggerExecution"] / 1000
                                           for r in runs[aggregate, method]), 3),
                "stages_of_fastest_batch": stages[int(np.argmin(critical))],
                # every batch of the first round, the first included: (micro-batch s, critical
                # s, total task s), to see a cost that grows with the state
                "per_batch": [[round(p["durationMs"]["triggerExecution"] / 1000, 3),
                               round(sum(s["max_task_s"] for s in paths[p["batchId"]]), 3),
                               round(sum(s["total_s"] for s in paths[p["batchId"]]), 3)]
                              for progress, paths, _ in runs[aggregate, method][:1]
                              for p in progress],
                "state_bytes_per_key": round(state["state_bytes"] / keys_so_far, 1),
                "auto_said": log.said.get((aggregate, method), ""),
                **state}
        figures.add(what="aggregators streaming", z=z, universe=universe, aggregate=aggregate,
                    rows_per_batch=STREAM_ROWS, batches=STREAM_BATCHES,
                    files_per_batch=FILES_PER_BATCH, workers=WORKERS, rounds=STREAM_ROUNDS,
                    distinct_keys_per_batch=distinct, keys_total=seen[-1],
                    p1=round(_p1(z, universe), 4), cost_per_row_us=costs[aggregate],
                    mix_width={"cheap": CHEAP_WIDTH,
                               "expensive": EXPENSIVE_WIDTH}.get(aggregate),
                    exact={m: checks[aggregate, m] for m in STREAM_METHODS}, methods=methods)


# --- the tables --------------------------------------------------------------------------------


def batch_table(rows):
    """Markdown: per cell and aggregate, critical / total (s) per plan, auto's choice, ratios."""
    rows = [r for r in rows if r.get("what") == "aggregators batch"]
    if not rows:
        return ""
    plans = list(rows[0]["plans"])
    lines = ["| z | keys | aggregate | µs/row | " + " | ".join(plans)
             + " | auto picked | pandas_udf / auto (critical) | target >= 3 at z >= 1.4 "
             "| auto / local-global (critical) | auto / pandas_udf (total) |",
             "|---|---:|---|---:|" + "---:|" * len(plans) + "---|---:|---|---:|---:|"]
    for row in rows:
        figures = row["plans"]
        cells = [f"{figures[p]['critical_s']:.2f} / {figures[p]['total_s']:.2f}" for p in plans]
        said = row["auto_said"].split(":")[0].replace("skew_group plan=", "") or "?"

        def ratio(a, b, field="critical_s"):
            if a in figures and b in figures and figures[b][field]:
                return figures[a][field] / figures[b][field]
            return None

        speedup = ratio("pandas_udf", "auto")
        met = "—" if row["z"] < 1.4 or speedup is None else ("met" if speedup >= 3 else "MISSED")
        shown = [f"{x:.2f}" if x is not None else "—"
                 for x in (speedup, ratio("auto", "local-global"),
                           ratio("auto", "pandas_udf", "total_s"))]
        lines.append(f"| {row['z']} | {row['universe']:,} ({row['distinct_keys']:,}) | "
                     f"{row['aggregate']} | {row['cost_per_row_us']} | " + " | ".join(cells)
                     + f" | {said} | {shown[0]} | {met} | {shown[1]} | {shown[2]} |")
    return "\n".join(lines)


def stream_table(rows):
    """Markdown: per cell, aggregate and method: micro-batch, critical path and total task time
    (min (max), s), state bytes per key; then the targets."""
    rows = [r for r in rows if r.get("what") == "aggregators streaming"]
    if not rows:
        return ""
    lines = ["| z | keys | aggregate | keys/batch | method | micro-batch s | critical s "
             "| total task s | state B/key |", "|---|---:|---|---:|---|---:|---:|---:|---:|"]
    targets = ["| z | keys | aggregate | keys/batch | per-key / skew_group (micro-batch) "
               "| target | bucketed / skew_group (critical) | target |",
               "|---|---:|---|---:|---:|---|---:|---|"]
    for row in rows:
        methods = row["methods"]
        keys_per_batch = int(np.mean(row["distinct_keys_per_batch"][1:]
                                     or row["distinct_keys_per_batch"]))
        for method, f in methods.items():
            lines.append(
                f"| {row['z']} | {row['universe']:,} | {row['aggregate']} | {keys_per_batch:,} "
                f"| {method} | {f['batch_s']['min']:.2f} ({f['batch_s']['max']:.2f}) "
                f"| {f['critical_s']['min']:.2f} ({f['critical_s']['max']:.2f}) "
                f"| {f['total_s']['min']:.2f} ({f['total_s']['max']:.2f}) "
                f"| {f['state_bytes_per_key']:,.0f} |")
        sg = methods.get("skew_group")
        if not sg:
            continue
        batch_ratio = crit_ratio = None
        batch_met = crit_met = "—"
        if "per-key" in methods:
            batch_ratio = methods["per-key"]["batch_s"]["min"] / sg["batch_s"]["min"]
            if keys_per_batch >= 5_000:
                batch_met = "met (>= 3)" if batch_ratio >= 3 else "MISSED (>= 3)"
            else:
                batch_met = "met (>= 1)" if batch_ratio >= 1 else "MISSED (>= 1)"
        if "bucketed" in methods:
            crit_ratio = methods["bucketed"]["critical_s"]["min"] / sg["critical_s"]["min"]
            if row["z"] == 1.0:
                crit_met = "met (<= 1.1x)" if 1 / crit_ratio <= 1.1 else "MISSED (<= 1.1x)"
            elif row["aggregate"] == "expensive":
                crit_met = "met (>= 2.5)" if crit_ratio >= 2.5 else "MISSED (>= 2.5)"
        shown = [f"{x:.2f}" if x is not None else "—" for x in (batch_ratio, crit_ratio)]
        targets.append(f"| {row['z']} | {row['universe']:,} | {row['aggregate']} | "
                       f"{keys_per_batch:,} | {shown[0]} | {batch_met} | {shown[1]} "
                       f"| {crit_met} |")
    return "\n".join(lines) + "\n\n" + "\n".join(targets)


def stage_table(rows, batch_plans=("auto", "split", "routed", "pandas_udf", "local-global"),
                stream_methods=("skew_group", "bucketed", "per-key", "foreachBatch")):
    """Markdown: per run, its stages (tasks: slowest task s / total s) in order; batch: the
    fastest round of each plan; stream: the batch with the shortest critical path."""
    lines = ["| kind | z | keys | aggregate | plan | stages: tasks: slowest task s / total s |",
             "|---|---|---:|---|---|---|"]
    for row in rows:
        if row.get("what") == "aggregators batch":
            kind, runs = "batch", {p: row["plans"][p]["stages"] for p in batch_plans
                                   if p in row["plans"]}
        elif row.get("what") == "aggregators streaming":
            kind, runs = "stream", {m: row["methods"][m]["stages_of_fastest_batch"]
                                    for m in stream_methods if m in row["methods"]}
        else:
            continue
        for plan, stages in runs.items():
            if not stages:
                continue
            parts = [f"{s['tasks']}: {s['max_task_s']:.2f} / {s['total_s']:.2f}" for s in stages]
            lines.append(f"| {kind} | {row['z']} | {row['universe']:,} | {row['aggregate']} "
                         f"| {plan} | " + " · ".join(parts) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def exactness_table(rows):
    lines = []
    for row in rows:
        if row.get("what") not in ("aggregators batch", "aggregators streaming"):
            continue
        kind = "batch" if row["what"] == "aggregators batch" else "stream"
        for plan, check in row["exact"].items():
            if check.get("exact") == "rank":
                lines.append(f"- {kind} z={row['z']} keys={row['universe']:,} kll {plan}: "
                             f"{check['keys_over_k']} keys over k, max rank error "
                             f"{check['max_rank_error_over_bound']}x the bound, "
                             f"{check['share_beyond_bound']:.2%} beyond it")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        rows = json.load(f)["rows"]
    for part in (batch_table(rows), stream_table(rows), stage_table(rows),
                 exactness_table(rows)):
        if part:
            print(part)
            print()
