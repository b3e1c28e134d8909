"""The skewgroup streaming job: ``skewgroup run [options]`` or ``spark-submit skewgroup/job.py``.

With no options it runs on local Spark over a generated Zipf stream (z = 1.4, 100k rows per
micro-batch, 8 workers, adaptive) the case skewgroup exists for: a Python aggregator whose merge
is Python (``quantiles:amount``, a KLL sketch per key, :func:`python_aggregator`), which Spark
can run in a stream only as ``applyInPandasWithState`` per key over the raw rows. Each
micro-batch shows the busiest worker's rows under plain groupBy's hash placement beside
skew_group's; after the run the summary measures that per-key query on the same micro-batches
(:func:`measure_per_key`) and prints both. It stops after 10 batches. ``--agg score:COL``
instead runs the sum of a per-row Python function (:func:`score_row`, about 10 µs a row), whose
busiest task is measured under skew_group and projected for groupBy. Every piece can be swapped::

    skewgroup run --source files --input events/ --format parquet --max-files-per-trigger 1 \\
        --key user --agg count --agg sum:amount --strategy pdstream --workers 16 \\
        --trigger availableNow --checkpoint ck/ --sink parquet --output out/

Sources: ``zipf`` / ``drift`` (generated: keys drawn from a Zipf law by a counter-based hash of
the row number, so a replayed micro-batch draws the same keys; ``drift`` replaces the hot keys
every ``--drift-every`` rows, as FISH §6.1's time-evolving streams), ``files`` (a directory of
parquet / CSV / JSON files) and ``rate`` (Spark's rate source: ``timestamp``, ``value``).
Sinks: ``memory`` (complete mode; the top rows are printed at the end), ``console`` (update
mode) and ``parquet`` (update mode through ``foreachBatch``: micro-batch ``b`` writes its updated
rows to ``OUTPUT/batch=b``, overwriting on replay, so with the checkpoint the output is exactly
once; :func:`final_result` reads the latest row per key).

Exactly once. Spark's checkpoint holds the source offsets and the merge state; a job killed at
any point and started again on the same ``--checkpoint`` replays the unfinished micro-batch and
goes on, and the parquet sink's per-batch overwrite makes the replay idempotent. The routers are
soft state, outside the checkpoint (``skewgroup.spark._routers``): snapshots by Spark's query
id let a restarted job route on as before; without them (another machine) only balance suffers
for a while, never the result.

Restarts. The job records its options (keys, aggregates, strategy, parameters, workers, seed)
in ``CHECKPOINT/skewgroup-job.json``. Spark's state in the checkpoint holds the groups and the
aggregates: a restart with another ``--key`` or ``--agg`` is refused. Everything else only
routes rows and may change: the merge is keyed by the grouping key, not by worker, so a restart
with another ``--workers`` (or ``--strategy``, ``--param``, ``--seed``) stays exactly once;
FISH's routers resize to the new number of workers, the others start fresh.
"""
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from skewgroup.options import (GENERATED_COLUMNS, JOB_FILE, PYTHON_MERGED, JobError,
                               check_columns, job_parser, parse_job_args, routing_config)
from skewgroup.spark._stderr import JvmStderr

QUERY_NAME = "skewgroup"


