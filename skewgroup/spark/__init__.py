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
* ``"routed"``: every row routed by ``strategy`` (the papers' plan below).
* ``"spread"``: the rows dealt to the n workers in turn (``_placement.deal``), then the partial
  inside each: the papers' shuffle grouping with a local combine. Every worker gets the same
  rows whatever the skew and no Python tag runs; a key's rows reach up to n workers, so the
  merge gets up to n partial rows a key (the replication the papers' key grouping avoids).
* ``"auto"`` (default): built-in aggregates alone (count, sum, min, max, mean, count_distinct)
  are Spark's own ``groupBy(keys).agg(...)``; with a custom aggregate the plan with the least
  estimated critical path (the partial's, its partial rows', the merge's and the stage a
  placement adds), from a sample of the keys and the partial timed on a few rows on the
  driver (``_plans``, ``skewgroup._estimate``); streams are routed.

Why "auto" does not route built-in aggregates: Spark's aggregation is two-phase. Each input task
first reduces its own rows per key (a combiner), so a hot key reaches the merge as at most one
row per input task, and the per-row work is spread over the input tasks whatever the key
distribution: that is the papers' shuffle grouping with a local aggregate, at no routing cost.
Routing every row cannot beat it (bench/RESULTS.md). Skew hurts where Spark cannot combine: a
user's aggregate written in Python (``agg.custom``), which is what the other plans are for.

The routed plan, one module per step, the same for batch DataFrames, streams and windowed
streams::

    _tag        an Arrow UDF over the key columns, inside the input task (no shuffle before
                it): a router (skewgroup.Partitioner) per input partition -> worker id
    _placement  repartition(n, v_worker)    (exact: v_w hashes to partition w)
    _partial    per (worker, key), one Arrow call per partition (custom aggregates); built-ins
                alone: Spark's own partial aggregation inside the worker's partition
    _merge      groupBy(keys).agg(merge)    (Spark's own aggregation, also in streaming)

``_plans`` holds each plan's placement and ``auto``'s choice, ``_aggregates`` what each kind of
aggregate computes in the partial, the merge and the finish, ``_checks`` the checks run on the
driver before a query starts, ``_observe`` the per-micro-batch balance metrics, ``_routers`` the
routers kept between micro-batches.

Routing is soft state: where a row goes never changes the result, only the balance; the merge is
per key, so the result equals ``df.groupBy(keys).agg(...)``. Exactly-once comes from Spark's
checkpointed merge state.

Router state (``_routers``). A batch DataFrame's task routes with a fresh router (a retried task
routes the same). A stream's router of (query, input partition) continues from the partition's
previous micro-batch: kept in the Python worker and as a snapshot file on the executor (conf
``spark.skewgroup.routerSnapshots``), named by Spark's query id, which the checkpoint keeps. So
routers survive micro-batches, Python workers, and a restart of the query or the driver on the
same machines, and a replayed batch routes as its first attempt did. A lost executor or
snapshot costs balance while a fresh router relearns the stream, never correctness (measured in
bench/RESULTS.md). Routers are not kept in Spark's state store: a stateful tagger keyed by
source would cost one more shuffle of the rows and a pandas round trip per micro-batch, and
cannot run on windowed streams in append mode (a state store operator before the merge holds
back the watermark).

Elastic workers: nothing in Spark's state depends on the worker, so a query may restart on its
checkpoint with another ``workers`` (or strategy); FISH's routers resize, the others start fresh.
"""

from skewgroup._config import make_config
from skewgroup._validation import check_int
from skewgroup.spark import agg
from skewgroup.spark import _checks, _merge, _observe, _partial, _plans, _python_merge, _tag
from skewgroup.spark._columns import internal
from skewgroup.spark._observe import balance, watch
from skewgroup.spark._placement import place

__all__ = ["agg", "balance", "route", "skew_group", "watch", "PLANS"]

PLANS = ("auto",) + tuple(_plans.PLANS)


def skew_group(keys, *aggregates, workers=None, strategy="adaptive", seed=0, plan="auto",
               output_mode="update", **params):
    """A function DataFrame -> DataFrame for ``df.transform`` that equals
    ``df.groupBy(keys).agg(...)`` with the work of hot keys spread over ``workers``.

    Parameters
    ----------
    keys : str or list of str
        Grouping column(s): numbers, strings, binary, booleans, dates, timestamps. Nulls form
        one group, as in Spark.
    *aggregates : skewgroup.spark.agg.Aggregate
        ``agg.count()``, ``agg.sum(c)``, ``agg.min(c)``, ``agg.max(c)``, ``agg.mean(c)``,
        ``agg.count_distinct(c)`` (batch only), ``agg.custom(...)``, ``agg.aggregator(...)``,
        mixed freely (on a stream, beside an aggregator, as docs/plans.md says);
        ``.alias(name)`` renames the result column.
    workers : int, optional
        Partitions of the partial stage (default ``spark.sql.shuffle.partitions``).
    strategy : str, default "adaptive"
        One of ``skewgroup.STRATEGIES``; ``**params`` are its parameters. ``adaptive`` (ours,
        docs/adaptive.md) balances as Pd-Stream does with about one partial row per key.
    seed : int, default 0
        Seed of the key hash.
    plan : {"auto", "local", "hash", "split", "routed", "spread"}, default "auto"
        Where the partial aggregate runs (see the module docstring). ``"auto"`` runs built-in
        aggregates alone as Spark's own ``groupBy(keys).agg(...)``; with a custom aggregate it
        samples the keys (one light job), times the partial on the input's first rows (one
        small job, the partial run on the driver) and picks the plan with the least
        estimated critical path, logging which and why on the ``skewgroup.spark`` logger
        (INFO); a stream is routed. ``"routed"`` routes every row with ``strategy`` (on a
        stream, rows per worker and replication are then observed in the query's progress,
        see :func:`balance`);
        ``strategy`` has no effect in the other plans. Forcing a plan skips the sample.
    output_mode : {"update", "append"}, default "update"
        Streams with Python aggregators (``agg.aggregator``) only: the output mode of their
        stateful merge, which must be the query's. ``applyInPandasWithState`` has no complete
        mode.

    Examples
    --------
    >>> from skewgroup.spark import skew_group, agg            # doctest: +SKIP
    >>> totals = events.transform(skew_group("user", agg.count(), agg.sum("amount")))  # doctest: +SKIP
    """
    keys = _checks.key_list(keys)
    if not aggregates:
        raise ValueError("skew_group needs at least one aggregate, e.g. agg.count().")
    for a in aggregates:
        if not isinstance(a, agg.Aggregate):
            raise TypeError(f"Aggregates must come from skewgroup.spark.agg (count, sum, min, max, "
                            f"mean, custom, aggregator). Got {a!r} of type "
                            f"{type(a).__name__}.")
    config = _routing_config(strategy, params)
    seed = check_int("seed", seed, 0, (1 << 64) - 1)
    if workers is not None:
        workers = check_int("workers", workers, 1, 1 << 20)
    if plan not in PLANS:
        raise ValueError(f"The 'plan' parameter must be one of {list(PLANS)}. Got {plan!r}.")
    if output_mode not in _python_merge.OUTPUT_MODES:
        raise ValueError(
            f"The 'output_mode' parameter must be one of {list(_python_merge.OUTPUT_MODES)}. "
            f"Got {output_mode!r}" + ("; a stream's Python aggregators merge in "
                                      "applyInPandasWithState, which has no complete mode: use "
                                      "update and keep the latest row per key downstream."
                                      if output_mode == "complete" else "."))
    builtins_only = all(a.builtin for a in aggregates)
    merge = "python" if any(a.merged_in_python for a in aggregates) else "spark"

    def transform(df):
        _checks.check_dataframe(df)
        return _transform(df, [_checks.reference(df, k, "The 'keys' parameter") for k in keys],
                          [a.resolved(df) for a in aggregates])

    def _transform(df, keys, aggregates):
        key_fields = _checks.check_keys(df, keys)
        reference, outputs = _checks.check_aggregates(df, keys, aggregates)
        if plan == "split" and df.isStreaming:
            raise ValueError("plan='split' plans from a sample taken before the query runs, "
                             "which a stream cannot give; use plan='routed' (or 'auto').")
        names = internal(df.columns)
        n = workers or _shuffle_partitions(df)
        spec = (None if builtins_only else
                _partial.PartialSpec(df, keys, key_fields, aggregates, reference, outputs, names))
        chosen, stats = plan, None
        if plan == "auto":
            chosen, stats = _plans.choose(df, keys, n, builtins_only, merge, spec)
        how = _plans.PLANS[chosen]
        step = _plans.Step(keys, key_fields, n, config, seed, names, builtins_only, stats)
        if builtins_only:
            return _merge.spark_aggregates(keys, aggregates, how.builtins_place(df, step))
        # The placement's columns have done their work: the partial does not read them, and
        # every column it gets crosses into Python.
        placed = how.place(df, step).drop(names.worker, names.place)
        observed = df.isStreaming and how.observed
        schema = spec.schema(observed)
        partials = spec.partial_input(placed).mapInArrow(
            _partial.make_partial(spec, _partial.arrow_fields(df, schema)), schema)
        if observed:
            partials = _observe.observe_partials(partials, spec.keys, names.rows)
        if spec.stateful:
            return (_python_merge.merge_stream(partials, spec, df, output_mode)
                    .select(*spec.key_outputs, *spec.finishes))
        if (how.keys_whole and not df.isStreaming and spec.one_row_per_key
                and not _checks.merged_apart(key_fields)):
            # Each key is in one partition, so its partial is its result. Not on a stream (it
            # merges with the earlier micro-batches in Spark's state), nor with float or
            # collated string keys (groupBy takes -0.0 and 0.0, every NaN, "a" and "A" under
            # UTF8_LCASE as one key; the partial, grouping bytes, does not).
            return _merge.finish(partials, spec)
        if df.isStreaming:     # Spark's aggregation finds the watermark on a key (append mode)
            partials = spec.marked(partials)
        return _merge.merge(partials, spec, df, keys_whole=how.keys_whole)

    return transform


def route(df, keys, workers=None, strategy="adaptive", seed=0, **params):
    """``df`` plus an int ``worker`` column, every row in Spark partition ``worker`` exactly.

    For users who run their own per-partition logic (``mapInArrow``, ``foreachPartition``)
    after a skew-aware placement. Parameters as in :func:`skew_group`.
    """
    keys = _checks.key_list(keys)
    config = _routing_config(strategy, params)
    seed = check_int("seed", seed, 0, (1 << 64) - 1)
    _checks.check_dataframe(df)
    keys = [_checks.reference(df, k, "The 'keys' parameter") for k in keys]
    key_fields = _checks.check_keys(df, keys)
    if "worker" in df.columns:
        raise ValueError("The DataFrame already has a 'worker' column; rename it first.")
    if workers is not None:
        workers = check_int("workers", workers, 1, 1 << 20)
    n = workers or _shuffle_partitions(df)
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


def _shuffle_partitions(df):
    return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
