"""How columns cross pandas into and out of a stream's stateful merge, Spark's side.

``transformWithStateInPandas`` hands rows over as pandas frames, where a null long becomes a
float, a NaN a null, a timestamp the session zone's wall-clock time without a zone (ambiguous
in a DST fold, and read back as UTC by pyarrow) in nanoseconds (years 1677 to 2262 only), an
interval a nanosecond timedelta (292 years at most), and a struct a dict (a NaN and a null
one). So what crosses is encoded before and decoded in Spark after, exactly:

* a number key, and a number result: filled, with its status beside it (Arrow's side of that,
  and the statuses, in ``skewgroup._aggregation.pandas_crossing``); a floating key is
  normalized first, as groupBy normalizes it (-0.0 is 0.0, every NaN one NaN), since Arrow
  groups bytes;
* by where it is (``KEY``, ``VALUE``: a top-level column; ``FIELD``: a struct's):
  a timestamp its epoch microseconds (a long); a timestamp without zone, as a value its
  microseconds since 1970-01-01 (a long: merged in order), as a key or a struct's field
  Spark's string of it (only compared for equality); a day-time interval Spark's string of it;
  a struct's float field Spark's string of it (the shortest that reads back the same).
"""
from pyspark.sql import functions as F
from pyspark.sql import types as T

from skewgroup._aggregation.pandas_crossing import STATUS_NAN, STATUS_VALUE, status_column

FLOATING = (T.FloatType, T.DoubleType)
# Keys that cross as numbers, with a status (a timestamp as its epoch microseconds, a
# year-month interval as its months).
_NUMBER_KEYS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
                T.TimestampType, T.YearMonthIntervalType)
KEY, VALUE, FIELD = "key", "value", "field"
_EPOCH_NTZ = "1970-01-01 00:00:00"


def normalized(column, data_type):
    """A floating ``column`` as groupBy groups it: -0.0 is 0.0, every NaN one NaN (Arrow, and
    the partial, group bytes)."""
    return (F.when(F.isnan(column), F.lit(float("nan"))).when(column == 0, F.lit(0.0))
            .otherwise(column).cast(data_type))


def key_copy(copy, field):
    """The copy of key ``field`` (a Column) as it crosses: a struct's floating fields
    normalized (they cross as Spark's strings of them, which would tell -0.0 from 0.0), a
    floating key normalized; and the key's status column, or None (a key that crosses as it
    is)."""
    data_type = field.dataType
    if isinstance(data_type, T.StructType) and any(
            isinstance(f.dataType, FLOATING) for f in data_type.fields):
        parts = [(normalized(copy[f.name], f.dataType)
                  if isinstance(f.dataType, FLOATING) else copy[f.name]).alias(f.name)
                 for f in data_type.fields]
        return F.when(copy.isNotNull(), F.struct(*parts)), None
    floating = isinstance(data_type, FLOATING)
    if not (isinstance(data_type, _NUMBER_KEYS) and (field.nullable or floating)):
        return copy, None
    return (normalized(copy, data_type) if floating else copy), True


def key_value(key, field):
    """The Column of a crossed number key ``key`` read back from its status: null or NaN as
    the status says."""
    status = F.col(status_column(key))
    if not isinstance(field.dataType, FLOATING):     # a long never meets a double literal
        return F.when(status == STATUS_VALUE, F.col(key))
    nan = F.lit(float("nan")).cast(field.dataType)
    if not field.nullable:                           # not null in, not null out
        return F.when(status == STATUS_NAN, nan).otherwise(F.col(key))
    return F.when(status == STATUS_VALUE, F.col(key)).when(status == STATUS_NAN, nan)


def result_value(column, result_type):
    """The Column of a crossed number result ``column`` read back from its status."""
    status = F.col(status_column(column))
    result = F.when(status == STATUS_VALUE, F.col(column))
    if isinstance(result_type, FLOATING):
        result = result.when(status == STATUS_NAN, F.lit(float("nan")).cast(result_type))
    return result


def _wired(data_type, where=VALUE):
    if isinstance(data_type, T.TimestampType):
        return T.LongType()
    if isinstance(data_type, T.TimestampNTZType):
        return T.LongType() if where == VALUE else T.StringType()
    if isinstance(data_type, T.DayTimeIntervalType) or (
            where == FIELD and isinstance(data_type, FLOATING)):
        return T.StringType()
    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(f.name, _wired(f.dataType, FIELD), f.nullable)
                             for f in data_type.fields])
    return data_type


def _where(field, keys):
    return KEY if field.name in keys else VALUE


def wire(schema, keys):
    """``schema`` as it crosses pandas (``keys``: the key columns' names)."""
    return T.StructType([T.StructField(f.name, _wired(f.dataType, _where(f, keys)), f.nullable)
                         for f in schema.fields])


def to_wire(field, keys):
    """The column ``field`` as it crosses pandas (:func:`wire`)."""
    def encode(column, data_type, wired):
        if isinstance(data_type, T.TimestampType):
            return F.unix_micros(column)
        if isinstance(data_type, T.TimestampNTZType) and isinstance(wired, T.LongType):
            return F.timestamp_diff("MICROSECOND", F.lit(_EPOCH_NTZ).cast(data_type), column)
        return column.cast(wired)

    return _each_part(F.col(field.name), field, _where(field, keys), encode)


def from_wire(field, keys):
    """The column ``field`` back from how it crossed pandas (:func:`wire`)."""
    def decode(column, data_type, wired):
        if isinstance(data_type, T.TimestampType):
            return F.timestamp_micros(column)
        if isinstance(data_type, T.TimestampNTZType) and isinstance(wired, T.LongType):
            return F.timestamp_add("MICROSECOND", column, F.lit(_EPOCH_NTZ).cast(data_type))
        return column.cast(data_type)

    return _each_part(F.col(field.name), field, _where(field, keys), decode)


def _each_part(column, field, where, convert):
    """``column`` with ``convert(part, type, wired type)`` applied to it, or to each changed
    field of a struct."""
    data_type = field.dataType
    if _wired(data_type, where) == data_type:
        return column
    if isinstance(data_type, T.StructType):
        parts = [(convert(column[f.name], f.dataType, _wired(f.dataType, FIELD))
                  if _wired(f.dataType, FIELD) != f.dataType else column[f.name]).alias(f.name)
                 for f in data_type.fields]
        return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*parts)).alias(field.name)
    return convert(column, data_type, _wired(data_type, where)).alias(field.name)
