"""What an aggregate is, in one class per kind: its names, its checks and its part.

Each kind (``BuiltinAggregate``, ``CustomAggregate``, ``PythonAggregate``,
``SparkFunctionAggregate``) answers everything the Spark layer asks of an aggregate: its output
names (groupBy's), its checks and their error texts, and its ``_call.Part``: the columns the
partial stage reads and writes, its executor steps (``_aggregation.steps``), its merge (a Spark
expression, or a buffer merged in Python), its state in a stream's stateful merge, and its
finish. Which aggregate runs where, and why, is docs/plans.md ("Which aggregate runs where").
The call that holds them, and the questions it answers from their flags, is ``_call``.
"""
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

from skewgroup._aggregation.reductions import Reduction
from skewgroup._aggregation.spark_functions import FUNCTIONS, UnsupportedFunction, make_reduction
from skewgroup._aggregation.steps import BufferStep, CustomStep, FunctionStep, ReductionStep
from skewgroup._aggregation.stream.states import BufferState, ReducedState
from skewgroup.aggregators import adapt
from skewgroup.spark._call import Part, arrow_safe_type, state_part
from skewgroup.spark._checks import MONTH_INTERVAL, reference, resolve
from skewgroup.spark._columns import from_arrow_safe
from skewgroup.spark._function_calls import (UnreadableCall, column_text, is_name,
                                              read_aggregation)
from skewgroup.spark._stateful_types import (INTEGRAL, STATEFUL_TYPES_TEXT, result_spark_type,
                                             state_spark_type, stateful_type)

# Built-ins: Spark's function and groupBy's default output name of each.
_FUNCTIONS = {"count": F.count, "count_distinct": F.count_distinct, "sum": F.sum, "min": F.min,
              "max": F.max, "mean": F.avg}
