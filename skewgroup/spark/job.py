"""The skewgroup streaming job: ``skewgroup run [options]`` or ``spark-submit skewgroup/job.py``.

With no options it runs on local Spark over a generated Zipf stream (z = 1.4, 100k rows per
micro-batch, 8 workers, pdstream), shows every micro-batch's balance live and stops after 10
batches. Every piece can be swapped::

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
import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from skewgroup import STRATEGIES
from skewgroup._config import make_config
from skewgroup._partitioner import MAX_WORKERS
from skewgroup.cli import _count, _int_in, _nonneg_float, _positive_float
from skewgroup.spark._stderr import JvmStderr

SOURCES = ("zipf", "drift", "files", "rate")
SINKS = ("memory", "console", "parquet")
FORMATS = ("parquet", "csv", "json")
AGGREGATES = ("count", "sum", "min", "max", "mean")
JOB_FILE = "skewgroup-job.json"
# The columns of the sources whose schema is fixed: what --key and --agg may name there.
GENERATED_COLUMNS = ("ts", "key", "amount")
RATE_COLUMNS = ("timestamp", "value")
QUERY_NAME = "skewgroup"


class JobError(ValueError):
    """A bad option of the job, found before Spark starts."""


# --- options ---------------------------------------------------------------------------------


def _aggregate(text):
    """'count' -> ('count', None); 'sum:amount' -> ('sum', 'amount')."""
    kind, _, column = str(text).partition(":")
    if kind not in AGGREGATES:
        raise argparse.ArgumentTypeError(
            f"expected one of {', '.join(AGGREGATES)} (with ':COLUMN' except count), "
            f"got {text!r}")
    if kind != "count" and not column:
        raise argparse.ArgumentTypeError(f"expected {kind}:COLUMN, got {text!r}")
    return kind, column or None


def _param(text):
    """'window=256' -> ('window', 256): the value is read as JSON when it parses."""
    name, eq, value = str(text).partition("=")
    if not (eq and name):
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE such as window=256, got {text!r}")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return name, tuple(parsed) if isinstance(parsed, list) else parsed


def _trigger(text):
    """'availableNow', 'once', or a processing-time interval such as '5 seconds'."""
    if text in ("availableNow", "once"):
        return text
    number, _, unit = str(text).strip().partition(" ")
    try:
        seconds = float(number)
    except ValueError:
        seconds = -1.0
    if seconds < 0 or unit.rstrip("s") not in ("second", ""):
        raise argparse.ArgumentTypeError(
            f"expected availableNow, once, or an interval such as '5 seconds', got {text!r}")
    return f"{seconds:g} seconds"


def build_parser():
    parser = argparse.ArgumentParser(
        prog="skewgroup run",
        description="The skewgroup streaming job: a stream grouped by key with skew_group, "
                    "its balance shown per micro-batch.",
        epilog="spark-submit skewgroup/job.py takes the same options.")
    src = parser.add_argument_group("source")
    src.add_argument("--source", choices=SOURCES, default="zipf",
                     help="zipf or drift (generated), files (a directory), rate (Spark's rate "
                          "source); default zipf")
    src.add_argument("--input", help="--source files: the directory to read")
    src.add_argument("--format", choices=FORMATS, default="parquet",
                     help="--source files: file format (default parquet)")
    src.add_argument("--max-files-per-trigger", type=_int_in(1), default=1,
                     help="--source files: files per micro-batch (default 1)")
    src.add_argument("--rows-per-batch", type=_count, default=100_000,
                     help="zipf/drift: rows per micro-batch (default 100k)")
    src.add_argument("--rate", type=_positive_float, default=None,
                     help="zipf/drift/rate: rows per second (Spark's rate source) instead of "
                          "--rows-per-batch")
    src.add_argument("--z", type=_nonneg_float, default=1.4, help="Zipf exponent (default 1.4)")
    src.add_argument("--universe", type=_count, default=100_000,
                     help="zipf/drift: distinct keys drawn from (default 100k)")
    src.add_argument("--drift-every", type=_count, default=500_000,
                     help="drift: rows between two replacements of the hot keys (default 500k)")
    src.add_argument("--partitions", type=_int_in(1, 4096), default=2,
                     help="zipf/drift/rate: input partitions, i.e. the papers' sources (default 2)")

    grp = parser.add_argument_group("grouping")
    grp.add_argument("--key", action="append", default=None,
                     help="key column, repeatable (default: 'key'; 'value' for --source rate)")
    grp.add_argument("--agg", type=_aggregate, action="append", default=None,
                     metavar="AGG[:COLUMN]",
                     help="count, sum:COL, min:COL, max:COL, mean:COL; repeatable "
                          "(default: count, and sum:amount on generated streams)")
    grp.add_argument("--strategy", choices=sorted(STRATEGIES), default="pdstream",
                     help="routing strategy (default pdstream)")
    grp.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE",
                     help="a strategy parameter, e.g. window=64 (repeatable)")
    grp.add_argument("--workers", type=_int_in(1, MAX_WORKERS), default=8,
                     help="workers, i.e. partitions of the partial stage (default 8)")
    grp.add_argument("--seed", type=_int_in(0, (1 << 63) - 1), default=0,
                     help="seed of the key hash and of generated streams (default 0)")

    run = parser.add_argument_group("run")
    run.add_argument("--trigger", type=_trigger, default=None,
                     help="availableNow, once, or '<n> seconds' (default: batches back to back)")
    run.add_argument("--batches", type=_int_in(1), default=None,
                     help="stop after this many micro-batches (default 10 for generated "
                          "sources; files and rate: none)")
    run.add_argument("--checkpoint", help="checkpoint directory (default: a temporary one, "
                                          "removed at the end)")
    run.add_argument("--sink", choices=SINKS, default="memory",
                     help="memory (default; the top rows are printed), console, or parquet")
    run.add_argument("--output", help="--sink parquet: the output directory")
    run.add_argument("--metrics", help="append each micro-batch's balance as a JSON line here")
    run.add_argument("--master", default=None,
                     help="Spark master (default local[*]; under spark-submit, spark-submit's)")
    run.add_argument("--quiet", action="store_true", help="no live display, only the summary")
    return parser


def parse_args(argv=None):
    """Parse and check the job's options; every error is raised before Spark starts."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check(args)
    except JobError as error:
        parser.error(str(error))
    return args


