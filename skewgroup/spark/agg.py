"""Aggregates for ``skew_group``: the built-ins (Spark's own functions), ``custom`` (a partial in
Python, merged by Spark functions) and ``aggregator`` (a Python aggregator, merged in Python).
Output names and types follow ``df.groupBy(keys).agg(F.<same>(col))``. Where each runs is
docs/plans.md ("Which aggregate runs where").

>>> from skewgroup.spark import agg
>>> agg.sum("amount").output_name, agg.count().output_name, agg.mean("x").alias("m").output_name
('sum(amount)', 'count(1)', 'm')
"""
from collections.abc import Mapping

from skewgroup.aggregators import protocol_of
from skewgroup.spark._aggregates import MERGE_FUNCTIONS as _MERGE_FUNCTIONS
from skewgroup.spark._aggregates import (Aggregate, BuiltinAggregate, CustomAggregate,
                                         PythonAggregate)

__all__ = ["Aggregate", "aggregator", "avg", "count", "count_distinct", "custom", "max", "mean",
           "min", "sum"]


def __dir__():
    # dir(agg) lists the aggregates, not this module's imports (PEP 562).
    return sorted(__all__)


def count(column=None):
    """``count(1)`` (rows) or ``count(column)`` (non-null values): partial count, merge sum."""
    return BuiltinAggregate("count", _column_name(column, allow_none=True))


def sum(column):  # noqa: A001 - mirrors pyspark.sql.functions.sum
    """``sum(column)``: partial sum, merge sum (null when the key has no non-null value)."""
    return BuiltinAggregate("sum", _column_name(column))


def min(column):  # noqa: A001
    """``min(column)``: partial min, merge min."""
    return BuiltinAggregate("min", _column_name(column))


def max(column):  # noqa: A001
    """``max(column)``: partial max, merge max."""
    return BuiltinAggregate("max", _column_name(column))


def mean(column):
    """``avg(column)`` as a double: partial (sum, count), merge sum(sum) / sum(count)."""
    return BuiltinAggregate("mean", _column_name(column))


avg = mean


def count_distinct(column):
    """``count(DISTINCT column)``: partial set of distinct non-null values, merge set union."""
    return BuiltinAggregate("count_distinct", _column_name(column))


def custom(partial, merge, schema, finish=None, name=None, vectorized=False):
    """A user's combinable aggregate: an expensive per-row function, spread over the workers.

    Parameters
    ----------
    partial : callable
        With ``vectorized=False``: ``partial(rows) -> dict``, called once per (worker, key)
        with that key's rows on that worker as a pandas DataFrame (all input columns); returns
        one value per field of ``schema``: the partial state. Simple, but a Python call per
        key costs tens of microseconds, which dominates when keys are many.

        With ``vectorized=True``: ``partial(rows, offsets) -> dict``, called once per
        partition: ``rows`` is a ``pyarrow.Table`` of the partition's rows grouped by key (each
        key's rows contiguous, groups in order of first appearance; grouped by hash, not
        sorted), ``offsets`` an int64 numpy array of the g + 1 group boundaries (group i is
        ``rows[offsets[i]:offsets[i + 1]]``); returns, for every field of ``schema``, g values
        in group order (a numpy array, a pyarrow array or a list), e.g.
        ``np.add.reduceat(values, offsets[:-1])``.
    merge : dict
        For each field of ``schema``, how Spark combines the partials of a key: one of
        ``'sum', 'min', 'max', 'count', 'first', 'last', 'bool_and', 'bool_or'``, or a callable
        that maps the partial column (a pyspark Column) to an aggregate Column.
    schema : str or pyspark StructType
        The partial state's fields, e.g. ``"score double, n long"``.
    finish : callable(dict of Column) -> Column, optional
        Turns the merged fields into the result column; by default every merged field is a
        result column.
    name : str, optional
        The result column's name when ``finish`` is given (default ``"custom"``).
    vectorized : bool, default False
        Which calling convention ``partial`` has (see above).

    Examples
    --------
    >>> import numpy as np
    >>> from skewgroup.spark import agg
    >>> expensive_sum = agg.custom(
    ...     partial=lambda rows: {"score": float(rows["value"].sum())},
    ...     merge={"score": "sum"}, schema="score double")
    >>> fast_sum = agg.custom(
    ...     partial=lambda rows, offsets: {
    ...         "score": np.add.reduceat(rows["value"].to_numpy(), offsets[:-1])},
    ...     merge={"score": "sum"}, schema="score double", vectorized=True)
    """
    if not callable(partial):
        raise TypeError(f"The 'partial' parameter must be callable. Got {type(partial).__name__}.")
    if not isinstance(merge, Mapping) or not merge:
        raise TypeError(
            f"The 'merge' parameter must be a non-empty dict from partial field to one of "
            f"{list(_MERGE_FUNCTIONS)} or a callable. Got {merge!r}.")
    for key, how in merge.items():
        if not (callable(how) or how in _MERGE_FUNCTIONS):
            raise ValueError(
                f"The 'merge' parameter maps {key!r} to {how!r}; allowed: "
                f"{list(_MERGE_FUNCTIONS)} or a callable Column -> Column.")
    if finish is not None and not callable(finish):
        raise TypeError(f"The 'finish' parameter must be callable or None. Got {finish!r}.")
    if not isinstance(schema, str) and not hasattr(schema, "fields"):
        raise TypeError(
            f"The 'schema' parameter must be a DDL string or a StructType. Got {schema!r}.")
    if not isinstance(vectorized, bool):
        raise TypeError(f"The 'vectorized' parameter must be True or False. Got {vectorized!r}.")
    return CustomAggregate(partial=partial, merge=dict(merge), schema=schema, finish=finish,
                  vectorized=vectorized, name=name)


