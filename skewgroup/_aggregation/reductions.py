"""Spark's built-in reductions over Arrow groups, for a stream's stateful merge in Python.

A stream whose call has a Python aggregator (``agg.aggregator``) merges every aggregate of the
call in one stateful Python step (``stream.runs.merge_runs``): the built-ins (count, sum, min, max,
mean) and the custom aggregates' merge rules (sum, min, max, count, first, last, bool_and,
bool_or) then run here, with Spark's semantics, not in Spark's aggregation. Each reduction keeps a
state of two columns per key, a value and ``n``, the number of non-null inputs behind it:

* the value column never holds a null (a key with no non-null input has the kind's filler), and
  its result is null exactly when ``n`` is 0, as Spark's sum, min, max and avg give null for a
  key of nulls;
* ``count`` keeps ``n`` only.

Spark's semantics, kept here:

* sum of byte, short, int, long: a long. Under ANSI mode (``spark.sql.ansi.enabled``, Spark 4's
  default) an overflow fails, as Spark's sum fails with ARITHMETIC_OVERFLOW; otherwise it wraps,
  as Spark's does. The sum is exact either way: each value is split into its high and low 32
  bits, summed apart and carried (no 128-bit integer in numpy).
* sum and avg of float and double: a double, NaN and infinities propagating.
* min and max: nulls skipped; NaN greater than every number (Spark's ordering of doubles), so
  max is NaN when a NaN is among the values and min is NaN only when every value is;
  strings and binary by their bytes (UTF8_BINARY); booleans false < true.
* first and last (custom merges, as ``first(c, ignorenulls=True)``): the first or the last non-null
  value in the order the rows come (a bucket's stored state before a micro-batch's rows).

What this module cannot keep as Spark does (a decimal's precision and its overflow to null, an
interval's sum, a collated string's order) is refused by the Spark layer before a query starts.

>>> import numpy as np, pyarrow as pa
>>> total = Reduction("sum", pa.int64())
>>> state = total.reduce(pa.array([1, None, 3, None]), np.array([0, 3, 4]))
>>> [a.to_pylist() for a in state]
[[4, 0], [2, 0]]
>>> total.result(total.merge(state, np.array([0, 2]))).to_pylist()
[4]
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewgroup._aggregation.arrow_columns import (fill_nulls, filled, segment_sum,
                                                  single_array, to_numpy, valid_mask)

KINDS = ("count", "sum", "mean", "min", "max", "first", "last", "bool_and", "bool_or")
_ORDERED = ("min", "max", "bool_and", "bool_or")
_HIGH = 32
_LOW_MASK = (1 << _HIGH) - 1


def reducible(kind, value_type):
    """Whether ``kind`` over Arrow ``value_type`` keeps Spark's semantics here."""
    t = value_type
    if kind == "count" or kind in ("first", "last"):
        return True
    if kind in ("sum", "mean"):
        return pa.types.is_integer(t) or pa.types.is_floating(t)
    if kind in ("bool_and", "bool_or"):
        return pa.types.is_boolean(t)
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_date(t) or pa.types.is_timestamp(t))


