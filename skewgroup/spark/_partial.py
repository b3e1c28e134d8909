"""The partial step: per (worker, key) of a partition, in Arrow, one call per partition.

    placed rows (partition == worker) --mapInArrow(make_partial)--> one partial row per key

:class:`PartialSpec` says per aggregate which partial fields it has, how Arrow computes them
and how Spark merges and finishes them (applied by ``_merge``); ``make_partial`` is the
executor function. Holds no algorithm: the aggregation is Arrow's (and the user's, for
``agg.custom``).
"""
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup.spark._checks import custom_schema
from skewgroup.spark._columns import ROWS, WORKER

class PartialSpec:
    """Per aggregate i: partial fields (Spark types), how Arrow computes them, how Spark merges
    them, and the final expression."""

    def __init__(self, schema, aggregates):
        self.fields = []       # StructFields of the partial columns
        self.arrow = []        # (input column or None, arrow hash function, options, field name)
        self.custom = []       # (aggregate, [field names])
        self.merges = []       # merged Column expressions (aliased to the partial field name)
        self.finishes = []     # final Column expressions, named as groupBy would name them
        for i, aggregate in enumerate(aggregates):
            getattr(self, "_" + aggregate.kind)(i, aggregate, schema)

    @property
    def one_row_per_key(self):
        """Whether a partition's partial has one row per key: custom aggregates alone (built-in
        ones reduce in their own Arrow grouping, whose rows the merge joins)."""
        return bool(self.custom) and not self.arrow

    def _field(self, name, data_type):
        self.fields.append(T.StructField(name, data_type, True))
        return name

    def _count(self, i, a, schema):
        name = self._field(f"__sg_p{i}", T.LongType())
        if a.column is None:
            self.arrow.append(([], "count_all", None, name))
        else:
            self.arrow.append((a.column, "count", "only_valid", name))
        self.merges.append(F.sum(name).alias(name))
        self.finishes.append(F.coalesce(F.col(name), F.lit(0).cast("long")).alias(a.output_name))

    def _sum(self, i, a, schema):
        data_type = schema[a.column].dataType
        if isinstance(data_type, T.DecimalType):
            result = T.DecimalType(min(38, data_type.precision + 10), data_type.scale)
        elif isinstance(data_type, (T.FloatType, T.DoubleType)):
            result = T.DoubleType()
        else:
            result = T.LongType()
        name = self._field(f"__sg_p{i}", result)
        self.arrow.append((a.column, "sum", "min_count_1", name))
        self.merges.append(F.sum(name).alias(name))
        self.finishes.append(F.col(name).cast(result).alias(a.output_name))

    def _minmax(self, i, a, schema, function):
        name = self._field(f"__sg_p{i}", schema[a.column].dataType)
        self.arrow.append((a.column, function, "min_count_1", name))
        self.merges.append(getattr(F, function)(name).alias(name))
        self.finishes.append(F.col(name).alias(a.output_name))

    def _min(self, i, a, schema):
        self._minmax(i, a, schema, "min")

    def _max(self, i, a, schema):
        self._minmax(i, a, schema, "max")

    def _mean(self, i, a, schema):
        total = self._field(f"__sg_p{i}_sum", T.DoubleType())
        count = self._field(f"__sg_p{i}_n", T.LongType())
        self.arrow.append((a.column, "sum", "min_count_1", total))
        self.arrow.append((a.column, "count", "only_valid", count))
        self.merges += [F.sum(total).alias(total), F.sum(count).alias(count)]
        self.finishes.append(
            F.when(F.col(count) > 0, F.col(total) / F.col(count)).alias(a.output_name))

    def _count_distinct(self, i, a, schema):
        name = self._field(f"__sg_p{i}", T.ArrayType(schema[a.column].dataType, False))
        self.arrow.append((a.column, "distinct", "only_valid", name))
        self.merges.append(F.array_distinct(F.flatten(F.collect_list(name))).alias(name))
        self.finishes.append(F.size(F.col(name)).cast("long").alias(a.output_name))

    def _custom(self, i, a, schema):
        names = []
        merged = {}
        for f in custom_schema(a).fields:
            name = self._field(f"__sg_p{i}_{f.name}", f.dataType)
            names.append(name)
            how = a.merge[f.name]
            if callable(how):
                column = how(F.col(name))
            elif how in ("first", "last"):  # partial rows of other aggregates hold nulls here
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


def partial_schema(schema, keys, spec):
    from pyspark.sql import types as T

    return T.StructType([schema[k] for k in keys] + spec.fields
                        + [T.StructField(ROWS, T.LongType(), False),
                           T.StructField(WORKER, T.IntegerType(), False)])


def arrow_fields(df, schema):
    from pyspark.sql.pandas.types import to_arrow_schema

    spark = df.sparkSession
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    # No default in conf.get: with a default Spark returns it whenever the user never set the
    # zone explicitly, and a timestamp field (e.g. a window key) then has no zone at all.
    arrow = to_arrow_schema(schema, prefers_large_types=large,
                            timezone=spark.conf.get("spark.sql.session.timeZone"))
    return list(arrow)


