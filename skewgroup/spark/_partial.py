"""The partial step: per (worker, key) of a partition, in Arrow, one call per partition.

    placed rows (partition == worker) --mapInArrow(make_partial)--> partial rows

Each aggregate answers for its own share of the stage as an immutable :class:`Part` (its
columns, its executor step, its merge, its finish, its state in a stream's stateful merge:
``_aggregates``); a call's :class:`Layout` is its keys' copies and the sum of its aggregates'
parts (:func:`layout`). ``make_partial`` is the executor function. Every column it writes has
an internal name (``_columns``).
"""
from dataclasses import dataclass, field, fields
from types import MappingProxyType

import numpy as np
import pyarrow as pa

from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup._aggregation.batches import table_of
from skewgroup._aggregation.groups import GroupedRows
from skewgroup.spark import _observe
from skewgroup.spark._columns import arrow_fields, from_arrow_safe, to_arrow_safe


WATERMARK_DELAY = "spark.watermarkDelayMs"   # Spark's EventTimeWatermark.delayKey


@dataclass(frozen=True)
class Part:
    """One aggregate's share of the partial stage and the merge (a sum of parts is a part)."""

    added_columns: tuple = ()   # (name, Column): copies of its inputs added before the partial
    passed: tuple = ()          # StructFields of copies passed on with the rows to Spark
    passes_rows: bool = False   # Spark's built-in reads the input rows
    reads_rows: bool = False    # a custom partial reads the user's columns (names and all)
    fields: tuple = ()          # its partial fields (StructFields)
    steps: tuple = ()           # executor steps: (groups, table, target) -> [(name, array)]
    merges: tuple = ()          # Spark's merge of its partial fields (Columns)
    finishes: tuple = ()        # its result columns (Columns), after the merge
    states: tuple = ()          # a stream's stateful merge: its states (``stream_state``)
    state_outputs: tuple = ()   # their results' StructFields, out of that merge
    buffers: tuple = ()         # a Python aggregator's ``BufferState``, merged in Python
    buffer_fields: tuple = ()   # its results' StructFields (buffer column, output type)
    joined: tuple = ()          # a batch's Spark aggregate Columns joined after the merge

    def __add__(self, other):
        flags = ("passes_rows", "reads_rows")
        summed = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)
                  if f.name not in flags}
        return Part(**{flag: getattr(self, flag) or getattr(other, flag) for flag in flags},
                    **summed)


@dataclass(frozen=True)
class Scope:
    """What an aggregate reads of its call while checked and laid out: the DataFrame, the keys
    (as ``F.col`` resolves them) and their fields, the plan's column names, whether the call
    has a partial stage and whether a stream merges it in its stateful Python step; the
    session's ANSI mode and zone; and, once the checks passed, groupBy's result type of each
    Spark function's output column."""

    df: object
    keys: tuple
    key_fields: tuple
    names: object
    has_partial: bool
    stateful: bool
    ansi: bool
    timezone: str
    result_types: object = field(default_factory=lambda: MappingProxyType({}))

    def input_copy(self, index, column, data_type=None):
        """(name, Column, type) of the copy of input ``column`` (a name, or a Column of
        ``data_type``) the partial reads: the call's ``index``-th input copy."""
        if isinstance(column, str):
            column = F.col(column)
        if data_type is None:
            data_type = self.df.select(column).schema.fields[0].dataType
        return self.names.input(index), to_arrow_safe(column, data_type), data_type


def arrow_safe_type(data_type):
    return T.IntegerType() if isinstance(data_type, T.YearMonthIntervalType) else data_type


def state_part(state, output, result_type, nullable=True):
    """(The part of ``state``, a ``stream_state`` state whose result goes out of the stateful
    merge as column ``output`` of ``result_type``; that result as a Column after the merge)."""
    outputs = (T.StructField(output, result_type, nullable),)
    return Part(states=(state,), state_outputs=outputs), F.col(output)


FLOATING = (T.FloatType, T.DoubleType)


