"""skewgroup on Spark: ``df.transform(skew_group(keys, *aggs))`` — groupBy/agg spread over workers.

Design
------
Every plan computes a partial aggregate per (place, key) and merges per key with Spark's own
``groupBy(keys).agg(merge)``; they differ in where the partial runs (``plan=``):

* ``"local"``: inside each input partition, no row shuffle (local-global aggregation). The
  least total work; the input's parallelism and skew are kept.
* ``"hash"``: after ``repartition(n, keys)``, groupBy's placement: a hot key is one task.
* ``"split"``: the hot keys of a sample split over the workers by water-filling, the tail on
  its hash partition; the worker is a Spark expression (no Python tag). Batch only.
* ``"routed"``: every row routed by ``strategy`` (the papers' plan below); the plan for streams.
* ``"auto"`` (default): built-in aggregates alone (count, sum, min, max, mean, count_distinct)
  are Spark's own ``groupBy(keys).agg(...)``; with a custom aggregate the plan with the least
  estimated critical path, from a sample of the keys (``_auto``); streams are routed.

Why "auto" does not route built-in aggregates: Spark's aggregation is two-phase. Each input task
first reduces its own rows per key (a combiner), so a hot key reaches the merge as at most one
row per input task, and the per-row work is spread over the input tasks whatever the key
distribution: that is the papers' shuffle grouping with a local aggregate, at no routing cost.
Routing every row cannot beat it (bench/RESULTS.md). Skew hurts where Spark cannot combine: a
user's aggregate written in Python (``agg.custom``), which is what the other plans are for.

The routed plan (see ``_plan``)::

    tag: a router per source -> worker id      (native core on whole Arrow batches; a batch
                                                query sends only the keys, an Arrow UDF)
    repartition(n, v_worker)                   (exact: v_w hashes to partition w, _placement)
    partial aggregate per (worker, key)        (custom: one Arrow group_by per partition;
                                                built-ins alone: Spark's partial aggregation)
    groupBy(keys).agg(merge)                   (Spark's own aggregation, also in streaming)

Routing is soft state: where a row goes never changes the result, only the balance; the merge is
per key, so the result equals ``df.groupBy(keys).agg(...)``. Exactly-once comes from Spark's
checkpointed merge state.

Router state. On a batch DataFrame each input partition is a source with a fresh router
(an iterator Arrow UDF over the key columns). On a streaming DataFrame rows are grouped by a
source id (input partition mod ``sources``) and routed in ``applyInPandasWithState`` whose
state is the router's bytes: state survives micro-batches and a restart from the checkpoint, and a
replayed batch routes exactly as the first attempt (rows are ordered by a sequence id). The cost
is one more shuffle of the rows per micro-batch and a pandas round trip in the tag stage.

Windowed streams (a key carries the watermark, e.g. ``F.window(ts, ...)``) cannot use that:
a state-store operator before the merge holds back the watermark the merge needs to close
windows in append mode, and Spark refuses the plan. There the router of each partition lives
in the reused Python worker (``mapInArrow``, no extra shuffle); it is lost on executor loss or
restart, which costs balance while the new router relearns the stream, never correctness.
"""
from pyspark.sql import DataFrame, functions as F

from skewgroup._config import make_config
from skewgroup._validation import check_int
from skewgroup.spark import agg
from skewgroup.spark import _auto, _observe, _plan, _tag
from skewgroup.spark._observe import balance, watch
from skewgroup.spark._placement import place

__all__ = ["agg", "balance", "route", "skew_group", "watch", "PLANS"]

PLANS = ("auto", "local", "hash", "split", "routed")