def make_partial(keys, arrow_reductions, customs, arrow_fields, input_columns):
    """mapInArrow function: the partial aggregate per key of one partition, in Arrow.

    In the routed and hash plans a partition is one worker; in the local plan it is one input
    partition (then the worker column holds the input partition's id). Built-in aggregates
    reduce in one ``Table.group_by``, the custom ones over one grouping of the rows; with both,
    each gives its own partial rows (its fields set, the others null). Spark's merge functions
    skip nulls, so the per-key merge combines them correctly and no join is needed. With custom
    aggregates alone a partition gives one partial row per key
    (:attr:`PartialSpec.one_row_per_key`).
    """
    target = pa.schema(arrow_fields)
    arrow_reductions = list(arrow_reductions) + [([], "count_all", None, ROWS)]
    customs = [(aggregate, names, fields, [target.field(name).type for name in names])
               for aggregate, names, fields in customs]

    def partial(batches):
        import numpy as np

        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        if WORKER in table.column_names:
            worker = table.column(WORKER)[0].as_py()
        else:
            from pyspark import TaskContext

            worker = TaskContext.get().partitionId()
        # With custom aggregates alone, the rows per key come with the first one's partial
        # rows: a built-in partial of the row counts alone would double the partial rows.
        with_builtins = len(arrow_reductions) > 1 or not customs
        parts = [_builtin_partial(table, keys, arrow_reductions)] if with_builtins else []
        if customs:
            # Every custom aggregate sees the same groups in the same order: their fields are
            # columns of one partial row per key.
            groups = _Groups(table, keys, input_columns)
            custom_part = groups.custom_partial(*customs[0])
            for custom in customs[1:]:
                other = groups.custom_partial(*custom)
                for name in custom[1]:
                    custom_part = custom_part.append_column(name, other.column(name))
            if not with_builtins:
                custom_part = custom_part.append_column(ROWS, pa.array(np.diff(groups.offsets)))
            parts.append(custom_part)
        for part in parts:
            part = _complete(part, target, worker)
            yield from part.to_batches()

    return partial


def _builtin_partial(table, keys, arrow_reductions):
    """One Arrow ``group_by`` computing every built-in reduction (and the rows per key)."""
    # Arrow cannot group by a struct (e.g. a time window): group by its fields instead.
    work, group_keys = _flat_keys(table, keys)
    # One uniquely named input column per reduction, so each result is found by name
    # ("<input>_<function>") whatever order group_by returns them in.
    specs = []
    for j, (column, function, option, _) in enumerate(arrow_reductions):
        if column == []:  # count_all, as a count of every row of a key column copy
            column, function, option = keys[0], "count", "all"
        work = work.append_column(f"__r{j}", table.column(column))
        specs.append((f"__r{j}", function, _options(option)))
    grouped = work.group_by(group_keys, use_threads=False).aggregate(specs)
    renamed = {f"__r{j}_{spec[1]}": arrow_reductions[j][3] for j, spec in enumerate(specs)}
    grouped = grouped.rename_columns([renamed.get(c, c) for c in grouped.column_names])
    return _unflat_keys(grouped, table, keys)


def _flat_keys(table, keys):
    """(table of the key columns with struct keys split into fields, the grouping columns)."""
    columns, names = [], []
    for key in keys:
        column = table.column(key)
        if pa.types.is_struct(column.type):
            for i, child in enumerate(column.type):
                columns.append(pa.chunked_array([chunk.field(i) for chunk in column.chunks],
                                                child.type))
                names.append(f"__k_{key}_{i}")
        else:
            columns.append(column)
            names.append(key)
    return pa.table(columns, names=names), names


def _unflat_keys(grouped, table, keys):
    """Rebuild the struct keys split by ``_flat_keys`` (a window is never null)."""
    for key in keys:
        key_type = table.schema.field(key).type
        if pa.types.is_struct(key_type):
            children = [grouped.column(f"__k_{key}_{i}").combine_chunks()
                        for i in range(key_type.num_fields)]
            struct = pa.StructArray.from_arrays(children, fields=list(key_type))
            grouped = grouped.append_column(key, struct)
    return grouped


def _options(option):
    # pyarrow's FunctionOptions do not pickle, so the plan names them and executors build them.
    if option in ("only_valid", "all"):
        return pa.compute.CountOptions(option)
    if option == "min_count_1":  # null when a key has no non-null value, as Spark's sum/min/max
        return pa.compute.ScalarAggregateOptions(min_count=1)
    return None


def _complete(part, target, worker):
    """``part`` with the target schema: missing partial fields null, the worker id set."""
    columns = []
    for f in target:
        if f.name == WORKER:
            columns.append(pa.array([worker] * part.num_rows, pa.int32()))
        elif f.name == ROWS and ROWS not in part.column_names:
            columns.append(pa.array([0] * part.num_rows, pa.int64()))
        elif f.name in part.column_names:
            columns.append(part.column(f.name).cast(f.type))
        else:
            columns.append(pa.nulls(part.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=target)


class _Groups:
    """A partition's rows grouped by key once, for every custom aggregate of the partition.

    The groups come from one Arrow ``group_by`` (struct keys such as a window split into their
    fields, nulls one group, as for the built-ins): ``rows`` holds the input columns with each
    key's rows contiguous, ``offsets`` the g + 1 group boundaries, ``keys`` one row per group.
    """

    def __init__(self, table, keys, input_columns):
        import numpy as np

        work, group_keys = _flat_keys(table, keys)
        work = work.append_column("__row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
        groups = work.group_by(group_keys, use_threads=False).aggregate([("__row", "list")])
        row_lists = groups.column("__row_list").combine_chunks()
        self.offsets = row_lists.offsets.to_numpy().astype(np.int64, copy=False)
        self.rows = table.select(input_columns).take(row_lists.flatten())
        key_table = _unflat_keys(groups.drop_columns(["__row_list"]), table, keys)
        self.keys = {k: key_table.column(k).cast(table.schema.field(k).type) for k in keys}
        self._frame = None

    def custom_partial(self, aggregate, names, fields, field_types):
        values = (self._vectorized(aggregate, fields) if aggregate.vectorized
                  else self._per_key(aggregate, fields))
        columns = dict(self.keys)
        for name, field_name, field_type in zip(names, fields, field_types):
            columns[name] = _partial_column(values, field_name, field_type, len(self.offsets) - 1)
        return pa.table(columns)

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
