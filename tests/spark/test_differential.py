"""skew_group against groupBy on generated DataFrames: the same schema and rows, or the same error.

Hypothesis draws a small DataFrame (at most 40 rows, in one to three input partitions) over the
types a key or an aggregate's input can have: integers at their limits, floats and doubles
with NaN, -0.0 and infinities, decimals at their precision (decimal(38,10) near 10^27, whose
sums overflow), strings (empty, unicode, long, under UTF8_LCASE), binary, booleans, dates,
timestamps with and without zone, day-time and year-month intervals, structs with null fields,
a field that is not nullable and null structs, nested structs, arrays, maps, variants and
calendar intervals; nulls everywhere and columns that are not nullable; names that need
backquotes (spaces, dots, a backquote), a name twice (two columns nothing refers to) and
references in another case than the column's. Then one to three keys, the built-in
aggregates valid for the columns' types (sum and mean of numbers and intervals, min, max and
count_distinct of orderable types, count of anything) and Spark's own aggregate Columns (moments, count_if, bool_and/or,
bit_and/or/xor, sum, max_by/min_by, collect_set: ``SPARK_FUNCTIONS``), alone or beside custom
ones (a
vectorized and a per-key row count), aliases, a plan, a strategy, a worker count, ANSI on or
off, a session time zone and Arrow batches of 1, 3 or 10,000 rows.

``skew_group`` must give ``df.groupBy(keys).agg(...)``'s schema (name, type, nullability per
field) and rows (NaN equal to NaN; -0.0 equal to 0.0 in an aggregate, where Spark's min and max
return either; a floating sum or mean within 1e-9 of its inputs' magnitudes, as the summation
order differs; everything else exactly), or fail with Spark's same error condition. In batch,
and in a stream: the rows in parquet, read as a stream, the query in complete mode into a
memory sink, its table against the batch groupBy of the same files; beside a Python aggregator
(a row count: ``VectorizedRowCount``, twin of ``count(1)``) in update mode over two micro-batches,
each key's latest row, or the refusal of a built-in the stream's Python merge cannot keep as
Spark does; and in windowed append (a one-minute window over an event time among the keys, a
watermark, a last micro-batch that closes every window), with and without a Python aggregator,
against the batch groupBy of the data rows. Where Spark's own result
depends on the order of additions (a sum that overflows midway), the values are drawn so that
it does not (``OVERFLOW_REGIMES``).

By default the file runs 40 batch and 8 stream examples, shared among the plans, in about two
minutes on two cores; the examples are the same on every run (derandomized). A longer run sets
the batch examples (the stream gets a fifth of them; 400 take about ten minutes)::

    SKEWGROUP_DIFFERENTIAL_EXAMPLES=400 python -m pytest -q tests/spark/test_differential.py

``--hypothesis-show-statistics`` shows which plans, types and outcomes were drawn. A failing
case is printed as generated; ``SKEWGROUP_DIFFERENTIAL_SHRINK=1`` shrinks it to a smallest one
first (minutes of queries).

Where skew_group differs from groupBy, the difference is an ``xfail(strict=True)`` case at the
end of this file with its input, and the generated cases step around exactly that input
(``known_difference``, ``fails_in_skew_group``); a fix turns the case into an XPASS, which
fails until its step goes too.
"""
import datetime as dt
import decimal
import math
import os
import re
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from typing import Callable, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, event, given, settings
from hypothesis import strategies as st
from pyspark import cloudpickle
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql import types as T

import _aggregators
from _aggregators import VectorizedRowCount
from skewgroup.spark import agg, skew_group

cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(_aggregators)

EXAMPLES = int(os.environ.get("SKEWGROUP_DIFFERENTIAL_EXAMPLES", "40"))
STREAM_EXAMPLES = max(2, EXAMPLES // 5)
MAX_ROWS = 40
PLANS = ["local", "hash", "split", "routed", "spread", "auto"]
STREAM_PLANS = ["local", "hash", "routed", "spread", "auto"]     # split plans from a sample: batch only
STRATEGIES = ["adaptive", "pkg", "kg", "pdstream"]
RELATIVE = 1e-9   # of a floating sum's input magnitudes: far above any summation order's error

# A failing case is printed as generated; shrinking it to a smallest one takes minutes of queries
SHRINK = os.environ.get("SKEWGROUP_DIFFERENTIAL_SHRINK", "") not in ("", "0")
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else [])
SETTINGS = dict(deadline=None, derandomize=True, database=None, phases=PHASES,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example,
                                       HealthCheck.filter_too_much])


# --- custom aggregates: row counts, vectorized and per key -----------------------------------

def row_count(rows, offsets):
    return {"n": np.diff(offsets)}


def rows_of_key(rows):
    return {"key_rows": len(rows)}


ROWS_N = agg.custom(partial=row_count, merge={"n": "sum"}, schema="n long", vectorized=True)
ROWS_PER_KEY = agg.custom(partial=rows_of_key, merge={"key_rows": "sum"},
                          schema="key_rows long")


PY_ROWS_NAME = "py rows"


# --- column types --------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class Kind:
    """A column type: the values ``createDataFrame`` takes for it (never null) and what may
    aggregate it. Where Python cannot create the type, the column is created as ``created``
    and turned into ``type`` by ``make`` (a Column -> Column)."""

    name: str
    type: T.DataType
    values: st.SearchStrategy
    key: bool = True            # a key type of skew_group's docstring
    sums: bool = False          # sum and mean
    orders: bool = True         # min, max and count_distinct
    created: Optional[T.DataType] = None
    make: Optional[Callable] = None
    streams: bool = True        # parquet carries it
    overflows: Optional[Callable] = None   # (value, regime) -> value: see OVERFLOW_REGIMES

    def __repr__(self):
        return self.name

    def _repr_pretty_(self, printer, cycle):    # Hypothesis prints a failing case with it
        printer.text(repr(self))


def integers(bits):
    low, high = -(1 << bits - 1), (1 << bits - 1) - 1
    return st.one_of(st.sampled_from([low, high, 0, -1, 1, low + 1, high - 1]),
                     st.integers(low, high))


NAN, INF = math.nan, math.inf
FLOAT_SPECIALS = [NAN, -NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0]
# Finite doubles stay below 1e300 so that 40 of them never overflow to inf: where they would,
# the result depends on the order of the sum, in groupBy as in skew_group.
DOUBLES = st.one_of(st.sampled_from(FLOAT_SPECIALS + [5e-324, 1e300, -1e300, 0.1]),
                    st.floats(-1e300, 1e300), st.integers(-3, 3).map(float))
