"""The stream's stateful merge (docs/stream.md), for a stream whose call has a Python
aggregator: every aggregate's state, keys hashed into ``BUCKETS`` buckets, one
``transformWithStateInPandas`` call per bucket a micro-batch touches, its rows in and out
packed as Arrow IPC values; the bucket's keys and states are runs of Arrow IPC bytes in a
MapState (``_aggregation.stream``: a micro-batch writes the keys it touched, not the bucket).
The bucket count is fixed, so a query restarts on its checkpoint with any ``workers``.
"""
import logging
import uuid

import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from pyspark import TaskContext
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from skewgroup._aggregation.batches import ipc_bytes, unpacked
from skewgroup._aggregation.stream.bucket import BucketRuns
from skewgroup._aggregation.stream.cache import RUN_CACHE_BYTES, process_cache
from skewgroup._aggregation.stream.packing import partial_packer, unpacker
from skewgroup.spark import _partial
from skewgroup.spark._call import WATERMARK_DELAY
from skewgroup.spark._observe import PACKED_SUMMARY_FIELDS
from skewgroup.spark._session import session_cores

BUCKETS = 64        # state groups of a stream; fixed: a checkpoint's state is keyed by them
OUTPUT_MODES = ("update", "append")
# The MapState: run id -> (level, an Arrow IPC run; its layout inside).
RUNS_STATE = "skewgroup_runs_1"
LOG = logging.getLogger("skewgroup.spark")


def packed_partials(call, placed, summary=None):
    """The stream's partial rows of ``call`` (a stream whose call has a Python aggregator) from
    ``placed`` (its rows after the plan's placement), packed for the stateful stage: each
    partition's partial rows (every aggregate's state per key, the layout's states) of one
    bucket (and, in append mode, one window end) as one Arrow IPC value. ``summary``: None, or
    ``_observe.packed_summary``: each task's figures on its first packed row, in the columns
    ``_observe.PACKED_SUMMARY_FIELDS`` (read by the merge's observation, ``_merge``), which
    :func:`merge_packed` drops.

    Rows cross the stateful stage packed: the partial's own ``mapInArrow`` packs them, and each
    call's output rows come out as one value, unpacked by a ``mapInArrow`` after; or, where
    every output type crosses pandas exactly (``_crosses_pandas_exactly``), as rows. PySpark's
    stateful worker turns every row it passes into pandas and back one by one; packed, it
    passes a few values a bucket, and every type crosses as Arrow has it (no pandas conversion
    of nulls, NaNs, timestamps or structs). The partial and the packing share one Python UDF:
    each UDF costs a task a fixed time (bench/RESULTS.md, "a Python UDF's fixed cost a
    task")."""
    layout = call.layout
    names, arrow = layout.names, layout.arrow
    observed = summary is not None
    keys = list(layout.keys)
    window = _window_key(call)
    # A key's bucket is pmod(xxhash64(key), BUCKETS) over the key as the partial writes it
    # (its type in the partial rows): a checkpoint's state is keyed by it, so it never changes.
    key_hash = F.xxhash64(*[F.col(k).cast(f.dataType) for k, f in zip(keys, layout.key_fields)])
    partial_input = (layout.partial_input(placed.drop(names.worker, names.place))
                     .withColumn(names.key_hash, key_hash))
    # The packed rows: a bucket, in append mode its window's end, the packed value, and with
    # ``summary`` the task's figures; as Spark types them and as Arrow does.
    end_fields, end_arrow = [], []
    if window is not None:
        end_type = layout.key_fields[keys.index(window)].dataType["end"].dataType
        end_fields = [T.StructField(names.event, end_type, True)]
        end_arrow = [pa.field(names.event, arrow.state.field(window).type.field("end").type)]
    packed_fields = [T.StructField(names.bucket, T.IntegerType(), False), *end_fields,
                     T.StructField(names.blob, T.BinaryType(), False)]
    summary_fields = list(PACKED_SUMMARY_FIELDS) if observed else []
    packed_schema = T.StructType([*packed_fields, *summary_fields])
    packed_arrow = pa.schema([arrow.bucket, *end_arrow, arrow.blob,
                              *(arrow.packed_summary if observed else ())])
    partial_arrow = layout.partial_arrow(observed).append(arrow.key_hash)
    partial_of = _partial.layout_partial_tables(layout, partial_arrow, carried=[names.key_hash])
    packer = partial_packer(partial_of, arrow.state.names, packed_arrow,
                            key_hash=names.key_hash, bucket=names.bucket, buckets=BUCKETS,
                            window=window, event=names.event, rows_column=names.rows,
                            summary=summary)
    return partial_input.mapInArrow(packer, packed_schema)


