"""What an aggregate is, in one class per kind, and the call that holds them.

Each kind (``Builtin``, ``Custom``, ``Aggregator``) answers everything the Spark layer asks of
an aggregate: its output names (groupBy's), its checks, its partial (the columns the partial
stage reads and writes and its executor step, ``_partial``), its merge (a Spark expression, or
a buffer merged in Python), its state in a stream's stateful merge, and its finish. Which
aggregate runs where, and why, is docs/plans.md ("Which aggregate runs where").

:class:`Call` is one ``skew_group`` call: built once by :func:`build_call` after every check,
frozen. It answers the call-level questions the plans and the merge ask (built-ins alone?
merged in Python? stateful?), so no module outside this one asks an aggregate its kind.
"""
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from skewgroup._aggregation.groups import BufferState
from skewgroup._aggregation.reductions import Reduction
from skewgroup.aggregators import adapt
from skewgroup.spark._checks import check_keys, merged_apart, reference, resolve
from skewgroup.spark._columns import from_arrow_safe, internal
from skewgroup._aggregation.spark_functions import FUNCTIONS, UnsupportedFunction, make_reduction
from skewgroup.spark._function_calls import UnreadableCall, column_text, read_call
from skewgroup.spark._partial import CustomPartial, FunctionPartial, PartialSpec, ReducedPartial

# Built-ins: Spark's function and groupBy's default output name of each.
_FUNCTIONS = {"count": F.count, "count_distinct": F.count_distinct, "sum": F.sum, "min": F.min,
              "max": F.max, "mean": F.avg}
_SPARK_NAMES = {"mean": "avg({})", "count_distinct": "count(DISTINCT {})"}
_NUMERIC_INPUT = ("sum", "mean")     # refuse other column types with a message of our own
_KEEPS_INPUT_TYPE = ("min", "max")   # the result has the input's type (a month interval back)

# The partial stage hands a year-month interval to Arrow as its months (``_columns``), which
# groups and orders as the interval does: a key, or min/max/count of it, but not a sum.
_MONTHS = (T.YearMonthIntervalType,)
_SUMMABLE = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
             T.DecimalType, T.DayTimeIntervalType, T.YearMonthIntervalType)

MERGE_FUNCTIONS = ("sum", "min", "max", "count", "first", "last", "bool_and", "bool_or")
# A merge that returns its only input unchanged (up to the merged type): with one partial per
# key the hash plan may skip it. Not "count" (it counts partials) nor a callable.
IDEMPOTENT_MERGES = ("sum", "min", "max", "first", "last", "bool_and", "bool_or")


class Aggregate:
    """One aggregate of ``skew_group``: build with :func:`skewgroup.spark.agg.count`, ``sum``,
    ... ``custom``, ``aggregator``. Each kind below answers:

    * ``output_name``, and ``outputs(builtin_names)``: the result columns' names;
    * ``resolved(df)``, ``check(call)``: its columns as Spark resolves them; its type rules,
      raised before any job;
    * ``spark_column()``: Spark's own function (built-ins);
    * ``add_partial(spec, i, outputs)``: its partial columns, its partial's executor step, its
      merge (or Python buffer, or stream state) and finish, registered in the call's
      ``_partial.PartialSpec``;
    * ``builtin``, ``merged_in_python``, ``single_partial_is_result``: read by :class:`Call`
      only.
    """

    builtin = False              # Spark runs it whole: its own partial and merge
    merged_in_python = False     # its merge is Python (a stream keeps its state itself)
    single_partial_is_result = False   # one partial of a key, merged, is that partial

    def alias(self, name):
        """The same aggregate with output column ``name``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"The 'name' parameter of alias must be a non-empty str. Got {name!r}.")
        return replace(self, name=name)

    @property
    def output_name(self):
        return self.name if self.name is not None else self._default_name()

    def outputs(self, builtin_names):
        """The result columns' names; ``builtin_names`` iterates over groupBy's names of the
        call's built-ins, in order."""
        return [self.output_name]

    def check(self, call):
        """Raise before any job if the aggregate cannot run on ``call``'s DataFrame."""

    def resolved(self, df):
        """The aggregate with its column names as ``F.col`` resolves them in ``df``
        (``_checks.reference``: a column with a dot in its own name backquoted); its output
        name stays the one the given names make, as groupBy names its columns."""
        return self

    def spark_column(self, column=None):
        raise TypeError(f"{self.output_name} has no Spark function of its own.")


