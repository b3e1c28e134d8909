"""The columns skew_group's plan adds between its steps, and how user columns cross Arrow.

Internal names never collide with a user's: their prefix (``__sg_``, else ``__sg1_``,
``__sg2_`` ...) is one that no column of the DataFrame starts with, compared without case as
Spark resolves names by default. Between the partial and the merge every column is internal
(the keys and the built-ins' inputs are copies), so user names with dots, spaces, duplicates or
any case never reach a Spark reference after the partial.
"""
from dataclasses import dataclass

from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema


@dataclass(frozen=True)
class Internal:
    """Internal column names of one plan."""

    prefix: str

    @property
    def worker(self):     # the row's worker (tag), the partial row's worker (partial)
        return self.prefix + "worker"

    @property
    def summary(self):    # streams: the tag's figures for the observed metrics, one row a task
        return self.prefix + "summary"

    @property
    def tag(self):        # the tag UDF's struct on a stream (worker, summary)
        return self.prefix + "tag"

    @property
    def place(self):      # the value whose Spark hash lands on the row's worker (placement)
        return self.prefix + "place"

    @property
    def rows(self):       # input rows behind a custom partial row (observed metrics)
        return self.prefix + "rows"

    @property
    def raw(self):        # true on the input rows the partial passes on to Spark's built-ins
        return self.prefix + "raw"

    @property
    def bucket(self):     # streams with Python aggregators: the state's bucket of keys
        return self.prefix + "bucket"

    @property
    def key_hash(self):   # streams with Python aggregators: Spark's xxhash64 of the keys
        return self.prefix + "key_hash"

    @property
    def blob(self):       # streams with Python aggregators: an Arrow IPC stream of rows
        return self.prefix + "blob"

    @property
    def event(self):      # streams in append mode: the window's end, carrying a watermark
        return self.prefix + "event"

    def key(self, i):     # a copy of the i-th key
        return f"{self.prefix}k{i}"

    def input(self, j):   # a copy of the j-th built-in's input column
        return f"{self.prefix}in{j}"

    def out(self, j):     # the j-th built-in's merged value
        return f"{self.prefix}out{j}"

    def user(self, i):    # the i-th user column in the partial stage's input
        return f"{self.prefix}c{i}"

    def field(self, i, name):   # the i-th aggregate's partial field ``name``
        return f"{self.prefix}p{i}_{name}"


def internal(columns):
    """The :class:`Internal` names for a DataFrame with ``columns``."""
    lowered = [c.lower() for c in columns]
    prefix, n = "__sg_", 0
    while any(c.startswith(prefix) for c in lowered):
        n += 1
        prefix = f"__sg{n}_"
    return Internal(prefix)


def to_arrow_safe(column, data_type):
    """``column`` in a type Arrow carries: a year-month interval (which PySpark cannot convert
    to Arrow) as its months, an int that orders and groups as the interval does."""
    if isinstance(data_type, T.YearMonthIntervalType):
        return column.cast("int")
    return column


def from_arrow_safe(column, data_type):
    """Undo :func:`to_arrow_safe`."""
    if isinstance(data_type, T.YearMonthIntervalType):
        return column.cast(data_type)
    return column


def quoted(name):
    """A column reference to exactly the top-level column ``name`` (dots and backquotes kept)."""
    return F.col("`" + name.replace("`", "``") + "`")


def arrow_fields(df, schema):
    """The Arrow fields of Spark ``schema`` as ``df``'s session hands them to Python (its large
    string types and time zone)."""
    spark = df.sparkSession
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    # No default in conf.get: with a default Spark returns it whenever the user never set the
    # zone explicitly, and a timestamp field (e.g. a window key) then has no zone at all.
    arrow = to_arrow_schema(schema, prefers_large_types=large,
                            timezone=spark.conf.get("spark.sql.session.timeZone"))
    return list(arrow)