def normalized(column, data_type):
    """A floating ``column`` as groupBy groups it: -0.0 is 0.0, every NaN one NaN (Arrow, and
    the partial, group bytes)."""
    return (F.when(F.isnan(column), F.lit(float("nan"))).when(column == 0, F.lit(0.0))
            .otherwise(column).cast(data_type))


def grouped_as_spark(copy, data_type):
    """The copy of a key of ``data_type`` as a stream's stateful merge groups it (Arrow groups
    bytes; groupBy groups a floating key, or a struct's floating field, normalized)."""
    if isinstance(data_type, T.StructType) and any(
            isinstance(f.dataType, FLOATING) for f in data_type.fields):
        parts = [(normalized(copy[f.name], f.dataType)
                  if isinstance(f.dataType, FLOATING) else copy[f.name]).alias(f.name)
                 for f in data_type.fields]
        return F.when(copy.isNotNull(), F.struct(*parts))
    return normalized(copy, data_type) if isinstance(data_type, FLOATING) else copy


@dataclass(frozen=True)
class Layout:
    """The partial stage's columns and the merge's expressions of one call: its keys' copies
    and the sum of its aggregates' parts."""

    names: object
    user_columns: tuple      # what a custom partial sees (names may repeat)
    keys: tuple              # the key copies' internal names
    user_key_fields: tuple   # the keys' StructFields in the input
    key_fields: tuple        # the key copies' StructFields
    key_outputs: tuple       # the keys as the result has them (Columns)
    added_columns: object    # name -> Column: the keys' and the inputs' copies
    part: Part               # the aggregates' parts, summed

    def marked(self, partials):
        """``partials`` with each key copy carrying its key's watermark mark (a time window
        over a watermarked column, or that column): the partial's columns are new ones, and
        Spark's aggregation in append mode finds its watermark on a grouping column."""
        marks = {name: field.metadata for name, field in zip(self.keys, self.user_key_fields)
                 if WATERMARK_DELAY in (field.metadata or {})}
        if not marks:
            return partials
        return partials.withColumns({name: F.col(name).alias(name, metadata=metadata)
                                     for name, metadata in marks.items()})

    def schema(self, observed=False):
        """The partial rows' schema: keys, built-in inputs and the raw flag (with built-ins),
        partial fields, and with ``observed`` the rows behind each partial row (what a
        stream's balance metrics read). Nothing else: every column crosses Arrow twice."""
        raw = ([T.StructField(self.names.raw, T.BooleanType(), True)]
               if self.part.passes_rows else [])
        rows = [T.StructField(self.names.rows, T.LongType(), False)] if observed else []
        return T.StructType([*self.key_fields, *self.part.passed, *raw, *self.part.fields,
                             *rows])

    def partial_input(self, df):
        """``df`` as the partial reads it: the copies of the keys and the inputs added, every
        user column renamed by position (PySpark's mapInArrow refers to each column by name,
        which fails on a dotted or repeated name); the partial gives a custom aggregate the
        user's names back. Without a custom aggregate only the copies cross into Python: every
        other step reads them, not the user's columns."""
        copied = df.withColumns(dict(self.added_columns))
        if not self.part.reads_rows:
            return copied.select(*self.added_columns)
        users = len(self.user_columns)
        renamed = copied.toDF(*[self.names.user(i) for i in range(users)],
                              *copied.columns[users:])
        # A year-month interval anywhere in the rows would stop Arrow: its months go instead.
        return renamed.withColumns({
            self.names.user(i): to_arrow_safe(F.col(self.names.user(i)), f.dataType)
            for i, f in enumerate(df.schema.fields[:users])
            if isinstance(f.dataType, T.YearMonthIntervalType)})