FLOATS = st.one_of(st.sampled_from(FLOAT_SPECIALS + [3.4028234663852886e38, 1e-45]),
                   st.floats(width=32), st.integers(-3, 3).map(float))
TEXT = st.one_of(
    st.sampled_from(["", " ", "a", "A", "é", "e\u0301", "日本語", "😀", "\x00", "a" * 300,
                     "ß" * 40]),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=12),
    st.text("ab", min_size=100, max_size=400))


EXACT = decimal.Context(prec=80)    # the default context rounds to 28 digits


def decimals(precision, scale, near):
    """decimal(precision, scale) values: its largest, ``near`` times a digit plus its smallest
    step (all digits used), and any."""
    step = decimal.Decimal(1).scaleb(-scale)
    largest = EXACT.subtract(EXACT.power(10, precision - scale), step)
    return st.one_of(
        st.sampled_from([largest, EXACT.minus(largest), decimal.Decimal(0), near, -near, step]),
        st.integers(-9, 9).map(lambda d: EXACT.add(EXACT.multiply(d, near), step)),
        # not st.decimals: it scales in the default context, rounding past 28 digits
        st.integers(-10 ** precision + 1, 10 ** precision - 1).map(
            lambda unscaled: decimal.Decimal(unscaled).scaleb(-scale, EXACT)))


# A sum of a type that can overflow (bigint, decimal(38,10), intervals) overflows or not
# depending on the order of its additions when its values have both signs: [max, 1, -1] raises
# under ANSI if max + 1 comes first. groupBy and skew_group add in different orders, so such a
# column's values are drawn in one regime: "small" (forty of them never overflow) or all of one
# sign (partial sums grow monotonically: the sum overflows in every order or in none).
OVERFLOW_REGIMES = ["small", "positive", "negative"]


def integral_regime(high):
    def regime(value, how):
        if how == "small":
            return value // (2 * MAX_ROWS)
        return min(abs(value), high) if how == "positive" else -min(abs(value), high + 1)
    return regime


def interval_regime(value, how):
    if how == "small":
        return value // (2 * MAX_ROWS)
    return abs(value) if how == "positive" else -abs(value)


def decimal_regime(scale):
    step = decimal.Decimal(1).scaleb(-scale)

    def regime(value, how):
        if how == "small":
            return EXACT.quantize(EXACT.divide(value, 2 * MAX_ROWS), step)
        value = EXACT.abs(value)
        return value if how == "positive" else EXACT.minus(value)
    return regime


UTC = dt.timezone.utc
DATES = st.one_of(st.sampled_from([dt.date(1, 1, 1), dt.date(9999, 12, 31),
                                   dt.date(1970, 1, 1), dt.date(1582, 10, 10)]),
                  st.dates())
NAIVE = st.one_of(st.sampled_from([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59,
                                                                     999999),
                                   dt.datetime(1970, 1, 1), dt.datetime(2026, 3, 29, 2, 30)]),
                  st.datetimes())
# PySpark collects a timestamp through datetime.fromtimestamp, which fails on 0001-01-01
ZONED = NAIVE.filter(lambda t: t >= dt.datetime(1, 1, 2)).map(lambda t: t.replace(tzinfo=UTC))
MAX_DAYS = 10 ** 8   # Spark's day-time interval holds about 1.07e8 days of microseconds
INTERVALS = st.one_of(st.sampled_from([dt.timedelta(0), dt.timedelta(microseconds=1),
                                       dt.timedelta(days=MAX_DAYS), -dt.timedelta(days=MAX_DAYS)]),
                      st.timedeltas(-dt.timedelta(days=MAX_DAYS), dt.timedelta(days=MAX_DAYS)))
MONTHS = st.one_of(st.sampled_from([0, 1, -1, (1 << 31) - 1, -(1 << 31) + 1]),
                   st.integers(-10 ** 4, 10 ** 4))
JSON = st.sampled_from(["1", "-2.5", '"a"', '{"a": [1, null]}', "[]", "null", "true"])

PAIR = T.StructType([T.StructField("a", T.IntegerType(), False),
                     T.StructField("b", T.StringType())])
POINT = T.StructType([T.StructField("x", T.DoubleType()), T.StructField("d", T.DateType())])
NESTED = T.StructType([T.StructField("s", T.StructType([T.StructField("a", T.IntegerType())])),
                       T.StructField("t", T.TimestampNTZType())])

KINDS = [
    Kind("tinyint", T.ByteType(), integers(8), sums=True),
    Kind("smallint", T.ShortType(), integers(16), sums=True),
    Kind("int", T.IntegerType(), integers(32), sums=True),
    Kind("bigint", T.LongType(), integers(64), sums=True,
         overflows=integral_regime((1 << 63) - 1)),
    Kind("float", T.FloatType(), FLOATS, sums=True),
    Kind("double", T.DoubleType(), DOUBLES, sums=True),
    Kind("decimal(10,2)", T.DecimalType(10, 2),
         decimals(10, 2, decimal.Decimal(10) ** 7), sums=True),
    Kind("decimal(38,10)", T.DecimalType(38, 10),
         decimals(38, 10, decimal.Decimal(10) ** 27), sums=True, overflows=decimal_regime(10)),
    Kind("string", T.StringType(), TEXT),
    # equal without case: groupBy returns one of "a" and "A" for both, compared in lower case
    Kind("string collate UTF8_LCASE", T.StringType("UTF8_LCASE"),
         st.one_of(st.sampled_from(["", "a", "A", "é", "É"]), st.text("aAbBéÉ ", max_size=4)),
         created=T.StringType(), make=lambda c: F.collate(c, "UTF8_LCASE")),
    Kind("binary", T.BinaryType(),
         st.one_of(st.sampled_from([b"", b"\x00", b"\xff" * 64]), st.binary(max_size=12))),
    Kind("boolean", T.BooleanType(), st.booleans()),
    Kind("date", T.DateType(), DATES),
    Kind("timestamp", T.TimestampType(), ZONED),
    Kind("timestamp_ntz", T.TimestampNTZType(), NAIVE),
    Kind("interval day to second", T.DayTimeIntervalType(), INTERVALS, sums=True,
         overflows=interval_regime),
    Kind("interval year to month", T.YearMonthIntervalType(), MONTHS, sums=True,
         created=T.IntegerType(), make=lambda c: F.make_ym_interval(F.lit(0), c),
         overflows=integral_regime((1 << 31) - 1)),
    Kind("struct<a:int not null,b:string>", PAIR,
         st.tuples(integers(32), st.none() | TEXT)),
    Kind("struct<x:double,d:date>", POINT, st.tuples(st.none() | DOUBLES, st.none() | DATES)),
    # groupBy groups by these too; skew_group refuses them as keys (xfail cases below)
    Kind("struct<s:struct<a:int>,t:timestamp_ntz>", NESTED,
         st.tuples(st.none() | st.tuples(st.none() | integers(32)), st.none() | NAIVE),
         key=False),
    Kind("array<int>", T.ArrayType(T.IntegerType()),
         st.lists(st.none() | integers(32), max_size=4), key=False),
    Kind("map<string,int>", T.MapType(T.StringType(), T.IntegerType()),
         st.dictionaries(TEXT, st.none() | integers(32), max_size=3), key=False, orders=False),
    Kind("variant", T.VariantType(), JSON, key=False, orders=False, created=T.StringType(),
         make=F.parse_json),
    Kind("calendar interval", T.CalendarIntervalType(), st.integers(-1000, 1000), key=False,
         orders=False, created=T.IntegerType(),
         make=lambda c: F.make_interval(F.lit(0), F.lit(0), F.lit(0), c), streams=False),
]
KEY_KINDS = [k for k in KINDS if k.key]