def merge_packed(call, packed):
    """The stateful merge of ``call``'s ``packed`` partial rows (:func:`packed_partials`) into
    per-bucket state.

    ``update``: one output row per key the micro-batch touched, every key kept. ``append``
    (a time window among the keys, a watermark on the stream): a key's row once the watermark
    passes its window's end, when it leaves the state; rows of a window closed before the
    micro-batch are dropped as late (Spark drops them before the call, by the watermark mark
    on the window's end), as its aggregation drops them. The bucket's event-time timer is its
    earliest open window's end, so a bucket with no new rows still closes its windows."""
    df, layout = call.df, call.layout
    names, part, arrow = layout.names, layout.part, layout.arrow
    returned = layout.stateful_output()
    keys = list(layout.keys)
    window = _window_key(call)
    packed = packed.select(names.bucket, *([names.event] if window is not None else []),
                           names.blob)
    if window is not None:
        # Spark wants a column marked with the stream's watermark among the stateful stage's
        # input (its event-time timers and late-row filter read it), and the packed columns
        # are new ones: the window's end carries the mark of the user's event-time column. A
        # packed value holds one window end, so Spark drops exactly the late rows.
        packed = packed.withColumn(
            names.event, F.col(names.event).alias(names.event, metadata=_watermark_mark(df)))
    _use_rocksdb(df.sparkSession)
    _check_state_partitions(df.sparkSession)
    output_as_rows = all(_crosses_pandas_exactly(f.dataType) for f in returned.fields)
    processor = _BucketProcessor(names.blob, packed.columns.index(names.blob), arrow.state,
                                 arrow.stateful_output, keys, part.states, window,
                                 output_as_rows, _kept_runs_bytes(df.sparkSession))
    blobs = T.StructType([T.StructField(names.blob, T.BinaryType(), False)])
    merged = packed.groupBy(names.bucket).transformWithStateInPandas(
        processor, returned if output_as_rows else blobs,
        "Append" if window is not None else "Update",
        "EventTime" if window is not None else "None")
    if output_as_rows:
        return merged
    return merged.mapInArrow(unpacker(arrow.stateful_output), returned)


def _window_key(call):
    """In append mode, the key copy that is a time window (its end closes a key), or a
    ValueError; None in update mode."""
    layout = call.layout
    if call.output_mode != "append":
        return None
    window = next((k for k, f in zip(layout.keys, layout.key_fields)
                   if _is_window(f.dataType)), None)
    if window is None:
        raise ValueError(
            "output_mode='append' with Python aggregators on a stream needs a time window "
            "among the keys (F.window(...)) and a watermark (withWatermark): a key's "
            "result is final once the watermark passes its window's end. Use "
            "output_mode='update' otherwise.")
    return window


# Types whose values PySpark's output conversion of the stateful stage
# (``pyspark.sql.conversion.PandasToArrowConversion.convert``) gives back exactly from
# :func:`_as_pandas`'s columns: nulls, NaN and -0.0 kept apart (checked in
# tests/spark/test_python_aggregators.py). Not a float inside an array (its NaN comes back
# null), nor a timestamp, decimal, interval, struct or map (converted value by value).
_PANDAS_EXACT = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
                 T.BooleanType, T.StringType, T.BinaryType)
_PANDAS_EXACT_ELEMENTS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType,
                          T.StringType, T.BinaryType)


def _crosses_pandas_exactly(data_type):
    """Whether a result column of ``data_type`` leaves the stateful stage as rows, with no
    packing: one Python UDF (the unpacking ``mapInArrow``) fewer in the stage's tasks."""
    if isinstance(data_type, T.ArrayType):
        return isinstance(data_type.elementType, _PANDAS_EXACT_ELEMENTS)
    return isinstance(data_type, _PANDAS_EXACT)


