"""The floor of a stream's stateful Python stage: what each stateful API costs a micro-batch
before any work, beside the grid's expert method and skew_group, in one session; and the
levers on that stage, one at a time, against the same baseline in the same run.

A Python merge of state in a stream needs one stateful stage of ``spark.sql.shuffle.partitions``
tasks. Its cost before any work decides how close any plan on it can come to another. Each
method below reads the same stream (bench_aggregators_spark's: 200,000 rows a micro-batch, keys
Zipf over a universe) and groups the rows into 64 buckets of key hashes, as the grid does:

* ``groupBy``       -- Spark's ``groupBy("k").agg(count, sum)``: the JVM's own floor (HDFS store);
* ``aipws-nothing`` -- ``applyInPandasWithState`` per bucket, reading the rows, no state, no
  output (HDFS store, Spark's default): the floor of the expert's bucketed method;
* ``tws-nothing``   -- ``transformWithStateInPandas`` the same (RocksDB store, which it needs);
* ``tws-runs-nothing`` -- the same, plus what skew_group's runs need a call, and nothing else:
  one MapState iterator over the bucket's runs and one ``updateValue`` of a small run (two
  requests to the JVM a bucket);
* ``tws-packed-nothing`` -- ``tws-runs-nothing`` on packed input (``partial`` input only): the
  partial emits, per input partition and bucket, one row holding an Arrow IPC stream of that
  bucket's partial rows; the processor deserializes the blobs and makes the same two requests;
* ``bucketed``      -- the grid's expert method with the cheap reduce (bench_aggregators_spark);
* ``sampled``       -- skew_group with ``plan="auto"`` and ``sample=``, the cheap reduce.

The input of the ``aipws``/``tws`` methods (SKEWGROUP_BENCH_FLOOR_INPUT):

* ``raw``     -- the stream's rows (k, x) themselves;
* ``partial`` -- the rows skew_group's stream sends its stateful stage: the stream's rows
  repartitioned round-robin over the grid's workers, then one ``mapInArrow`` call a partition
  reduces them per key to (k, a ``BUFFER_BYTES`` binary buffer: the cheap reduce's two int64,
  score and n), one row per (worker, key), bucketed after the partial as skew_group does.

A lever is a method with ``+name=value`` suffixes, e.g. ``tws-runs-nothing+partitions=2``:

* ``partitions=N`` -- ``spark.sql.shuffle.partitions`` (the stateful stage's tasks; the partial
  stays on the grid's workers: its repartition names them);
* ``trackrows=B``  -- ``spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows``;
* ``snapshot=N``   -- ``spark.sql.streaming.stateStore.minDeltasForSnapshot``;
* ``time=MODE``    -- the ``timeMode`` of ``transformWithStateInPandas`` (``None`` otherwise);
* ``schema=ddl``   -- the MapState's schemas as DDL strings (StructType otherwise);
* ``uds=B``        -- ``spark.python.unix.domain.socket.enabled``, a SparkContext conf: the
  session is restarted whenever the next run wants another value (every run, interleaved).

The session confs are set before each run's query starts and restored after it.

Per method: micro-batch time (``triggerExecution``), critical path (the slowest task of each
stage, summed) and total task time, each the minimum over the micro-batches after the first and
over rounds, the maximum in brackets; the stateful stage's own slowest and total task time; and
the checkpoint's state files at the end of a run (files, KB, RocksDB snapshots; min and max over
rounds).

    cd /tmp && python -m pytest /path/to/bench/bench_stream_floor.py --benchmark-only -s \\
        -p no:cacheprovider

Environment: SKEWGROUP_BENCH_FLOOR_Z (1.4), _UNIVERSE (100000), _ROUNDS (2), _INPUT (raw),
_BUFFER_BYTES (16), _METHODS (groupBy, aipws-nothing, tws-nothing, tws-runs-nothing, bucketed,
sampled); skew_group's workers and the stream's size are bench_aggregators_spark's
(SKEWGROUP_BENCH_AGGS_WORKERS, 16, also the default shuffle partitions; _STREAM_ROWS;
_STREAM_BATCHES).
"""
import json
import os
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import pytest