_SPARK_NAMES = {"mean": "avg({})", "count_distinct": "count(DISTINCT {})"}
_NUMERIC_INPUT = ("sum", "mean")     # refuse other column types with a message of our own
_KEEPS_INPUT_TYPE = ("min", "max")   # the result has the input's type (a month interval back)

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
    * ``resolved(df)``, ``check(scope)``: its columns as Spark resolves them; its type rules
      (``scope``: a ``_call.Scope``), raised before any job;
    * ``spark_column()``: Spark's own function (built-ins);
    * ``part(scope, i, outputs, inputs_before)``: its ``_call.Part`` as the call's ``i``-th
      aggregate (its input copies numbered from ``inputs_before``): its partial columns and
      executor step, its merge (or Python buffer, or stream state) and finish;
    * ``run_by_spark``, ``merged_in_python``, ``joined_after_merge``,
      ``single_partial_is_result``: read by ``_call.Call`` only.
    """

    run_by_spark = False         # Spark runs it whole: its own partial and merge
    joined_after_merge = False   # a batch's Spark aggregate Column beside Python code
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

    def check(self, scope):
        """Raise before any job if the aggregate cannot run in ``scope``."""

    def resolved(self, df):
        """The aggregate with its column names as ``F.col`` resolves them in ``df``
        (``_checks.reference``: a column with a dot in its own name backquoted); its output
        name stays the one the given names make, as groupBy names its columns."""
        return self

    def spark_column(self, column=None):
        raise TypeError(f"{self.output_name} has no Spark function of its own.")


@dataclass(frozen=True)
class BuiltinAggregate(Aggregate):
    """count, sum, min, max, mean (avg), count_distinct: Spark's own functions."""

    kind: str
    column: Optional[str] = None
    name: Optional[str] = None

    run_by_spark = True

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

    def check(self, scope):
        if self.column is None:
            return
        df = scope.df
        data_type = resolve(df, self.column, f"The aggregate {self.output_name}").dataType
        if self.kind in _NUMERIC_INPUT and not isinstance(data_type, _SUMMABLE):
            raise TypeError(f"The aggregate {self.output_name} needs a numeric column; "
                            f"{self.column!r} is {data_type.simpleString()}.")
        if (scope.has_partial and self.kind in _NUMERIC_INPUT
                and isinstance(data_type, MONTH_INTERVAL)):
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
        if scope.stateful and not stateful_type(self.kind, data_type):
            raise TypeError(
                f"The aggregate {self.output_name} of {self.column!r} "
                f"({data_type.simpleString()}) cannot run beside a Python aggregator on a "
                f"stream: there every aggregate merges in Python, which keeps Spark's {self.kind} "
                f"for {STATEFUL_TYPES_TEXT[self.kind]} only (a decimal's precision and "
                f"overflow, an interval, a collated string are Spark's alone). Cast the column "
                f"(e.g. to double), or compute this aggregate in its own skew_group call.")
        try:
            df.groupBy(*scope.keys).agg(self.spark_column()).schema
        except AnalysisException as error:
            need = "an orderable column" if self.kind in ("min", "max") else "another column type"
            raise TypeError(
                f"The aggregate {self.output_name} needs {need}; {self.column!r} is "
                f"{data_type.simpleString()} (Spark: {error.getCondition()}); groupBy refuses "
                f"it too.") from None

    def part(self, scope, i, outputs, inputs_before):
        """The input rows pass on (a copy of the column, or the raw flag for ``count()``);
        Spark's function reduces them inside the partial's task and merges per key."""
        if scope.stateful:
            return self.stateful_part(scope, i, outputs, inputs_before)
        names = scope.names
        added, spark_inputs = (), ()
        if self.column is None:
            column, data_type = F.col(names.raw), T.BooleanType()
        else:
            name, copy, data_type = scope.input_copy(inputs_before, self.column)
            added = ((name, copy),)
            spark_inputs = (T.StructField(name, arrow_safe_type(data_type), True),)
            column = F.col(name)
        result = F.col(names.out(i))
        if self.kind in _KEEPS_INPUT_TYPE:
            result = from_arrow_safe(result, data_type)
        return Part(added_columns=added, spark_inputs=spark_inputs, passes_rows=True,
                    merges=(self.spark_column(column).alias(names.out(i)),),
                    finishes=(result.alias(outputs[0]),))

    def stateful_part(self, scope, i, outputs, inputs_before):
        """Reduced per key in the partial (its value and n, ``_aggregation.reductions``),
        merged with the stream's other aggregates in its stateful Python merge."""
        part, result = self.stateful_value(scope, scope.names.out(i), inputs_before)
        return part + Part(finishes=(result.alias(outputs[0]),))

    def stateful_value(self, scope, out, inputs_before):
        """(Its part in a stream's stateful merge, its state going out as column ``out``,
        without a finish; its value after the merge, a Column)."""
        added, name, data_type = (), None, T.LongType()
        if self.column is not None:
            name, copy, data_type = scope.input_copy(inputs_before, self.column)
            added = ((name, copy),)
        # The copy reaches Arrow arrow-safe (a year-month interval as its months): only a
        # count takes such a type here (stateful_type).
        reduction = Reduction(self.kind, to_arrow_type(arrow_safe_type(data_type),
                                                       timezone=scope.timezone),
                              ansi=scope.ansi, name=self.output_name)
        state, columns, result = _reduced(reduction, out, self.kind, data_type)
        if self.kind in _KEEPS_INPUT_TYPE:
            result = from_arrow_safe(result, data_type)
        return state + Part(added_columns=added,
                            steps=(ReductionStep(reduction, name, columns),)), result


def _reduced(reduction, out, kind, data_type):
    """(The part of ``reduction``'s state in a stream's stateful merge, its result going out as
    column ``out``; the state's columns; the result as a Column after the merge)."""
    state_type = state_spark_type(kind, data_type)
    # The value (unless a count) and n, which is never null; a value is null where no input
    # was (a date's, a string's: only a number's is filled, ``_aggregation.reductions``).
    columns = ([] if state_type is None else [out + "__v"]) + [out + "__n"]
    types = ([] if state_type is None else [state_type]) + [T.LongType()]
    # A count is never null, as groupBy's; every other reduction may be.
    state, result = state_part(ReducedState(reduction, columns, out), out,
                               result_spark_type(kind, data_type), nullable=kind != "count")
    fields = tuple(T.StructField(c, t, not c.endswith("__n")) for c, t in zip(columns, types))
    return state + Part(fields=fields), tuple(columns), result


