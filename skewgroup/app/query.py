"""The job's query and sinks: source -> ``skew_group(keys, aggregates)``, observed with the rows
each partition would get under plain groupBy; the sinks (memory, console, parquet exactly once
through ``foreachBatch``). The hand-written ways the job compares with it are
:mod:`skewgroup.app.baselines`."""
import logging
import os
from pathlib import Path

from skewgroup.app.options import PYTHON_MERGED, check_columns
from skewgroup.app.sources import source
from skewgroup.app.workload import python_aggregator, score_aggregate


QUERY_NAME = "skewgroup"
# The rows of the memory sink with Python aggregators that the job keeps and prints: the
# smallest keys (a generated stream's hot keys come first).
FIRST_KEYS = 10


def first_order(key):
    """The order of the printed keys (a tuple of key values): ascending, nulls last."""
    return [(value is None, value) for value in key]


# The names under which the job observes each micro-batch: rows per partition had the query
# been groupBy(keys) (Spark's hash placement, pmod(murmur3(keys, 42), n)).
GROUPBY_ROWS = "skewgroup_groupby_rows"


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

    df = source(spark, args)
    # Before the query starts, not as a failed query.
    check_columns(args, {field.name: field.dataType.simpleString() for field in df.schema})
    placed_by_hash = F.pmod(F.hash(*args.key), F.lit(args.workers))
    df = df.observe(GROUPBY_ROWS, *[F.count_if(placed_by_hash == w).alias(f"w{w}")
                                    for w in range(args.workers)])
    return grouped(args, df, timings)


def grouped(args, df, timings=None):
    """``df`` grouped by the job's keys and aggregates with skew_group, under ``--plan``
    (default auto: the plan a user gets who writes no ``plan=``). The plan it ran and why go to
    ``args.chosen_plan`` (plan, reason): auto logs them on the ``skewgroup.spark`` logger."""
    from skewgroup.spark import skew_group

    chosen = _ChosenPlan()
    logger = logging.getLogger("skewgroup.spark")
    level = logger.level
    logger.addHandler(chosen)
    logger.setLevel(logging.INFO)
    try:
        result = df.transform(skew_group(args.key, *aggregates(args, df.schema, timings),
                                         plan=args.plan, workers=args.workers,
                                         strategy=args.strategy, seed=args.seed, **args.params))
    finally:
        logger.removeHandler(chosen)
        logger.setLevel(level)
    args.chosen_plan = chosen.found or (args.plan, "given by --plan, or routed as --strategy or "
                                                   "--param ask")
    return result


class _ChosenPlan(logging.Handler):
    """Keeps auto's ``skew_group plan=NAME: reason`` record (docs/plans.md, "auto")."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.found = None

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("skew_group plan="):
            plan, _, reason = message[len("skew_group plan="):].partition(": ")
            self.found = (plan, reason)


def start(result, args, checkpoint, latest=None):
    """Start the query. With Python aggregators (update mode only) the memory sink keeps the
    latest row of the ``FIRST_KEYS`` smallest keys in ``latest`` (a dict on the driver) instead
    of Spark's memory table."""
    from pyspark.sql import functions as F

    writer = result.writeStream.option("checkpointLocation", checkpoint).queryName(QUERY_NAME)
    if args.sink == "memory" and latest is not None:
        def keep(batch, batch_id):
            # Only the keys the summary prints, the FIRST_KEYS smallest: a stream that keeps
            # a million keys would otherwise bring every updated row to the driver.
            first = batch.orderBy(*[F.asc_nulls_last(k) for k in args.key]).limit(FIRST_KEYS)
            for row in first.collect():
                latest[tuple(row[k] for k in args.key)] = row
            for key in sorted(latest, key=first_order)[FIRST_KEYS:]:
                del latest[key]

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