NAMES = st.one_of(
    st.sampled_from(["k", "v", "x", "K2", "a b", "a.b", "a.b.c", "x`y", " lead", "é", "日付",
                     "sum(v)", "count(1)", "n", "key_rows", "__sg_k0", "select", "group"]),
    st.from_regex(r"\A[a-z][a-z0-9_]{0,4}\Z"))


# --- generated cases -----------------------------------------------------------------------

@dataclass(repr=False, eq=False)
class Column:
    name: str
    kind: Kind
    nullable: bool
    values: list          # one per row, as createDataFrame takes them
    reference: str = ""   # how keys and aggregates name it ("" for an unreferenced twin)

    def __repr__(self):
        null = "" if self.nullable else " not null"
        return f"{self.name!r} {self.kind!r}{null} = {self.values!r}"

    def _repr_pretty_(self, printer, cycle):
        printer.text(repr(self))


@dataclass
class Case:
    """A DataFrame, a skew_group call over it and the groupBy it must equal."""

    columns: list
    partitions: int                 # input partitions (0: as createDataFrame gives them)
    keys: list                      # references
    aggregates: list                # (Aggregate, kind, column or None, alias or None)
    plan: str
    strategy: str
    workers: int
    ansi: bool
    zone: str                       # spark.sql.session.timeZone
    arrow_batch: int                # spark.sql.execution.arrow.maxRecordsPerBatch (0: default)

    @property
    def conf(self):
        conf = {"spark.sql.ansi.enabled": str(self.ansi).lower(),
                "spark.sql.session.timeZone": self.zone}
        if self.arrow_batch:
            conf["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(self.arrow_batch)
        return conf

    @property
    def rows(self):
        return list(zip(*[c.values for c in self.columns]))

    def __repr__(self):
        aggregates = [a.output_name if kind == "custom" else
                      f"{alias or kind} = {kind}({column.reference if column else ''})"
                      for a, kind, column, alias in self.aggregates]
        columns = "".join(f"\n    {c!r}," for c in self.columns)
        return (f"Case(plan={self.plan!r}, strategy={self.strategy!r}, workers={self.workers}, "
                f"conf={self.conf!r}, input partitions={self.partitions or 'default'},\n"
                f"  keys={self.keys!r},\n  aggregates={aggregates!r},\n"
                f"  columns=[{columns}])")

    def _repr_pretty_(self, printer, cycle):
        printer.text(repr(self))

    @property
    def key_columns(self):
        by_reference = {c.reference: c for c in self.columns if c.reference}
        return [by_reference[k] for k in self.keys]

    @property
    def custom(self):
        return any(kind == "custom" for _, kind, *_ in self.aggregates)


def reference(draw, name):
    """A reference to the column ``name`` as groupBy takes it: backquoted where needed (a
    backquote doubled), sometimes where not, and sometimes in another case (Spark resolves
    names without case by default)."""
    quoted = "`" + name.replace("`", "``") + "`"
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None
    if draw(st.booleans()):
        name = "".join(c.swapcase() if c.isascii() else c for c in name)
        quoted = "`" + name.replace("`", "``") + "`"
    return draw(st.sampled_from([name, quoted])) if plain else quoted


def column_values(draw, kind, nullable, rows, distinct):
    """``rows`` values of ``kind`` drawn from a pool of at most ``distinct`` values (so that
    keys repeat and groups have several rows), with nulls where ``nullable``."""
    values = kind.values if not nullable else st.none() | kind.values
    pool = draw(st.lists(values, min_size=1, max_size=distinct))
    if kind.overflows:
        regime = draw(st.sampled_from(OVERFLOW_REGIMES))
        pool = [None if v is None else kind.overflows(v, regime) for v in pool]
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=rows, max_size=rows))
    return [pool[i] for i in picks]


def aggregate_choices(column, custom, streaming, spark_functions=False):
    """(kind, column) of every built-in aggregate groupBy accepts over ``column``, except the
    known differences (see :func:`known_difference`)."""
    kind = column.kind
    kinds = ["count"]
    if kind.orders:
        kinds += ["min", "max"] + ([] if streaming else ["count_distinct"])
    if kind.sums:
        kinds += ["sum", "mean"]
    choices = [(k, column) for k in kinds if not known_difference(k, kind, custom)]
    if spark_functions:
        choices += [(k, column) for k, (_, kinds_, _) in SPARK_FUNCTIONS.items()
                    if kind.name in kinds_]
    return choices


BUILTINS = {"count": (agg.count, F.count), "count_distinct": (agg.count_distinct, F.count_distinct),
            "sum": (agg.sum, F.sum), "mean": (agg.mean, F.avg), "min": (agg.min, F.min),
            "max": (agg.max, F.max)}


# Spark's own aggregate Columns (``skew_group`` takes them as groupBy does): kind -> (the Column
# over a reference, the column kinds it is drawn for, how its result compares). Drawn in batch
# (Spark's groupBy joined on the keys) and beside a Python aggregator on a stream (the stateful
# Python merge, with Spark's semantics), over kinds where the result does not depend on the
# order of the rows: max_by/min_by order a column by itself (a tie is the same value), the
# moments take integers (a double's square may overflow in one order and not another).
INTEGRAL = ("tinyint", "smallint", "int", "bigint")
SMALL_INTEGRAL = ("tinyint", "smallint", "int")
ORDERED_PLAIN = INTEGRAL + ("float", "double", "string", "binary", "boolean", "date")
def col(c):
    """``c`` as a Column: the draws pass a name, :func:`theirs` a Column."""
    return F.col(c) if isinstance(c, str) else c