pytest.importorskip("pyspark")
sys.path.insert(0, os.path.dirname(__file__))

import _aggregators_grid as grid  # noqa: E402  (the grid's data and methods)
from _rest import batch_stages  # noqa: E402
from skewgroup._aggregation.batches import table_of  # noqa: E402
from skewgroup.app.baselines import bucket_column  # noqa: E402


def _env(name, default):
    return os.environ.get(f"SKEWGROUP_BENCH_FLOOR_{name}", default)


WORKERS = grid.WORKERS     # SKEWGROUP_BENCH_AGGS_WORKERS, as the grid's
Z = float(_env("Z", 1.4))
UNIVERSE = int(_env("UNIVERSE", 100_000))
ROUNDS = int(_env("ROUNDS", 2))
INPUT = _env("INPUT", "raw")
BUFFER_BYTES = int(_env("BUFFER_BYTES", 16))
METHODS = tuple(_env("METHODS", "groupBy,aipws-nothing,tws-nothing,tws-runs-nothing,"
                                "bucketed,sampled").split(","))
UI_PORT = 4083
BASES = ("groupBy", "aipws-nothing", "tws-nothing", "tws-runs-nothing", "tws-packed-nothing",
         "bucketed", "sampled")
# lever -> (where it goes, the conf or argument it sets)
LEVERS = {"partitions": ("session", "spark.sql.shuffle.partitions"),
          "trackrows": ("session", "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"),
          "snapshot": ("session", "spark.sql.streaming.stateStore.minDeltasForSnapshot"),
          "uds": ("context", "spark.python.unix.domain.socket.enabled"),
          "time": ("query", "timeMode"),
          "schema": ("query", "schema")}


def parse(method):
    """(base method, {lever: value}) of ``method`` (``base+lever=value+...``), or ValueError."""
    base, *suffixes = method.split("+")
    if base not in BASES:
        raise ValueError(f"SKEWGROUP_BENCH_FLOOR_METHODS: unknown method {base!r} in "
                         f"{method!r}; allowed: {', '.join(BASES)}")
    levers = {}
    for suffix in suffixes:
        name, _, value = suffix.partition("=")
        if name not in LEVERS or not value:
            raise ValueError(f"SKEWGROUP_BENCH_FLOOR_METHODS: lever {suffix!r} in {method!r} is "
                             f"not name=value with a name among {', '.join(LEVERS)}")
        levers[name] = value
    if levers and not base.startswith("tws"):
        raise ValueError(f"SKEWGROUP_BENCH_FLOOR_METHODS: levers apply to the tws methods, "
                         f"got {method!r}")
    if base == "tws-packed-nothing" and INPUT != "partial":
        raise ValueError("SKEWGROUP_BENCH_FLOOR_METHODS: tws-packed-nothing packs the partial "
                         f"rows; it needs SKEWGROUP_BENCH_FLOOR_INPUT=partial, got {INPUT!r}")
    if levers.get("schema", "ddl") != "ddl":
        raise ValueError(f"SKEWGROUP_BENCH_FLOOR_METHODS: schema=ddl is the only schema lever, "
                         f"got {method!r}")
    return base, levers


if INPUT not in ("raw", "partial"):
    raise ValueError(f"SKEWGROUP_BENCH_FLOOR_INPUT: raw or partial, got {INPUT!r}")
PARSED = {m: parse(m) for m in METHODS}


def _nothing_per_bucket(_, frames, state):
    for _frame in frames:      # the rows are read, as every method reads them
        pass
    return iter(())


# --- the partial rows skew_group sends -------------------------------------------------------


