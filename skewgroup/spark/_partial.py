"""The partial step: per (worker, key) of a partition, in Arrow, one call per partition.

    placed rows (partition == worker) --mapInArrow(make_partial)--> partial rows

Custom aggregates give one partial row per key (their fields, the key's rows). Built-in
aggregates are Spark's: the partial passes their input rows on (the keys and input columns
only, flagged ``raw``), and Spark's own aggregation reduces them per key, first inside the same
task (its map-side partial aggregation over the worker's rows), then in the merge. So NaN
ordering, ANSI overflow, decimal precision and null structs are Spark's, never an imitation in
Arrow (docs/plans.md, "Which aggregate runs where").

:class:`PartialSpec` says which columns the partial reads and writes, how Spark merges them
and how the result is named (as ``df.groupBy(keys).agg(...)`` names it); ``make_partial`` is
the executor function. Every column it writes has an internal name (``_columns``).
"""
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup.spark._checks import custom_schema
from skewgroup.spark._columns import from_arrow_safe, to_arrow_safe

# A merge that returns its only input unchanged (up to the merged type): with one partial per
# key the hash plan may skip it. Not "count" (it counts partials) nor a callable.
IDEMPOTENT_MERGES = ("sum", "min", "max", "first", "last", "bool_and", "bool_or")


