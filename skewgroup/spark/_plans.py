"""Where the partial aggregate runs: each plan's placement, and ``plan="auto"``'s choice.

=========  ==================================================  ================================
plan       placement of the rows before the partial            built-in aggregates alone
=========  ==================================================  ================================
local      as they are: inside each input partition             Spark's groupBy (its partial
                                                                aggregation is this plan)
hash       ``repartition(n, keys)``, groupBy's placement        Spark's groupBy (its merge is
                                                                this plan)
split      the sample's hot keys water-filled over the          Spark's groupBy after the
           workers, the tail on its hash partition (an          placement
           expression; batch only)
routed     every row routed by a strategy (``_tag``), then      Spark's groupBy after the
           placed exactly (``_placement.place``)                placement
spread     the rows dealt to the workers in turn                Spark's groupBy after the
           (``_placement.deal``)                                placement
=========  ==================================================  ================================

The estimate behind ``auto`` (the Horvitz-Thompson sample's counts, each plan's critical path,
the split's water-filling) is numpy, in :mod:`skewgroup._estimate`; this module takes the sample
in one Spark job, fetches the first rows the partial is timed on in another (a ``limit``), and
turns the split into a Spark expression.
"""
import logging
from dataclasses import dataclass
from typing import Callable

from pyspark.sql import functions as F

from skewgroup import _estimate
from skewgroup.spark import _observe, _placement, _tag

LOG = logging.getLogger("skewgroup.spark")
SAMPLE_PARTITION, SAMPLE_P = "__sg_sample_partition", "__sg_sample_p"


@dataclass(frozen=True)
class Step:
    """The ``skew_group`` call as the placements see it."""

    keys: list
    key_fields: list
    workers: int
    config: object          # the routing strategy's config
    seed: int
    names: object           # ``_columns.Internal``
    builtins_only: bool
    stats: object = None    # a ``_estimate.Sample``, for the split placement


def _as_is(df, step):
    return df


def _by_hash(df, step):
    return df.repartition(step.workers, *step.keys)


def _split(df, step):
    stats = step.stats or sample(df, step.keys, step.workers)
    tagged = df.withColumn(step.names.worker, split_worker(step.keys, stats))
    return _placement.place(tagged, step.workers, step.names)


def _routed(df, step):
    names = step.names
    tagged = _tag.tag(df, step.keys, step.key_fields, step.workers, step.config, step.seed,
                      names)
    if df.isStreaming:
        # With built-ins alone Spark computes the partials inside its aggregation, unobservable:
        # the pairs and keys the tag saw are observed instead.
        tagged = _observe.observe(tagged, step.workers, names.summary, pairs=step.builtins_only)
        tagged = tagged.drop(names.summary)
    return _placement.place(tagged, step.workers, names)


def _deal(df, step):
    return _placement.deal(df, step.workers, step.names)


@dataclass(frozen=True)
class Plan:
    """A plan's placement of the rows before the partial, and what it means for the rest."""

    place: Callable          # (df, Step) -> placed DataFrame
    builtins_place: Callable  # the same for built-in aggregates alone (then Spark's groupBy)
    keys_whole: bool         # each key's rows in one partition (a partial is its key's result)
    observed: bool           # a stream's partial rows are observed (rows per worker vary)


PLANS = {
    # Spark's aggregation is the local plan (its partial aggregation runs inside the input
    # tasks) and the hash plan (its merge runs per hash partition) at once.
    "local": Plan(_as_is, _as_is, keys_whole=False, observed=False),
    "hash": Plan(_by_hash, _as_is, keys_whole=True, observed=False),
    # After an exact placement Spark's partial aggregation runs inside each worker's
    # partition, i.e. per (worker, key) as in the papers, in the JVM, and Spark merges per key.
    "split": Plan(_split, _split, keys_whole=False, observed=False),
    "routed": Plan(_routed, _routed, keys_whole=False, observed=True),
    "spread": Plan(_deal, _deal, keys_whole=False, observed=True),
}