@dataclass(frozen=True)
class CustomAggregate(Aggregate):
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

    def check(self, scope):
        schema = self.partial_schema    # parsed and checked against the merge rules
        if not scope.stateful:
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
                    f"{STATEFUL_TYPES_TEXT.get(how, 'other types')} only. Change the field's "
                    f"type (e.g. double), or compute this aggregate in its own skew_group call.")

    def part(self, scope, i, outputs, inputs_before):
        schema = self.partial_schema    # a DDL string is parsed by the JVM: once
        if scope.stateful:
            return self._stateful_part(scope, i, schema)
        field_names = [f.name for f in schema.fields]
        partial_fields, merges, merged = [], [], {}
        for f in schema.fields:
            name = scope.names.field(i, f.name)
            partial_fields.append(T.StructField(name, f.dataType, True))
            how = self.merge[f.name]
            if callable(how):
                column = how(F.col(name))
            elif how in ("first", "last"):   # the built-ins' passed rows hold nulls here
                column = getattr(F, how)(name, ignorenulls=True)
            else:
                column = getattr(F, how)(name)
            merges.append(column.alias(name))
            merged[f.name] = F.col(name)
        step = CustomStep(self.partial, self.vectorized, [f.name for f in partial_fields],
                          field_names)
        return Part(fields=tuple(partial_fields), steps=(step,), merges=tuple(merges),
                    finishes=self._finishes(merged), reads_rows=True)

    def _finishes(self, merged):
        if self.finish is None:
            return tuple(merged[f].alias(f) for f in merged)
        return (self.finish(merged).alias(self.output_name),)

    def _stateful_part(self, scope, i, schema):
        """The user's partial per key, each field's partial lifted into its merge rule's state
        (``_aggregation.reductions``), merged in the stream's stateful Python merge."""
        total, partial_names, field_states, merged = Part(), [], [], {}
        for f in schema.fields:
            how = self.merge[f.name]
            reduction = Reduction(how, to_arrow_type(f.dataType, timezone=scope.timezone),
                                  ansi=scope.ansi, name=f"{self.output_name}.{f.name}")
            out = scope.names.field(i, f.name)
            state, columns, result = _reduced(reduction, out, how, f.dataType)
            total += state
            partial_names.append(out)
            field_states.append((reduction, columns))
            merged[f.name] = result
        step = CustomStep(self.partial, self.vectorized, partial_names,
                          [f.name for f in schema.fields], field_states,
                          [to_arrow_type(f.dataType, timezone=scope.timezone)
                           for f in schema.fields])
        return total + Part(steps=(step,), finishes=self._finishes(merged), reads_rows=True)


@dataclass(frozen=True)
class PythonAggregate(Aggregate):
    """A Python aggregator (Spark's Aggregator or Beam's CombineFn protocol): its partial one
    buffer per key in an Arrow column of its declared type, its merge and finish Python
    (``agg.aggregator``)."""

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

    def check(self, scope):
        for column in self.columns:
            resolve(scope.df, column, f"The aggregator {self.output_name}")

    def part(self, scope, i, outputs, inputs_before):
        """One buffer per key (``reduce_arrow``) in a column of its declared type (a binary
        pickle for a CombineFn that declares none), merged and finished in Python on whichever
        merge path the call takes (``_merge``)."""
        added = tuple(scope.input_copy(inputs_before + j, column)[:2]
                      for j, column in enumerate(self.columns))
        output_type = spark_type(self.output_type)
        buffer_type = None
        if self.protocol == "Spark Aggregator":     # a declared buffer schema
            buffer_type = to_arrow_type(spark_type(self.obj.bufferSchema))
        adapter = adapt(self.obj, [name for name, _ in added], buffer_type=buffer_type,
                        output_type=to_arrow_type(output_type), name=self.output_name,
                        protocol=self.protocol)
        wire_type = from_arrow_type(adapter.wire_type)
        buffer = scope.names.field(i, "buffer")
        state = BufferState(adapter, buffer)
        result, states = F.col(buffer), Part()
        if scope.stateful:
            states, result = state_part(state, buffer, output_type)
        return states + Part(
            added_columns=added, fields=(T.StructField(buffer, wire_type, True),),
            steps=(BufferStep(adapter, buffer),), merges=(F.collect_list(buffer).alias(buffer),),
            finishes=(result.alias(self.output_name),), buffers=(state,),
            buffer_fields=(T.StructField(buffer, output_type, True),))