class PartialSpec:
    """The partial stage's columns and the merge's expressions for one ``skew_group`` call.

    ``key_fields`` and ``reference`` come from ``_checks`` (the keys as Spark resolves them,
    and the built-ins' output schema as groupBy gives it)."""

    def __init__(self, df, keys, key_fields, aggregates, reference, names):
        from skewgroup.spark._merge import spark_aggregate

        self.names = names
        self.user_columns = list(df.columns)   # what a custom partial sees (names may repeat)
        self.keys = [names.key(i) for i in range(len(keys))]
        self.key_fields = [T.StructField(names.key(i), _arrow_safe_type(f.dataType), f.nullable)
                           for i, f in enumerate(key_fields)]
        # Copies of the keys and the built-ins' inputs, appended to the rows before the partial.
        self.copies = {names.key(i): to_arrow_safe(F.col(k), f.dataType)
                       for i, (k, f) in enumerate(zip(keys, key_fields))}
        self.key_outputs = [from_arrow_safe(F.col(names.key(i)), f.dataType).alias(out.name)
                            for i, (f, out) in enumerate(zip(key_fields, reference))]
        self.inputs = []       # StructFields of the built-ins' input copies, as Arrow gets them
        self.fields = []       # StructFields of the custom partial columns
        self.custom = []       # (aggregate, [partial names], [schema field names])
        self.merges = []       # merged Column expressions
        self.finishes = []     # final Column expressions, in the order of the aggregates
        self.aggregators = []  # (PythonAggregator, buffer column, output Spark type)
        builtin_outputs = iter(reference.fields[len(keys):])
        for i, aggregate in enumerate(aggregates):
            if aggregate.kind == "custom":
                self._custom(i, aggregate)
                continue
            if aggregate.kind == "aggregator":
                self._aggregator(i, aggregate, df)
                continue
            out = next(builtin_outputs)
            if aggregate.column is None:      # count(1): the rows passed on
                column, data_type = F.col(names.raw), T.BooleanType()
            else:
                name, data_type = self._copy(df, aggregate.column)
                self.inputs.append(T.StructField(name, _arrow_safe_type(data_type), True))
                column = F.col(name)
            self.merges.append(spark_aggregate(aggregate, column).alias(names.out(i)))
            result = F.col(names.out(i))
            if aggregate.kind in ("min", "max"):
                result = from_arrow_safe(result, data_type)
            self.finishes.append(result.alias(out.name))
        self.builtins = len(self.merges) > len(self.fields)

    def _copy(self, df, column):
        """(internal name, type) of a copy of the input ``column`` the partial reads."""
        name = self.names.input(len(self.copies) - len(self.keys))
        data_type = df.select(F.col(column)).schema.fields[0].dataType
        self.copies[name] = to_arrow_safe(F.col(column), data_type)
        return name, data_type

    def _aggregator(self, i, a, df):
        """A Python aggregator: its partial is one encoded buffer per key, its merge Python
        (``_python_merge``); the buffers are collected per key for it."""
        from pyspark.sql.pandas.types import to_arrow_type

        from skewgroup.aggregators import adapt, adapt_protocol

        columns = [self._copy(df, column)[0] for column in a.columns]
        output_type = _spark_type(a.output_type)
        buffer_type = None
        if adapt_protocol(a.obj, a.output_name) == "Spark Aggregator":   # checked by schema
            buffer_type = to_arrow_type(_spark_type(a.obj.bufferSchema))
        adapter = adapt(a.obj, columns, buffer_type=buffer_type,
                        output_type=to_arrow_type(output_type), name=a.output_name)
        buffer = self.names.field(i, "buffer")
        self.fields.append(T.StructField(buffer, T.BinaryType(), True))
        self.aggregators.append((adapter, buffer, output_type))
        self.merges.append(F.collect_list(buffer).alias(buffer))
        self.finishes.append(F.col(buffer).alias(a.output_name))

    @property
    def one_row_per_key(self):
        """Whether a partition's partial has one row per key and every merge returns a single
        partial unchanged: custom aggregates alone, merged by :data:`IDEMPOTENT_MERGES`."""
        return (bool(self.custom) and not self.builtins and not self.aggregators
                and all(not callable(how) and how in IDEMPOTENT_MERGES
                        for aggregate, _, _ in self.custom for how in aggregate.merge.values()))

    def schema(self, observed=False):
        """The partial rows' schema: keys, built-in inputs and the raw flag (with built-ins),
        custom fields, and with ``observed`` the rows behind each partial row (what a
        stream's balance metrics read). Nothing else: every column crosses Arrow twice."""
        raw = [T.StructField(self.names.raw, T.BooleanType(), True)] if self.builtins else []
        rows = [T.StructField(self.names.rows, T.LongType(), False)] if observed else []
        return T.StructType(self.key_fields + self.inputs + raw + self.fields + rows)

    def partial_input(self, df):
        """``df`` as the partial reads it: the copies of the keys and the built-ins' inputs
        appended, every user column renamed by position (PySpark's mapInArrow refers to each
        column by name, which fails on a dotted or repeated name); the partial gives a custom
        aggregate the user's names back."""
        copied = df.withColumns(self.copies)
        users = len(self.user_columns)
        renamed = copied.toDF(*[self.names.user(i) for i in range(users)],
                              *copied.columns[users:])
        # A year-month interval anywhere in the rows would stop Arrow: its months go instead.
        return renamed.withColumns({
            self.names.user(i): to_arrow_safe(F.col(self.names.user(i)), f.dataType)
            for i, f in enumerate(df.schema.fields[:users])
            if isinstance(f.dataType, T.YearMonthIntervalType)})

    def _custom(self, i, a):
        names = []
        merged = {}
        for f in custom_schema(a).fields:
            name = self.names.field(i, f.name)
            self.fields.append(T.StructField(name, f.dataType, True))
            names.append(name)
            how = a.merge[f.name]
            if callable(how):
                column = how(F.col(name))
            elif how in ("first", "last"):  # the raw rows of the built-ins hold nulls here
                column = getattr(F, how)(name, ignorenulls=True)
            else:
                column = getattr(F, how)(name)
            self.merges.append(column.alias(name))
            merged[f.name] = F.col(name)
        self.custom.append((a, names, [f.name for f in custom_schema(a).fields]))
        if a.finish is None:
            self.finishes += [merged[f].alias(f) for f in merged]
        else:
            self.finishes.append(a.finish(merged).alias(a.output_name))
def _spark_type(declared):
    """A DDL string or pyspark DataType as a DataType (parsed by the active session)."""
    if isinstance(declared, str):
        return T._parse_datatype_string(declared)
    return declared