SPARK_FUNCTIONS = {
    "F.stddev": (F.stddev, SMALL_INTEGRAL, "moment1"),
    "F.var_pop": (F.var_pop, SMALL_INTEGRAL, "moment2"),
    "F.variance": (F.variance, SMALL_INTEGRAL, "moment2"),
    "F.count_if": (F.count_if, ("boolean",), "exact"),
    "F.bool_and": (F.bool_and, ("boolean",), "exact"),
    "F.bool_or": (F.bool_or, ("boolean",), "exact"),
    "F.bit_and": (F.bit_and, INTEGRAL, "exact"),
    "F.bit_or": (F.bit_or, INTEGRAL, "exact"),
    "F.bit_xor": (F.bit_xor, INTEGRAL, "exact"),
    "F.sum": (F.sum, INTEGRAL, "exact"),     # ANSI overflow in the overflow regimes
    "F.max_by": (lambda c: F.max_by(c, c), ORDERED_PLAIN, "exact"),
    "F.min_by": (lambda c: F.min_by(c, c), ORDERED_PLAIN, "exact"),
    "F.collect_set": (F.collect_set, ("int", "bigint", "double", "string", "date"), "set"),
    # Expressions inside an aggregate (evaluated before the partial on a stream, with the
    # session's ANSI mode: an int's product at its limits overflows in both), scalar functions
    # around one and arithmetic between two (applied after the merge), DISTINCT (each key's
    # distinct values). An average of small integers is exact in any order.
    "count_if(c > 0)": (lambda c: F.count_if(col(c) > 0), INTEGRAL + ("float", "double"),
                        "exact"),
    "sum(when(c > 0, c))": (lambda c: F.sum(F.when(col(c) > 0, col(c))), INTEGRAL, "exact"),
    "avg(c * 2)": (lambda c: F.avg(col(c) * 2), SMALL_INTEGRAL, "exact"),
    "max_by(c, c + 1)": (lambda c: F.max_by(col(c), col(c) + 1), SMALL_INTEGRAL, "exact"),
    "round(avg(c), 2)": (lambda c: F.round(F.avg(c), 2), SMALL_INTEGRAL, "exact"),
    "coalesce(sum(c), 0)": (lambda c: F.coalesce(F.sum(c), F.lit(0)), INTEGRAL, "exact"),
    "max(c) - min(c)": (lambda c: F.max(c) - F.min(c), INTEGRAL + ("float", "double"),
                        "exact"),
    "hll_sketch_estimate": (lambda c: F.hll_sketch_estimate(F.hll_sketch_agg(c)),
                            ("int", "bigint", "string"), "exact"),
    "F.count_distinct": (F.count_distinct, ("int", "bigint", "double", "string", "date"),
                         "exact"),
    "F.sum_distinct": (F.sum_distinct, INTEGRAL, "exact"),
    "F.median": (F.median, INTEGRAL + ("float", "double"), "exact"),
    "percentile(c, 0.3)": (lambda c: F.percentile(c, 0.3), INTEGRAL + ("double",), "exact"),
}


def rotated(items, by):
    return items[by % len(items):] + items[:by % len(items)]


@st.composite
def cases(draw, plan, streaming=False, python=False):
    """A :class:`Case` for ``plan``. Each plan's test draws the same choices (derandomized), so
    the types and strategies are rotated by the plan: each plan meets other DataFrames. With
    ``python``, the built-ins are drawn as beside a custom aggregate (a Python aggregator is
    added by the test)."""
    turn = PLANS.index(plan)
    kinds = rotated([k for k in KINDS if k.streams or not streaming], 5 * turn)
    keys = draw(st.lists(st.sampled_from([k for k in kinds if k.key]), min_size=1, max_size=3))
    values = draw(st.lists(st.sampled_from(kinds), max_size=5))
    twins = [] if streaming else draw(st.lists(st.sampled_from(kinds), max_size=2))
    twins = twins if len(twins) == 2 else []    # two columns of one name, never referenced
    names = draw(st.lists(NAMES, min_size=len(keys) + len(values) + 1,
                          max_size=len(keys) + len(values) + 1, unique_by=str.lower))
    empty = not streaming and draw(st.sampled_from([False] * 7 + [True]))
    rows = 0 if empty else draw(st.integers(1, MAX_ROWS))
    columns = []
    for i, kind in enumerate(keys + values + twins):
        nullable = draw(st.booleans()) or draw(st.booleans())    # three in four
        name = names[min(i, len(names) - 1)]
        column = Column(name, kind, nullable,
                        column_values(draw, kind, nullable, rows, 4 if i < len(keys) else 12))
        if i < len(keys) + len(values):
            column.reference = reference(draw, name)
        columns.append(column)
    key_columns = columns[:len(keys)]
    columns = draw(st.permutations(columns))
    custom = draw(st.sampled_from([(), (), (ROWS_N,), (ROWS_PER_KEY,), (ROWS_N, ROWS_PER_KEY)]))
    choices = [("count", None)] + [choice for c in columns if c.reference
                                   for choice in aggregate_choices(
                                       c, bool(custom) or python, streaming,
                                       spark_functions=python or not streaming)]
    # Spark's count_distinct and skewgroup's name their column alike: two columns of one name
    # are a known difference (test_known_one_aggregate_twice), so a case draws one of them.
    chosen = draw(st.lists(st.sampled_from(choices), max_size=8, min_size=0 if custom else 1,
                           unique_by=lambda c: (c[0].replace("F.count_distinct",
                                                             "count_distinct"), id(c[1]))))
    aggregates = []
    for j, (kind, column) in enumerate(chosen):
        alias = draw(st.sampled_from([None, None, f"out {j}", f"out.{j}"]))
        build = SPARK_FUNCTIONS[kind][0] if kind in SPARK_FUNCTIONS else BUILTINS[kind][0]
        aggregate = build(column.reference) if column is not None else build()
        if alias:
            aggregate = aggregate.alias(alias)
        aggregates.append((aggregate, kind, column, alias))
    aggregates += [(c, "custom", None, None) for c in custom]
    aggregates = draw(st.permutations(aggregates))
    return Case(columns=columns,
                partitions=draw(st.sampled_from([0, 1, 3])),
                keys=[c.reference for c in key_columns],
                aggregates=list(aggregates),
                plan=plan,
                strategy=draw(st.sampled_from(rotated(STRATEGIES, turn))),
                workers=draw(st.integers(1, 8)),
                ansi=draw(st.booleans()),
                zone=draw(st.sampled_from(["UTC", "America/Los_Angeles", "Asia/Kathmandu"])),
                arrow_batch=draw(st.sampled_from([0, 0, 1, 3])))