@dataclass(frozen=True)
class Builtin(Aggregate):
    """count, sum, min, max, mean (avg), count_distinct: Spark's own functions."""

    kind: str
    column: Optional[str] = None
    name: Optional[str] = None

    builtin = True

    def _default_name(self):
        if self.column is None:
            return "count(1)"
        return _SPARK_NAMES.get(self.kind, self.kind + "({})").format(self.column)

    def outputs(self, builtin_names):
        return [next(builtin_names)]

    def resolved(self, df):
        if self.column is None:
            return self
        column = reference(df, self.column, f"The aggregate {self.output_name}")
        if column == self.column:
            return self
        return replace(self, column=column, name=self.output_name)

    def spark_column(self, column=None):
        """Spark's function over ``column`` (default: the aggregate's column, or ``lit(1)`` for
        ``count()``), named as groupBy names it unless the aggregate has an alias."""
        if column is None:
            column = F.lit(1) if self.column is None else F.col(self.column)
        result = _FUNCTIONS[self.kind](column)
        return result if self.name is None else result.alias(self.name)

    def check(self, call):
        if self.column is None:
            return
        df = call.df
        data_type = resolve(df, self.column, f"The aggregate {self.output_name}").dataType
        if self.kind in _NUMERIC_INPUT and not isinstance(data_type, _SUMMABLE):
            raise TypeError(f"The aggregate {self.output_name} needs a numeric column; "
                            f"{self.column!r} is {data_type.simpleString()}.")
        if call.beside_custom and self.kind in _NUMERIC_INPUT and isinstance(data_type, _MONTHS):
            raise TypeError(
                f"The aggregate {self.output_name} of a year-month interval cannot run beside a "
                f"custom aggregate (Arrow carries no such interval); aggregate it in its own "
                f"skew_group call, or cast {self.column!r} to its months first.")
        if df.isStreaming and self.kind == "count_distinct":
            raise ValueError(
                f"The aggregate {self.output_name} (count_distinct) cannot run on a stream: "
                f"Spark refuses distinct aggregations in streaming queries, with groupBy too. "
                f"Use an approximate count (approx_count_distinct) in your own groupBy, or "
                f"count distinct values per batch in foreachBatch.")
        if call.stateful and not stateful_type(self.kind, data_type):
            raise TypeError(
                f"The aggregate {self.output_name} of {self.column!r} "
                f"({data_type.simpleString()}) cannot run beside a Python aggregator on a "
                f"stream: there every aggregate merges in Python, which keeps Spark's {self.kind} "
                f"for {_STATEFUL_TYPES_TEXT[self.kind]} only (a decimal's precision and "
                f"overflow, an interval, a collated string are Spark's alone). Cast the column "
                f"(e.g. to double), or compute this aggregate in its own skew_group call.")
        try:
            df.groupBy(*call.keys).agg(self.spark_column()).schema
        except AnalysisException as error:
            need = "an orderable column" if self.kind in ("min", "max") else "another column type"
            raise TypeError(
                f"The aggregate {self.output_name} needs {need}; {self.column!r} is "
                f"{data_type.simpleString()} (Spark: {error.getCondition()}); groupBy refuses "
                f"it too.") from None

    def add_partial(self, spec, i, outputs):
        """The input rows pass on (a copy of the column, or the raw flag for ``count()``);
        Spark's function reduces them inside the partial's task and merges per key."""
        names = spec.names
        if spec.stateful:
            return self._add_stateful(spec, i, outputs)
        if self.column is None:
            column, data_type = F.col(names.raw), T.BooleanType()
        else:
            name, data_type = spec.copy_input(self.column)
            column = F.col(name)
        spec.passes_rows = True
        spec.merges.append(self.spark_column(column).alias(names.out(i)))
        result = F.col(names.out(i))
        if self.kind in _KEEPS_INPUT_TYPE:
            result = from_arrow_safe(result, data_type)
        spec.finishes.append(result.alias(outputs[0]))

    def _add_stateful(self, spec, i, outputs):
        """Reduced per key in the partial (its value and n, ``skewgroup._aggregation.reductions``), merged
        with the stream's other aggregates in its stateful Python merge."""
        names = spec.names
        if self.column is None:
            name, data_type = None, T.LongType()
        else:
            name, data_type = spec.copy_input(self.column, passed=False)
        kind = self.kind
        reduction = Reduction(kind, _arrow_type(data_type, spec), ansi=spec.ansi,
                              name=self.output_name)
        out = names.out(i)
        columns, result = spec.add_state(reduction, out, _state_spark_type(kind, data_type),
                                         _result_spark_type(kind, data_type))
        spec.makers.append(ReducedPartial(reduction, name, columns))
        if self.kind in _KEEPS_INPUT_TYPE:
            result = from_arrow_safe(result, data_type)
        spec.finishes.append(result.alias(outputs[0]))