@dataclass(frozen=True)
class SparkFunctionAggregate(Aggregate):
    """Any aggregate Column of Spark's (``F.stddev("x")``, ``F.kll_sketch_agg_double("x")``, an
    expression inside or around it, an alias), given to ``skew_group`` as ``groupBy().agg()``
    takes it.

    Alone or beside other Spark functions, Spark's groupBy runs it. Beside Python code in a
    batch, Spark's groupBy of the input runs it and its result is joined on the keys
    (``_merge``). On a stream beside Python code, it is read as its aggregate calls and the
    scalar expression around them (``_function_calls.read_aggregation``): each call's inputs
    are evaluated as columns before the partial, each call merges in the stateful Python step
    with Spark's semantics (``skewgroup._aggregation.spark_functions``), and the expression
    around them is applied in Spark after the merge. A call that step cannot keep is refused
    before the query.
    """

    column: object = field(compare=False)
    name: Optional[str] = None
    read: object = field(default=None, compare=False)   # a stream's Aggregation, or the error

    run_by_spark = True
    joined_after_merge = True
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
            read = read_aggregation(df, self.column)
        except UnreadableCall as error:
            read = error
        return replace(self, read=read)

    def check(self, scope):
        try:
            expected = scope.df.groupBy(*scope.keys).agg(self.spark_column()).schema
        except AnalysisException as error:
            raise TypeError(f"The aggregate {self.output_name} is refused by Spark's groupBy "
                            f"too: {error.getCondition()}: {_first_line(error)}") from None
        if not scope.stateful:
            return
        calls = self._stateful_calls(scope)
        for call in calls:
            if call.as_builtin is not None:
                call.as_builtin.check(scope)
        if self.read.around is not None:
            # The expression around the calls, over their merged values, must give groupBy's
            # type (analysis of the calls' groupBy, no job).
            names = [f"{scope.names.prefix}value{j}" for j in range(len(calls))]
            merged = scope.df.groupBy(*scope.keys).agg(
                *[c.read.column().alias(n) for c, n in zip(calls, names)])
            got = merged.select(self.read.column([F.col(n) for n in names])).schema
            if got.fields[0].dataType != expected.fields[-1].dataType:
                raise ValueError(self._refusal(
                    f"applied after the merge, the expression around its aggregates gives "
                    f"{got.fields[0].dataType.simpleString()}, not groupBy's "
                    f"{expected.fields[-1].dataType.simpleString()}"))

    def _stateful_calls(self, scope):
        """Its calls as the stream's stateful Python step keeps them (``_StatefulCall``), or a
        ValueError saying what to write instead."""
        read = self.read
        if isinstance(read, UnreadableCall):
            raise ValueError(self._refusal(f"skew_group cannot read it as aggregate functions "
                                           f"over columns and literals: {read}"))
        return [self._stateful_call(scope, call) for call in read.calls]

    def _stateful_call(self, scope, call):
        if call.counts_rows:
            return _StatefulCall(call, BuiltinAggregate("count", name=self.output_name))
        if call.function in _AS_BUILTIN and len(call.inputs) == 1 and not call.params \
                and not call.distinct and is_name(call.input_texts[0]):
            return _StatefulCall(call, BuiltinAggregate(
                _AS_BUILTIN[call.function], call.input_texts[0], name=self.output_name))
        if call.function in _REFUSED:
            raise ValueError(self._refusal(_REFUSED[call.function]))
        function, after = call.function, None
        if call.distinct:
            if len(call.inputs) != 1:
                raise ValueError(self._refusal(
                    f"{call.function}(DISTINCT ...) of {len(call.inputs)} columns has no merge "
                    f"there (one column's distinct values do: count_distinct(x) or "
                    f"sum_distinct(x))"))
            # Each key's distinct values are its state (collect_set's, which compares as
            # Spark's DISTINCT does: nulls left out, one NaN, -0.0 as 0.0); count or sum
            # them after the merge.
            function, after = "collect_set", _DISTINCT_AFTER[call.function]
        if function not in FUNCTIONS:
            raise ValueError(self._refusal(f"that step has no merge of {function}'s partial "
                                           f"state with Spark's semantics"))
        # Spark casts a moment's input to a double (ImplicitCastInputTypes): the same cast here.
        inputs = [c.cast("double") if function in _DOUBLE_INPUT else c for c in call.inputs]
        types = [scope.df.select(c).schema.fields[0].dataType for c in inputs]
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
                function, [to_arrow_type(t, timezone=scope.timezone) for t in types],
                call.params, ansi=scope.ansi, name=self.output_name)
        except UnsupportedFunction as error:
            raise ValueError(self._refusal(str(error))) from None
        state_call = F.collect_set(*inputs) if call.distinct else call.column()
        # groupBy's type of the call (of the distinct values' set): its merged value's.
        result_type = scope.df.groupBy(*scope.keys).agg(state_call).schema.fields[-1].dataType
        return _StatefulCall(call, None, reduction, tuple(zip(inputs, types)), result_type,
                             after)

    def _refusal(self, why):
        return (f"The aggregate {self.output_name} cannot run beside Python code on a stream: "
                f"there every aggregate merges in skew_group's stateful Python step, and {why}. "
                f"That step keeps Spark's semantics for: {', '.join(sorted(FUNCTIONS))}, "
                f"count(DISTINCT x) and sum(DISTINCT x), with expressions inside them and "
                f"scalar functions around them. Use one of those (e.g. kll_sketch_agg_double "
                f"with kll_sketch_get_quantile_double for a percentile, hll_sketch_agg with "
                f"hll_sketch_estimate for a distinct count), or compute this aggregate in its "
                f"own groupBy.")

    def part(self, scope, i, outputs, inputs_before):
        out = scope.names.out(i)
        if not scope.stateful:
            # Spark's groupBy of the input runs it, joined on the keys after the merge.
            return Part(joined=(self.spark_column().alias(out),),
                        finishes=(F.col(out).alias(outputs[0]),))
        calls = self._stateful_calls(scope)
        total, values = Part(), []
        for j, call in enumerate(calls):
            call_out = out if len(calls) == 1 else f"{out}_{j}"
            part, value = call.stateful_value(scope, call_out,
                                              inputs_before + len(total.added_columns))
            total += part
            values.append(value)
        return total + Part(finishes=(self.read.column(values).alias(outputs[0]),))


