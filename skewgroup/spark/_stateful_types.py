"""What a stream's stateful Python merge keeps with Spark's semantics: each kind's type rule
(:func:`stateful_type`, and the text an error gives of it), and the Spark types of a
reduction's state and result. Read by the aggregate kinds' checks and parts (``_aggregates``).
"""
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from skewgroup._aggregation.reductions import reducible
from skewgroup.spark._checks import MONTH_INTERVAL

# What a stream's stateful Python merge reduces with Spark's semantics: the rule is
# ``_aggregation.reductions.reducible`` over the Arrow type a column reaches Python in.
INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
STATEFUL_TYPES_TEXT = {
    "sum": "byte, short, int, long, float and double", "mean": "byte, short, int, long, float "
    "and double", "min": "numbers but decimals, strings, binary, booleans, dates and timestamps",
    "bool_and": "booleans", "bool_or": "booleans"}
STATEFUL_TYPES_TEXT["max"] = STATEFUL_TYPES_TEXT["min"]


def stateful_type(kind, data_type):
    """Whether ``kind`` (a built-in or a custom merge rule) over Spark ``data_type`` keeps
    Spark's semantics in a stream's stateful Python merge."""
    if kind == "count":
        return True
    if isinstance(data_type, MONTH_INTERVAL):     # it reaches Python as its months: no interval
        return False
    if kind in ("first", "last"):
        return True
    if isinstance(data_type, T.StringType) and getattr(data_type, "collation",
                                                       "UTF8_BINARY") != "UTF8_BINARY":
        return False                     # its order and equality are Spark's alone
    try:
        arrow_type = to_arrow_type(data_type, timezone="UTC")   # the type, not its zone
    except Exception:                    # pyspark's own error types vary by version
        return False
    return reducible(kind, arrow_type)


def state_spark_type(kind, data_type):
    """The Spark type of a reduction's value column (None for count, which keeps n only)."""
    if kind == "count":
        return None
    if kind == "mean" or (kind == "sum" and not isinstance(data_type, INTEGRAL)):
        return T.DoubleType()
    return T.LongType() if kind == "sum" else data_type


def result_spark_type(kind, data_type):
    """Spark's result type of ``kind`` over ``data_type``: groupBy's."""
    return T.LongType() if kind == "count" else state_spark_type(kind, data_type)