def _buffers(sums, counts):
    """One ``BUFFER_BYTES`` binary buffer per key: its sum's and count's 8 bytes each (the
    cheap reduce's two int64), zero-padded, built as one Arrow array."""
    import pyarrow as pa

    n = len(counts)
    raw = np.zeros((n, max(BUFFER_BYTES, 16)), dtype=np.uint8)
    raw[:, :8] = np.asarray(sums, dtype=np.float64).view(np.uint8).reshape(n, 8)
    raw[:, 8:16] = np.asarray(counts, dtype=np.int64).view(np.uint8).reshape(n, 8)
    raw = np.ascontiguousarray(raw[:, :BUFFER_BYTES])
    offsets = np.arange(n + 1, dtype=np.int32) * BUFFER_BYTES
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                        pa.py_buffer(raw)])


def _per_key(batches, keys):
    """The partition's rows reduced per ``keys`` (sum and count of x), or None if empty."""
    table = table_of(batches)
    if table is None:
        return None
    return table.group_by(keys).aggregate([("x", "sum"), ("x", "count")])


def _partial(batches):
    """mapInArrow: (k, buffer), one row per key of the partition."""
    import pyarrow as pa

    grouped = _per_key(batches, ["k"])
    if grouped is None:
        return
    yield pa.RecordBatch.from_arrays(
        [grouped.column("k").combine_chunks(),
         _buffers(grouped.column("x_sum").to_numpy(), grouped.column("x_count").to_numpy())],
        names=["k", "buffer"])


def _packed_partial(batches):
    """mapInArrow: (bucket, blob), one row per bucket of the partition, the blob an Arrow IPC
    stream of that bucket's (k, buffer) rows."""
    import pyarrow as pa

    grouped = _per_key(batches, ["bucket", "k"])
    if grouped is None:
        return
    grouped = grouped.sort_by("bucket")
    buckets = grouped.column("bucket").to_numpy()
    rows = pa.table({"k": grouped.column("k"),
                     "buffer": _buffers(grouped.column("x_sum").to_numpy(),
                                        grouped.column("x_count").to_numpy())})
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    ends = np.r_[starts[1:], len(buckets)]
    blobs = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows.slice(start, end - start))
        blobs.append(sink.getvalue().to_pybytes())
    yield pa.RecordBatch.from_arrays([pa.array(buckets[starts], pa.int64()),
                                      pa.array(blobs, pa.binary())], names=["bucket", "blob"])


def stateful_input(source, base):
    """The rows a stateful ``base`` method groups by ``bucket``."""
    if INPUT == "raw":
        return source.select("k", "x", bucket_column("k"))
    if base == "tws-packed-nothing":
        return (source.select("k", "x", bucket_column("k")).repartition(WORKERS)
                .mapInArrow(_packed_partial, "bucket long, blob binary"))
    return (source.repartition(WORKERS).mapInArrow(_partial, "k long, buffer binary")
            .select("k", "buffer", bucket_column("k")))


def partial_rows_per_batch(directory):
    """Rows into the stateful stage a micro-batch with the partial input (the first file's):
    distinct keys per round-robin share of ``WORKERS``, summed (Spark's round-robin starts
    each input partition at a random worker: the same shares, shifted)."""
    import pyarrow.parquet as pq

    first = sorted((directory / "input").glob("*.parquet"))[0]
    keys = pq.read_table(first, columns=["k"]).column("k").to_numpy()
    return sum(len(np.unique(keys[w::WORKERS])) for w in range(WORKERS))


# --- the processors ----------------------------------------------------------------------------


