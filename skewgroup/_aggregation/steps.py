"""The aggregates' executor steps: what each aggregate computes per key of a partition in the
partial stage (:class:`Step`), below the Spark layer (pyarrow and numpy, no pyspark). The Spark
layer (``skewgroup.spark._aggregates``) builds one per aggregate, with the internal names of
the columns it reads and writes; ``skewgroup._aggregation.partial`` runs them.
"""
from typing import Protocol

import numpy as np
import pyarrow as pa

from skewgroup._aggregation.custom import partial_columns


class Step(Protocol):
    """One aggregate's executor step in the partial stage.

    ``step(groups, table, target)`` reads a partition's rows ``table`` grouped by key once for
    every step (``groups``, a ``groups.GroupedRows``: ``order`` the row indices group by group,
    ``offsets`` the g + 1 group boundaries) and returns its partial columns, one value per
    group in group order, as ``[(name, Arrow array)]``; ``target`` is the partial rows' Arrow
    schema (a step may take its columns' types from it). Whole arrays only: a step never
    loops over rows in Python, but a custom aggregate's per-key partial (the user's).
    """

    def __call__(self, groups, table: pa.Table, target: pa.Schema) -> list: ...


class ReductionStep:
    """A built-in's step in a stream's stateful merge: its reduction's state per key
    (``input_column`` None: count(), the rows of each key)."""

    def __init__(self, reduction, input_column, state_columns):
        self.reduction, self.input_column = reduction, input_column
        self.state_columns = state_columns

    def __call__(self, groups, table, target):
        if self.input_column is None:
            return [(self.state_columns[0], pa.array(np.diff(groups.offsets)))]
        values = table.column(self.input_column).take(groups.order)
        return list(zip(self.state_columns, self.reduction.reduce(values, groups.offsets)))


class CustomStep:
    """A custom aggregate's step: the user's ``partial`` (``vectorized`` or per key,
    ``custom.partial_columns``) gives its fields ``fields``, written as the partial columns
    ``names``, one value per key; in a stream's stateful merge (``field_states``: each field's
    reduction and state columns; ``types`` the fields' Arrow types) each field's value lifted
    into its merge rule's state."""

    def __init__(self, partial, vectorized, names, fields, field_states=None, types=None):
        self.partial, self.vectorized = partial, vectorized
        self.names, self.fields = names, fields
        self.field_states, self.types = field_states, types

    def __call__(self, groups, table, target):
        types = self.types or [target.field(name).type for name in self.names]
        columns = list(zip(self.names, partial_columns(self.partial, self.vectorized, groups,
                                                       self.fields, types)))
        if self.field_states is None:
            return columns
        lifted = []
        for (_, values), (reduction, state_columns) in zip(columns, self.field_states):
            one_each = np.arange(len(values) + 1, dtype=np.int64)
            lifted += zip(state_columns, reduction.reduce(values, one_each))
        return lifted


class BufferStep:
    """A Python aggregator's step: one buffer per key (its adapter's ``reduce_arrow``, in
    ``buffer``), an Arrow column."""

    def __init__(self, adapter, buffer):
        self.adapter, self.buffer = adapter, buffer

    def __call__(self, groups, table, target):
        rows = table.select(list(self.adapter.columns)).take(groups.order)
        return [(self.buffer, self.adapter.reduce_arrow(rows, groups.offsets))]


class FunctionStep:
    """A Spark function's step in a stream's stateful merge: its reduction's state per key
    (``spark_functions``) from its input columns."""

    def __init__(self, reduction, input_columns, state_columns):
        self.reduction, self.input_columns = reduction, list(input_columns)
        self.state_columns = state_columns

    def __call__(self, groups, table, target):
        values = [table.column(c).take(groups.order) for c in self.input_columns]
        return list(zip(self.state_columns, self.reduction.reduce(values, groups.offsets)))
