"""The vocabulary of one ``skew_group`` call: what every stage reads of it, built once.

* :class:`Part`: one aggregate's share of the partial stage and the merge (its columns, its
  executor steps, its merge, its finish, its state in a stream's stateful merge); a sum of
  parts is a part. Each aggregate kind (``_aggregates``) answers for its own.
* :class:`Scope`: what an aggregate reads of its call while it is checked and laid out.
* :class:`Layout`: the partial stage's columns and the merge's expressions of one call (its keys'
  copies and the sum of its aggregates' parts), with their Arrow schemas (:class:`ArrowSchemas`)
  converted once from the Spark ones, as the session hands them to Python, when the call is
  built: no stage converts a schema again.
* :class:`Call`: one call, checked and frozen, built by :func:`build_call` only. It answers the
  call-level questions the plans and the merge ask (built-ins alone? merged in Python?
  stateful?), so no module asks an aggregate its kind.
"""
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Optional

import pyarrow as pa

from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup.spark._checks import check_keys, merged_apart, reference
from skewgroup.spark._columns import arrow_fields, from_arrow_safe, internal, to_arrow_safe
from skewgroup.spark._observe import PACKED_SUMMARY_FIELDS

WATERMARK_DELAY = "spark.watermarkDelayMs"   # Spark's EventTimeWatermark.delayKey


@dataclass(frozen=True)
class Part:
    """One aggregate's share of the partial stage and the merge (a sum of parts is a part)."""

    added_columns: tuple = ()   # (name, Column): copies of its inputs added before the partial
    spark_inputs: tuple = ()    # StructFields of the input copies passed on with the rows to Spark
    passes_rows: bool = False   # Spark's built-in reads the input rows
    reads_rows: bool = False    # a custom partial reads the user's columns (names and all)
    fields: tuple = ()          # its partial fields (StructFields)
    steps: tuple = ()           # its executor steps (``_aggregation.partial.Step``)
    merges: tuple = ()          # Spark's merge of its partial fields (Columns)
    finishes: tuple = ()        # its result columns (Columns), after the merge
    states: tuple = ()          # a stream's stateful merge: its states (``_aggregation.stream``)
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
    """(The part of ``state``, a stream state (``_aggregation.stream.states``) whose result goes
    out of the stateful merge as column ``output`` of ``result_type``; that result as a Column
    after the merge)."""
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
class ArrowSchemas:
    """A layout's Spark schemas as the session hands them to Python (``_columns.arrow_fields``:
    its large string types and time zone), converted once when the call is built."""

    partial: pa.Schema               # the partial rows (:meth:`Layout.schema`)
    observed_partial: pa.Schema      # the same with the rows behind each partial row
    merged_buffers: pa.Schema        # keys and each aggregator's result (batch Python merges)
    # A stream's stateful merge (None without): its runs' rows, its output rows, and the
    # columns it adds: the key hash beside the partial rows, a packed value's bucket and bytes,
    # the task's figures (``_observe.PACKED_SUMMARY_FIELDS``).
    state: Optional[pa.Schema] = None
    stateful_output: Optional[pa.Schema] = None
    key_hash: Optional[pa.Field] = None
    bucket: Optional[pa.Field] = None
    blob: Optional[pa.Field] = None
    packed_summary: tuple = ()


@dataclass(frozen=True)
class Layout:
    """The partial stage's columns and the merge's expressions of one call: its keys' copies
    and the sum of its aggregates' parts; ``arrow`` their Arrow schemas."""

    names: object
    user_columns: tuple      # what a custom partial sees (names may repeat)
    keys: tuple              # the key copies' internal names
    user_key_fields: tuple   # the keys' StructFields in the input
    key_fields: tuple        # the key copies' StructFields
    key_outputs: tuple       # the keys as the result has them (Columns)
    added_columns: object    # name -> Column: the keys' and the inputs' copies
    part: Part               # the aggregates' parts, summed
    arrow: Optional[ArrowSchemas] = None

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
        return T.StructType([*self.key_fields, *self.part.spark_inputs, *raw,
                             *self.part.fields, *rows])

    def partial_arrow(self, observed=False):
        """:meth:`schema` in Arrow."""
        return self.arrow.observed_partial if observed else self.arrow.partial

    def merged_buffers(self):
        """The rows of a batch's Python merge of aggregators alone: keys and each aggregator's
        result."""
        return T.StructType([*self.key_fields, *self.part.buffer_fields])

    def state_schema(self):
        """A stream's stateful merge: the rows of its runs, keys and each state's columns."""
        columns = {c for state in self.part.states for c in state.columns}
        return T.StructType([*self.key_fields, *[f for f in self.part.fields
                                                 if f.name in columns]])

    def stateful_output(self):
        """A stream's stateful merge: its output rows, keys and each state's result; every
        column nullable, as a streaming groupBy's result is (its state store's rows)."""
        return T.StructType([T.StructField(f.name, f.dataType, True)
                             for f in (*self.key_fields, *self.part.state_outputs)])

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


def build_layout(scope, aggregates, outputs, key_names):
    """The :class:`Layout` of ``aggregates`` (their result names ``outputs``) on ``scope``:
    each aggregate's part, its input copies numbered after the ones before it; ``key_names``
    the keys' result names (groupBy's); its Arrow schemas converted once."""
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
    layout = Layout(
        names=names, user_columns=tuple(scope.df.columns), keys=keys,
        user_key_fields=tuple(scope.key_fields),
        key_fields=tuple(T.StructField(k, arrow_safe_type(f.dataType), f.nullable)
                         for k, f in zip(keys, scope.key_fields)),
        key_outputs=tuple(key_outputs),
        added_columns=MappingProxyType(added), part=total)
    return replace(layout, arrow=_arrow_schemas(layout, scope))