@dataclass(frozen=True)
class Custom(Aggregate):
    """A user's combinable aggregate: a partial in Python (Arrow), merged by Spark functions
    per field (``agg.custom``)."""

    partial: Callable = field(compare=False)
    merge: Mapping = field(compare=False)
    schema: object = field(compare=False)
    finish: Optional[Callable] = field(default=None, compare=False)
    vectorized: bool = False
    name: Optional[str] = None

    kind = "custom"

    def _default_name(self):
        return "custom"

    @property
    def partial_schema(self):
        """The partial state's StructType (a DDL string parsed by the active session)."""
        schema = self.schema
        if isinstance(schema, str):
            schema = T._parse_datatype_string(schema)
            if not isinstance(schema, T.StructType):
                raise TypeError(f"The 'schema' of a custom aggregate must describe a struct; "
                                f"got {self.schema!r}.")
        missing = [f.name for f in schema.fields if f.name not in self.merge]
        if missing:
            raise ValueError(f"The custom aggregate's 'merge' has no rule for field(s) {missing}.")
        return schema

    @property
    def single_partial_is_result(self):
        return all(not callable(how) and how in IDEMPOTENT_MERGES for how in self.merge.values())

    def outputs(self, builtin_names):
        if self.finish is None:
            return [f.name for f in self.partial_schema.fields]
        return [self.output_name]

    def check(self, call):
        schema = self.partial_schema    # parsed and checked against the merge rules
        if not call.stateful:
            return
        for f in schema.fields:
            how = self.merge[f.name]
            if callable(how):
                raise TypeError(
                    f"The custom aggregate {self.output_name} merges field {f.name!r} with a "
                    f"callable (a Spark Column expression), which cannot run beside a Python "
                    f"aggregator on a stream: there every aggregate merges in Python. Use one "
                    f"of {list(MERGE_FUNCTIONS)} for it, or compute this aggregate in its own "
                    f"skew_group call.")
            if not stateful_type(how, f.dataType):
                raise TypeError(
                    f"The custom aggregate {self.output_name} merges field {f.name!r} "
                    f"({f.dataType.simpleString()}) with {how!r}, which beside a Python "
                    f"aggregator on a stream (a Python merge) keeps Spark's semantics for "
                    f"{_STATEFUL_TYPES_TEXT.get(how, 'other types')} only. Change the field's "
                    f"type (e.g. double), or compute this aggregate in its own skew_group call.")

    def add_partial(self, spec, i, outputs):
        schema = self.partial_schema    # a DDL string is parsed by the JVM: once
        fields = [f.name for f in schema.fields]
        if spec.stateful:
            return self._add_stateful(spec, i, schema)
        names, merged = [], {}
        for f in schema.fields:
            name = spec.names.field(i, f.name)
            spec.fields.append(T.StructField(name, f.dataType, True))
            names.append(name)
            how = self.merge[f.name]
            if callable(how):
                column = how(F.col(name))
            elif how in ("first", "last"):   # the built-ins' passed rows hold nulls here
                column = getattr(F, how)(name, ignorenulls=True)
            else:
                column = getattr(F, how)(name)
            spec.merges.append(column.alias(name))
            merged[f.name] = F.col(name)
        spec.makers.append(CustomPartial(self, names, fields))
        if self.finish is None:
            spec.finishes += [merged[f].alias(f) for f in merged]
        else:
            spec.finishes.append(self.finish(merged).alias(self.output_name))

    def _add_stateful(self, spec, i, schema):
        """The user's partial per key, each field's partial lifted into its merge rule's state
        (``skewgroup._aggregation.reductions``), merged in the stream's stateful Python merge."""
        fields = [f.name for f in schema.fields]
        partial_names, lifts, merged = [], [], {}
        for f in schema.fields:
            how = self.merge[f.name]
            reduction = Reduction(how, _arrow_type(f.dataType, spec), ansi=spec.ansi,
                                  name=f"{self.output_name}.{f.name}")
            out = spec.names.field(i, f.name)
            columns, result = spec.add_state(reduction, out, _state_spark_type(how, f.dataType),
                                             _result_spark_type(how, f.dataType))
            partial_names.append(out)
            lifts.append((reduction, columns))
            merged[f.name] = result
        spec.makers.append(CustomPartial(self, partial_names, fields, lifts,
                                         [_arrow_type(f.dataType, spec) for f in schema.fields]))
        if self.finish is None:
            spec.finishes += [merged[f].alias(f) for f in merged]
        else:
            spec.finishes.append(self.finish(merged).alias(self.output_name))