# --- sources ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _zipf_cdf(z, universe):
    weights = np.arange(1, universe + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def draw_keys(row_numbers, z, universe, seed, drift_every=None):
    """Zipf keys (rank 0 hottest) and amounts for row numbers, counter-based: the same row
    number always draws the same key, so a replayed micro-batch is the same micro-batch.

    ``drift_every``: the key ranking is rotated every that many rows, so the hot keys are
    replaced by keys that were cold (FISH §6.1's time-evolving streams).
    """
    from skewgroup import hash_keys

    row_numbers = np.asarray(row_numbers, dtype=np.int64)
    uniform = (hash_keys(row_numbers, seed) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    keys = np.searchsorted(_zipf_cdf(z, universe), uniform, side="right").astype(np.int64)
    np.minimum(keys, universe - 1, out=keys)
    if drift_every:
        # A large odd step moves every rank far from where it was at each change.
        shift = (row_numbers // drift_every) * 7_919_993
        keys = (keys + shift) % universe
    amounts = (hash_keys(row_numbers, seed + 1) % np.uint64(10_000)).astype(np.float64) / 100.0
    return keys, amounts


def _generated(spark, args):
    import pyarrow as pa
    from pyspark.sql import types as T

    if args.rate:
        rows = (spark.readStream.format("rate").option("rowsPerSecond", args.rate)
                .option("numPartitions", args.partitions).load())
    else:
        rows = (spark.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", args.rows_per_batch)
                .option("numPartitions", args.partitions).load())
    z, universe, seed = args.z, args.universe, args.seed
    drift_every = args.drift_every if args.source == "drift" else None

    def draw(batches):
        for batch in batches:
            keys, amounts = draw_keys(batch.column("value").to_numpy(), z, universe, seed,
                                      drift_every)
            yield pa.RecordBatch.from_arrays(
                [batch.column("timestamp"), pa.array(keys), pa.array(amounts)],
                names=list(GENERATED_COLUMNS))

    ts, key, amount = GENERATED_COLUMNS
    schema = T.StructType([T.StructField(ts, T.TimestampType()),
                           T.StructField(key, T.LongType(), False),
                           T.StructField(amount, T.DoubleType(), False)])
    return rows.mapInArrow(draw, schema)


def _files(spark, args):
    from pyspark.errors import AnalysisException

    reader = spark.read
    if args.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        schema = reader.format(args.format).load(args.input).schema
    except AnalysisException as error:
        if error.getCondition() != "UNABLE_TO_INFER_SCHEMA":
            raise
        schema = None
    if not schema:
        # The files are there (checked before Spark started) but hold no columns, e.g. they are
        # empty: parquet fails to infer, JSON infers no column.
        raise JobError(f"--input {args.input}: Spark finds no columns in its {args.format} "
                       f"files (are they empty?); put a non-empty {args.format} file in it")
    stream = (spark.readStream.format(args.format).schema(schema)
              .option("maxFilesPerTrigger", args.max_files_per_trigger))
    if args.format == "csv":
        stream = stream.option("header", "true")
    return stream.load(args.input)


def source(spark, args):
    if args.source in ("zipf", "drift"):
        return _generated(spark, args)
    if args.source == "files":
        return _files(spark, args)
    return (spark.readStream.format("rate").option("rowsPerSecond", args.rate or 1000)
            .option("numPartitions", args.partitions).load())


# --- the query -------------------------------------------------------------------------------


# The job's stand-in for a user's Python aggregate: Spark cannot combine it map-side, and in
# streaming it refuses pandas grouped-aggregate UDFs, so a hot key's rows all reach one task.
SCORE_ROUNDS = 160
_MASK64 = (1 << 64) - 1
# The names under which the job observes each micro-batch: rows per partition had the query
# been groupBy(keys) (Spark's hash placement, pmod(murmur3(keys, 42), n)).
GROUPBY_ROWS = "skewgroup_groupby_rows"
_BATCH_ID = "streaming.sql.batchId"   # the local property Spark sets on a micro-batch's tasks


def score_row(value):
    """A per-row Python function standing in for a user's (a model's score, a parser, a lookup):
    pure Python, about 10 µs a row, an integer in [0, 1024) so that sums are exact."""
    if value is None:
        return 0
    x = int(value * 100) & _MASK64
    for _ in range(SCORE_ROUNDS):
        x = (x * 6364136223846793005 + 1442695040888963407) & _MASK64
    return x >> 54


class _AddPerTask:
    """Accumulates {(batch, partition): [seconds, rows]} from the tasks (an AccumulatorParam)."""

    def zero(self, value):
        return {}

    def addInPlace(self, total, update):
        for key, (seconds, rows) in update.items():
            before = total.get(key, (0.0, 0))
            total[key] = (before[0] + seconds, before[1] + rows)
        return total


def score_aggregate(column, timings=None):
    """``agg.custom``: the sum of :func:`score_row` over ``column``, vectorized per partition;
    ``timings`` (an accumulator of :class:`_AddPerTask`) receives each task's time in it."""
    from skewgroup.spark import agg

    def partial(rows, offsets):
        # CPU time of this thread: what the task would take on a core of its own, which a
        # wall clock on a shared machine (two tasks per core, other processes) overstates.
        started = time.thread_time()
        values = np.fromiter(map(score_row, rows.column(column).to_pylist()), dtype=np.int64,
                             count=rows.num_rows)
        if timings is not None:
            from pyspark import TaskContext

            task = TaskContext.get()
            timings.add({(task.getLocalProperty(_BATCH_ID), task.partitionId()):
                         (time.thread_time() - started, rows.num_rows)})
        sums = np.add.reduceat(values, offsets[:-1]) if rows.num_rows else values
        return {"score": sums}

    return agg.custom(partial, merge={"score": "sum"}, schema="score long", vectorized=True,
                      finish=lambda merged: merged["score"], name="score")


def python_aggregator(kind, column, schema):
    """The shipped aggregator (``skewgroup.aggregators``) an ``--agg`` kind names, and the
    columns it reads: its merge is Python, which Spark cannot run in a streaming aggregation."""
    from skewgroup.aggregators import DistinctCount, KllQuantiles, LeastSquares, TopK

    columns = column.split(",")
    item_type = schema[columns[0]].dataType.simpleString()
    if kind == "quantiles":
        return KllQuantiles((0.5, 0.9, 0.99)), columns
    if kind == "topk":
        return TopK(10, item_type=item_type), columns
    if kind == "distinct":
        return DistinctCount(item_type=item_type), columns
    return LeastSquares(len(columns) - 1, intercept=True), columns


def aggregates(args, schema, timings=None):
    from skewgroup.spark import agg

    made = []
    for kind, column in args.agg:
        if kind == "score":
            a = score_aggregate(column, timings)
        elif kind in PYTHON_MERGED:
            obj, columns = python_aggregator(kind, column, schema)
            a = agg.aggregator(obj, *columns)
        else:
            a = getattr(agg, kind)(column) if column else agg.count()
        # Plain names: parquet refuses the parentheses of Spark's default 'sum(amount)'.
        made.append(a.alias(output_name(kind, column)))
    return made


def output_name(kind, column):
    return kind if column is None else f"{kind}_{column.replace(',', '_')}"


def merged_in_python(args):
    return any(kind in PYTHON_MERGED for kind, _ in args.agg)


def build_query(spark, args, timings=None):
    """The job's streaming DataFrame: source -> skew_group(keys, aggregates), observed with
    the rows each partition would get under plain groupBy."""
    from pyspark.sql import functions as F

    from skewgroup.spark import skew_group

    df = source(spark, args)
    check_columns(args, df.columns)     # before the query starts, not as a failed query
    placed_by_hash = F.pmod(F.hash(*args.key), F.lit(args.workers))
    df = df.observe(GROUPBY_ROWS, *[F.count_if(placed_by_hash == w).alias(f"w{w}")
                                    for w in range(args.workers)])
    # Always routed: the job's point is the per-batch balance of the routing, which the "auto"
    # plan would hand to Spark's own aggregation for built-in aggregates (nothing to observe).
    sources = args.partitions if args.source != "files" else None
    return df.transform(skew_group(args.key, *aggregates(args, df.schema, timings), plan="routed",
                                   workers=args.workers, strategy=args.strategy, seed=args.seed,
                                   sources=sources, **args.params))


def start(result, args, checkpoint, latest=None):
    """Start the query. With Python aggregators (update mode only) the memory sink keeps the
    latest row per key in ``latest`` (a dict on the driver) instead of Spark's memory table."""
    writer = result.writeStream.option("checkpointLocation", checkpoint).queryName(QUERY_NAME)
    if args.sink == "memory" and latest is not None:
        def keep(batch, batch_id):
            for row in batch.collect():
                latest[tuple(row[k] for k in args.key)] = row

        writer = writer.outputMode("update").foreachBatch(keep)
    elif args.sink == "memory":
        writer = writer.format("memory").outputMode("complete")
    elif args.sink == "console":
        writer = (writer.format("console").outputMode("update").option("numRows", 20)
                  .option("truncate", "false"))
    else:
        writer = writer.outputMode("update").foreachBatch(_batch_writer(args.output))
    if args.trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    elif args.trigger == "once":
        writer = writer.trigger(once=True)
    elif args.trigger:
        writer = writer.trigger(processingTime=args.trigger)
    return writer.start()


def _batch_writer(output):
    def write(batch, batch_id):
        # Overwrite, not append: a micro-batch replayed after a crash replaces what its first
        # attempt may have written, which makes the sink idempotent (exactly once with the
        # checkpoint).
        batch.write.mode("overwrite").parquet(os.path.join(output, f"batch={batch_id}"))
    return write


def final_result(output, keys=("key",)):
    """The latest row per key of a ``--sink parquet`` output (pandas), sorted by key.

    Each micro-batch holds the keys it updated with their running aggregates, so the row of a
    key's last batch is its final value.
    """
    import pandas as pd
    import pyarrow.parquet as pq

    frames = []
    for part in sorted(Path(output).glob("batch=*")):
        table = pq.read_table(part)
        if table.num_rows:
            frame = table.to_pandas()
            frame["_batch"] = int(part.name.split("=", 1)[1])
            frames.append(frame)
    if not frames:
        return pd.DataFrame()
    everything = pd.concat(frames, ignore_index=True).sort_values("_batch", kind="stable")
    last = everything.drop_duplicates(list(keys), keep="last").drop(columns="_batch")
    return last.sort_values(list(keys)).reset_index(drop=True)


# --- progress --------------------------------------------------------------------------------

LEGEND = (
    "busiest worker: rows of the busiest of the n partitions, under plain groupBy (hash "
    "placement) and under skew_group; LI = (busiest - mean) / mean, 0 is perfect balance; RF = "
    "partial rows / keys, the extra merge work routing costs (1 = none); hot keys: keys with "
    ">= 1/(5n) of the batch's rows, and on how many workers each was spread; Python aggregate: "
    "its busiest task, measured under skew_group and projected for groupBy (the same cost per "
    "row on groupBy's busiest partition).")


def batch_figures(progress, timings=None):
    """One micro-batch's figures from a query progress: rows, time, LI, busiest worker under
    skew_group and under plain groupBy, and with ``timings`` (the Python aggregate's per-task
    seconds and rows, by batch and partition) its busiest task under both."""
    from skewgroup.spark import balance

    figures = balance(progress) or {}
    progress = json.loads(progress.json) if hasattr(progress, "json") else progress
    by_hash = (progress.get("observedMetrics") or {}).get(GROUPBY_ROWS) or {}
    batch = progress.get("batchId")
    result = {
        "batch": batch,
        "rows": progress.get("numInputRows", 0),
        "batch_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "load_imbalance": figures.get("load_imbalance"),
        "busiest_worker_rows": figures.get("busiest_worker_rows"),
        "groupby_busiest_rows": max((int(v or 0) for v in by_hash.values()), default=None),
        "replication_factor": figures.get("replication_factor"),
        "hot_keys": figures.get("hot_keys"),
        "hot_key_replication": figures.get("hot_key_replication"),
        "rows_per_worker": figures.get("rows_per_worker"),
        "python_busiest_s": None,
        "python_groupby_busiest_s": None,
    }
    tasks = [v for (b, _), v in (timings or {}).items() if b == str(batch)]
    rows = sum(r for _, r in tasks)
    if rows and result["groupby_busiest_rows"] is not None:
        # Measured: the busiest task's seconds in the Python aggregate. Projected: groupBy's
        # busiest partition at this batch's mean cost per row of the same function.
        result["python_busiest_s"] = max(s for s, _ in tasks)
        result["python_groupby_busiest_s"] = (sum(s for s, _ in tasks) / rows
                                              * result["groupby_busiest_rows"])
    return result


class Display:
    """Live per-batch progress: a rich table on a terminal, one line per batch elsewhere."""

    HEADERS = ("batch", "rows", "batch ms", "busiest worker\ngroupBy", "busiest worker\n"
               "skew_group", "LI", "RF", "hot keys", "workers/\nhot key",
               "Python agg ms\ngroupBy (proj.)", "Python agg ms\nskew_group",
               "speed-up\n(n cores)")

    def __init__(self, args, total):
        from skewgroup._console import console

        self.console = console()
        self.quiet = args.quiet
        self.workers = args.workers
        self.total = total
        self.rows = []
        self.live = None
        if not self.quiet:
            self.console.print(LEGEND, style="dim", highlight=False)
        if not self.quiet and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=self.console, refresh_per_second=4)
            self.live.start()

    def _render(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        table = Table(title="skewgroup: per micro-batch", title_justify="left")
        for name in self.HEADERS:
            table.add_column(name, justify="right")
        for f in self.rows[-12:]:
            table.add_row(*_cells(f))
        done = len(self.rows)
        if self.total:
            return Group(ProgressBar(total=self.total, completed=done, width=40),
                         f"{done}/{self.total} batches", table)
        return Group(f"{done} batches", table)

    def add(self, figures):
        self.rows.append(figures)
        if self.live is not None:
            self.live.update(self._render())
        elif not self.quiet:
            self.console.print(
                "batch {} | {} rows | {} ms | busiest worker: groupBy {}, skew_group {} "
                "(LI {}) | RF {} | {} hot keys on {} workers each | Python aggregate's busiest "
                "task: groupBy ~{} ms, skew_group {} ms ({}x on {} cores)".format(
                    *_cells(figures), self.workers),
                highlight=False, soft_wrap=True)

    def close(self):
        if self.live is not None:
            self.live.stop()


def _cells(f):
    def number(value, pattern, scale=1):
        return "-" if value is None else format(value * scale, pattern)
    return (str(f["batch"]), number(f["rows"], ","), number(f["batch_ms"], ","),
            number(f["groupby_busiest_rows"], ","), number(f["busiest_worker_rows"], ","),
            number(f["load_imbalance"], ".4f"), number(f["replication_factor"], ".3f"),
            number(f["hot_keys"], ","), number(f["hot_key_replication"], ".1f"),
            number(f["python_groupby_busiest_s"], ",.0f", 1000),
            number(f["python_busiest_s"], ",.0f", 1000),
            number(_speedup(f), ".1f"))


def _speedup(f):
    if not f["python_busiest_s"] or f["python_groupby_busiest_s"] is None:
        return None
    return f["python_groupby_busiest_s"] / f["python_busiest_s"]


def follow(query, args, display, poll=0.25, stop=None, timings=None):
    """Show each new micro-batch until the query ends or ``--batches`` have run."""
    seen = set()
    metrics = open(args.metrics, "a") if args.metrics else None

    def report_new_batches():
        for progress in query.recentProgress:
            figures = batch_figures(progress, timings.value if timings is not None else None)
            if figures["batch"] in seen or (figures["rows"] == 0
                                            and figures["load_imbalance"] is None):
                continue
            seen.add(figures["batch"])
            display.add(figures)
            if metrics:
                metrics.write(json.dumps(figures) + "\n")
                metrics.flush()

    try:
        while True:
            active = query.isActive
            report_new_batches()
            if args.batches is not None and len(seen) >= args.batches:
                (stop or query.stop)()
                query.awaitTermination()
                break
            if not active:
                # A query that ends by itself (availableNow, a bounded source) may record its
                # last batch's progress after isActive turned false: one CI run's restarted
                # job lost its last batch's metrics line that way. Once the query thread has
                # ended, every progress it made is there.
                query.awaitTermination()
                report_new_batches()
                break
            time.sleep(poll)
    finally:
        if metrics:
            metrics.close()
    return len(seen)


# --- main ------------------------------------------------------------------------------------


def session(args, jvm_stderr):
    """The SparkSession: spark-submit's when run by it, else a local one (or ``--master``),
    whose JVM writes its stderr through ``jvm_stderr`` (a :class:`_stderr.JvmStderr`)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # pandas' FutureWarnings from inside pyspark's own worker code are not the user's to act on;
    # the Python workers inherit this environment.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    builder = (SparkSession.builder.appName("skewgroup")
               .config("spark.sql.shuffle.partitions", str(args.workers))
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.schemaInference", "true")
               # Python workers start in the executor's working directory with it first on
               # sys.path: run from a checkout, its uncompiled skewgroup/ would shadow the
               # installed package. Python >= 3.11 leaves it out of sys.path with this.
               .config("spark.executorEnv.PYTHONSAFEPATH", "1"))
    if not under_submit:
        master = args.master or "local[*]"
        if master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(master)
    elif args.master:
        builder = builder.master(args.master)
    # The same for a JVM this process starts (local mode): launch it outside the checkout.
    here = os.getcwd()
    os.chdir(tempfile.gettempdir())
    try:
        if under_submit:
            spark = builder.getOrCreate()
        else:
            with jvm_stderr:
                spark = builder.getOrCreate()
    finally:
        os.chdir(here)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv=None):
    """``spark-submit skewgroup/job.py [options]``: the same options as ``skewgroup run``."""
    return run(parse_job_args(sys.argv[1:] if argv is None else argv))


def run(args):
    """Run the job with options parsed by :func:`skewgroup.options.parse_job_args`."""
    try:
        return _run(args)
    except JobError as error:
        # Found once Spark could read the source (a file source's columns): the same error line
        # and exit code as an option error found before Spark started, and no traceback.
        print(f"{job_parser().prog}: error: {error}", file=sys.stderr)
        return 2


def _run(args):
    temporary = None
    checkpoint = args.checkpoint
    if checkpoint is None:
        temporary = checkpoint = tempfile.mkdtemp(prefix="skewgroup-checkpoint-")
    jvm_stderr = JvmStderr()
    spark = session(args, jvm_stderr)
    try:
        timings = None
        if any(kind == "score" for kind, _ in args.agg):
            timings = spark.sparkContext.accumulator({}, _AddPerTask())
        result = build_query(spark, args, timings)
        Path(checkpoint, JOB_FILE).write_text(json.dumps(routing_config(args), indent=1))
        latest = {} if merged_in_python(args) else None
        query = start(result, args, checkpoint, latest)
        display = Display(args, args.batches)
        started = time.perf_counter()
        try:
            batches = follow(query, args, display, timings=timings,
                             stop=lambda: _stop_quietly(spark, query, jvm_stderr))
        except KeyboardInterrupt:
            _stop_quietly(spark, query, jvm_stderr)
            batches = len(display.rows)
        finally:
            display.close()
        seconds = time.perf_counter() - started
        baseline = None
        if merged_in_python(args) and args.batches:
            display.console.print(
                f"measuring Spark's own way on the same {batches} micro-batches: "
                f"groupBy(key).applyInPandasWithState over the raw rows, one call per key ...",
                style="dim", highlight=False)
            baseline = measure_per_key(spark, args, batches)
        _summary(spark, args, display, batches, seconds, checkpoint, latest, baseline)
    finally:
        spark.stop()
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
    return 0


def _stop_quietly(spark, query, jvm_stderr):
    """Stop after --batches: the next micro-batch has usually started, and Spark reports its
    cancellation though nothing failed: ERROR logs (e.g. 'Store broadcast ... fail', 'Error in
    TaskCompletionListener' from a state store aborted by the interruption) and its Python
    workers' BrokenPipeError tracebacks (see skewgroup.spark._stderr). The cancelled tasks end
    after stop() returns, so the log stays off for the rest of the run: what is left (the
    summary) reports its own errors as Python exceptions."""
    jvm_stderr.stopping.set()
    spark.sparkContext.setLogLevel("OFF")
    query.stop()


def per_key_query(spark, args):
    """What Spark offers a Python merge in a stream: ``groupBy(keys).applyInPandasWithState``
    over the raw rows, one Python call per key per micro-batch, the key's merged buffers its
    state (the same aggregators, their vectorized reduce on the key's rows)."""
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout

    from skewgroup.aggregators import adapt

    df = source(spark, args)
    adapters = []
    for kind, column in args.agg:
        obj, columns = python_aggregator(kind, column, df.schema)
        adapters.append(adapt(obj, columns))
    outputs = [T.StructField(output_name(*a), T._parse_datatype_string(adapter.obj.outputType))
               for a, adapter in zip(args.agg, adapters)]
    output = T.StructType([df.schema[k] for k in args.key] + outputs)
    state = T.StructType([T.StructField(f"b{i}", T.BinaryType()) for i in range(len(adapters))])
    inputs = sorted({c for adapter in adapters for c in adapter.columns})

    def per_key(key, frames, group_state):
        rows = pa.Table.from_pandas(pd.concat(list(frames), ignore_index=True)[inputs],
                                    preserve_index=False)
        offsets = np.array([0, rows.num_rows])
        buffers, results = [], []
        for i, adapter in enumerate(adapters):
            buffer = adapter.reduce_groups(rows, offsets)
            if group_state.exists:
                stored = adapter.decode(pa.array([group_state.get[i]], pa.binary()))
                buffer = adapter.merge_groups(stored + buffer, np.array([0, 2]))
            buffers.append(adapter.encode(buffer)[0].as_py())
            results.append(adapter.finish(buffer)[0].as_py())
        group_state.update(tuple(buffers))
        yield pd.DataFrame([list(key) + results], columns=output.fieldNames())

    return df.groupBy(*args.key).applyInPandasWithState(
        per_key, output, state, "update", GroupStateTimeout.NoTimeout)


def measure_per_key(spark, args, batches):
    """Micro-batch seconds of :func:`per_key_query` over the first ``batches`` micro-batches of
    the same source (a generated source draws the same rows again; files are read again)."""
    checkpoint = tempfile.mkdtemp(prefix="skewgroup-per-key-")
    query = (per_key_query(spark, args).writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", checkpoint).start())
    try:
        while query.isActive and _batches_done(query) < batches:
            time.sleep(0.25)
    finally:
        # The batch running now is cancelled, and its tasks end after stop() returns: the log
        # stays off, as _stop_quietly leaves it.
        spark.sparkContext.setLogLevel("OFF")
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    return [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress
            if p["numInputRows"]][:batches]


def _batches_done(query):
    return sum(1 for p in query.recentProgress if p["numInputRows"])


def _summary(spark, args, display, batches, seconds, checkpoint, latest=None, baseline=None):
    console = display.console
    rows = sum(f["rows"] or 0 for f in display.rows)
    imbalances = [f["load_imbalance"] for f in display.rows if f["load_imbalance"] is not None]
    worst = f"{max(imbalances):.4f}" if imbalances else "-"
    console.print(f"skewgroup run: {batches} micro-batches, {rows:,} rows in {seconds:.1f} s; "
                  f"strategy {args.strategy}, {args.workers} workers; worst batch LI {worst}",
                  highlight=False, soft_wrap=True)
    if baseline is not None:
        console.print(per_key_comparison(display.rows, baseline), highlight=False,
                      soft_wrap=True)
    else:
        console.print(comparison(display.rows, args.workers), highlight=False, soft_wrap=True)
    if args.sink == "memory":
        _top_keys(spark, args, console, latest)
    elif args.sink == "parquet":
        console.print(f"output: {args.output} (skewgroup.spark.job.final_result reads it); "
                      f"checkpoint: {checkpoint}")


def comparison(batch_rows, workers):
    """The summary's line on what plain groupBy would have cost, from the batches' figures."""
    timed = [f for f in batch_rows if f["python_busiest_s"] is not None]
    if timed:
        groupby = sum(f["python_groupby_busiest_s"] for f in timed)
        ours = sum(f["python_busiest_s"] for f in timed)
        return (f"plain groupBy: the Python aggregate's busiest task {groupby:.2f} s "
                f"(projected); skew_group: {ours:.2f} s (measured); "
                f"{groupby / ours:.1f}x faster on {workers} cores")
    placed = [f for f in batch_rows if f["groupby_busiest_rows"] is not None
              and f["busiest_worker_rows"] is not None]
    groupby = sum(f["groupby_busiest_rows"] for f in placed)
    ours = sum(f["busiest_worker_rows"] for f in placed)
    if not ours:
        return "plain groupBy: no batch to compare"
    return (f"plain groupBy: busiest worker {groupby:,} rows; skew_group: {ours:,} rows. "
            f"Built-in aggregates only: Spark's groupBy combines them map-side, so its busiest "
            f"task is not that slow, and skew_group's default plan (auto) would run Spark's "
            f"own groupBy; routed here to show the balance.")


def per_key_comparison(batch_rows, per_key_seconds):
    """The summary's line: skew_group's micro-batches against applyInPandasWithState per key
    over the raw rows on the same micro-batches, both measured (wall seconds a micro-batch)."""
    ours = [f["batch_ms"] / 1000 for f in batch_rows if f["batch_ms"]][:len(per_key_seconds)]
    if not ours or not per_key_seconds:
        return "applyInPandasWithState per key: no micro-batch to compare"
    ratio = np.median(per_key_seconds) / np.median(ours)
    return (f"applyInPandasWithState per key over the raw rows (Spark's way to run a Python "
            f"merge in a stream): {len(per_key_seconds)} micro-batches, median "
            f"{np.median(per_key_seconds):.2f} s; skew_group: median {np.median(ours):.2f} s "
            f"(both measured, same micro-batches); {ratio:.1f}x faster")


def _top_keys(spark, args, console, latest=None):
    """The ten keys with the largest first aggregate, numbers rounded for reading."""
    from rich.table import Table

    first = output_name(*args.agg[0])
    if latest is not None:
        # A sketch or a fit has no order worth ranking by: the first keys (a generated
        # stream's rank 0 is its hottest key).
        table = Table(title=f"first keys by {', '.join(args.key)}", title_justify="left")
        columns = next(iter(latest.values())).__fields__ if latest else []
        rows = [latest[k] for k in sorted(latest, key=lambda k: [(v is None, v) for v in k])]
        rows = rows[:10]
    else:
        table = Table(title=f"top keys by {first}", title_justify="left")
        result = spark.table(QUERY_NAME)
        columns = result.columns
        rows = result.orderBy(result[first].desc()).limit(10).collect()
    for name in columns:
        table.add_column(name, justify="left" if name in args.key else "right")
    for row in rows:
        table.add_row(*(_readable(v) for v in row))
    console.print(table)


def _readable(value):
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e15 else f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_readable(v) for v in value) + "]"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
