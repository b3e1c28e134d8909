"""The partial step: per (worker, key) of a partition, in Arrow, one call per partition.

    placed rows (partition == worker) --mapInArrow(make_partial)--> partial rows

:class:`PartialSpec` gathers, for one ``skew_group`` call, the columns the partial reads and
writes, its per-partition steps, and the merge and finish expressions; each aggregate adds its
own (``_aggregates``: custom aggregates and aggregators one partial row per key, built-ins
their input rows passed on, flagged ``raw``, for Spark's own aggregation). ``make_partial`` is
the executor function. Every column it writes has an internal name (``_columns``).
"""
from types import MappingProxyType

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

from skewgroup._aggregation.custom import partial_columns
from skewgroup._aggregation.groups import GroupedRows
from skewgroup._aggregation.reductions import STATUS_NAN, STATUS_VALUE, ReducedState, status
from skewgroup.spark import _observe
from skewgroup.spark._columns import arrow_fields, from_arrow_safe, to_arrow_safe


WATERMARK_DELAY = "spark.watermarkDelayMs"   # Spark's EventTimeWatermark.delayKey


# Keys that cross the stateful merge's pandas frames as numbers (a timestamp as its epoch
# microseconds, ``_python_merge._wire``).
_NUMBER_KEYS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
                T.TimestampType, T.YearMonthIntervalType)   # a year-month interval as its months


