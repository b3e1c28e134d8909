"""Where the partial aggregate runs: each plan's placement (:data:`PLANS`), and
``plan="auto"``'s choice (:func:`choose`). What each plan does and costs, and how auto picks,
is docs/plans.md; the estimate itself is numpy, in :mod:`_planning.estimate`. This module takes
the sample in one Spark job, fetches the rows the partial is timed on in another (a ``limit``),
and turns the split into a Spark expression.
"""
import logging
from dataclasses import dataclass
from typing import Callable

from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup._planning import estimate
from skewgroup.spark import _observe, _partial, _placement, _tag
from skewgroup.spark._session import session_cores

LOG = logging.getLogger("skewgroup.spark")
SAMPLE_PARTITION, SAMPLE_P = "__sg_sample_partition", "__sg_sample_p"


# Each placement: (df, call, sampled) -> the rows placed; ``call`` a ``_call.Call``,
# ``sampled`` auto's ``estimate.Sample`` (the split's hot keys) or None.

def _as_is(df, call, sampled):
    return df


def _by_hash(df, call, sampled):
    return df.repartition(call.workers, *call.keys)


def _split(df, call, sampled):
    sampled = sampled or sample(df, call.keys, call.workers)
    tagged = df.withColumn(call.names.worker, split_worker(call.keys, sampled))
    return _placement.place(tagged, call.workers, call.names)


def _routed(df, call, sampled):
    names = call.names
    tagged = _tag.tag(df, call.keys, call.key_fields, call.workers, call.config, call.seed,
                      names)
    if df.isStreaming:
        # With built-ins alone Spark computes the partials inside its aggregation, unobservable:
        # the pairs and keys the tag saw are observed instead.
        tagged = _observe.observe(tagged, call.workers, names.summary, pairs=call.builtins_only)
        tagged = tagged.drop(names.summary)
    return _placement.place(tagged, call.workers, names)


def _deal(df, call, sampled):
    return _placement.deal(df, call.workers, call.names)


@dataclass(frozen=True)
class Plan:
    """A plan's placement of the rows before the partial, and what it means for the rest."""

    place: Callable          # (df, call, sampled) -> placed DataFrame
    builtins_place: Callable  # the same for built-in aggregates alone (then Spark's groupBy)
    keys_whole: bool         # each key's rows in one partition (a partial is its key's result)
    observed: bool           # a stream's partial rows are observed (rows per worker vary)

    def placed(self, call, sampled=None):
        """``call.df``'s rows placed for the partial (for Spark's groupBy, built-ins alone)."""
        place = self.builtins_place if call.builtins_only else self.place
        return place(call.df, call, sampled)


PLANS = {
    # Spark's aggregation is the local plan (its partial aggregation runs inside the input
    # tasks) and the hash plan (its merge runs per hash partition) at once.
    # A stream's local partial observes its tasks' rows too: the input partitions' balance.
    "local": Plan(_as_is, _as_is, keys_whole=False, observed=True),
    "hash": Plan(_by_hash, _as_is, keys_whole=True, observed=False),
    # After an exact placement Spark's partial aggregation runs inside each worker's
    # partition, i.e. per (worker, key) as in the papers, in the JVM, and Spark merges per key.
    "split": Plan(_split, _split, keys_whole=False, observed=False),
    "routed": Plan(_routed, _routed, keys_whole=False, observed=True),
    "spread": Plan(_deal, _deal, keys_whole=False, observed=True),
}


def choose(call, rows=None):
    """(plan, sample or None) for ``plan="auto"`` of ``call`` (a ``_call.Call``), logged
    with the reason on ``LOG`` (INFO); ``rows``: on a stream, a batch DataFrame of rows like
    its own (``skew_group``'s ``sample=``), sampled and timed in its place. docs/plans.md
    ("auto") says how."""
    sampled = None
    df = call.df
    if call.builtins_only:
        plan, reason = "local", ("built-in aggregates only: Spark's own two-phase aggregation "
                                 "already combines inside the input tasks")
    elif df.isStreaming and rows is None:
        measured = made_rows(df, estimate.MEASURE_ROWS)
        plan, reason = estimate.stream_default(partial_seconds(call.layout, measured),
                                               call.workers,
                                               session_cores(df.sparkSession) or 1)
    else:
        merge = "python" if call.merged_in_python else "spark"
        measured = df if rows is None else rows
        sampled = sample(measured, call.keys, call.workers, count_keys=call.merged_in_python)
        if rows is not None:
            # A micro-batch's input partitions are unknown before the stream starts (a file
            # source with maxFilesPerTrigger=1 reads one), so local is estimated at its
            # worst: one input partition.
            sampled = sampled.in_one_input()
        plan, reason = estimate.choose(sampled, merge,
                                       lambda: partial_seconds(call.layout, measured))
        if rows is not None:
            reason = (f"from sample= (a batch read like the stream, a micro-batch taken as "
                      f"one input partition: the source's are unknown before the query "
                      f"starts): {reason}")
            if plan == "split":     # its hot keys come from the sample, not from the stream
                plan, reason = "spread", reason + "; split is for batch: spread (round robin) instead"
            sampled = None
    LOG.info("skew_group plan=%s: %s", plan, reason)
    return plan, sampled