def _check(args):
    generated = args.source in ("zipf", "drift")
    if args.source == "files":
        if not args.input:
            raise JobError("--source files needs --input DIR")
        if not Path(args.input).is_dir():
            raise JobError(f"--input must be an existing directory; got {args.input!r}, "
                           f"which {'is not a directory' if Path(args.input).exists() else 'does not exist'}")
        args.input = str(Path(args.input).resolve())
        if not _has_data_files(args.input):
            raise JobError(
                f"--input {args.input} has no files to infer a schema from; put at least one "
                f"{args.format} file in it before starting the job (its columns are read once, "
                f"at the start)")
    elif args.input:
        raise JobError(f"--input goes with --source files; got --source {args.source}")
    # Which were left to their defaults: an error about a column names them as such.
    args.defaulted = {option for option, value in (("--key", args.key), ("--agg", args.agg))
                      if value is None}
    if args.key is None:
        args.key = ["value"] if args.source == "rate" else ["key"]
    if args.agg is None:
        args.agg = [("count", None)] + ([("sum", "amount")] if generated else [])
    if args.batches is None and generated:
        args.batches = 10
    if args.source != "files":      # a fixed schema: checked now; files once Spark read theirs
        check_columns(args, GENERATED_COLUMNS if generated else RATE_COLUMNS)
    if args.trigger in ("availableNow", "once") and args.source == "rate":
        raise JobError(f"--trigger {args.trigger} needs a source with an end; the rate source "
                       f"has none (use --batches)")
    params = dict(args.param)
    try:
        make_config(args.strategy, params)
    except (TypeError, ValueError) as error:
        raise JobError(f"--param: {error}") from None
    args.params = params
    if args.sink == "parquet":
        if not args.output:
            raise JobError("--sink parquet needs --output DIR")
        args.output = _writable_dir(args.output, "--output")
    elif args.output:
        raise JobError(f"--output goes with --sink parquet; got --sink {args.sink}")
    if args.checkpoint:
        args.checkpoint = _writable_dir(args.checkpoint, "--checkpoint")
        _check_restart(args)
    if args.metrics:
        _writable_dir(str(Path(args.metrics).resolve().parent), "--metrics (its directory)")
        args.metrics = str(Path(args.metrics).resolve())


