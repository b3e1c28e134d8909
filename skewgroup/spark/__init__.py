"""skewgroup on Spark: ``df.transform(skew_group(keys, *aggs))`` equals
``df.groupBy(keys).agg(...)`` with the work of hot keys spread over workers.

A call is checked on the driver before any job (``_call.build_call``), its plan chosen
(``_plans``: where the partial runs; ``plan="auto"`` picks one), its rows placed, and then the
partial stage and one merge path run (``_merge``). docs/plans.md describes the plans, which
aggregate runs where, the merge paths and auto's choice; docs/aggregators.md the Python
aggregators. Routing is soft state: where a row goes changes the balance, never the result,
since every merge is keyed by the grouping key; a stream's exactly-once state is Spark's
checkpointed merge state, and its routers (``_routers``) survive micro-batches and restarts as
snapshots beside it.
"""

from pyspark.sql import Column

from skewgroup._routing.config import make_config
from skewgroup._routing._router import MAX_SEED, MAX_WORKERS
from skewgroup._routing._validation import check_int
from skewgroup.spark import agg
from skewgroup.spark import _checks, _merge, _plans, _stream_merge, _tag
from skewgroup.spark._aggregates import SparkFunctionAggregate
from skewgroup.spark._call import build_call
from skewgroup.spark._columns import internal
from skewgroup.spark._observe import balance, watch
from skewgroup.spark._placement import place

__all__ = ["agg", "balance", "route", "skew_group", "watch", "PLANS"]

PLANS = ("auto",) + tuple(_plans.PLANS)


