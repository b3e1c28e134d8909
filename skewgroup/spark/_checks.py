"""Checks of skew_group's input, on the driver, before any query starts: every error names the
parameter or column and the value received. Names resolve as Spark resolves them, by Spark's
own analysis (no job)."""
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

_KEY_TYPES = (T.NumericType, T.StringType, T.BinaryType, T.BooleanType, T.DateType,
              T.TimestampType, T.TimestampNTZType, T.DayTimeIntervalType)
# The partial stage hands a year-month interval to Arrow as its months (``_columns``), which
# groups and orders as the interval does: a key, or min/max/count of it, but not a sum.
_MONTHS = (T.YearMonthIntervalType,)
_SUMMABLE = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
             T.DecimalType, T.DayTimeIntervalType, T.YearMonthIntervalType)


def resolve(df, name, what):
    """The StructField Spark resolves ``name`` to in ``df`` (case as spark.sql.caseSensitive
    says, backquotes, nested fields), or a ValueError naming ``what`` and the columns."""
    try:
        return df.select(F.col(name)).schema.fields[0]
    except AnalysisException as error:
        raise ValueError(
            f"{what} names column {name!r}, which the DataFrame does not have "
            f"({error.getCondition()}); its columns are {df.columns}. Quote a name with dots "
            f"or spaces in backquotes, as groupBy needs: '`a.b`'.") from None


def check_keys(df, keys):
    """The keys' StructFields as Spark resolves them; each must be a type skew_group hashes."""
    fields = []
    for key in keys:
        field = resolve(df, key, "The 'keys' parameter")
        data_type = field.dataType
        if isinstance(data_type, T.StructType) and data_type.fields and all(
                isinstance(f.dataType, _KEY_TYPES) for f in data_type.fields):
            pass  # e.g. a time window: hashed and grouped by its fields
        elif not isinstance(data_type, _KEY_TYPES + _MONTHS):
            raise TypeError(
                f"The 'keys' parameter names column {key!r} of type {data_type.simpleString()}; "
                f"skew_group keys must be numbers, strings, binary, booleans, dates, "
                f"timestamps, intervals, or structs of those (such as a time window).")
        fields.append(field)
    return fields