@dataclass(frozen=True)
class _StatefulCall:
    """One aggregate call of a Spark Column as a stream's stateful step keeps it: as the
    BuiltinAggregate it is, or as its reduction over its inputs ((Column, type) pairs), its merged
    value of ``result_type`` turned into the call's by ``after`` (None: it is)."""

    read: object
    as_builtin: Optional[BuiltinAggregate] = None
    reduction: object = None
    inputs: tuple = ()
    result_type: object = None
    after: Optional[Callable] = None

    def stateful_value(self, scope, out, inputs_before):
        """(Its part in the stateful merge, its state going out as column ``out``; its value
        after the merge, a Column)."""
        if self.as_builtin is not None:
            return self.as_builtin.stateful_value(scope, out, inputs_before)
        added = [scope.input_copy(inputs_before + j, column, data_type)[:2]
                 for j, (column, data_type) in enumerate(self.inputs)]
        reduction = self.reduction
        types = [from_arrow_type(t) for t in reduction.state_types]
        columns = [f"{out}__{j}" for j in range(len(types))]
        states, result = state_part(ReducedState(reduction, columns, out), out,
                                    self.result_type)
        if self.after is not None:
            result = self.after(result, self.inputs[0][1])
        return states + Part(
            added_columns=tuple(added),
            fields=tuple(T.StructField(c, t, True) for c, t in zip(columns, types)),
            steps=(FunctionStep(reduction, [name for name, _ in added], columns),)), result


def _sum_of_set(values, data_type):
    """Spark's sum of ``values`` (an array of one key's distinct values of ``data_type``):
    null for none; a long for integers, a double for floats, added as Spark's sum adds (an
    overflow an error under ANSI)."""
    result_type = T.LongType() if isinstance(data_type, INTEGRAL) else T.DoubleType()
    total = F.aggregate(values, F.lit(0).cast(result_type),
                        lambda acc, v: acc + v.cast(result_type))
    return F.when(F.size(values) > 0, total)


# count(DISTINCT x), sum(DISTINCT x): from each key's distinct values, after the merge.
_DISTINCT_AFTER = {"count": lambda values, _: F.size(values).cast("long"),
                   "sum": _sum_of_set}

# Spark functions whose state has no exact merge in the stateful step, and what to write.
_REFUSED = {
    "approx_count_distinct": "approx_count_distinct's state (Spark's own HyperLogLog++) has no "
    "merge there; write hll_sketch_estimate(hll_sketch_agg(x)), Spark's DataSketches HLL, "
    "which merges there, or count_distinct(x) for the exact count",
    "percentile_approx": "percentile_approx's state (Spark's own quantile summary) has no "
    "merge there; write kll_sketch_get_quantile_double(kll_sketch_agg_double(x), p), Spark's "
    "DataSketches KLL, which merges there",
}
_REFUSED["approx_percentile"] = _REFUSED["percentile_approx"]


# Spark functions the stream's stateful step keeps as the built-in of the same meaning.
_AS_BUILTIN = {"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "mean",
               "mean": "mean"}
_DOUBLE_INPUT = ("stddev", "std", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
                 "skewness", "kurtosis")
_ARROW_SAFE_INPUT = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType,
                     T.FloatType, T.DoubleType, T.StringType, T.BinaryType, T.DateType,
                     T.TimestampType, T.TimestampNTZType)


def _first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else ""


def spark_type(declared):
    """A DDL string or pyspark DataType as a DataType (parsed by the active session)."""
    if isinstance(declared, str):
        return T._parse_datatype_string(declared)
    return declared