def choose(df, keys, workers, builtins_only, merge, spec=None):
    """(plan, sample or None) for ``plan="auto"``, logged with the reason on ``LOG`` (INFO);
    ``spec`` (a ``_partial.PartialSpec``) is the partial that is timed, for custom
    aggregates."""
    stats = None
    if builtins_only:
        plan, reason = "local", ("built-in aggregates only: Spark's own two-phase aggregation "
                                 "already combines inside the input tasks")
    elif df.isStreaming:
        plan, reason = "routed", ("a stream: its input's partitioning and skew are unknown "
                                  "before the query starts, and routing is even whatever they "
                                  "are")
    else:
        stats = sample(df, keys, workers, count_keys=merge == "python")
        plan, reason = _estimate.choose(stats, merge, lambda: partial_seconds(df, spec))
    LOG.info("skew_group plan=%s: %s", plan, reason)
    return plan, stats


def sample(df, keys, workers, count_keys=False):
    """The :class:`skewgroup._estimate.Sample` of ``df``: one job of one stage, the key columns
    only; with ``count_keys`` the distinct keys are counted over every row too (a HyperLogLog).
    The design of the sample is in :mod:`skewgroup._estimate`."""
    from pyspark.sql import Observation

    key_columns = [F.col(k) for k in keys]
    index = F.monotonically_increasing_id().bitwiseAND(F.lit((1 << 33) - 1))
    keep = F.least(F.lit(_estimate.SAMPLE_FRACTION),
                   F.lit(float(_estimate.SAMPLE_ROWS)) / (index + 1))
    distinct = Observation()
    # The partition and the row index over every row, the hashes over the kept rows only (a
    # filter on rand is not pushed below a projection); the distinct keys over every row.
    rows = df.select(*key_columns, F.spark_partition_id().alias(SAMPLE_PARTITION),
                     keep.alias(SAMPLE_P))
    if count_keys:
        rows = rows.observe(distinct, F.approx_count_distinct(
            F.xxhash64(*key_columns), _estimate.KEYS_RSD).alias("keys"))
    table = (rows.filter(F.rand(seed=0) < F.col(SAMPLE_P))
             .select(F.col(SAMPLE_PARTITION).alias("i"),
                     F.pmod(F.hash(*key_columns), F.lit(workers)).alias("h"),
                     F.xxhash64(*key_columns).alias("kh"),
                     (1.0 / F.col(SAMPLE_P)).alias("w"))).toArrow()
    i, h, kh, w = (table.column(c).to_numpy() for c in ("i", "h", "kh", "w"))
    return _estimate.from_sample(i, h, kh, w, workers,
                                 keys=float(distinct.get["keys"]) if count_keys else None)


def partial_seconds(df, spec):
    """The partial's cost a row (``_estimate.partial_seconds``), timed on the driver over the
    input's first ``MEASURE_ROWS`` rows (one small Spark job), or None: too few rows, or the
    partial failed here (it then fails again, with its own error, in the partial stage)."""
    from skewgroup.spark import _partial

    if spec is None:
        return None
    function = _partial.make_partial(spec, _partial.arrow_fields(df, spec.schema()))
    rows = spec.partial_input(df).limit(_estimate.MEASURE_ROWS).toArrow()
    try:
        return _estimate.partial_seconds(function, rows, spec.keys)
    except Exception as error:     # the user's code: its errors belong to the query
        LOG.debug("skew_group could not time the partial: %r", error)
        return None


def split_worker(keys, stats):
    """The split placement's worker id of every row, as a Spark expression (no Python)."""
    key_columns = [F.col(k) for k in keys]
    tail = F.pmod(F.hash(*key_columns), F.lit(stats.workers))
    _, slots = stats.split_slots()
    if not slots:
        return tail
    # A literal map from key hash to the key's slots; a row of a hot key takes a random slot.
    table = F.create_map(*[c for key_hash, chosen in slots.items()
                           for c in (F.lit(key_hash), F.array(*[F.lit(int(w)) for w in chosen]))])
    hot_slots = F.try_element_at(table, F.xxhash64(*key_columns))
    slot = (F.rand(seed=0) * _estimate.SLOTS).cast("int") + 1
    return F.when(hot_slots.isNull(), tail).otherwise(F.element_at(hot_slots, slot))