# --- known differences from groupBy (each an xfail(strict=True) case below) -----------------

def known_difference(aggregate_kind, kind, custom):
    """Whether skew_group refuses an aggregate groupBy accepts (``test_known_*`` below)."""
    if custom and aggregate_kind in ("sum", "mean") and kind.name == "interval year to month":
        return True    # test_known_year_month_sum_beside_a_custom_aggregate
    if custom and aggregate_kind == "count" and kind.name == "calendar interval":
        return True    # test_known_count_of_a_calendar_interval_beside_a_custom_aggregate
    return False


def required_child(data_type, streaming):
    """Whether Arrow carries ``data_type`` as a struct with a child that is not nullable: a
    variant (value and metadata, not null), or a struct with a field that is not nullable
    (not in a stream, whose file source reads every field as nullable)."""
    return isinstance(data_type, T.VariantType) or (
        not streaming and isinstance(data_type, T.StructType)
        and any(not f.nullable for f in data_type.fields))


def fails_in_skew_group(case, streaming=False, python=False):
    """test_known_null_struct_with_a_required_field_beside_a_custom_aggregate and
    test_known_null_variant_beside_a_custom_aggregate: with a custom aggregate, a null value of
    such a type in a key or an aggregate's input fails the partial (Arrow refuses the null
    child)."""
    inputs = {id(c) for c in case.key_columns} | {id(c) for _, _, c, _ in case.aggregates if c}
    return (case.custom or python) and any(id(c) in inputs and required_child(c.kind.type, streaming)
                               and None in c.values for c in case.columns)


def collated_key(case):
    """A string key under a collation other than UTF8_BINARY: Spark's streaming aggregation
    refuses it (STATE_STORE_UNSUPPORTED_OPERATION_BINARY_INEQUALITY), under groupBy too."""
    return any(isinstance(c.kind.type, T.StringType)
               and c.kind.type.collation != "UTF8_BINARY" for c in case.key_columns)


# --- building and comparing ----------------------------------------------------------------

def created_schema(case):
    return T.StructType([T.StructField(f"c{i}", c.kind.created or c.kind.type, c.nullable)
                         for i, c in enumerate(case.columns)])


def dataframe(spark, case, source=None, extra=()):
    """The case's DataFrame, from its rows or from ``source`` (a DataFrame with the created
    columns, e.g. a stream of them), and the ``extra`` columns (names) of ``source`` after
    them."""
    if source is None:
        source = spark.createDataFrame(case.rows, created_schema(case))
        if case.partitions:
            source = source.repartition(case.partitions)
    made = [(c.kind.make(F.col(f"c{i}")) if c.kind.make else F.col(f"c{i}")).alias(f"c{i}")
            for i, c in enumerate(case.columns)]
    return source.select(*made, *extra).toDF(*[c.name for c in case.columns], *extra)


def ours(df, case, output_mode="update"):
    keys = case.keys[0] if len(case.keys) == 1 else case.keys
    return df.transform(skew_group(keys, *[a for a, *_ in case.aggregates], workers=case.workers,
                                   plan=case.plan, strategy=case.strategy,
                                   output_mode=output_mode))


def theirs(df, case, bounds=False):
    """groupBy's result; with ``bounds``, one more column per floating sum or mean: the sum of
    its finite inputs' magnitudes, which bounds how much summation order can change it."""
    columns, extra = [], []
    for j, (aggregate, kind, column, alias) in enumerate(case.aggregates):
        if kind == "python":      # the Python aggregator PY_ROWS: a row count
            columns.append(F.count(F.lit(1)).alias(PY_ROWS_NAME))
            continue
        if kind == "custom":
            # a row count merged by sum: nullable, as any sum
            name = "n" if aggregate is ROWS_N else "key_rows"
            columns.append(F.sum(F.lit(1).cast("long")).alias(name))
            continue
        function = SPARK_FUNCTIONS[kind][0] if kind in SPARK_FUNCTIONS else BUILTINS[kind][1]
        result = function(F.col(column.reference) if column is not None else F.lit(1))
        columns.append(result.alias(alias) if alias else result)
        if bounds and kind in SPARK_FUNCTIONS and SPARK_FUNCTIONS[kind][2].startswith("moment"):
            magnitude = F.max(F.abs(F.col(column.reference).cast("double")))
            power = 2 if SPARK_FUNCTIONS[kind][2] == "moment2" else 1
            extra.append((magnitude ** power).alias(f"__bound{j}"))
        if bounds and kind in ("sum", "mean") and isinstance(column.kind.type, T.NumericType):
            magnitude = F.abs(F.col(column.reference).cast("double"))
            extra.append(F.sum(F.when(magnitude < F.lit(INF), magnitude)).alias(f"__bound{j}"))
    return df.groupBy(*case.keys).agg(*columns, *extra)


def fields(df):
    """A schema as (name, type, nullability) per column."""
    return [(f.name, f.dataType, f.nullable) for f in df.schema.fields]


def condition(error):
    """Spark's error condition of ``error`` (the cause's, for a failed stream), or its first
    line where it has none (an error in a Python worker)."""
    found = error.getCondition() if isinstance(error, PySparkException) else None
    if found in (None, "STREAM_FAILED"):
        cause = re.search(r"terminated with exception: \[([A-Z_.]+)\]", str(error))
        if cause:
            return cause.group(1)
    return found or f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"


def canonical(value, signed_zero):
    """``value`` comparable and sortable: NaN equal to NaN, rows and lists as tuples; -0.0
    apart from 0.0 only where ``signed_zero`` (a key: groupBy gives one of them)."""
    if isinstance(value, float):
        if math.isnan(value):
            return ("nan",)
        if value == 0 and not signed_zero:
            return ("f", 0.0)
        return ("f", value, math.copysign(1.0, value))
    if isinstance(value, (list, tuple)):   # arrays, structs (Rows)
        return tuple(canonical(v, signed_zero) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((repr(canonical(k, True)), canonical(v, signed_zero))
                            for k, v in value.items()))
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def folded(rows, outputs):
    """``rows`` with the strings of a case-insensitive collation in lower case: groupBy returns
    any of the equal strings of a group (or of a min or max)."""
    lower = [isinstance(t, T.StringType) and t.collation == "UTF8_LCASE" for _, t, _ in outputs]
    return [tuple(v.lower() if fold and v is not None else v for v, fold in zip(row, lower))
            for row in rows]