def skew_group(keys, *aggregates, workers=None, strategy="pdstream", seed=0, sources=None,
               plan="auto", **params):
    """A function DataFrame -> DataFrame for ``df.transform`` that equals
    ``df.groupBy(keys).agg(...)`` with the work of hot keys spread over ``workers``.

    Parameters
    ----------
    keys : str or list of str
        Grouping column(s): numbers, strings, binary, booleans, dates, timestamps. Nulls form
        one group, as in Spark.
    *aggregates : skewgroup.spark.agg.Aggregate
        ``agg.count()``, ``agg.sum(c)``, ``agg.min(c)``, ``agg.max(c)``, ``agg.mean(c)``,
        ``agg.custom(...)``; ``.alias(name)`` renames the result column.
    workers : int, optional
        Partitions of the partial stage (default ``spark.sql.shuffle.partitions``).
    strategy : str, default "pdstream"
        One of ``skewgroup.STRATEGIES``; ``**params`` are its parameters.
    seed : int, default 0
        Seed of the key hash.
    sources : int, optional
        Streaming only: routers (the papers' sources), default the session's default
        parallelism.
    plan : {"auto", "local", "hash", "split", "routed"}, default "auto"
        Where the partial aggregate runs (see the module docstring). ``"auto"`` runs built-in
        aggregates alone as Spark's own ``groupBy(keys).agg(...)``; with a custom aggregate it
        samples the keys (one light job) and picks the plan with the least estimated critical
        path, logging which and why on the ``skewgroup.spark`` logger (INFO); a stream is
        routed. ``"routed"`` routes every row with ``strategy`` (on a stream, rows per worker
        and replication are then observed in the query's progress, see :func:`balance`);
        ``strategy`` has no effect in the other plans. Forcing a plan skips the sample.

    Examples
    --------
    >>> from skewgroup.spark import skew_group, agg            # doctest: +SKIP
    >>> totals = events.transform(skew_group("user", agg.count(), agg.sum("amount")))  # doctest: +SKIP
    """
    keys = _key_list(keys)
    if not aggregates:
        raise ValueError("skew_group needs at least one aggregate, e.g. agg.count().")
    for a in aggregates:
        if not isinstance(a, agg.Aggregate):
            raise TypeError(f"Aggregates must come from skewgroup.spark.agg (count, sum, min, max, "
                            f"mean, custom). Got {a!r} of type {type(a).__name__}.")
    config = make_config(strategy, params)
    seed = check_int("seed", seed, 0, (1 << 64) - 1)
    if workers is not None:
        workers = check_int("workers", workers, 1, 1 << 20)
    if sources is not None:
        sources = check_int("sources", sources, 1, 1 << 16)
    if plan not in PLANS:
        raise ValueError(f"The 'plan' parameter must be one of {list(PLANS)}. Got {plan!r}.")
    builtins_only = not any(a.kind == "custom" for a in aggregates)

    def transform(df):
        _check_dataframe(df)
        _plan.check_keys(df.schema, keys)
        _plan.check_aggregates(df.schema, aggregates)
        n = workers or _shuffle_partitions(df)
        chosen, stats = plan, None
        if plan == "split" and df.isStreaming:
            raise ValueError("plan='split' plans from a sample taken before the query runs, "
                             "which a stream cannot give; use plan='routed' (or 'auto').")
        if plan == "auto":
            if builtins_only:
                chosen, reason = "local", ("built-in aggregates only: Spark's own two-phase "
                                           "aggregation already combines inside the input tasks")
            else:
                chosen, reason, stats = _auto.choose(df, keys, n)
            _auto.LOG.info("skew_group plan=%s: %s", chosen, reason)
        if builtins_only and chosen in ("local", "hash"):
            # Spark's aggregation is the local plan (its partial aggregation runs inside the
            # input tasks) and the hash plan (its merge runs per hash partition) at once.
            return df.groupBy(*keys).agg(*[_plan.spark_aggregate(a) for a in aggregates])
        if chosen in ("routed", "split"):
            if chosen == "routed":
                placed = _tag_and_place(df, keys, n, config, seed)
            else:
                stats = stats or _auto.sample(df, keys, n)
                placed = place(df.withColumn(_plan.WORKER, _auto.split_worker(keys, stats)), n)
            if df.isStreaming:
                placed = _observe.observe_rows(placed, n, keys, _plan.WORKER, _plan.HOT)
            if builtins_only:
                # The same aggregation after the exact placement: Spark's partial aggregation
                # then runs inside each worker's partition, i.e. per (worker, key) as in the
                # papers, in the JVM, and Spark merges per key. No Python partial stage.
                if df.isStreaming:
                    placed = _observe.observe_pairs(placed, keys, _plan.WORKER)
                return placed.groupBy(*keys).agg(*[_plan.spark_aggregate(a) for a in aggregates])
        elif chosen == "hash":
            placed = df.repartition(n, *keys)
        else:
            placed = df
        spec = _plan.PartialSpec(df.schema, aggregates)
        input_columns = df.schema.fieldNames()
        partial_schema = _partial_schema(df.schema, keys, spec)
        partials = placed.mapInArrow(
            _plan.make_partial(keys, spec.arrow, spec.custom, _arrow_fields(df, partial_schema),
                               input_columns),
            partial_schema)
        if df.isStreaming and chosen == "routed":
            partials = _observe.observe_partials(partials, keys, _plan.ROWS)
        merged = partials.groupBy(*keys).agg(*spec.merges)
        return merged.select(*keys, *spec.finishes)

    return transform