@dataclass(frozen=True)
class Aggregator(Aggregate):
    """A Python aggregator (Spark's Aggregator or Beam's CombineFn protocol): its partial one
    encoded buffer per key, its merge and finish Python (``agg.aggregator``)."""

    obj: object = field(compare=False)
    columns: tuple = ()
    output_type: object = field(default=None, compare=False)
    name: Optional[str] = None
    protocol: str = "Spark Aggregator"    # or "Beam CombineFn": detected once, by agg

    kind = "aggregator"
    merged_in_python = True

    def _default_name(self):     # as pyspark's udaf(obj)(columns) names its column
        return f"{type(self.obj).__name__}({', '.join(self.columns)})"

    def resolved(self, df):
        columns = tuple(reference(df, c, f"The aggregator {self.output_name}")
                        for c in self.columns)
        if columns == self.columns:
            return self
        return replace(self, columns=columns, name=self.output_name)

    def check(self, call):
        for column in self.columns:
            resolve(call.df, column, f"The aggregator {self.output_name}")

    def add_partial(self, spec, i, outputs):
        """One encoded buffer per key (``reduce_groups``), merged and finished in Python on
        whichever merge path the call takes (``_merge``)."""
        columns = [spec.copy_input(column, passed=False)[0] for column in self.columns]
        output_type = spark_type(self.output_type)
        buffer_type = None
        if self.protocol == "Spark Aggregator":     # a declared buffer schema
            buffer_type = to_arrow_type(spark_type(self.obj.bufferSchema))
        adapter = adapt(self.obj, columns, buffer_type=buffer_type,
                        output_type=to_arrow_type(output_type), name=self.output_name,
                        protocol=self.protocol)
        spec.add_buffer(BufferState(adapter, spec.names.field(i, "buffer")), output_type,
                        self.output_name)