def check_aggregates(df, keys, aggregates):
    """The output schema of the built-ins as ``df.groupBy(keys).agg(...)`` gives it (Spark's
    own analysis decides what it accepts), after skew_group's own rules; duplicate output
    names refused."""
    from skewgroup.spark._merge import spark_aggregate

    builtins = [a for a in aggregates if a.kind not in ("custom", "aggregator")]
    custom = len(builtins) < len(aggregates)
    python_merged = [a for a in aggregates if a.kind == "aggregator"]
    for aggregate in python_merged:
        for column in aggregate.columns:
            resolve(df, column, f"The aggregator {aggregate.output_name}")
    if df.isStreaming and python_merged and len(python_merged) < len(aggregates):
        others = [a.output_name for a in aggregates if a.kind != "aggregator"]
        raise ValueError(
            f"On a stream, Python aggregators ({[a.output_name for a in python_merged]}) keep "
            f"their merged buffers in their own state, which Spark's aggregation of the other "
            f"aggregates {others} cannot share: run them in two skew_group calls (two queries), "
            f"or write the built-ins as aggregators. In batch they mix freely.")
    for aggregate in builtins:
        if aggregate.column is None:
            continue
        data_type = resolve(df, aggregate.column,
                            f"The aggregate {aggregate.output_name}").dataType
        if aggregate.kind in ("sum", "mean") and not isinstance(data_type, _SUMMABLE):
            raise TypeError(
                f"The aggregate {aggregate.output_name} needs a numeric column; "
                f"{aggregate.column!r} is {data_type.simpleString()}.")
        if custom and aggregate.kind in ("sum", "mean") and isinstance(data_type, _MONTHS):
            raise TypeError(
                f"The aggregate {aggregate.output_name} of a year-month interval cannot run "
                f"beside a custom aggregate (Arrow carries no such interval); aggregate it in "
                f"its own skew_group call, or cast {aggregate.column!r} to its months first.")
        if df.isStreaming and aggregate.kind == "count_distinct":
            raise ValueError(
                f"The aggregate {aggregate.output_name} (count_distinct) cannot run on a stream: "
                f"Spark refuses distinct aggregations in streaming queries, with groupBy too. "
                f"Use an approximate count (approx_count_distinct) in your own groupBy, or "
                f"count distinct values per batch in foreachBatch.")
        try:
            df.groupBy(*keys).agg(spark_aggregate(aggregate)).schema
        except AnalysisException as error:
            need = ("an orderable column" if aggregate.kind in ("min", "max")
                    else "another column type")
            raise TypeError(
                f"The aggregate {aggregate.output_name} needs {need}; {aggregate.column!r} is "
                f"{data_type.simpleString()} (Spark: {error.getCondition()}); groupBy refuses "
                f"it too.") from None
    # groupBy's own output names and types (analysis, no job); count(1) stands in for none.
    reference = df.groupBy(*keys).agg(*([spark_aggregate(a) for a in builtins]
                                        or [F.count(F.lit(1))])).schema
    if not builtins:
        reference = T.StructType(reference.fields[:len(keys)])
    names = iter(reference.fieldNames()[len(keys):])
    seen = set()
    for aggregate in aggregates:
        if aggregate.kind == "custom":
            produced = output_names(aggregate)
        elif aggregate.kind == "aggregator":
            produced = [aggregate.output_name]
        else:
            produced = [next(names)]
        for name in produced:
            if name in seen:
                raise ValueError(f"Two aggregates produce the column {name!r}; use .alias().")
            seen.add(name)
    return reference


def output_names(aggregate):
    if aggregate.kind == "custom" and aggregate.finish is None:
        return [f.name for f in custom_schema(aggregate).fields]
    return [aggregate.output_name]


def custom_schema(aggregate):
    schema = aggregate.schema
    if isinstance(schema, str):
        schema = T._parse_datatype_string(schema)
        if not isinstance(schema, T.StructType):
            raise TypeError(f"The 'schema' of a custom aggregate must describe a struct; got "
                            f"{aggregate.schema!r}.")
    missing = [f.name for f in schema.fields if f.name not in aggregate.merge]
    if missing:
        raise ValueError(f"The custom aggregate's 'merge' has no rule for field(s) {missing}.")
    return schema



def check_dataframe(df):
    if not isinstance(df, DataFrame):
        raise TypeError(f"skew_group transforms a pyspark DataFrame. Got {type(df).__name__}.")


def key_list(keys):
    if isinstance(keys, str):
        return [keys]
    if isinstance(keys, (list, tuple)) and keys and all(isinstance(k, str) for k in keys):
        if len(set(keys)) != len(keys):
            raise ValueError(f"The 'keys' parameter repeats a column: {list(keys)}.")
        return list(keys)
    raise TypeError(f"The 'keys' parameter must be a column name or a non-empty list of names. "
                    f"Got {keys!r}.")


def merged_apart(key_fields):
    """Whether groupBy may take keys that repartition(n, keys) puts apart as one: a float or
    double (-0.0 and 0.0, every NaN), or a string under a collation other than UTF8_BINARY
    ("a" and "A" under UTF8_LCASE), alone or in a struct (the key types :func:`check_keys`
    lets through)."""
    def apart(data_type):
        if isinstance(data_type, T.StructType):
            return any(apart(f.dataType) for f in data_type.fields)
        if isinstance(data_type, T.StringType):
            return getattr(data_type, "collation", "UTF8_BINARY") != "UTF8_BINARY"
        return isinstance(data_type, (T.FloatType, T.DoubleType))

    return any(apart(f.dataType) for f in key_fields)