class Reduction:
    """One of Spark's reductions, ``kind`` (``KINDS``) over values of Arrow ``value_type``.

    ``reduce`` turns grouped input values into a state per group, ``merge`` grouped states
    into one per group, ``result`` a state into the values Spark's function gives. Groups are
    given by ``offsets`` (g + 1 boundaries, each group non-empty), the arrays in group order.
    """

    def __init__(self, kind, value_type, ansi=True, name=None):
        if kind not in KINDS:
            raise ValueError(f"The 'kind' parameter must be one of {list(KINDS)}. Got {kind!r}.")
        if not reducible(kind, value_type):
            raise TypeError(f"{kind} of {value_type} has no exact reduction here.")
        self.kind, self.input_type, self.ansi = kind, value_type, ansi
        self.name = name or kind
        if kind in ("sum",) and pa.types.is_integer(value_type):
            self.value_type = pa.int64()
        elif kind in ("sum", "mean"):
            self.value_type = pa.float64()
        else:
            self.value_type = value_type

    @property
    def state_types(self):
        """The Arrow types of the state's columns: (value, n), or (n,) for count."""
        return [pa.int64()] if self.kind == "count" else [self.value_type, pa.int64()]

    @property
    def result_type(self):
        return pa.int64() if self.kind == "count" else (
            pa.float64() if self.kind == "mean" else self.value_type)

    def reduce(self, values, offsets):
        """The state of each group of input ``values`` (an Arrow array, nulls skipped)."""
        values = single_array(values)
        valid = valid_mask(values)
        n = segment_sum(valid.astype(np.int64), offsets)
        if self.kind == "count":
            return [pa.array(n, pa.int64())]
        if self.kind in ("sum", "mean") and self.value_type != values.type:   # a long or a double
            values = values.cast(self.value_type, safe=False)   # a long rounds to a double
        return [self._combine(values, valid, offsets), pa.array(n, pa.int64())]

    def merge(self, state, offsets):
        """The merged state of each group of ``state`` (the arrays ``reduce`` gives)."""
        if self.kind == "count":
            return [pa.array(segment_sum(to_numpy(state[0]), offsets), pa.int64())]
        values, counts = single_array(state[0]), to_numpy(state[1])
        return [self._combine(values, counts > 0, offsets),
                pa.array(segment_sum(counts, offsets), pa.int64())]

    def result(self, state):
        """Spark's result of each state: null where no non-null value was reduced."""
        if self.kind == "count":
            return single_array(state[0])
        values, counts = single_array(state[0]), to_numpy(state[1])
        empty = counts == 0
        if self.kind == "mean":
            totals = to_numpy(values).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                means = totals / np.where(empty, 1, counts)
            return pa.array(means, pa.float64(), mask=empty)
        return pc.if_else(pa.array(empty), pa.nulls(len(values), values.type), values)

    # --- the combination of a group's values, nulls (``valid`` false) skipped -------------------

    def _combine(self, values, valid, offsets):
        """One value per group, never null: the kind's filler where a group has no valid one."""
        kind = self.kind
        if kind in ("sum", "mean"):
            if pa.types.is_integer(self.value_type):
                return pa.array(self._checked_sum(filled(values, valid, 0), offsets), pa.int64())
            return pa.array(segment_sum(filled(values, valid, 0.0), offsets), pa.float64())
        if kind in ("first", "last"):
            return _pick(values, valid, offsets, last=kind == "last")
        if pa.types.is_floating(values.type):
            return pa.array(_float_extreme(to_numpy(values).astype(np.float64), valid, offsets,
                                           largest=kind == "max"), values.type)
        largest = kind in ("max", "bool_or")
        picked = _arrow_extreme(values, valid, offsets, largest)
        return fill_nulls(picked, dates_times_decimals=False)

    def _checked_sum(self, values, offsets):
        """Each group's int64 sum, exact: an overflow raises under ANSI, else wraps as Java's
        long addition does."""
        values = values.astype(np.int64)
        high = segment_sum(values >> _HIGH, offsets)
        low = segment_sum(values & _LOW_MASK, offsets)   # < 2^63 below 2^31 rows a group
        high += low >> _HIGH
        low &= _LOW_MASK
        if self.ansi:
            over = (high >= 1 << (63 - _HIGH)) | (high < -(1 << (63 - _HIGH)))
            if over.any():
                raise ArithmeticError(
                    f"[ARITHMETIC_OVERFLOW] {self.name}: the sum overflows a long (bigint), "
                    f"as Spark's sum does under ANSI mode. Cast the column to a decimal or a "
                    f"double first, or set spark.sql.ansi.enabled to false to wrap around.")
        return (high << _HIGH) + low   # wraps modulo 2^64 outside ANSI, as Spark's sum does


def _float_extreme(values, valid, offsets, largest):
    """Spark's max (NaN above every number) or min (NaN only if every value is NaN) of each
    group of doubles, invalid entries skipped (filler 0.0 where a group has none)."""
    if len(offsets) <= 1:
        return np.zeros(0)
    starts = offsets[:-1]
    if largest:
        result = np.maximum.reduceat(np.where(valid, values, -np.inf), starts)  # NaN propagates
    else:
        result = np.fmin.reduceat(np.where(valid, values, np.nan), starts)      # NaN skipped
    counts = np.add.reduceat(valid.astype(np.int64), starts)
    return np.where(counts > 0, result, 0.0)


def _arrow_extreme(values, valid, offsets, largest):
    """Arrow's min or max of each group (any ordered type: its bytes for strings)."""
    groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    masked = pc.if_else(pa.array(valid), values, pa.nulls(len(values), values.type))
    how = "max" if largest else "min"
    table = pa.table({"g": groups, "v": masked})
    return table.group_by("g", use_threads=False).aggregate([("v", how)]).column(
        f"v_{how}").combine_chunks()


def _pick(values, valid, offsets, last):
    """The first or last valid value of each group (the group's first value where none is)."""
    if len(offsets) <= 1:
        return values.slice(0, 0)
    index = np.arange(len(values), dtype=np.int64)
    starts = offsets[:-1]
    if last:
        chosen = np.maximum.reduceat(np.where(valid, index, -1), starts)
    else:
        chosen = np.minimum.reduceat(np.where(valid, index, len(values)), starts)
    chosen = np.where((chosen < 0) | (chosen >= len(values)), starts, chosen)
    return fill_nulls(values.take(pa.array(chosen)), dates_times_decimals=False)