class PartialSpec:
    """The partial stage's columns and the merge's expressions for one ``skew_group`` call
    (``_aggregates.Call``; ``reference`` the built-ins' output schema as groupBy gives it,
    ``outputs`` each aggregate's result column names). Each aggregate adds its own while the
    spec is built; then it is frozen."""

    def __init__(self, call, reference, outputs):
        df, names, keys, key_fields = call.df, call.names, call.keys, call.key_fields
        self.df = df
        self.names = names
        self.user_columns = list(df.columns)   # what a custom partial sees (names may repeat)
        self.keys = [names.key(i) for i in range(len(keys))]
        self.user_key_fields = key_fields
        self.key_fields = [T.StructField(names.key(i), _arrow_safe_type(f.dataType), f.nullable)
                           for i, f in enumerate(key_fields)]
        # A stream with a Python aggregator merges every aggregate in one stateful Python step
        # (``_python_merge.merge_stream``): each aggregate adds its state there (``states``,
        # ``_groups.merge_runs``'s protocol) and the column its result goes out under.
        self.stateful = call.stateful
        self.states = []
        self.state_outputs = []   # StructFields of the stateful merge's results, after the keys
        conf = df.sparkSession.conf
        self.ansi = conf.get("spark.sql.ansi.enabled", "true") == "true"
        self.timezone = conf.get("spark.sql.session.timeZone")
        # Copies of the keys and the aggregates' inputs, appended to the rows before the partial.
        self.copies = {names.key(i): to_arrow_safe(F.col(k), f.dataType)
                       for i, (k, f) in enumerate(zip(keys, key_fields))}
        self.key_outputs = [from_arrow_safe(F.col(names.key(i)), f.dataType).alias(out.name)
                            for i, (f, out) in enumerate(zip(key_fields, reference))]
        # The stateful merge's numeric keys cross pandas filled, with a status beside them (a
        # null long would become a float, a NaN a null); a floating key is normalized first,
        # as groupBy normalizes it (-0.0 is 0.0, every NaN one NaN), since Arrow groups bytes.
        self.key_status = {}
        for i, (key, field, out) in enumerate(zip(self.keys, key_fields, reference)):
            floating = isinstance(field.dataType, _FLOATING)
            if self.stateful and isinstance(field.dataType, T.StructType) and any(
                    isinstance(f.dataType, _FLOATING) for f in field.dataType.fields):
                # A struct's floating fields too (they cross pandas as Spark's strings of them,
                # ``_python_merge._wire``).
                copy = self.copies[key]
                parts = [(_normalized(copy[f.name], f.dataType)
                          if isinstance(f.dataType, _FLOATING) else copy[f.name]).alias(f.name)
                         for f in field.dataType.fields]
                self.copies[key] = F.when(copy.isNotNull(), F.struct(*parts))
                continue
            if not (self.stateful and isinstance(field.dataType, _NUMBER_KEYS)
                    and (field.nullable or floating)):
                continue
            self.key_status[key] = key + "__s"
            status = F.col(self.key_status[key])
            if floating:
                self.copies[key] = _normalized(self.copies[key], field.dataType)
                nan = F.lit(float("nan")).cast(field.dataType)
                value = (F.when(status == STATUS_NAN, nan).otherwise(F.col(key))
                         if not field.nullable else   # not null in, not null out
                         F.when(status == STATUS_VALUE, F.col(key)).when(status == STATUS_NAN,
                                                                         nan))
            else:                                     # a long never meets a double literal
                value = F.when(status == STATUS_VALUE, F.col(key))
            self.key_outputs[i] = from_arrow_safe(value, field.dataType).alias(out.name)
        self.inputs = []       # StructFields of the input copies passed on to Spark's built-ins
        self.fields = [T.StructField(s, T.ByteType(), False) for s in self.key_status.values()]
        self.makers = []       # per-partition steps: (groups, table, target) -> [(name, array)]
        self.merges = []       # merged Column expressions
        self.finishes = []     # final Column expressions, in the order of the aggregates
        self.buffers = []      # Python aggregators' ``_groups.BufferState``s
        self.buffer_fields = []   # their results' StructFields (buffer column, output type)
        self.passes_rows = False   # a built-in reads the input rows
        self.joined = []       # a batch's Spark aggregate Columns, run by Spark's groupBy of the
        #                        input and joined on the keys after the merge (``_merge``)
        self._reference = {f.name: f.dataType for f in reference.fields[len(keys):]}
        for i, (aggregate, names_out) in enumerate(zip(call.aggregates, outputs)):
            aggregate.add_partial(self, i, names_out)
        self._freeze()

    def _freeze(self):
        for name, value in vars(self).items():
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
            elif isinstance(value, dict):
                object.__setattr__(self, name, MappingProxyType(value))
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"A PartialSpec is frozen once built; {name} cannot change.")
        object.__setattr__(self, name, value)

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

    def add_state(self, reduction, output, state_type, result_type):
        """A reduction's state columns (its value, unless a count, and n) among the partial
        fields and in the stateful merge, its result as column ``output``: (the state's column
        names, the result as a Column after the merge)."""
        columns = ([] if state_type is None else [output + "__v"]) + [output + "__n"]
        types = ([] if state_type is None else [state_type]) + [T.LongType()]
        # n is never null; a value is null where no input was (a date's, a string's: only a
        # number's is filled, ``skewgroup._aggregation.reductions``).
        self.fields += [T.StructField(c, t, not c.endswith("__n"))
                        for c, t in zip(columns, types)]
        state = ReducedState(reduction, columns, output)
        self.states.append(state)
        # A count is never null, as groupBy's; every other reduction may be.
        self.state_outputs.append(T.StructField(output, result_type, reduction.kind != "count"))
        return columns, self._stateful_result(state, output, result_type)

    def _stateful_result(self, state, column, result_type):
        """The Column of a stateful merge's result ``column``: with a status column (a number
        crossed pandas filled), null or NaN as its status says."""
        result = F.col(column)
        if state.status_column is None:
            return result
        self.state_outputs.append(T.StructField(state.status_column, T.ByteType(), False))
        status = F.col(state.status_column)
        result = F.when(status == STATUS_VALUE, result)
        if isinstance(result_type, (T.FloatType, T.DoubleType)):
            result = result.when(status == STATUS_NAN, F.lit(float("nan")).cast(result_type))
        return result

    def reference_type(self, output):
        """groupBy's type of the Spark function whose result is column ``output``."""
        return self._reference[output]

    def add_function_state(self, reduction, output, result_type):
        """A Spark function's state columns (``reduction.state_types``,
        ``skewgroup._aggregation.spark_functions``) among the partial fields and in the stateful merge, its
        result as column ``output`` of ``result_type``: (the state's column names, the result
        as a Column after the merge)."""
        types = [from_arrow_type(t) for t in reduction.state_types]
        columns = [f"{output}__{j}" for j in range(len(types))]
        self.fields += [T.StructField(c, t, True) for c, t in zip(columns, types)]
        state = ReducedState(reduction, columns, output)
        self.states.append(state)
        self.state_outputs.append(T.StructField(output, result_type, True))
        return columns, self._stateful_result(state, output, result_type)

    def add_buffer(self, state, output_type, output):
        """A Python aggregator's buffer column (``state``: its ``_groups.BufferState``): one
        encoded buffer per key in the partial, collected per key for Spark's aggregation, or
        merged in Python (``_python_merge``); its result is column ``output``."""
        buffer = state.columns[0]
        self.fields.append(T.StructField(buffer, T.BinaryType(), True))
        self.buffers.append(state)
        self.buffer_fields.append(T.StructField(buffer, output_type, True))
        self.states.append(state)
        self.state_outputs.append(T.StructField(buffer, output_type, True))
        self.makers.append(AggregatorPartial(state.adapter, buffer))
        self.merges.append(F.collect_list(buffer).alias(buffer))
        result = (self._stateful_result(state, buffer, output_type) if self.stateful
                  else F.col(buffer))
        self.finishes.append(result.alias(output))

    def copy_input(self, column, passed=True, data_type=None):
        """(internal name, type) of a copy of the input ``column`` (a name, or a Column of
        ``data_type``) the partial reads; with ``passed`` it is passed on to Spark's built-ins
        with the rows."""
        name = self.names.input(len(self.copies) - len(self.keys))
        if isinstance(column, str):
            column = F.col(column)
        if data_type is None:
            data_type = self.df.select(column).schema.fields[0].dataType
        self.copies[name] = to_arrow_safe(column, data_type)
        if passed:
            self.inputs.append(T.StructField(name, _arrow_safe_type(data_type), True))
        return name, data_type

    def schema(self, observed=False):
        """The partial rows' schema: keys, built-in inputs and the raw flag (with built-ins),
        partial fields, and with ``observed`` the rows behind each partial row (what a
        stream's balance metrics read). Nothing else: every column crosses Arrow twice."""
        raw = [T.StructField(self.names.raw, T.BooleanType(), True)] if self.passes_rows else []
        rows = [T.StructField(self.names.rows, T.LongType(), False)] if observed else []
        return T.StructType([*self.key_fields, *self.inputs, *raw, *self.fields, *rows])

    def partial_input(self, df):
        """``df`` as the partial reads it: the copies of the keys and the built-ins' inputs
        appended, every user column renamed by position (PySpark's mapInArrow refers to each
        column by name, which fails on a dotted or repeated name); the partial gives a custom
        aggregate the user's names back."""
        copied = df.withColumns(dict(self.copies))
        users = len(self.user_columns)
        renamed = copied.toDF(*[self.names.user(i) for i in range(users)],
                              *copied.columns[users:])
        # A year-month interval anywhere in the rows would stop Arrow: its months go instead.
        return renamed.withColumns({
            self.names.user(i): to_arrow_safe(F.col(self.names.user(i)), f.dataType)
            for i, f in enumerate(df.schema.fields[:users])
            if isinstance(f.dataType, T.YearMonthIntervalType)})


