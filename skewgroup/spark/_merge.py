"""The merge step: Spark's own ``groupBy(keys).agg(...)`` over the partial rows, then each
aggregate's final expression. Spark's aggregation functions merge in a streaming aggregation
too (where pandas UDAFs are refused), and the merge is keyed by the grouping key, never by
worker: the result does not depend on where rows were routed.
"""
from pyspark.sql import functions as F


def merge(partials, keys, spec):
    """``partials`` (``_partial``'s rows) merged per key: the result of groupBy(keys).agg."""
    return partials.groupBy(*keys).agg(*spec.merges).select(*keys, *spec.finishes)


def finish(partials, keys, spec):
    """``partials`` that already hold every key's whole aggregate (one partial row per key, each
    key in one partition: the hash plan of a batch DataFrame), finished without a merge: no
    shuffle of the partials. Each partial field is cast to the type its merge would give; the
    value is the merge's, since merging a single partial must return it (a key seen in one
    place has one partial in every plan).
    """
    merged = partials.groupBy(*keys).agg(*spec.merges).schema   # analysis only, no job
    fields = [F.col(f.name).cast(f.dataType).alias(f.name) for f in merged.fields
              if f.name not in keys]
    return partials.select(*keys, *fields).select(*keys, *spec.finishes)


def spark_aggregates(keys, aggregates, df):
    """Built-in aggregates alone: ``df.groupBy(keys).agg`` with Spark's own functions (its
    partial aggregation runs inside each partition of ``df``, its merge per key)."""
    return df.groupBy(*keys).agg(*[spark_aggregate(a) for a in aggregates])


def spark_aggregate(aggregate):
    """The built-in ``aggregate`` as Spark's own function, named as groupBy names it."""
    if aggregate.kind == "count":
        column = F.count(F.lit(1) if aggregate.column is None else F.col(aggregate.column))
    elif aggregate.kind == "count_distinct":
        column = F.count_distinct(F.col(aggregate.column))
    else:
        function = {"sum": F.sum, "min": F.min, "max": F.max, "mean": F.avg}[aggregate.kind]
        column = function(F.col(aggregate.column))
    return column.alias(aggregate.output_name)