def _as_pandas(table):
    """``table`` as the pandas frame PySpark converts back to the same Arrow values: each
    column an Arrow-backed pandas array, an array column Python lists (PySpark's converter
    iterates each value and skips only None)."""
    return pd.DataFrame({
        name: (pd.Series(column.to_pylist(), dtype=object) if pa.types.is_list(column.type)
               else pd.Series(pd.arrays.ArrowExtensionArray(column)))
        for name, column in zip(table.column_names, table.columns)})


# --- the bucket's state: runs in a MapState -------------------------------------------------
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
RUN_ID = T.StructType([T.StructField("run", T.LongType(), False)])
RUN = T.StructType([T.StructField("level", T.IntegerType(), False),
                    T.StructField("arrow", T.BinaryType(), False)])


def _use_rocksdb(spark):
    """transformWithStateInPandas keeps its state in RocksDB's state store only. A session on
    another provider gets RocksDB, with changelog checkpointing (a commit writes the changed
    values, not files of the whole store), for the queries it starts from now on; a query
    restarted on a checkpoint keeps the provider the checkpoint records."""
    if spark.conf.get(PROVIDER, None) == ROCKSDB:
        return
    spark.conf.set(PROVIDER, ROCKSDB)
    spark.conf.set(CHANGELOG, "true")
    LOG.info("skew_group: a stream with a Python aggregator keeps its state in RocksDB's "
             "state store; set %s=%s and %s=true for this session", PROVIDER, ROCKSDB,
             CHANGELOG)


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
STATEFUL_TASKS_PER_CORE = 4


def _check_state_partitions(spark):
    """Says so (a WARNING on the ``skewgroup.spark`` logger) when the stateful stage would run
    far more tasks than the session has cores: each of its ``spark.sql.shuffle.partitions``
    tasks costs a fixed time whatever its rows (its state server, its store's load and
    commit), and Spark fixes the count in the checkpoint at the query's first start. As Spark
    ships it the session has 200: on 2 cores 39.6 s a micro-batch against 1.33 s at 2
    (bench/RESULTS.md, "The front door")."""
    cores = session_cores(spark)
    if cores is None:     # Spark Connect: the cores are not known here
        return
    partitions = int(spark.conf.get(SHUFFLE_PARTITIONS))
    if partitions > STATEFUL_TASKS_PER_CORE * cores:
        LOG.warning("skew_group: %s is %d, so the stream's stateful merge runs %d tasks a "
                    "micro-batch on %d cores, each at a fixed cost; set "
                    "spark.conf.set(%r, %d) (the cores) before the query's first start (Spark "
                    "keeps the count in the checkpoint)", SHUFFLE_PARTITIONS, partitions,
                    partitions, cores, SHUFFLE_PARTITIONS, cores)


KEPT_RUNS_CONF = "spark.skewgroup.keptRunsBytes"


def _kept_runs_bytes(spark):
    """The bytes of decoded runs a Python worker keeps (``_aggregation.stream.cache``): the
    session's ``spark.skewgroup.keptRunsBytes``, a whole number of bytes, 0 for none."""
    given = spark.conf.get(KEPT_RUNS_CONF, None)
    if given is None:
        return RUN_CACHE_BYTES
    try:
        limit = int(given)
    except ValueError:
        limit = -1
    if limit < 0:
        raise ValueError(f"{KEPT_RUNS_CONF} must be a whole number of bytes, 0 or more (0: a Python "
                         f"worker keeps no runs), got {given!r}")
    return limit


class _MapStore:
    """A bucket's runs in a MapState (run id -> level, Arrow IPC bytes), as
    ``skewgroup._aggregation.stream.bucket.BucketRuns`` reads and writes them. ``scope``: the
    query's and the bucket's, under which a Python worker keeps the runs it decoded
    (``_aggregation.stream.cache``), set for each call."""

    def __init__(self, state):
        self.state, self.scope = state, None

    def items(self):
        return [(key[0], value[0], value[1]) for key, value in self.state.iterator()]

    def ids(self):
        return [key[0] for key in self.state.keys()]

    def get(self, run_id):
        value = self.state.getValue((run_id,))
        return (None, None) if value is None else (value[0], value[1])

    def put(self, run_id, level, blob):
        self.state.updateValue((run_id,), (level, blob))

    def remove(self, run_id):
        self.state.removeKey((run_id,))