def _processors():
    from pyspark.sql import types as T
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    run_id = T.StructType([T.StructField("run", T.LongType(), False)])
    run = T.StructType([T.StructField("level", T.IntegerType(), False),
                        T.StructField("arrow", T.BinaryType(), False)])

    class Nothing(StatefulProcessor):
        def init(self, handle):
            self.handle = handle

        def handleInputRows(self, key, rows, timerValues):
            for _frame in rows:
                pass
            return iter(())

        def close(self):
            pass

    class RunsNothing(Nothing):
        """The two requests a call of skew_group's runs makes, and no work."""

        def __init__(self, ddl=False):
            self.ddl = ddl

        def init(self, handle):
            if self.ddl:
                self.runs = handle.getMapState("runs", "run long", "level int, arrow binary")
            else:
                self.runs = handle.getMapState("runs", run_id, run)

        def handleInputRows(self, key, rows, timerValues):
            self.read(rows)
            stored = list(self.runs.iterator())
            self.runs.updateValue((len(stored),), (0, b"\0" * 64))
            return iter(())

        def read(self, rows):
            for _frame in rows:
                pass

    class PackedRunsNothing(RunsNothing):
        """RunsNothing on packed input: each row's blob (the last column) read as Arrow."""

        def read(self, rows):
            import pyarrow as pa

            for frame in rows:
                for blob in frame.iloc[:, -1]:
                    pa.ipc.open_stream(blob).read_all()

    return {"tws-nothing": Nothing, "tws-runs-nothing": RunsNothing,
            "tws-packed-nothing": PackedRunsNothing}


def query(spark, source, method, sample):
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    base, levers = PARSED[method]
    if base == "groupBy":
        return source.groupBy("k").agg(F.count("*"), F.sum("x"))
    if base in ("bucketed", "sampled"):
        return grid.stream_query(spark, source, "cheap", base, sample)
    buckets = stateful_input(source, base)
    if base == "aipws-nothing":
        return buckets.groupBy("bucket").applyInPandasWithState(
            _nothing_per_bucket, "k long", "blob binary", "update", GroupStateTimeout.NoTimeout)
    processor_class = _processors()[base]
    processor = (processor_class(ddl=levers.get("schema") == "ddl") if base != "tws-nothing"
                 else processor_class())
    return buckets.groupBy("bucket").transformWithStateInPandas(
        processor, "k long", "Update", levers.get("time", "None"))


# --- the sessions and a run --------------------------------------------------------------------


class Sessions:
    """The bench's session; another one (the same conf plus ``context``) when a run wants
    other SparkContext confs, the current one stopped first."""

    def __init__(self):
        self.session, self.context = None, None

    def get(self, context):
        from _session import local_session

        if self.session is not None and context == self.context:
            return self.session
        if self.session is not None:
            self.session.stop()
        self.session = local_session(sys.modules[__name__], "skewgroup-bench-floor", UI_PORT,
                                     {"spark.sql.adaptive.enabled": "false",
                                      "spark.sql.shuffle.partitions": str(WORKERS), **context},
                                     by_value=(grid,))
        self.context = dict(context)
        conf = self.session.sparkContext.getConf()
        for key, value in context.items():
            if conf.get(key) != value:
                raise RuntimeError(f"the restarted session has {key}={conf.get(key)!r}, "
                                   f"not {value!r}")
        return self.session

    def stop(self):
        if self.session is not None:
            self.session.stop()


@pytest.fixture(scope="module")
def sessions():
    holder = Sessions()
    yield holder
    holder.stop()


def _checkpoint_state(checkpoint):
    """(files, KB, RocksDB snapshots: .zip files) under the checkpoint's state/ directory."""
    files = [p for p in pathlib.Path(checkpoint, "state").rglob("*") if p.is_file()]
    return (len(files), round(sum(p.stat().st_size for p in files) / 1024, 1),
            sum(1 for p in files if p.suffix == ".zip"))


def _confs(levers, where):
    return {LEVERS[name][1]: value for name, value in levers.items() if LEVERS[name][0] == where}


def _await_input(q):
    """Until ``q`` has processed the stream's micro-batches: it ends itself (availableNow),
    unless a processing-time timer mode keeps asking for one more batch with no data at every
    trigger; then it is stopped."""
    while not q.awaitTermination(0.5):
        if sum(1 for p in q.recentProgress if p.numInputRows) >= grid.STREAM_BATCHES:
            q.stop()
            return