def same_rows(got, expected, case, outputs):
    """``got`` (skew_group's rows) against ``expected`` (groupBy's, with the bounds of
    :func:`theirs`): the same keys, once each, and per key the same values."""
    keys = len(case.keys)

    def by_key(rows):
        return sorted(folded(rows, outputs), key=lambda r: repr(canonical(r[:keys], True)))

    got, expected = by_key(got), by_key(expected)
    assert ([canonical(r[:keys], True) for r in got]
            == [canonical(r[:keys], True) for r in expected])
    bound_at, sets, scale = {}, set(), {}
    for j, (_, kind, _, _) in enumerate(case.aggregates):
        how = SPARK_FUNCTIONS[kind][2] if kind in SPARK_FUNCTIONS else None
        if (kind in ("sum", "mean") and isinstance(outputs[keys + j][1], T.DoubleType)
                or how in ("moment1", "moment2")):
            bound_at[keys + j] = outputs.index(next(o for o in outputs if o[0] == f"__bound{j}"))
            # A variance's rounding is ~1e-16 of the squares' magnitude; a standard deviation's
            # is its square root (a variance near 0 meets rounding of that size).
            scale[keys + j] = math.sqrt(RELATIVE) if how == "moment1" else RELATIVE
        if how == "set":     # collect_set: Spark's order is not specified
            sets.add(keys + j)
    for mine, reference in zip(got, expected):
        for i in range(len(mine)):
            a, b = mine[i], reference[i]
            if i in sets and a is not None and b is not None:
                a, b = (sorted(v, key=lambda e: repr(canonical(e, False))) for v in (a, b))
            if i in bound_at and a is not None and b is not None and math.isfinite(a) \
                    and math.isfinite(b):
                tolerance = scale[i] * (reference[bound_at[i]] or 0.0)
                assert abs(a - b) <= tolerance, (mine, reference, i, tolerance)
            else:
                assert canonical(a, i < keys) == canonical(b, i < keys), (mine, reference, i)


