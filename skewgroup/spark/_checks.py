"""Checks of skew_group's input, on the driver, before any query starts: every error names the
parameter or column and the value received."""
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from skewgroup.spark._columns import RESERVED_PREFIX

_KEY_TYPES = (T.NumericType, T.StringType, T.BinaryType, T.BooleanType, T.DateType,
              T.TimestampType, T.TimestampNTZType)
_SUMMABLE = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
             T.DecimalType)
_ORDERABLE = _KEY_TYPES


def check_keys(schema, keys):
    names = schema.fieldNames()
    reserved = [name for name in names if name.startswith(RESERVED_PREFIX)]
    if reserved:
        raise ValueError(f"Column names starting with '__sg_' are reserved for skew_group's plan; "
                         f"the DataFrame has {reserved}. Rename them first.")
    for key in keys:
        if key not in names:
            raise ValueError(
                f"The 'keys' parameter names column {key!r}, which the DataFrame does not have; "
                f"its columns are {names}.")
        data_type = schema[key].dataType
        if isinstance(data_type, T.StructType) and data_type.fields and all(
                isinstance(f.dataType, _KEY_TYPES) for f in data_type.fields):
            continue  # e.g. a time window: hashed and grouped by its fields
        if not isinstance(data_type, _KEY_TYPES):
            raise TypeError(
                f"The 'keys' parameter names column {key!r} of type {data_type.simpleString()}; "
                f"skew_group keys must be numbers, strings, binary, booleans, dates, "
                f"timestamps, or structs of those (such as a time window).")


def check_aggregates(schema, aggregates):
    names = schema.fieldNames()
    seen = set()
    for aggregate in aggregates:
        if aggregate.column is not None:
            if aggregate.column not in names:
                raise ValueError(
                    f"The aggregate {aggregate.output_name} reads column {aggregate.column!r}, "
                    f"which the DataFrame does not have; its columns are {names}.")
            data_type = schema[aggregate.column].dataType
            if aggregate.kind in ("sum", "mean") and not isinstance(data_type, _SUMMABLE):
                raise TypeError(
                    f"The aggregate {aggregate.output_name} needs a numeric column; "
                    f"{aggregate.column!r} is {data_type.simpleString()}.")
            if aggregate.kind == "mean" and isinstance(data_type, T.DecimalType):
                raise TypeError(
                    f"The aggregate {aggregate.output_name} on a decimal column is not supported; "
                    f"cast {aggregate.column!r} to double first.")
            if aggregate.kind == "count_distinct" and not isinstance(data_type, _KEY_TYPES):
                raise TypeError(
                    f"The aggregate {aggregate.output_name} needs a column of numbers, strings, "
                    f"binary, booleans, dates or timestamps; {aggregate.column!r} is "
                    f"{data_type.simpleString()}.")
            if aggregate.kind in ("min", "max") and not isinstance(data_type, _ORDERABLE):
                raise TypeError(
                    f"The aggregate {aggregate.output_name} needs an orderable column; "
                    f"{aggregate.column!r} is {data_type.simpleString()}.")
        for name in output_names(aggregate, schema):
            if name in seen:
                raise ValueError(f"Two aggregates produce the column {name!r}; use .alias().")
            seen.add(name)


def output_names(aggregate, schema):
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


def has_floats(schema, keys):
    """Whether any key column is a float or double, or a struct with one (the key types
    :func:`check_keys` lets through)."""
    floats = (T.FloatType, T.DoubleType)

    def floating(data_type):
        if isinstance(data_type, T.StructType):
            return any(isinstance(f.dataType, floats) for f in data_type.fields)
        return isinstance(data_type, floats)

    return any(floating(schema[k].dataType) for k in keys)
