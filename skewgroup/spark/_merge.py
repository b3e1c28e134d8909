"""The merge step: Spark's own ``groupBy(keys).agg(...)`` over the partial rows, then each
aggregate's final expression. Spark's aggregation functions merge in a streaming aggregation
too (where pandas UDAFs are refused), and the merge is keyed by the grouping key, never by
worker: the result does not depend on where rows were routed.
"""
from pyspark.sql import functions as F


def merge(partials, spec, df, keys_whole=False):
    """``partials`` (``_partial``'s rows) merged per key: the result of groupBy(keys).agg.
    Python aggregators' buffers are collected per key and merged in Python after it; when they
    are the only aggregates, they are merged in Python straight after a hash repartition
    (``_python_merge.merge_partitions``; none with ``keys_whole``, each key's partial rows in
    one partition already: the hash plan), unless groupBy may take as one key two keys that a
    hash repartition puts apart (floats, collated strings: ``_checks.merged_apart``)."""
    from skewgroup.spark._checks import merged_apart
    from skewgroup.spark._python_merge import finish_collected, merge_partitions

    if len(spec.aggregators) == len(spec.merges) and not merged_apart(spec.key_fields):
        return (merge_partitions(partials, spec, df, repartition=not keys_whole)
                .select(*spec.key_outputs, *spec.finishes))
    merged = partials.groupBy(*spec.keys).agg(*spec.merges)
    if spec.aggregators:
        merged = finish_collected(merged, spec, df)
    return merged.select(*spec.key_outputs, *spec.finishes)


def finish(partials, spec):
    """``partials`` that already hold every key's whole aggregate (one partial row per key, each
    key in one partition: the hash plan of a batch DataFrame, ``spec.one_row_per_key``),
    finished without a merge: no shuffle of the partials. Each partial field is cast to the
    type its merge would give; the value is the merge's, since each merge returns a single
    partial unchanged (``_aggregates.IDEMPOTENT_MERGES``).
    """
    merged = partials.groupBy(*spec.keys).agg(*spec.merges).schema   # analysis only, no job
    fields = [F.col(f.name).cast(f.dataType).alias(f.name) for f in merged.fields
              if f.name not in spec.keys]
    return (partials.select(*spec.keys, *fields)
            .select(*spec.key_outputs, *spec.finishes))


def spark_aggregates(keys, aggregates, df):
    """Built-in aggregates alone: ``df.groupBy(keys).agg`` with Spark's own functions (its
    partial aggregation runs inside each partition of ``df``, its merge per key)."""
    return df.groupBy(*keys).agg(*[a.spark_column() for a in aggregates])