def _has_data_files(directory):
    """Whether ``directory`` holds a file Spark reads: it skips names starting with '_' or '.'
    (_SUCCESS, .crc files, hidden files) at any depth. Stops at the first one."""
    root = Path(directory)
    return any(p.is_file() and not any(part.startswith(("_", "."))
                                       for part in p.relative_to(root).parts)
               for p in root.rglob("*"))


def describe_source(args):
    if args.source == "files":
        return f"the {args.format} files in --input {args.input}"
    return f"--source {args.source}"


def check_columns(args, columns):
    """Every option naming a column names one of ``columns``, the source's; else a JobError
    naming the option, the column and the columns there are."""
    columns = list(columns)
    references = [("--key", "--key", name) for name in args.key]
    references += [("--agg", f"--agg {kind}:{column}", column)
                   for kind, column in args.agg if column]
    for option, given, name in references:
        if name not in columns:
            default = " (the default)" if option in args.defaulted else ""
            raise JobError(f"argument {given}{default}: {name!r} is not a column of "
                           f"{describe_source(args)}; its columns are {', '.join(columns)}")


def _writable_dir(path, option):
    """``path`` made absolute, created if missing, and proven writable by writing a file."""
    target = Path(path).resolve()
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target, prefix=".skewgroup-write-test"):
            pass
    except OSError as error:
        raise JobError(f"{option} must be a writable directory; {str(path)!r} is not "
                       f"({error.strerror or error})") from None
    return str(target)


def routing_config(args):
    """The options the job records in its checkpoint (``JOB_FILE``)."""
    return {"keys": list(args.key), "aggregates": [list(a) for a in args.agg],
            "strategy": args.strategy, "params": {k: v for k, v in sorted(args.params.items())},
            "workers": args.workers, "seed": args.seed}


# What Spark's state in the checkpoint depends on, and the option that sets it. The other
# recorded options only route rows (soft state): a restart may change them.
STATE_OPTIONS = {"keys": "--key", "aggregates": "--agg"}


def _check_restart(args):
    saved_path = Path(args.checkpoint) / JOB_FILE
    if not saved_path.exists():
        return
    saved = json.loads(saved_path.read_text())
    ours = json.loads(json.dumps(routing_config(args)))
    changed = [k for k in STATE_OPTIONS if saved.get(k) != ours[k]]
    if not changed:
        return
    options = " and ".join(STATE_OPTIONS[k] for k in changed)
    what = ", ".join(f"{STATE_OPTIONS[k]} {saved.get(k)!r} -> {ours[k]!r}" for k in changed)
    raise JobError(
        f"checkpoint {args.checkpoint} was started with other {options} ({what}). Spark's state "
        f"in it holds those groups and aggregates; restart with the same {options}, or start a "
        f"new --checkpoint to change them (--workers, --strategy, --param and --seed may change "
        f"on a restart).")


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


def aggregates(args):
    from skewgroup.spark import agg

    made = []
    for kind, column in args.agg:
        a = getattr(agg, kind)(column) if column else agg.count()
        # Plain names: parquet refuses the parentheses of Spark's default 'sum(amount)'.
        made.append(a.alias(kind if column is None else f"{kind}_{column}"))
    return made


def build_query(spark, args):
    """The job's streaming DataFrame: source -> skew_group(keys, aggregates)."""
    from skewgroup.spark import skew_group

    df = source(spark, args)
    check_columns(args, df.columns)     # before the query starts, not as a failed query
    # Always routed: the job's point is the per-batch balance of the routing, which the "auto"
    # plan would hand to Spark's own aggregation for built-in aggregates (nothing to observe).
    sources = args.partitions if args.source != "files" else None
    return df.transform(skew_group(args.key, *aggregates(args), plan="routed",
                                   workers=args.workers, strategy=args.strategy, seed=args.seed,
                                   sources=sources, **args.params))


def start(result, args, checkpoint):
    writer = result.writeStream.option("checkpointLocation", checkpoint).queryName(QUERY_NAME)
    if args.sink == "memory":
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


def batch_figures(progress):
    """One micro-batch's figures from a query progress: rows, time, LI, busiest worker."""
    from skewgroup.spark import balance

    figures = balance(progress) or {}
    progress = json.loads(progress.json) if hasattr(progress, "json") else progress
    return {
        "batch": progress.get("batchId"),
        "rows": progress.get("numInputRows", 0),
        "batch_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "load_imbalance": figures.get("load_imbalance"),
        "busiest_worker_rows": figures.get("busiest_worker_rows"),
        "replication_factor": figures.get("replication_factor"),
        "hot_keys": figures.get("hot_keys"),
        "hot_key_replication": figures.get("hot_key_replication"),
        "rows_per_worker": figures.get("rows_per_worker"),
    }