_FLOATING = (T.FloatType, T.DoubleType)


def _normalized(column, data_type):
    """A floating ``column`` as groupBy groups it: -0.0 is 0.0, every NaN one NaN (Arrow, and
    the partial, group bytes)."""
    return (F.when(F.isnan(column), F.lit(float("nan"))).when(column == 0, F.lit(0.0))
            .otherwise(column).cast(data_type))


class CustomPartial:
    """A custom aggregate's per-partition step: its partial fields, one value per key; in a
    stream's stateful merge (``lifts``: each field's reduction and state columns) each field's
    value lifted into its merge rule's state."""

    def __init__(self, aggregate, names, fields, lifts=None, types=None):
        self.aggregate, self.names, self.fields = aggregate, names, fields
        self.lifts, self.types = lifts, types

    def __call__(self, groups, table, target):
        types = self.types or [target.field(name).type for name in self.names]
        aggregate = self.aggregate
        columns = list(zip(self.names, partial_columns(aggregate.partial, aggregate.vectorized,
                                                       groups, self.fields, types)))
        if self.lifts is None:
            return columns
        lifted = []
        for (_, values), (reduction, state_columns) in zip(columns, self.lifts):
            one_each = np.arange(len(values) + 1, dtype=np.int64)
            lifted += zip(state_columns, reduction.reduce(values, one_each))
        return lifted