def aggregator(obj, *columns, name=None, output_type=None):
    """A Python aggregator whose merge is Python: a sketch, a top-k, a model's statistics.

    ``obj`` follows Spark's ``pyspark.sql.aggregator.Aggregator`` protocol (``zero``,
    ``reduce(buffer, value)``, ``merge``, ``finish``, ``bufferSchema``, ``outputType``) or
    Apache Beam's ``CombineFn`` (``create_accumulator``, ``add_input``/``add_inputs``,
    ``merge_accumulators``, ``extract_output``), duck-typed; an optional vectorized
    ``reduce_groups``/``merge_groups`` is used when present (docs/aggregators.md). The partial
    runs on the spread workers, the merge per key in Python, one call per partition (batch) or
    per bucket of keys (streams), never one per key. Ready ones: ``skewgroup.aggregators``.

    Parameters
    ----------
    obj : object
        The aggregator.
    *columns : str
        The columns ``reduce`` reads, in order (``value`` is the tuple of their values).
    name : str, optional
        The output column's name; default ``ClassName(col1, col2)``, as ``udaf`` names it.
    output_type : str or pyspark DataType, optional
        The result's type, where ``obj`` declares no ``outputType`` (a Beam CombineFn).

    Examples
    --------
    >>> from skewgroup.aggregators import KllQuantiles
    >>> from skewgroup.spark import agg
    >>> agg.aggregator(KllQuantiles((0.5, 0.99)), "latency").output_name
    'KllQuantiles(latency)'
    """
    if not columns:
        raise TypeError("agg.aggregator needs at least one input column, e.g. "
                        "agg.aggregator(obj, 'x').")
    columns = tuple(_column_name(c) for c in columns)
    label = name or type(obj).__name__
    protocol = protocol_of(obj, label)
    if output_type is None:
        output_type = getattr(obj, "outputType", None)
    if output_type is None:
        raise TypeError(
            f"Aggregator {label!r} ({protocol}) declares no outputType: pass "
            f"output_type= (a DDL string such as 'double' or a pyspark DataType).")
    if not isinstance(output_type, str) and not hasattr(output_type, "simpleString"):
        raise TypeError(f"The 'output_type' parameter must be a DDL string or a pyspark "
                        f"DataType. Got {output_type!r}.")
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"The 'name' parameter must be a non-empty str. Got {name!r}.")
    return PythonAggregate(obj=obj, columns=columns, output_type=output_type, name=name,
                           protocol=protocol)


def _column_name(column, allow_none=False):
    if column is None and allow_none:
        return None
    if column == "*" and allow_none:
        return None
    if not isinstance(column, str) or not column:
        raise TypeError(
            f"The 'column' parameter must be a column name (str). Got {column!r}; skew_group "
            f"aggregates named columns, so compute expressions with withColumn first.")
    return column