@dataclass(frozen=True)
class SparkFunction(Aggregate):
    """Any aggregate Column of Spark's (``F.stddev("x")``, ``F.kll_sketch_agg_double("x")``, an
    expression, an alias), given to ``skew_group`` as ``groupBy().agg()`` takes it.

    Alone or beside other Spark functions, Spark's groupBy runs it. Beside Python code in a
    batch, Spark's groupBy of the input runs it and its result is joined on the keys
    (``_merge``). On a stream beside Python code, it merges in the stateful Python step with
    Spark's semantics (``skewgroup._aggregation.spark_functions``), read as a call by
    ``_function_calls.read_call``; a function that step cannot keep is refused before the query.
    """

    column: object = field(compare=False)
    name: Optional[str] = None
    read: object = field(default=None, compare=False)    # a stream's FunctionCall, or the error

    builtin = True
    single_partial_is_result = True    # it is not in the partial: it never stops that path
    kind = "spark function"

    def _default_name(self):
        return column_text(self.column)

    def outputs(self, builtin_names):
        return [next(builtin_names)]

    def spark_column(self, column=None):
        return self.column if self.name is None else self.column.alias(self.name)

    def resolved(self, df):
        if not df.isStreaming:
            return self
        try:
            read = read_call(df, self.column)
        except UnreadableCall as error:
            read = error
        return replace(self, read=read)

    def check(self, call):
        try:
            call.df.groupBy(*call.keys).agg(self.spark_column()).schema
        except AnalysisException as error:
            raise TypeError(f"The aggregate {self.output_name} is refused by Spark's groupBy "
                            f"too: {error.getCondition()}: {_first_line(error)}") from None
        if call.stateful:
            builtin, _, _ = self._stateful_parts(call.df)
            if builtin is not None:
                builtin.check(call)

    def _stateful_parts(self, df):
        """(the Builtin it is, or None; else its reduction and its inputs as (Column, type)
        pairs): how a stream's stateful Python step keeps it, or a ValueError saying what to
        write instead."""
        read = self.read
        if isinstance(read, UnreadableCall):
            raise ValueError(self._refusal(f"skew_group cannot read it as one function over "
                                           f"columns and literals: {read}"))
        if read.counts_rows:
            return Builtin("count", name=self.output_name), None, ()
        if read.function in _AS_BUILTIN and len(read.inputs) == 1 and not read.params \
                and _is_name(read.input_texts[0]):
            return Builtin(_AS_BUILTIN[read.function], read.input_texts[0],
                           name=self.output_name), None, ()
        if read.function not in FUNCTIONS:
            raise ValueError(self._refusal(f"that step has no merge of {read.function}'s partial "
                                           f"state with Spark's semantics"))
        # Spark casts a moment's input to a double (ImplicitCastInputTypes): the same cast here.
        inputs = [c.cast("double") if read.function in _DOUBLE_INPUT else c for c in read.inputs]
        types = [df.select(c).schema.fields[0].dataType for c in inputs]
        for data_type in types:
            if isinstance(data_type, T.StringType) and getattr(
                    data_type, "collation", "UTF8_BINARY") != "UTF8_BINARY":
                raise ValueError(self._refusal(
                    f"its input is a string under {data_type.collation}, whose order and "
                    f"equality only Spark keeps"))
            if not isinstance(data_type, _ARROW_SAFE_INPUT):
                raise ValueError(self._refusal(
                    f"its input is {data_type.simpleString()}, and that step takes numbers "
                    f"but decimals, strings, binary, booleans, dates and timestamps"))
        try:
            reduction = make_reduction(
                read.function, [to_arrow_type(t, timezone=_timezone(df)) for t in types],
                read.params, ansi=_ansi(df), name=self.output_name)
        except UnsupportedFunction as error:
            raise ValueError(self._refusal(str(error))) from None
        return None, reduction, tuple(zip(inputs, types))

    def _refusal(self, why):
        return (f"The aggregate {self.output_name} cannot run beside Python code on a stream: "
                f"there every aggregate merges in skew_group's stateful Python step, and {why}. "
                f"That step keeps Spark's semantics for: {', '.join(sorted(FUNCTIONS))}. "
                f"Write a function of column names and literals (compute an expression with "
                f"withColumn first; apply a function of an aggregate, such as "
                f"hll_sketch_estimate, to the result column after skew_group), use one of those "
                f"(e.g. kll_sketch_agg_double with kll_sketch_get_quantile_double for a "
                f"percentile, hll_sketch_agg with hll_sketch_estimate for a distinct count), "
                f"or compute this aggregate in its own groupBy.")

    def add_partial(self, spec, i, outputs):
        if not spec.stateful:
            # Spark's groupBy of the input runs it, joined on the keys after the merge.
            spec.joined.append(self.spark_column().alias(spec.names.out(i)))
            spec.finishes.append(F.col(spec.names.out(i)).alias(outputs[0]))
            return
        builtin, reduction, inputs = self._stateful_parts(spec.df)
        if builtin is not None:
            return builtin._add_stateful(spec, i, outputs)
        names = [spec.copy_input(column, passed=False, data_type=data_type)[0]
                 for column, data_type in inputs]
        result_type = spec.reference_type(outputs[0])
        columns, result = spec.add_function_state(reduction, spec.names.out(i), result_type)
        spec.makers.append(FunctionPartial(reduction, names, columns))
        spec.finishes.append(result.alias(outputs[0]))