class Display:
    """Live per-batch progress: a rich table on a terminal, one line per batch elsewhere."""

    def __init__(self, args, total):
        from rich.console import Console

        self.console = Console(stderr=False)
        self.quiet = args.quiet
        self.total = total
        self.rows = []
        self.live = None
        if not self.quiet and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=self.console, refresh_per_second=4)
            self.live.start()

    def _render(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        table = Table(title="skewgroup: per micro-batch", title_justify="left")
        for name in ("batch", "rows", "batch ms", "LI", "busiest worker", "RF", "hot keys",
                     "workers/hot key"):
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
            self.console.print("batch {} | {} rows | {} ms | LI {} | busiest worker {} | RF {} | "
                               "{} hot keys on {} workers each".format(*_cells(figures)),
                               highlight=False, soft_wrap=True)

    def close(self):
        if self.live is not None:
            self.live.stop()


def _cells(f):
    def number(value, pattern):
        return "-" if value is None else format(value, pattern)
    return (str(f["batch"]), number(f["rows"], ","), number(f["batch_ms"], ","),
            number(f["load_imbalance"], ".4f"), number(f["busiest_worker_rows"], ","),
            number(f["replication_factor"], ".3f"), number(f["hot_keys"], ","),
            number(f["hot_key_replication"], ".1f"))


def follow(query, args, display, poll=0.25, stop=None):
    """Show each new micro-batch until the query ends or ``--batches`` have run."""
    seen = set()
    metrics = open(args.metrics, "a") if args.metrics else None

    def report_new_batches():
        for progress in query.recentProgress:
            figures = batch_figures(progress)
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
    # pandas' FutureWarning from inside pyspark's applyInPandasWithState worker, once per batch,
    # is not the user's to act on; the Python workers inherit this environment.
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
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except JobError as error:
        # Found once Spark could read the source (a file source's columns): the same error line
        # and exit code as an option error found before Spark started, and no traceback.
        print(f"{build_parser().prog}: error: {error}", file=sys.stderr)
        return 2


def _run(args):
    temporary = None
    checkpoint = args.checkpoint
    if checkpoint is None:
        temporary = checkpoint = tempfile.mkdtemp(prefix="skewgroup-checkpoint-")
    jvm_stderr = JvmStderr()
    spark = session(args, jvm_stderr)
    try:
        result = build_query(spark, args)
        Path(checkpoint, JOB_FILE).write_text(json.dumps(routing_config(args), indent=1))
        query = start(result, args, checkpoint)
        display = Display(args, args.batches)
        started = time.perf_counter()
        try:
            batches = follow(query, args, display,
                             stop=lambda: _stop_quietly(spark, query, jvm_stderr))
        except KeyboardInterrupt:
            _stop_quietly(spark, query, jvm_stderr)
            batches = len(display.rows)
        finally:
            display.close()
        _summary(spark, args, display, batches, time.perf_counter() - started, checkpoint)
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


def _summary(spark, args, display, batches, seconds, checkpoint):
    console = display.console
    rows = sum(f["rows"] or 0 for f in display.rows)
    imbalances = [f["load_imbalance"] for f in display.rows if f["load_imbalance"] is not None]
    worst = f"{max(imbalances):.4f}" if imbalances else "-"
    console.print(f"skewgroup run: {batches} micro-batches, {rows:,} rows in {seconds:.1f} s; "
                  f"strategy {args.strategy}, {args.workers} workers; worst batch LI {worst}",
                  highlight=False, soft_wrap=True)
    if args.sink == "memory":
        first = aggregates(args)[0].output_name
        top = spark.table(QUERY_NAME).orderBy(spark.table(QUERY_NAME)[first].desc()).limit(10)
        console.print(f"top keys by {first}:")
        for row in top.collect():
            console.print("  " + ", ".join(f"{k}={v}" for k, v in row.asDict().items()),
                          highlight=False)
    elif args.sink == "parquet":
        console.print(f"output: {args.output} (skewgroup.spark.job.final_result reads it); "
                      f"checkpoint: {checkpoint}")


if __name__ == "__main__":
    sys.exit(main())