def months(data_type):
    """Whether ``data_type`` holds a year-month interval, which PySpark cannot collect."""
    if isinstance(data_type, T.StructType):
        return any(months(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return months(data_type.elementType)
    return isinstance(data_type, T.YearMonthIntervalType)


def collectable(df):
    """``df`` with columns named by position (output names may repeat) and every column that
    holds a year-month interval as Spark's string of it."""
    df = df.toDF(*[f"_{i}" for i in range(len(df.columns))])
    return df.select(*[F.col(f.name).cast("string") if months(f.dataType) else F.col(f.name)
                       for f in df.schema.fields])


def collect(df):
    """(rows, None) or (None, Spark's error condition)."""
    try:
        return collectable(df).collect(), None
    except PySparkException as error:
        return None, condition(error)


@contextmanager
def session_conf(spark, conf):
    """``spark`` with ``conf`` set, restored after (the session is the module's)."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def describe(case):
    for name, value in [("plan", case.plan), ("strategy", case.strategy),
                        ("ansi", case.ansi), ("custom", case.custom), ("zone", case.zone),
                        ("arrow batch", case.arrow_batch),
                        ("rows", "none" if not case.rows else "some")]:
        event(f"{name}: {value}")
    for c in case.key_columns:
        event(f"key: {c.kind!r}")
    for _, kind, column, _ in case.aggregates:
        if column is not None:
            event(f"aggregate: {kind}({column.kind!r})")


def check_batch(spark, case):
    df = dataframe(spark, case)
    reference = theirs(df, case)                 # analysis: groupBy accepts the case
    result = ours(df, case)                      # skew_group must accept it too
    expected_fields, got_fields = fields(reference), fields(result)
    assert got_fields == expected_fields
    bounded = theirs(df, case, bounds=True)
    expected, expected_error = collect(bounded)
    got, error = collect(result)
    event(f"outcome: {expected_error or 'rows'}")
    assert error == expected_error
    if expected is not None:
        same_rows(got, expected, case, fields(bounded))


@pytest.mark.parametrize("plan", PLANS)
@settings(max_examples=max(1, EXAMPLES // len(PLANS)), **SETTINGS)
@given(data=st.data())
def test_batch_equals_group_by(spark, plan, data):
    case = data.draw(cases(plan), label="case")
    assume(not fails_in_skew_group(case))
    describe(case)
    with session_conf(spark, case.conf):
        check_batch(spark, case)


QUERIES = count()


def run_memory(spark, result, mode, directory):
    """(the rows ``result`` leaves in a memory sink in ``mode``, None), or (None, Spark's error
    condition)."""
    name = f"differential_{next(QUERIES)}"
    query = (result.writeStream.outputMode(mode).format("memory").queryName(name)
             .option("checkpointLocation", os.path.join(directory, "checkpoint")).start())
    try:
        query.processAllAvailable()
        return collectable(spark.table(name)).collect(), None
    except PySparkException as failure:
        return None, condition(failure)
    finally:
        query.stop()


def same_outcome(got, error, bounded, case):
    """skew_group's rows ``got`` or its error condition against groupBy's (``bounded``:
    :func:`theirs` with bounds)."""
    expected, expected_error = collect(bounded)
    event(f"outcome: {expected_error or 'rows'}")
    assert error == expected_error
    if expected is not None:
        same_rows(got, expected, case, fields(bounded))


@contextmanager
def stream_session(spark, case):
    """A scratch directory, removed after, with the case's session conf set. The memory sink
    keeps rows as java.sql.Date and Timestamp unless the java8 API is on, which moves a date of
    the Julian-Gregorian gap (1582-10-10 to 1582-10-15), groupBy's too."""
    directory = tempfile.mkdtemp(prefix="skewgroup-differential-")
    try:
        with session_conf(spark, {**case.conf, "spark.sql.datetime.java8API.enabled": "true"}):
            yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def check_stream(spark, case, directory):
    source = os.path.join(directory, "in")
    spark.createDataFrame(case.rows, created_schema(case)).write.parquet(source)
    stream = dataframe(spark, case, spark.readStream.schema(created_schema(case))
                       .parquet(source))
    batch = dataframe(spark, case, spark.read.schema(created_schema(case)).parquet(source))
    result = ours(stream, case)
    assert fields(result) == fields(theirs(stream, case))
    got, error = run_memory(spark, result, "complete", directory)
    same_outcome(got, error, theirs(batch, case, bounds=True), case)


@pytest.mark.parametrize("plan", STREAM_PLANS)
@settings(max_examples=max(1, STREAM_EXAMPLES // len(STREAM_PLANS)), **SETTINGS)
@given(data=st.data())
def test_stream_equals_group_by(spark, plan, data):
    case = data.draw(cases(plan, streaming=True), label="case")
    assume(not fails_in_skew_group(case, streaming=True) and not collated_key(case))
    describe(case)
    with stream_session(spark, case) as directory:
        check_stream(spark, case, directory)


def write_micro_batches(spark, case, directory, extra=None):
    """The case's rows as two parquet files (two micro-batches with maxFilesPerTrigger 1), and
    with ``extra`` (a function from the rows to (column name, type, values)) that column
    after the case's; the files' paths."""
    schema = created_schema(case)
    rows = case.rows
    if extra is not None:
        name, data_type, values = extra(rows)
        schema = schema.add(name, data_type)
        rows = [row + (value,) for row, value in zip(rows, values)]
    halves = [rows[:len(rows) // 2], rows[len(rows) // 2:]]
    paths = []
    for i, half in enumerate(halves):
        path = os.path.join(directory, "in", f"part-{i}")
        spark.createDataFrame(half, schema).coalesce(1).write.parquet(path)
        paths.append(path)
    return schema, paths


def stream_of(spark, schema, directory):
    return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            .option("recursiveFileLookup", "true").parquet(os.path.join(directory, "in")))


def run_update(result, directory, keys):
    """``result``'s update-mode rows over its micro-batches, the latest per key (by its first
    ``keys`` columns), or Spark's error condition."""
    latest = {}

    def keep(batch, _):
        for row in collectable(batch).collect():
            latest[repr(canonical(tuple(row)[:keys], True))] = row

    query = (result.writeStream.outputMode("update").foreachBatch(keep)
             .option("checkpointLocation", os.path.join(directory, "checkpoint")).start())
    try:
        query.processAllAvailable()
        return list(latest.values()), None
    except PySparkException as failure:
        return None, condition(failure)
    finally:
        query.stop()


def refused_in_the_stream_merge(case):
    """The built-ins a stream's Python merge cannot keep as Spark does (``docs/plans.md``):
    skew_group must refuse each before the query, naming it."""
    from skewgroup.spark._stateful_types import stateful_type

    return [a.output_name for a, kind, column, _ in case.aggregates
            if column is not None and kind not in ("custom", "python")
            and kind not in SPARK_FUNCTIONS
            and not stateful_type(kind, column.kind.type)]


def with_py_rows(case):
    """The case with the Python aggregator ``VectorizedRowCount`` (over its first key) among its
    aggregates."""
    py_rows = agg.aggregator(VectorizedRowCount(), case.keys[0], name=PY_ROWS_NAME)
    aggregates = case.aggregates + [(py_rows, "python", None, None)]
    return Case(**{**case.__dict__, "aggregates": aggregates})


@pytest.mark.parametrize("plan", STREAM_PLANS)
@settings(max_examples=max(1, STREAM_EXAMPLES // len(STREAM_PLANS)), **SETTINGS)
@given(data=st.data())
def test_stream_with_a_python_aggregator_equals_group_by(spark, plan, data):
    """Every aggregate beside a Python aggregator merges in the stream's stateful Python
    merge: over two micro-batches in update mode, each key's latest row equals groupBy's over
    all rows (the aggregator against its twin, count(1)), or skew_group refuses the built-in
    it cannot keep as Spark does before the query, naming it."""
    case = with_py_rows(data.draw(cases(plan, streaming=True, python=True), label="case"))
    assume(case.rows and not fails_in_skew_group(case, streaming=True, python=True)
           and not collated_key(case))
    describe(case)
    with stream_session(spark, case) as directory:
        schema, _ = write_micro_batches(spark, case, directory)
        stream = dataframe(spark, case, stream_of(spark, schema, directory))
        refused = refused_in_the_stream_merge(case)
        if refused:
            event("outcome: refused")
            with pytest.raises(TypeError, match=re.escape(refused[0])):
                ours(stream, case)
            return
        result = ours(stream, case)
        expected_fields = fields(theirs(stream, case))
        # The aggregator's result may be null (finish may return None); count(1)'s is not.
        assert fields(result) == [(n, t, True if n == PY_ROWS_NAME else null)
                                  for n, t, null in expected_fields]
        got, error = run_update(result, directory, len(case.keys))
        batch = dataframe(spark, case, spark.read.schema(schema).parquet(
            os.path.join(directory, "in", "part-*")))
        same_outcome(got, error, theirs(batch, case, bounds=True), case)


WINDOW = "__window"


@pytest.mark.parametrize("plan", STREAM_PLANS)
@settings(max_examples=max(1, STREAM_EXAMPLES // len(STREAM_PLANS)), **SETTINGS)
@given(data=st.data())
def test_windowed_append_equals_group_by(spark, plan, data):
    """A one-minute window over an event time (ten seconds a row, a ten-minute watermark)
    among the keys, in append mode: built-ins and custom aggregates (Spark's aggregation) or
    those beside a Python aggregator (the stateful Python merge). A last micro-batch of one
    row a day later closes every window of the data, and each window's rows equal groupBy's
    over the data rows."""
    python = data.draw(st.booleans(), label="python aggregator")
    case = data.draw(cases(plan, streaming=True, python=python), label="case")
    case = with_py_rows(case) if python else case
    assume(case.rows and not fails_in_skew_group(case, streaming=True, python=python)
           and not collated_key(case) and not (python and refused_in_the_stream_merge(case)))
    describe(case)
    event(f"python aggregator: {python}")
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    with stream_session(spark, case) as directory:
        def event_times(rows):
            return "__t", T.TimestampType(), [start + dt.timedelta(seconds=10 * i)
                                              for i in range(len(rows))]

        schema, _ = write_micro_batches(spark, case, directory, event_times)
        late = os.path.join(directory, "in", "part-2")     # a day later: closes the data's
        spark.createDataFrame([case.rows[0] + (start + dt.timedelta(days=1),)],
                              schema).write.parquet(late)
        windowed = (stream_of(spark, schema, directory).withWatermark("__t", "10 minutes")
                    .withColumn(WINDOW, F.window("__t", "1 minute")))
        stream = dataframe(spark, case, windowed, extra=[WINDOW])
        wcase = Case(**{**case.__dict__, "keys": [WINDOW] + case.keys})
        result = ours(stream, wcase, output_mode="append")
        got, error = run_memory(spark, result, "append", directory)
        data_rows = (spark.read.schema(schema).parquet(
            os.path.join(directory, "in", "part-0"), os.path.join(directory, "in", "part-1"))
            .withColumn(WINDOW, F.window("__t", "1 minute")))
        same_outcome(got, error, theirs(dataframe(spark, case, data_rows, extra=[WINDOW]),
                                        wcase, bounds=True), wcase)


def test_a_stream_refuses_count_distinct_and_the_split_plan(spark, tmp_path):
    spark.createDataFrame([(1, 2)], "k int, v int").write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema("k int, v int").parquet(str(tmp_path / "in"))
    with pytest.raises(ValueError, match="count_distinct"):
        stream.transform(skew_group("k", agg.count_distinct("v"), plan="routed"))
    with pytest.raises(ValueError, match="plan='split'"):
        stream.transform(skew_group("k", agg.count(), ROWS_N, plan="split"))


# --- differences from groupBy: each the smallest input that shows it -------------------------

def same_as_group_by(df, keys, builtins, custom=(ROWS_N,), plan="routed"):
    """skew_group(keys, *builtins, *custom) against groupBy(keys).agg(*builtins, a row count
    per custom aggregate): schema, then rows. ``builtins``: (aggregate kind, column) pairs."""
    result = df.transform(skew_group(keys, *[BUILTINS[k][0](c) for k, c in builtins], *custom,
                                     workers=3, plan=plan))
    counts = [F.sum(F.lit(1).cast("long")).alias("n" if c is ROWS_N else "key_rows")
              for c in custom]
    reference = df.groupBy(*([keys] if isinstance(keys, str) else keys)).agg(
        *[BUILTINS[k][1](c) for k, c in builtins], *counts)
    assert fields(result) == fields(reference)
    assert (sorted(repr(canonical(tuple(r), True)) for r in collectable(result).collect())
            == sorted(repr(canonical(tuple(r), True)) for r in collectable(reference).collect()))


@pytest.mark.parametrize("plan", PLANS)
def test_a_non_nullable_key_beside_a_custom_aggregate_stays_not_null(spark, plan):
    df = spark.createDataFrame([(1, 2), (1, 3), (2, 4)], T.StructType([
        T.StructField("k", T.IntegerType(), False), T.StructField("v", T.IntegerType())]))
    same_as_group_by(df, "k", [("sum", "v")], plan=plan)


@pytest.mark.xfail(strict=True, raises=PySparkException, reason=(
    "with a custom aggregate, a null struct of a type with a field that is not nullable, in a "
    "key or an aggregate's input, fails the partial (pyarrow: nulls in input cannot be viewed "
    "as non-nullable)"))
@pytest.mark.parametrize("keys, builtins", [("s", []), ("k", [("max", "s")]),
                                            ("k", [("count", "s")])])
def test_known_null_struct_with_a_required_field_beside_a_custom_aggregate(spark, keys,
                                                                            builtins):
    pair = T.StructType([T.StructField("a", T.IntegerType(), False),
                         T.StructField("b", T.StringType())])
    df = spark.createDataFrame([(1, (1, "x")), (1, None), (2, (3, None))],
                               T.StructType([T.StructField("k", T.IntegerType()),
                                             T.StructField("s", pair)]))
    same_as_group_by(df, keys, builtins)


@pytest.mark.xfail(strict=True, raises=PySparkException, reason=(
    "with a custom aggregate, a null variant in an aggregate's input fails the partial (Arrow "
    "carries a variant as a struct of two binaries that are not nullable; pyarrow: nulls in "
    "input cannot be viewed as non-nullable)"))
def test_known_null_variant_beside_a_custom_aggregate(spark):
    df = spark.sql("select id % 2 as k, if(id = 1, null, parse_json('1')) as v from range(5)")
    same_as_group_by(df, "k", [("count", "v")])


def test_a_collated_key_in_the_hash_plan_is_merged(spark):
    df = spark.createDataFrame([("a",), ("A",), ("b",), ("a",)], "s string").select(
        F.collate(F.col("s"), "UTF8_LCASE").alias("s"))
    result = df.transform(skew_group("s", ROWS_N, workers=3, plan="hash"))
    reference = df.groupBy("s").agg(F.sum(F.lit(1).cast("long")).alias("n"))
    assert fields(result) == fields(reference)
    assert (sorted(folded(result.collect(), fields(result)))
            == sorted(folded(reference.collect(), fields(reference))))


@pytest.mark.xfail(strict=True, raises=PySparkException, reason=(
    "count of a calendar interval beside a custom aggregate fails: the partial's Arrow schema "
    "has no calendar interval (UNSUPPORTED_DATA_TYPE_FOR_ARROW_CONVERSION)"))
def test_known_count_of_a_calendar_interval_beside_a_custom_aggregate(spark):
    df = spark.sql("select id % 2 as k, make_interval(0, 0, 0, cast(id as int)) as i "
                   "from range(5)")
    same_as_group_by(df, "k", [("count", "i")])


@pytest.mark.xfail(strict=True, raises=TypeError, reason=(
    "sum and mean of a year-month interval beside a custom aggregate are refused "
    "(TypeError: Arrow carries no such interval); groupBy gives them"))
@pytest.mark.parametrize("kind", ["sum", "mean"])
def test_known_year_month_sum_beside_a_custom_aggregate(spark, kind):
    df = spark.sql("select id % 2 as k, make_ym_interval(0, cast(id as int)) as m from range(5)")
    same_as_group_by(df, "k", [(kind, "m")])


@pytest.mark.xfail(strict=True, raises=TypeError, reason=(
    "skew_group refuses keys of types groupBy groups by (TypeError: keys must be numbers, "
    "strings, binary, booleans, dates, timestamps, intervals, or structs of those)"))
@pytest.mark.parametrize("key", ["array(id % 2) as g", "map('a', id % 2) as g",
                                 "named_struct('s', named_struct('a', id % 2)) as g",
                                 "named_struct('a', array(id % 2)) as g",
                                 "named_struct('m', make_ym_interval(0, 1)) as g",
                                 "null as g"])
def test_known_key_types_group_by_takes(spark, key):
    df = spark.sql(f"select {key}, id as v from range(5)")
    same_as_group_by(df, "g", [("sum", "v")], custom=(), plan="local")


@pytest.mark.xfail(strict=True, raises=ValueError, reason=(
    "two aggregates with one output name are refused (ValueError: use .alias()); groupBy "
    "gives both columns"))
def test_known_one_aggregate_twice(spark):
    df = spark.createDataFrame([(1, 2), (1, 3), (2, 4)], "k int, v int")
    same_as_group_by(df, "k", [("sum", "v"), ("sum", "v")], custom=(), plan="local")