# Spark functions the stream's stateful step keeps as the built-in of the same meaning.
_AS_BUILTIN = {"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "mean",
               "mean": "mean"}
_DOUBLE_INPUT = ("stddev", "std", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
                 "skewness", "kurtosis")
_ARROW_SAFE_INPUT = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType,
                     T.FloatType, T.DoubleType, T.StringType, T.BinaryType, T.DateType,
                     T.TimestampType, T.TimestampNTZType)


def _is_name(text):
    return not any(ch in text for ch in "()")


def _first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else ""


def _ansi(df):
    return df.sparkSession.conf.get("spark.sql.ansi.enabled", "true") == "true"


def _timezone(df):
    return df.sparkSession.conf.get("spark.sql.session.timeZone")


# What a stream's stateful Python merge reduces with Spark's semantics (``skewgroup._aggregation.reductions``).
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_NUMBERS = _INTEGRAL + (T.FloatType, T.DoubleType)
_ORDERED = _NUMBERS + (T.StringType, T.BinaryType, T.BooleanType, T.DateType, T.TimestampType,
                       T.TimestampNTZType)
_STATEFUL_TYPES_TEXT = {
    "sum": "byte, short, int, long, float and double", "mean": "byte, short, int, long, float "
    "and double", "min": "numbers but decimals, strings, binary, booleans, dates and timestamps",
    "bool_and": "booleans", "bool_or": "booleans"}
_STATEFUL_TYPES_TEXT["max"] = _STATEFUL_TYPES_TEXT["min"]


def stateful_type(kind, data_type):
    """Whether ``kind`` (a built-in or a custom merge rule) over Spark ``data_type`` keeps
    Spark's semantics in a stream's stateful Python merge."""
    if kind == "count":
        return True
    if kind in ("first", "last"):        # a year-month interval reaches Python as its months
        return not isinstance(data_type, T.YearMonthIntervalType)
    if kind in ("sum", "mean"):
        return isinstance(data_type, _NUMBERS)
    if kind in ("bool_and", "bool_or"):
        return isinstance(data_type, T.BooleanType)
    if isinstance(data_type, T.StringType):
        return getattr(data_type, "collation", "UTF8_BINARY") == "UTF8_BINARY"
    return isinstance(data_type, _ORDERED)


def _state_spark_type(kind, data_type):
    """The Spark type of a reduction's value column (None for count, which keeps n only)."""
    if kind == "count":
        return None
    if kind == "mean" or (kind == "sum" and not isinstance(data_type, _INTEGRAL)):
        return T.DoubleType()
    return T.LongType() if kind == "sum" else data_type


def _result_spark_type(kind, data_type):
    """Spark's result type of ``kind`` over ``data_type``: groupBy's."""
    return T.LongType() if kind == "count" else _state_spark_type(kind, data_type)


def _arrow_type(data_type, spec):
    return to_arrow_type(data_type, timezone=spec.timezone)