def _arrow_safe_type(data_type):
    return T.IntegerType() if isinstance(data_type, T.YearMonthIntervalType) else data_type


def arrow_fields(df, schema):
    from pyspark.sql.pandas.types import to_arrow_schema

    spark = df.sparkSession
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    # No default in conf.get: with a default Spark returns it whenever the user never set the
    # zone explicitly, and a timestamp field (e.g. a window key) then has no zone at all.
    arrow = to_arrow_schema(schema, prefers_large_types=large,
                            timezone=spark.conf.get("spark.sql.session.timeZone"))
    return list(arrow)


def make_partial(spec, arrow_fields):
    """mapInArrow function: the partial rows of one partition (see the module docstring).

    In the routed, split, spread and hash plans a partition is one worker; in the local plan
    it is one input partition. Custom aggregates share
    one grouping of the rows (one partial row per key, their fields side by side); the
    built-ins' rows follow, their custom fields null, which Spark's merge functions skip.
    """
    target = pa.schema(arrow_fields)
    keys, raw_name, rows_name = spec.keys, spec.names.raw, spec.names.rows
    inputs = [f.name for f in spec.inputs]
    user_columns = spec.user_columns
    builtins = spec.builtins
    customs = [(aggregate, names, fields, [target.field(name).type for name in names])
               for aggregate, names, fields in spec.custom]
    aggregators = [(adapter, buffer) for adapter, buffer, _ in spec.aggregators]

    def partial(batches):
        import numpy as np

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        parts = []
        if customs or aggregators:
            groups = _Groups(table, keys, user_columns)
            custom_part = pa.table(groups.keys)
            for custom in customs:
                for name, column in groups.custom_partial(*custom):
                    custom_part = custom_part.append_column(name, column)
            for adapter, buffer in aggregators:
                rows = table.select(list(adapter.columns)).take(groups.order)
                buffers = adapter.reduce_groups(rows, groups.offsets)
                custom_part = custom_part.append_column(buffer, adapter.encode(buffers))
            if rows_name in target.names:
                custom_part = custom_part.append_column(rows_name,
                                                        pa.array(np.diff(groups.offsets)))
            parts.append(custom_part)
        if builtins:
            passed = table.select(keys + inputs)
            parts.append(passed.append_column(raw_name, pa.repeat(True, table.num_rows)))
        for part in parts:
            yield from _complete(part, target, rows_name).to_batches()

    return partial


def _flat_keys(table, keys):
    """(a table of the key columns with each struct key split into its validity and fields,
    the grouping columns). Only generated names: a user's column names never meet them."""
    columns = []
    for key in keys:
        column = table.column(key)
        if pa.types.is_struct(column.type):
            # A null struct and a struct of nulls are two keys, as in Spark: the validity is a
            # grouping column, and flatten() nulls a null struct's fields.
            columns.append(pa.compute.is_valid(column))
            chunks = [chunk.flatten() for chunk in column.chunks]
            for j, child in enumerate(column.type):
                columns.append(pa.chunked_array([c[j] for c in chunks], child.type))
        else:
            columns.append(column)
    names = [f"g{j}" for j in range(len(columns))]
    return pa.table(columns, names=names), names


def _unflat_keys(grouped, table, keys):
    """The key columns of ``grouped`` (grouped by ``_flat_keys``' columns) as ``table`` has
    them: struct keys rebuilt with their validity."""
    out, j = {}, 0
    for key in keys:
        key_type = table.schema.field(key).type
        if pa.types.is_struct(key_type):
            valid = grouped.column(f"g{j}").combine_chunks()
            children = [grouped.column(f"g{j + 1 + c}").combine_chunks()
                        for c in range(key_type.num_fields)]
            out[key] = pa.StructArray.from_arrays(children, fields=list(key_type),
                                                  mask=pa.compute.invert(valid))
            j += 1 + key_type.num_fields
        else:
            out[key] = grouped.column(f"g{j}")
            j += 1
    return out


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


