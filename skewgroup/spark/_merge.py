"""The merge: one function, :func:`merge_path`, picks from the call and the plan which of the
named paths below merges the partial rows per key; :func:`aggregate` runs the partial stage (if
the call has one) and that path. Every path is keyed by the grouping key, never by worker, so
the result does not depend on where rows were placed. docs/plans.md ("The merge") says when
each path is taken and why.
"""
from pyspark.sql import functions as F

from skewgroup.spark import _observe, _partial, _python_merge, _stream_merge

SPARK_GROUPBY = "spark-groupby"              # built-ins alone: Spark's groupBy of the rows
PARTIAL_IS_RESULT = "partial-is-result"      # each key whole in one partition, one row each
SPARK_MERGE = "spark-merge"                  # Spark's aggregation of the partial rows
PYTHON_AFTER_HASH = "python-after-hash"      # aggregators alone: Python per hash partition
COLLECTED_THEN_PYTHON = "collected-then-python"   # Spark collects buffers, Python finishes
STATEFUL = "stateful"                        # a stream with an aggregator: bucketed state


def merge_path(call, plan, streaming):
    """The merge path of ``call`` (a ``_call.Call``) under ``plan`` (a
    ``_plans.Plan``), on a stream if ``streaming``: one of the names above."""
    if call.builtins_only:
        return SPARK_GROUPBY
    if call.stateful:
        return STATEFUL
    if streaming:          # merged with earlier micro-batches in Spark's state
        return SPARK_MERGE
    if call.keys_merged_apart:
        # groupBy takes -0.0 and 0.0, every NaN, "a" and "A" under UTF8_LCASE as one key; a
        # hash partition (and the partial, grouping bytes) may hold them apart.
        return COLLECTED_THEN_PYTHON if call.merged_in_python else SPARK_MERGE
    if plan.keys_whole and call.one_row_per_key:
        return PARTIAL_IS_RESULT
    if call.python_alone:
        return PYTHON_AFTER_HASH
    return COLLECTED_THEN_PYTHON if call.merged_in_python else SPARK_MERGE


def aggregate(call, placed, plan):
    """``df.groupBy(keys).agg(...)`` of ``call`` from ``placed`` (its rows after ``plan``'s
    placement): the partial stage, then the merge path :func:`merge_path` picks."""
    df = call.df
    path = merge_path(call, plan, df.isStreaming)
    if path == SPARK_GROUPBY:     # Spark's partial aggregation runs inside each partition
        return placed.groupBy(*call.keys).agg(*[a.spark_column() for a in call.aggregates])
    layout = call.layout
    if path == STATEFUL:      # its partial runs inside the stateful merge's packing stage
        merged = _merged_stream(call, placed, plan.observed)
    else:
        merged = _merged_partials(call, placed, plan, path)
    if layout.part.joined:
        merged = _with_spark_functions(merged, layout, df)
    return merged.select(*layout.key_outputs, *layout.part.finishes)


def _merged_stream(call, placed, observed):
    """The stream's stateful merge of ``placed`` (``_stream_merge``); with ``observed`` its
    packed partial rows carry each task's figures, observed in the stream's progress."""
    packed = _stream_merge.packed_partials(
        call, placed, _observe.packed_summary if observed else None)
    if observed:
        packed = _observe.observe_packed_partials(packed)
    return _stream_merge.merge_packed(call, packed)


def _merged_partials(call, placed, plan, path):
    """The partial stage's rows of ``placed``, merged per key by ``path`` (not the stream's
    stateful merge, whose partial runs inside it)."""
    df, layout = call.df, call.layout
    observed = df.isStreaming and plan.observed
    rows = _partial.partial_rows(call, placed, observed)
    if observed:       # the stream's progress reads the partial rows' figures
        rows = _observe.observe_partials(rows, layout.keys, call.names.rows)
    if path == PARTIAL_IS_RESULT:
        merged = _partial_is_result(rows, layout)
    elif path == PYTHON_AFTER_HASH:
        merged = _python_merge.merge_partitions(rows, layout, repartition=not plan.keys_whole)
    else:
        if df.isStreaming:     # Spark's aggregation finds the watermark on a key (append)
            rows = layout.marked(rows)
        merged = rows.groupBy(*layout.keys).agg(*layout.part.merges)
        if path == COLLECTED_THEN_PYTHON:
            merged = _python_merge.finish_collected(merged, layout)
    return merged


def _with_spark_functions(merged, layout, df):
    """``merged`` (one row per key) with the batch's Spark aggregate Columns beside: Spark's
    groupBy of the input computes them (combined map-side, as Spark does for any of its
    functions) over the same key copies, joined on the keys null-safely. Both sides group as
    groupBy does (a join compares floating keys normalized, -0.0 as 0.0 and NaN as NaN), so
    every key of one is one key of the other; an inner join keeps groupBy's nullability."""
    side = df.groupBy(*[layout.added_columns[k].alias(k + "__j") for k in layout.keys]).agg(
        *layout.part.joined)
    same_key = [F.col(k).eqNullSafe(F.col(k + "__j")) for k in layout.keys]
    return merged.join(side, same_key, "inner").drop(*[k + "__j" for k in layout.keys])


def _partial_is_result(partials, layout):
    """``partials`` that already hold every key's whole aggregate, without a merge: no shuffle.
    Each partial field is cast to the type its merge would give; the value is the merge's,
    since each merge returns a single partial unchanged (``_aggregates.IDEMPOTENT_MERGES``)."""
    merged = partials.groupBy(*layout.keys).agg(*layout.part.merges).schema   # analysis only
    fields = [F.col(f.name).cast(f.dataType).alias(f.name) for f in merged.fields
              if f.name not in layout.keys]
    return partials.select(*layout.keys, *fields)