class _BucketProcessor(StatefulProcessor):
    """The stateful merge of one bucket of keys: each micro-batch's packed partial rows merged
    into the bucket's runs (``_aggregation.stream``), the touched keys emitted (update),
    or the keys whose window the watermark passed (append: on new rows, or on the bucket's
    event-time timer, set at its earliest open window's end); the output one packed value, or
    the rows themselves where every output type crosses pandas exactly (``output_as_rows``)."""

    def __init__(self, blob, blob_position, state_arrow, output_arrow, keys, states, window,
                 output_as_rows, kept_runs_bytes):
        # This operator's name among the runs a Python worker keeps, beside the query's id
        # (``init``): drawn when the plan is built, so two operators of one query keep theirs
        # apart.
        self.operator_scope = uuid.uuid4().hex
        self.kept_runs_bytes = kept_runs_bytes
        self.blob, self.blob_position = blob, blob_position
        self.state_arrow, self.output_arrow = state_arrow, output_arrow
        self.keys, self.states, self.window = keys, states, window
        # The output as rows (``_crosses_pandas_exactly``), not packed.
        self.output_as_rows = output_as_rows

    def init(self, handle):
        self.handle = handle
        self.store = _MapStore(handle.getMapState(RUNS_STATE, RUN_ID, RUN))
        self.runs = BucketRuns(self.state_arrow, self.keys, self.states,
                               cache=process_cache(self.kept_runs_bytes))
        # The query's id, kept in its checkpoint (Spark's StreamExecution.QUERY_ID_KEY among
        # the task's local properties): two queries of one DataFrame, on two checkpoints, keep
        # their runs apart; a restart on the same checkpoint finds the runs it kept.
        context = TaskContext.get()
        query = context.getLocalProperty("sql.streaming.queryId") if context else None
        self.query_scope = (query, self.operator_scope) if self.kept_runs_bytes else None

    def handleInputRows(self, key, rows, timerValues):
        # transformWithStateInPandas names the columns by position (_0, _1, ...).
        blobs = [blob for frame in rows for blob in frame.iloc[:, self.blob_position]]
        yield from self._merge(key, unpacked(blobs, self.state_arrow), timerValues)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield from self._merge(key, self.state_arrow.empty_table(), timerValues)

    def close(self):
        pass

    def _merge(self, key, new, timer_values):
        # The bucket's runs are kept under the query's, the operator's and the bucket's names.
        self.store.scope = None if self.query_scope is None else (*self.query_scope, *key)
        window = self.window
        closed = None
        if window is not None:
            watermark = timer_values.getCurrentWatermarkInMs()
            closed = lambda merged: pa.compute.less_equal(_end_ms(merged, window), watermark)
        result = self.runs.merge(self.store, new, closed)
        if window is not None:
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            if result.live_keys.num_rows:
                self.handle.registerTimer(
                    int(pa.compute.min(_end_ms(result.live_keys, window)).as_py()))
        out = result.emitted
        if len(out[self.keys[0]]):
            table = pa.table([out[f.name].cast(f.type) for f in self.output_arrow],
                             schema=self.output_arrow)
            yield (_as_pandas(table) if self.output_as_rows
                   else pd.DataFrame({self.blob: [ipc_bytes(table)]}))


def _watermark_mark(df):
    """The metadata Spark puts on the stream's event-time column (its watermark delay), or a
    ValueError: append mode closes windows with the watermark."""
    for field in df.schema.fields:
        if WATERMARK_DELAY in (field.metadata or {}):
            return {WATERMARK_DELAY: field.metadata[WATERMARK_DELAY]}
    raise ValueError(
        "output_mode='append' with Python aggregators on a stream needs a watermark "
        "(df.withWatermark(column, delay)): a window's result is final once the watermark "
        "passes its end.")


def _is_window(data_type):
    """A time window: Spark's ``window()`` struct of a start and an end timestamp."""
    return (isinstance(data_type, T.StructType) and data_type.fieldNames() == ["start", "end"]
            and all(isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType))
                    for f in data_type.fields))


def _end_ms(table, window):
    """Each row's window end in epoch milliseconds (int64), as the watermark is kept."""
    ends = pa.compute.struct_field(table.column(window), [1])
    if not pa.types.is_integer(ends.type):          # a TIMESTAMP_NTZ window stays a timestamp
        ends = ends.cast(pa.timestamp("us")).cast(pa.int64())
    return pa.compute.divide(ends, 1000)