class ReducedPartial:
    """A built-in's per-partition step in a stream's stateful merge: its reduction's state per
    key (``input_column`` None: count(), the rows of each key)."""

    def __init__(self, reduction, input_column, state_columns):
        self.reduction, self.input_column = reduction, input_column
        self.state_columns = state_columns

    def __call__(self, groups, table, target):
        if self.input_column is None:
            return [(self.state_columns[0], pa.array(np.diff(groups.offsets)))]
        values = table.column(self.input_column).take(groups.order)
        return list(zip(self.state_columns, self.reduction.reduce(values, groups.offsets)))


class FunctionPartial:
    """A Spark function's per-partition step in a stream's stateful merge: its reduction's
    state per key (``skewgroup._aggregation.spark_functions``) from its input columns."""

    def __init__(self, reduction, input_columns, state_columns):
        self.reduction, self.input_columns = reduction, list(input_columns)
        self.state_columns = state_columns

    def __call__(self, groups, table, target):
        values = [table.column(c).take(groups.order) for c in self.input_columns]
        return list(zip(self.state_columns, self.reduction.reduce(values, groups.offsets)))


class AggregatorPartial:
    """A Python aggregator's per-partition step: one encoded buffer per key."""

    def __init__(self, adapter, buffer):
        self.adapter, self.buffer = adapter, buffer

    def __call__(self, groups, table, target):
        rows = table.select(list(self.adapter.columns)).take(groups.order)
        return [(self.buffer, self.adapter.encode(self.adapter.reduce_groups(rows,
                                                                             groups.offsets)))]


def _arrow_safe_type(data_type):
    return T.IntegerType() if isinstance(data_type, T.YearMonthIntervalType) else data_type


def partials(call, placed, observed):
    """The partial rows of ``placed`` (``call.df`` after the plan's placement), one
    ``mapInArrow`` stage; ``observed``: a stream's partial rows carry the rows behind each and
    are observed in its progress (``_observe``)."""
    spec, names = call.partial, call.names
    # The placement's columns have done their work: the partial does not read them, and every
    # column it gets crosses into Python.
    placed = placed.drop(names.worker, names.place)
    schema = spec.schema(observed)
    rows = spec.partial_input(placed).mapInArrow(
        make_partial(spec, arrow_fields(call.df, schema)), schema)
    if observed:
        rows = _observe.observe_partials(rows, spec.keys, names.rows)
    return rows


def make_partial(spec, fields):
    """mapInArrow function: the partial rows of one partition (see the module docstring).

    In the routed, split, spread and hash plans a partition is one worker; in the local plan
    it is one input partition. The aggregates that make a partial row per key share one
    grouping of the rows (their fields side by side); the built-ins' rows follow, the other
    fields null, which Spark's merge functions skip.
    """
    target = pa.schema(fields)
    keys, raw_name, rows_name = spec.keys, spec.names.raw, spec.names.rows
    inputs = [f.name for f in spec.inputs]
    user_columns = spec.user_columns
    passes_rows = spec.passes_rows
    makers = spec.makers
    key_status = spec.key_status

    def partial(batches):
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        parts = []
        if makers:
            groups = GroupedRows(table, keys, user_columns)
            per_key = pa.table(groups.keys)
            for key, status_column in key_status.items():
                per_key = filled_with_status(per_key, key, status_column)
            for make in makers:
                for name, column in make(groups, table, target):
                    per_key = per_key.append_column(name, column)
            if rows_name in target.names:
                per_key = per_key.append_column(rows_name, pa.array(np.diff(groups.offsets)))
            parts.append(per_key)
        if passes_rows:
            passed = table.select([*keys, *inputs])
            parts.append(passed.append_column(raw_name, pa.repeat(True, table.num_rows)))
        for part in parts:
            yield from _complete(part, target, rows_name).to_batches()

    return partial


def filled_with_status(table, key, status_column):
    """``table`` with the numeric column ``key`` filled (no null, no NaN) and its ``STATUS_*``
    in ``status_column``: how a number crosses pandas exactly (``skewgroup._aggregation.reductions``)."""
    column = table.column(key).combine_chunks()
    filled = column.fill_null(pa.scalar(0, column.type)) if column.null_count else column
    if pa.types.is_floating(column.type):     # a NaN would be a null on its way out of pandas
        filled = pa.compute.if_else(pa.compute.is_nan(filled), pa.scalar(0, column.type), filled)
    table = table.set_column(table.schema.get_field_index(key), key, filled)
    return table.append_column(status_column, status(column))


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