def route(df, keys, workers=None, strategy="pdstream", seed=0, sources=None, **params):
    """``df`` plus an int ``worker`` column, every row in Spark partition ``worker`` exactly.

    For users who run their own per-partition logic (``mapInArrow``, ``foreachPartition``)
    after a skew-aware placement. Parameters as in :func:`skew_group`.
    """
    keys = _key_list(keys)
    config = make_config(strategy, params)
    seed = check_int("seed", seed, 0, (1 << 64) - 1)
    _check_dataframe(df)
    _plan.check_keys(df.schema, keys)
    if "worker" in df.columns:
        raise ValueError("The DataFrame already has a 'worker' column; rename it first.")
    if workers is not None:
        workers = check_int("workers", workers, 1, 1 << 20)
    if sources is not None:
        sources = check_int("sources", sources, 1, 1 << 16)
    n = workers or _shuffle_partitions(df)
    placed = _tag_and_place(df, keys, n, config, seed)
    return placed.withColumnRenamed(_plan.WORKER, "worker").drop(_plan.PLACE, _plan.HOT)


# --- plan pieces -------------------------------------------------------------------------------


def _tag_and_place(df, keys, n, config, seed):
    return place(_tag.tag(df, keys, n, config, seed), n)


def _partial_schema(schema, keys, spec):
    from pyspark.sql import types as T

    return T.StructType([schema[k] for k in keys] + spec.fields
                        + [T.StructField(_plan.ROWS, T.LongType(), False),
                           T.StructField(_plan.WORKER, T.IntegerType(), False)])


def _arrow_fields(df, schema):
    from pyspark.sql.pandas.types import to_arrow_schema

    spark = df.sparkSession
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    # No default in conf.get: with a default Spark returns it whenever the user never set the
    # zone explicitly, and a timestamp field (e.g. a window key) then has no zone at all.
    arrow = to_arrow_schema(schema, prefers_large_types=large,
                            timezone=spark.conf.get("spark.sql.session.timeZone"))
    return list(arrow)


def _shuffle_partitions(df):
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))


def _check_dataframe(df):
    if not isinstance(df, DataFrame):
        raise TypeError(f"skew_group transforms a pyspark DataFrame. Got {type(df).__name__}.")


def _key_list(keys):
    if isinstance(keys, str):
        return [keys]
    if isinstance(keys, (list, tuple)) and keys and all(isinstance(k, str) for k in keys):
        if len(set(keys)) != len(keys):
            raise ValueError(f"The 'keys' parameter repeats a column: {list(keys)}.")
        return list(keys)
    raise TypeError(f"The 'keys' parameter must be a column name or a non-empty list of names. "
                    f"Got {keys!r}.")