class _Groups:
    """A partition's rows grouped by key once, for every custom aggregate of the partition.

    The groups come from one Arrow ``group_by`` of the key copies (struct keys such as a window
    split into their validity and fields, nulls one group, as in Spark): ``rows`` holds the
    user's columns (the first ones, named ``user_columns``: names may repeat) with each key's
    rows contiguous, ``offsets`` the g + 1 group boundaries, ``keys`` one row per group.
    """

    def __init__(self, table, keys, user_columns):
        import numpy as np

        work, group_keys = _flat_keys(table, keys)
        work = work.append_column("row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
        groups = work.group_by(group_keys, use_threads=False).aggregate([("row", "list")])
        row_lists = groups.column("row_list").combine_chunks()
        self.offsets = row_lists.offsets.to_numpy().astype(np.int64, copy=False)
        self.order = row_lists.flatten()      # the rows' indices, grouped
        self._user = (table, user_columns)
        self._rows = None
        key_columns = _unflat_keys(groups, table, keys)
        self.keys = {k: key_columns[k].cast(table.schema.field(k).type) for k in keys}
        self._frame = None

    @property
    def rows(self):
        """The user's columns (their own names), grouped: what a custom partial sees."""
        if self._rows is None:
            table, user_columns = self._user
            self._rows = (table.select(list(range(len(user_columns))))
                          .rename_columns(user_columns).take(self.order))
        return self._rows

    def custom_partial(self, aggregate, names, fields, field_types):
        """(partial column name, per-group values) of one custom aggregate."""
        values = (self._vectorized(aggregate, fields) if aggregate.vectorized
                  else self._per_key(aggregate, fields))
        return [(name, _partial_column(values, field_name, field_type, len(self.offsets) - 1))
                for name, field_name, field_type in zip(names, fields, field_types)]

    def _vectorized(self, aggregate, fields):
        """One call for the whole partition: the user's function sees every group at once."""
        result = aggregate.partial(self.rows, self.offsets.copy())
        if not isinstance(result, Mapping):
            raise TypeError(f"A vectorized custom aggregate's partial must return a dict from "
                            f"each schema field {fields} to its per-group values. Got "
                            f"{type(result).__name__}.")
        extra = sorted(set(result) - set(fields))
        if extra:
            raise ValueError(f"A vectorized custom aggregate's partial returned field(s) {extra} "
                             f"that its schema lacks; the schema's fields are {fields}.")
        return result

    def _per_key(self, aggregate, fields):
        """One call per key, each on a slice of a frame converted to pandas once, in group
        order: no pandas groupby and no per-key DataFrame built (~0.35 ms per key before)."""
        if self._frame is None:
            self._frame = self.rows.to_pandas()
        states = [aggregate.partial(self._frame.iloc[start:stop])
                  for start, stop in zip(self.offsets[:-1], self.offsets[1:])]
        return {f: [state[f] for state in states] for f in fields}


def _partial_column(values, field_name, field_type, groups):
    """The per-group values of one partial field as an Arrow array, checked field by field."""
    if field_name not in values:
        raise ValueError(f"The custom aggregate's partial returned no value for field "
                         f"{field_name!r}; it must return every schema field.")
    column = values[field_name]
    try:
        array = column if isinstance(column, (pa.Array, pa.ChunkedArray)) else pa.array(column)
        length = len(array)
    except (TypeError, ValueError, pa.ArrowException) as error:
        raise TypeError(f"The custom aggregate's field {field_name!r} must be an array of "
                        f"{groups} values of type {field_type}; got "
                        f"{type(column).__name__}: {error}") from None
    if length != groups:
        raise ValueError(f"The custom aggregate's field {field_name!r} must hold one value per "
                         f"group: {groups} values; got {length}.")
    try:
        return array.cast(field_type)
    except (pa.ArrowException, ValueError) as error:
        raise TypeError(f"The custom aggregate's field {field_name!r} must be of type "
                        f"{field_type}; got {array.type} ({error}).") from None