def spark_type(declared):
    """A DDL string or pyspark DataType as a DataType (parsed by the active session)."""
    if isinstance(declared, str):
        return T._parse_datatype_string(declared)
    return declared


@dataclass(frozen=True)
class Call:
    """One ``skew_group`` call, checked: its DataFrame, keys, aggregates and options, and (with
    anything but built-ins) the partial stage's layout. Built by :func:`build_call` only."""

    df: object               # the input DataFrame
    keys: tuple              # the grouping columns, as ``F.col`` resolves them in ``df``
    key_fields: tuple        # their StructFields
    aggregates: tuple
    workers: int
    config: object           # the routing strategy's config
    seed: int
    output_mode: str
    names: object            # ``_columns.Internal``: the plan's own column names
    partial: Optional[PartialSpec] = None   # None with built-ins alone

    @property
    def builtins_only(self):
        """Spark's own functions alone: Spark's groupBy runs them whole."""
        return all(a.builtin for a in self.aggregates)

    @property
    def beside_custom(self):
        """A custom aggregate or an aggregator is in the call."""
        return not self.builtins_only

    @property
    def merged_in_python(self):
        """An aggregator is in the call: a Python merge (auto counts the keys for it)."""
        return any(a.merged_in_python for a in self.aggregates)

    @property
    def spark_functions_beside_python(self):
        """A Spark aggregate Column beside a custom aggregate or an aggregator."""
        return self.beside_custom and any(isinstance(a, SparkFunction) for a in self.aggregates)

    @property
    def stateful(self):
        """A stream with an aggregator, or with a Spark aggregate Column beside a custom
        aggregate: every aggregate merges in its stateful Python step (Spark cannot join two
        streaming aggregations)."""
        return self.df.isStreaming and (self.merged_in_python
                                        or self.spark_functions_beside_python)

    @property
    def python_alone(self):
        """Every aggregate of the partial is an aggregator: nothing for Spark's aggregation to
        merge (a Spark aggregate Column of a batch is joined after, ``_merge``)."""
        return all(a.merged_in_python or isinstance(a, SparkFunction) for a in self.aggregates)

    @property
    def one_row_per_key(self):
        """With each key's rows in one partition, its partial is its result."""
        return (self.partial is not None and not self.partial.passes_rows
                and all(a.single_partial_is_result for a in self.aggregates))

    @property
    def keys_merged_apart(self):
        """groupBy may take as one key two keys a hash repartition puts apart
        (``_checks.merged_apart``)."""
        return merged_apart(self.key_fields)


def build_call(df, keys, aggregates, *, workers, config, seed, output_mode):
    """The :class:`Call` of ``skew_group(keys, *aggregates, ...)`` on ``df``, after every check
    (each raised before any job): the keys' types, each aggregate's own, and no two results
    with one name. ``workers`` None is ``spark.sql.shuffle.partitions``."""
    keys = tuple(reference(df, k, "The 'keys' parameter") for k in keys)
    key_fields = tuple(check_keys(df, keys))
    aggregates = tuple(a.resolved(df) for a in aggregates)
    if workers is None:
        workers = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    call = Call(df, keys, key_fields, aggregates, workers, config, seed, output_mode,
                internal(df.columns))
    for aggregate in aggregates:
        aggregate.check(call)
    builtins = [a for a in aggregates if a.builtin]
    # groupBy's own output names and types (analysis, no job); count(1) stands in for none.
    reference_schema = df.groupBy(*keys).agg(*([a.spark_column() for a in builtins]
                                               or [F.count(F.lit(1))])).schema
    if not builtins:
        reference_schema = T.StructType(reference_schema.fields[:len(keys)])
    names = iter(reference_schema.fieldNames()[len(keys):])
    outputs, seen = [], set()
    for aggregate in aggregates:
        produced = aggregate.outputs(names)
        for name in produced:
            if name in seen:
                raise ValueError(f"Two aggregates produce the column {name!r}; use .alias().")
            seen.add(name)
        outputs.append(produced)
    if call.builtins_only:
        return call
    return replace(call, partial=PartialSpec(call, reference_schema, outputs))