def layout(scope, aggregates, outputs, key_names):
    """The :class:`Layout` of ``aggregates`` (their result names ``outputs``) on ``scope``:
    each aggregate's part, its input copies numbered after the ones before it; ``key_names``
    the keys' result names (groupBy's)."""
    names = scope.names
    keys = tuple(names.key(i) for i in range(len(scope.keys)))
    added = {}
    key_outputs = []
    for key, user_key, field, out in zip(keys, scope.keys, scope.key_fields, key_names):
        copy = to_arrow_safe(F.col(user_key), field.dataType)
        added[key] = grouped_as_spark(copy, field.dataType) if scope.stateful else copy
        key_outputs.append(from_arrow_safe(F.col(key), field.dataType).alias(out))
    total = Part()
    for i, (aggregate, produced) in enumerate(zip(aggregates, outputs)):
        total += aggregate.part(scope, i, produced, len(total.added_columns))
    added.update(total.added_columns)
    return Layout(
        names=names, user_columns=tuple(scope.df.columns), keys=keys,
        user_key_fields=tuple(scope.key_fields),
        key_fields=tuple(T.StructField(k, arrow_safe_type(f.dataType), f.nullable)
                         for k, f in zip(keys, scope.key_fields)),
        key_outputs=tuple(key_outputs),
        added_columns=MappingProxyType(added), part=total)


def partials(call, placed, observed):
    """The partial rows of ``placed`` (``call.df`` after the plan's placement), one
    ``mapInArrow`` stage; ``observed``: a stream's partial rows carry the rows behind each and
    are observed in its progress (``_observe``)."""
    layout, names = call.layout, call.names
    # The placement's columns have done their work: the partial does not read them, and every
    # column it gets crosses into Python.
    placed = placed.drop(names.worker, names.place)
    schema = layout.schema(observed)
    rows = layout.partial_input(placed).mapInArrow(
        make_partial(layout, arrow_fields(call.df, schema)), schema)
    if observed:
        rows = _observe.observe_partials(rows, layout.keys, names.rows)
    return rows


def make_partial(layout, fields):
    """mapInArrow function: the partial rows of one partition (see the module docstring)."""
    partial_of = partial_tables(layout, fields)

    def partial(batches):
        table = table_of(batches)
        if table is None:
            return
        for part in partial_of(table):
            yield from part.to_batches()

    return partial


def partial_tables(layout, fields, carried=()):
    """(table -> the partial rows of one partition, as tables of ``fields``).

    In the routed, split, spread and hash plans a partition is one worker; in the local plan
    it is one input partition. The aggregates that make a partial row per key share one
    grouping of the rows (their fields side by side); the built-ins' rows follow, the other
    fields null, which Spark's merge functions skip. ``carried``: input columns whose value
    is a function of the key (the stream merge's key hash), each partial row given its key's.
    """
    target = pa.schema(fields)
    keys, raw_name, rows_name = list(layout.keys), layout.names.raw, layout.names.rows
    passed = [f.name for f in layout.part.passed]
    user_columns = layout.user_columns if layout.part.reads_rows else ()
    passes_rows = layout.part.passes_rows
    steps = layout.part.steps
    carried = list(carried)

    def partial(table):
        parts = []
        if steps:
            groups = GroupedRows(table, keys, user_columns)
            per_key = pa.table(groups.keys)
            if carried:
                firsts = groups.order.take(pa.array(groups.offsets[:-1]))
                for name in carried:
                    per_key = per_key.append_column(name, table.column(name).take(firsts))
            for step in steps:
                for name, column in step(groups, table, target):
                    per_key = per_key.append_column(name, column)
            if rows_name in target.names:
                per_key = per_key.append_column(rows_name, pa.array(np.diff(groups.offsets)))
            parts.append(per_key)
        if passes_rows:
            rows = table.select([*keys, *carried, *passed])
            parts.append(rows.append_column(raw_name, pa.repeat(True, table.num_rows)))
        return [_complete(part, target, rows_name) for part in parts]

    return partial


def _complete(part, target, rows_name):
    """``part`` with the target schema: missing partial fields null, rows 0 (the built-ins'
    passed rows are no partial row)."""
    columns = []
    for f in target:
        if f.name == rows_name and rows_name not in part.column_names:
            columns.append(pa.repeat(pa.scalar(0, pa.int64()), part.num_rows))
        elif f.name in part.column_names:
            columns.append(part.column(f.name).cast(f.type))
        else:
            columns.append(pa.nulls(part.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=target)