def sample(df, keys, workers, count_keys=False):
    """The :class:`_planning.estimate.Sample` of ``df``: one job of one stage, the key columns
    only; with ``count_keys`` the distinct keys are counted over every row too (a HyperLogLog).
    The design of the sample is in :mod:`skewgroup._planning.estimate`."""
    key_columns = [F.col(k) for k in keys]
    index = _placement.row_index()
    keep = F.least(F.lit(estimate.SAMPLE_FRACTION),
                   F.lit(float(estimate.SAMPLE_ROWS)) / (index + 1))
    distinct = Observation()
    # The partition and the row index over every row, the hashes over the kept rows only (a
    # filter on rand is not pushed below a projection); the distinct keys over every row.
    rows = df.select(*key_columns, F.spark_partition_id().alias(SAMPLE_PARTITION),
                     keep.alias(SAMPLE_P))
    if count_keys:
        rows = rows.observe(distinct, F.approx_count_distinct(
            F.xxhash64(*key_columns), estimate.KEYS_RSD).alias("keys"))
    table = (rows.filter(F.rand(seed=0) < F.col(SAMPLE_P))
             .select(F.col(SAMPLE_PARTITION).alias("i"),
                     F.pmod(F.hash(*key_columns), F.lit(workers)).alias("h"),
                     F.xxhash64(*key_columns).alias("kh"),
                     (1.0 / F.col(SAMPLE_P)).alias("w"))).toArrow()
    i, h, kh, w = (table.column(c).to_numpy() for c in ("i", "h", "kh", "w"))
    return estimate.from_sample(i, h, kh, w, workers,
                                 keys=float(distinct.get["keys"]) if count_keys else None)


def partial_seconds(layout, df):
    """The partial's cost a row (``estimate.partial_seconds``) of ``layout`` over ``df`` (the
    call's input, the stream's sample or rows made from its schema), timed on the driver over
    its first ``MEASURE_ROWS`` rows (one small Spark job), or None: too few rows, or the
    partial or its input failed here (an error on the real rows comes again, as the query's
    own, in the partial stage)."""
    function = _partial.make_partial(layout, layout.partial_arrow())
    try:
        # The rows' own expressions (an aggregate's argument) may fail on them too, on a
        # stream's made rows where the stream's would not (an overflow under ANSI mode).
        rows = layout.partial_input(df).limit(estimate.MEASURE_ROWS).toArrow()
        return estimate.partial_seconds(function, rows, list(layout.keys))
    except Exception as error:     # the user's code: its errors belong to the query
        LOG.debug("skew_group could not time the partial: %r", error)
        return None


def made_rows(df, count):
    """A batch DataFrame of ``count`` rows with ``df``'s schema (a stream's, whose rows cannot be
    read before it starts) for timing the partial: numbers, strings, dates and binaries drawn
    from a seeded ``rand``, a few thousand distinct values a column (the keys' too: every row
    is given one key when timed), booleans half true; nested types null. A user's aggregator
    may cost more or less on its real rows: ``sample=`` times it on those."""
    def made(field):
        t, draw = field.dataType, F.rand(seed=len(field.name))
        if isinstance(t, T.NumericType):
            return (draw * 4096).cast(t)
        if isinstance(t, T.BooleanType):
            return draw < 0.5
        if isinstance(t, (T.StringType, T.BinaryType)):
            return F.format_string("v%d", (draw * 4096).cast("int")).cast(t)
        if isinstance(t, (T.DateType, T.TimestampType, T.TimestampNTZType)):
            return F.timestamp_seconds((draw * 1e9).cast("long")).cast(t)
        return F.lit(None).cast(t)

    spark = df.sparkSession
    return spark.range(count, numPartitions=1).select(
        *[made(f).alias(f.name) for f in df.schema.fields])


def split_worker(keys, sampled):
    """The split placement's worker id of every row, as a Spark expression (no Python)."""
    key_columns = [F.col(k) for k in keys]
    tail = F.pmod(F.hash(*key_columns), F.lit(sampled.workers))
    _, slots = sampled.split_slots()
    if not slots:
        return tail
    # A literal map from key hash to the key's slots; a row of a hot key takes a random slot.
    table = F.create_map(*[c for key_hash, chosen in slots.items()
                           for c in (F.lit(key_hash), F.array(*[F.lit(int(w)) for w in chosen]))])
    hot_slots = F.try_element_at(table, F.xxhash64(*key_columns))
    slot = (F.rand(seed=0) * estimate.SLOTS).cast("int") + 1
    return F.when(hot_slots.isNull(), tail).otherwise(F.element_at(hot_slots, slot))