def skew_group(keys, *aggregates, workers=None, strategy="adaptive", seed=0, plan="auto",
               output_mode="update", sample=None, **params):
    """A function DataFrame -> DataFrame for ``df.transform`` that equals
    ``df.groupBy(keys).agg(...)`` with the work of hot keys spread over ``workers``.

    Parameters
    ----------
    keys : str or list of str
        Grouping column(s): numbers, strings, binary, booleans, dates, timestamps. Nulls form
        one group, as in Spark.
    *aggregates : pyspark Column or skewgroup.spark.agg.Aggregate
        Any of Spark's aggregate Columns, as ``groupBy().agg()`` takes them (``F.stddev("x")``,
        ``F.kll_sketch_agg_double("x")``, an expression, an alias), and ``agg.count()``,
        ``agg.sum(c)``, ``agg.min(c)``, ``agg.max(c)``, ``agg.mean(c)``,
        ``agg.count_distinct(c)`` (batch only), ``agg.custom(...)``, ``agg.aggregator(...)``,
        mixed freely; on a stream beside Python code, the Spark functions that
        docs/plans.md lists ("Spark's functions beside Python code"); ``.alias(name)`` renames
        the result column.
    workers : int, optional
        Partitions of the partial stage (default ``spark.sql.shuffle.partitions``).
    strategy : str, default "adaptive"
        One of ``skewgroup.STRATEGIES``; ``**params`` are its parameters. ``adaptive`` (ours,
        docs/adaptive.md) balances as Pd-Stream does with about one partial row per key.
    seed : int, default 0
        Seed of the key hash.
    plan : {"auto", "local", "hash", "split", "routed", "spread"}, default "auto"
        Where the partial aggregate runs (docs/plans.md). ``"auto"`` picks one from a sample of
        the keys and the partial timed on a few rows (batch) and logs which and why on the
        ``skewgroup.spark`` logger (INFO); forcing a plan skips the sample. ``strategy``
        applies to ``"routed"`` only; a routed stream reports its balance per micro-batch
        (:func:`balance`).
    output_mode : {"update", "append"}, default "update"
        Streams with Python aggregators (``agg.aggregator``) only: the output mode of their
        stateful merge, which must be the query's. ``transformWithStateInPandas`` has no
        complete mode. Such a stream keeps its state in RocksDB's state store, which
        skew_group sets for the session (docs/stream.md).
    sample : pyspark DataFrame, optional
        Streams with ``plan="auto"`` only: a batch DataFrame with the stream's columns and
        about one micro-batch's rows (e.g. ``spark.read.parquet(one_file)`` of a file source
        that reads a file a trigger), which auto samples and times the partial on, as it does
        a batch DataFrame, taking it as a micro-batch in one input partition (the source's
        partitions are unknown before the query starts). Without one auto times the partial on rows made from the stream's schema and
        keeps it in the input tasks (local) unless spreading it over the query's cores saves
        more than the stage it adds (spread); docs/plans.md ("auto") says how.

    Examples
    --------
    >>> from skewgroup.spark import skew_group, agg            # doctest: +SKIP
    >>> totals = events.transform(skew_group("user", agg.count(), agg.sum("amount")))  # doctest: +SKIP
    """
    keys = _checks.key_list(keys)
    if not aggregates:
        raise ValueError("skew_group needs at least one aggregate, e.g. agg.count().")
    aggregates = tuple(SparkFunctionAggregate(a) if isinstance(a, Column) else a
                       for a in aggregates)
    for a in aggregates:
        if not isinstance(a, agg.Aggregate):
            raise TypeError(f"An aggregate must be a Spark aggregate Column (F.sum(...), "
                            f"F.stddev(...), ...) or come from skewgroup.spark.agg (count, sum, "
                            f"min, max, mean, custom, aggregator). Got {a!r} of type "
                            f"{type(a).__name__}.")
    config = _routing_config(strategy, params)
    seed = check_int("seed", seed, 0, MAX_SEED)
    if workers is not None:
        workers = check_int("workers", workers, 1, MAX_WORKERS)
    if plan not in PLANS:
        raise ValueError(f"The 'plan' parameter must be one of {list(PLANS)}. Got {plan!r}.")
    if output_mode not in _stream_merge.OUTPUT_MODES:
        raise ValueError(
            f"The 'output_mode' parameter must be one of {list(_stream_merge.OUTPUT_MODES)}. "
            f"Got {output_mode!r}" + ("; a stream's Python aggregators merge in "
                                      "transformWithStateInPandas, which has no complete mode: "
                                      "use "
                                      "update and keep the latest row per key downstream."
                                      if output_mode == "complete" else "."))

    if sample is not None and plan != "auto":
        raise ValueError(f"The 'sample' parameter is read by plan='auto' only; got plan={plan!r}: "
                         f"drop sample= or use plan='auto'.")

    def transform(df):
        _checks.check_dataframe(df)
        call = build_call(df, keys, aggregates, workers=workers, config=config, seed=seed,
                          output_mode=output_mode)
        if plan == "split" and df.isStreaming:
            raise ValueError("plan='split' plans from a sample taken before the query runs, "
                             "which a stream cannot give; use plan='routed' (or 'auto').")
        if sample is not None:
            _checks.check_sample(sample, df)
        chosen, sampled = _plans.choose(call, sample) if plan == "auto" else (plan, None)
        how = _plans.PLANS[chosen]
        return _merge.aggregate(call, how.placed(call, sampled), how)

    return transform


def route(df, keys, workers=None, strategy="adaptive", seed=0, **params):
    """``df`` plus an int ``worker`` column, every row in Spark partition ``worker`` exactly.

    For users who run their own per-partition logic (``mapInArrow``, ``foreachPartition``)
    after a skew-aware placement. Parameters as in :func:`skew_group`.
    """
    keys = _checks.key_list(keys)
    config = _routing_config(strategy, params)
    seed = check_int("seed", seed, 0, MAX_SEED)
    _checks.check_dataframe(df)
    keys = [_checks.reference(df, k, "The 'keys' parameter") for k in keys]
    key_fields = _checks.check_keys(df, keys)
    if "worker" in df.columns:
        raise ValueError("The DataFrame already has a 'worker' column; rename it first.")
    if workers is not None:
        workers = check_int("workers", workers, 1, MAX_WORKERS)
    n = workers or int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    names = internal(df.columns)
    tagged = _tag.tag(df, keys, key_fields, n, config, seed, names)
    if df.isStreaming:
        tagged = tagged.drop(names.summary)
    return place(tagged, n, names).withColumnRenamed(names.worker, "worker").drop(names.place)


def _routing_config(strategy, params):
    if "sources" in params:
        raise ValueError(
            "skew_group and route have no 'sources' parameter: each input partition is one "
            "source of the papers with its own router; repartition the input to change their "
            f"number. Got sources={params['sources']!r}.")
    return make_config(strategy, params)