def run(sessions, directory, method):
    """(per micro-batch after the first: seconds, critical s, total s, the last stage's
    (slowest, total) task s), (state files, KB) at the end."""
    from skewgroup.spark._stream_merge import CHANGELOG, PROVIDER, ROCKSDB

    base, levers = PARSED[method]
    spark = sessions.get(_confs(levers, "context"))
    source = (spark.readStream.schema(grid.SCHEMA).option("maxFilesPerTrigger", 1)
              .parquet(str(directory / "input")))
    sample = grid.one_batch_sample(spark, directory, grid.SCHEMA)
    stateful_api = base.startswith("tws")
    # Each method on the state store its user gets (skew_group sets RocksDB itself).
    spark.conf.set(PROVIDER, ROCKSDB if stateful_api else grid.HDFS)
    spark.conf.set(CHANGELOG, "true")
    session_confs = _confs(levers, "session")
    before = {key: spark.conf.get(key, None) for key in session_confs}
    checkpoint = tempfile.mkdtemp(prefix="sg-bench-floor-")
    try:
        for key, value in session_confs.items():   # fixed at the query's start
            spark.conf.set(key, value)
        try:
            q = (query(spark, source, method, sample).writeStream.format("noop")
                 .option("checkpointLocation", checkpoint).outputMode("update")
                 .trigger(availableNow=True).start())
        finally:
            for key, value in before.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
        _await_input(q)
        progress = [json.loads(p.json) for p in q.recentProgress if p.numInputRows]
        stages = batch_stages(spark, q.runId)
        state = _checkpoint_state(checkpoint)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    out = []
    for p in progress[1:]:
        batch = stages[p["batchId"]]
        out.append((p["durationMs"]["triggerExecution"] / 1000,
                    sum(s["max_task_s"] for s in batch), sum(s["total_s"] for s in batch),
                    (batch[-1]["max_task_s"], batch[-1]["total_s"])))
    return out, state


def _spread(values, digits=2):
    return f"{min(values):.{digits}f} ({max(values):.{digits}f})"


def test_stream_floor(benchmark, figures, sessions):
    directory = grid.stream_dataset(Z, UNIVERSE)
    runs = {m: [] for m in METHODS}
    states = {m: [] for m in METHODS}

    def every_method():
        for _ in range(ROUNDS):            # interleaved: a slow minute hits every method
            for method in METHODS:
                batches, state = run(sessions, directory, method)
                runs[method].extend(batches)
                states[method].append(state)

    benchmark.pedantic(every_method, rounds=1, iterations=1)
    rows_in = (grid.STREAM_ROWS if INPUT == "raw"
               else f"~{partial_rows_per_batch(directory)} (partial), <= {WORKERS} x 64 packed")
    print(f"\nz={Z} universe={UNIVERSE} workers={WORKERS} rounds={ROUNDS} input={INPUT} "
          f"(rows into the stateful stage a micro-batch: {rows_in}): min (max) s over "
          f"{len(runs[METHODS[0]])} micro-batches")
    print("| method | micro-batch | critical | total task | stateful stage slowest | "
          "stateful stage total | state files | state KB | snapshots |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for method, batches in runs.items():
        columns = list(zip(*batches))
        last = list(zip(*columns[3]))
        files, kb, snapshots = zip(*states[method])
        print(f"| {method} | " + " | ".join(_spread(c) for c in (*columns[:3], *last))
              + f" | {_spread(files, 0)} | {_spread(kb, 1)} | {_spread(snapshots, 0)} |")
        figures.add(what="stream floor", z=Z, universe=UNIVERSE, workers=WORKERS,
                    rounds=ROUNDS, input=INPUT, buffer_bytes=BUFFER_BYTES, method=method,
                    batches=[[round(b, 3), round(c, 3), round(t, 3), list(s)]
                             for b, c, t, s in batches],
                    state_files=list(files), state_kb=list(kb), snapshots=list(snapshots))
