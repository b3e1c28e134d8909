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
# groups and orders as the interval does: a key.
MONTH_INTERVAL = T.YearMonthIntervalType


def resolve(df, name, what):
    """The StructField Spark resolves ``name`` to in ``df`` (case as spark.sql.caseSensitive
    says, backquotes, nested fields, and a top-level column's own name even with a dot in it),
    or a ValueError naming ``what`` and the columns."""
    return df.select(F.col(reference(df, name, what))).schema.fields[0]


def reference(df, name, what):
    """``name`` as a string ``F.col`` resolves in ``df`` to the column groupBy would take:
    ``name`` itself where Spark resolves it ("a.b" a nested field, "`a.b`" a column); else, where
    ``name`` is a top-level column's own name ("a.b" with a dot in it), that column backquoted.
    A ValueError naming ``what`` and the columns otherwise."""
    try:
        df.select(F.col(name)).schema    # analysis only, no job
        return name
    except AnalysisException as error:
        condition = error.getCondition()
    sensitive = df.sparkSession.conf.get("spark.sql.caseSensitive", "false") == "true"
    same = [c for c in df.columns if c == name or (not sensitive and c.lower() == name.lower())]
    if len(same) == 1:
        return "`" + same[0].replace("`", "``") + "`"
    raise ValueError(
        f"{what} names column {name!r}, which the DataFrame does not have "
        f"({condition}); its columns are {df.columns}.")


def check_keys(df, keys):
    """The keys' StructFields as Spark resolves them; each must be a type skew_group hashes."""
    fields = []
    for key in keys:
        field = resolve(df, key, "The 'keys' parameter")
        data_type = field.dataType
        if isinstance(data_type, T.StructType) and data_type.fields and all(
                isinstance(f.dataType, _KEY_TYPES) for f in data_type.fields):
            pass  # e.g. a time window: hashed and grouped by its fields
        elif not isinstance(data_type, (*_KEY_TYPES, MONTH_INTERVAL)):
            raise TypeError(
                f"The 'keys' parameter names column {key!r} of type {data_type.simpleString()}; "
                f"skew_group keys must be numbers, strings, binary, booleans, dates, "
                f"timestamps, intervals, or structs of those (such as a time window).")
        fields.append(field)
    return fields


def check_dataframe(df):
    if not isinstance(df, DataFrame):
        raise TypeError(f"skew_group transforms a pyspark DataFrame. Got {type(df).__name__}.")


def check_sample(sample, df):
    """``sample`` (``skew_group``'s ``sample=``): a batch DataFrame with ``df``'s columns (a
    stream's), in its order and of its types."""
    if not isinstance(sample, DataFrame):
        raise TypeError(f"The 'sample' parameter must be a pyspark DataFrame (a batch read of the "
                        f"stream's source). Got {type(sample).__name__}.")
    if not df.isStreaming:
        raise ValueError("The 'sample' parameter is for streams: auto samples a batch DataFrame "
                         "itself. Drop sample=.")
    if sample.isStreaming:
        raise ValueError("The 'sample' parameter must be a batch DataFrame (spark.read...., not "
                         "spark.readStream): auto reads a few of its rows before the query.")
    want = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    given = [(f.name, f.dataType.simpleString()) for f in sample.schema.fields]
    if given != want:
        raise ValueError(f"The 'sample' parameter must have the stream's columns, in its order "
                         f"and of its types: {want}. Got {given}.")


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