def _arrow_schemas(layout, scope):
    """The :class:`ArrowSchemas` of ``layout``: every Spark schema a stage hands to Arrow."""
    df = scope.df

    def arrow(*fields):
        return pa.schema(arrow_fields(df, T.StructType(list(fields))))

    partial = layout.schema(observed=False)
    schemas = ArrowSchemas(partial=arrow(*partial.fields),
                           observed_partial=arrow(*layout.schema(observed=True).fields),
                           merged_buffers=arrow(*layout.merged_buffers().fields))
    if not scope.stateful:
        return schemas
    names = layout.names
    added = arrow(T.StructField(names.key_hash, T.LongType(), False),
                  T.StructField(names.bucket, T.IntegerType(), False),
                  T.StructField(names.blob, T.BinaryType(), False), *PACKED_SUMMARY_FIELDS)
    return replace(schemas, state=arrow(*layout.state_schema().fields),
                   stateful_output=arrow(*layout.stateful_output().fields),
                   key_hash=added.field(0), bucket=added.field(1), blob=added.field(2),
                   packed_summary=tuple(added)[3:])


@dataclass(frozen=True)
class Call:
    """One ``skew_group`` call, checked: its DataFrame, keys, aggregates and options, whether a
    stream merges it in its stateful Python step, and (with anything but Spark's functions) the
    partial stage's layout. Built by :func:`build_call` only, once."""

    df: object               # the input DataFrame
    keys: tuple              # the grouping columns, as ``F.col`` resolves them in ``df``
    key_fields: tuple        # their StructFields
    aggregates: tuple
    workers: int
    config: object           # the routing strategy's config
    seed: int
    output_mode: str
    names: object            # ``_columns.Internal``: the plan's own column names
    stateful: bool           # a stream's every aggregate merges in its stateful Python step
    layout: Optional[Layout] = None   # None with Spark's functions alone

    @property
    def builtins_only(self):
        """Spark's own functions alone: Spark's groupBy runs them whole."""
        return all(a.run_by_spark for a in self.aggregates)

    @property
    def merged_in_python(self):
        """An aggregator is in the call: a Python merge (auto counts the keys for it)."""
        return any(a.merged_in_python for a in self.aggregates)

    @property
    def python_alone(self):
        """Every aggregate of the partial is an aggregator: nothing for Spark's aggregation to
        merge (a Spark aggregate Column of a batch is joined after, ``_merge``)."""
        return all(a.merged_in_python or a.joined_after_merge for a in self.aggregates)

    @property
    def one_row_per_key(self):
        """With each key's rows in one partition, its partial is its result."""
        return (self.layout is not None and not self.layout.part.passes_rows
                and all(a.single_partial_is_result for a in self.aggregates))

    @property
    def keys_merged_apart(self):
        """groupBy may take as one key two keys a hash repartition puts apart
        (``_checks.merged_apart``)."""
        return merged_apart(self.key_fields)


def merged_statefully(df, aggregates):
    """Whether every aggregate merges in a stream's stateful Python step: a stream with an
    aggregator, or with a Spark aggregate Column beside a custom aggregate (Spark cannot join
    two streaming aggregations)."""
    if not df.isStreaming or all(a.run_by_spark for a in aggregates):
        return False
    return any(a.merged_in_python or a.joined_after_merge for a in aggregates)


def build_call(df, keys, aggregates, *, workers, config, seed, output_mode):
    """The :class:`Call` of ``skew_group(keys, *aggregates, ...)`` on ``df``, after every check
    (each raised before any job): the keys' types, each aggregate's own, and no two results
    with one name. ``workers`` None is ``spark.sql.shuffle.partitions``."""
    keys = tuple(reference(df, k, "The 'keys' parameter") for k in keys)
    key_fields = tuple(check_keys(df, keys))
    aggregates = tuple(a.resolved(df) for a in aggregates)
    if workers is None:
        workers = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    conf = df.sparkSession.conf
    scope = Scope(df, keys, key_fields, internal(df.columns),
                  has_partial=not all(a.run_by_spark for a in aggregates),
                  stateful=merged_statefully(df, aggregates),
                  ansi=conf.get("spark.sql.ansi.enabled", "true") == "true",
                  timezone=conf.get("spark.sql.session.timeZone"))
    for aggregate in aggregates:
        aggregate.check(scope)
    run_by_spark = [a for a in aggregates if a.run_by_spark]
    # groupBy's own output names and types (analysis, no job); count(1) stands in for none.
    reference_schema = df.groupBy(*keys).agg(*([a.spark_column() for a in run_by_spark]
                                               or [F.count(F.lit(1))])).schema
    names = iter(reference_schema.fieldNames()[len(keys):] if run_by_spark else ())
    outputs, seen = [], set()
    for aggregate in aggregates:
        produced = aggregate.outputs(names)
        for name in produced:
            if name in seen:
                raise ValueError(f"Two aggregates produce the column {name!r}; use .alias().")
            seen.add(name)
        outputs.append(produced)
    layout = None
    if scope.has_partial:
        result_types = {f.name: f.dataType for f in reference_schema.fields[len(keys):]
                        if run_by_spark}
        layout = build_layout(replace(scope, result_types=MappingProxyType(result_types)),
                              aggregates, outputs, reference_schema.fieldNames()[:len(keys)])
    return Call(df, keys, key_fields, aggregates, workers, config, seed, output_mode,
                scope.names, scope.stateful, layout)
