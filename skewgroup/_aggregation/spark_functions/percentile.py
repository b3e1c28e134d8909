"""Spark's percentile(x, p[, frequency]) and median(x) as reductions over Arrow groups: exact,
as Spark's own state (each distinct value's count) is.
"""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.arrow_columns import filled, single_array, valid_mask
from skewgroup._aggregation.spark_functions.arguments import UnsupportedFunction, expect


class _Percentile:
    """Spark's percentile(x, p[, frequency]) and median(x) (percentile(x, 0.5)) of a number:
    Spark's state is each distinct value's count, and so is this one, so the result is exact.
    State: one binary value per key, its distinct values as doubles in ascending order (Spark
    sorts a double's NaN above every number) and their counts as int64s after them. A value is
    kept as a double: Spark reads each value as a double for the result, and two longs one
    double apart sort and interpolate the same as that double. The result is Spark's: the
    value at position p * (n - 1) of the sorted values, interpolated between the two values
    around it (``low + (position - lower) * (high - low)``); null for a key without values."""

    def __init__(self, function, arg_types, params, ansi):
        if function == "median":
            expect(function, arg_types, params, 1)
            self.percentage, frequency = 0.5, 1
        else:
            if len(arg_types) != 1:
                raise UnsupportedFunction(
                    f"percentile takes one column and one literal percentage here (an array "
                    f"of percentages, or a frequency column, has no reduction: write one "
                    f"percentile(x, p) a percentage); got {len(arg_types)} column arguments.")
            expect(function, arg_types, params, 1, max_params=2)
            if not params or isinstance(params[0], bool) or not isinstance(params[0],
                                                                          (int, float)):
                raise UnsupportedFunction(f"percentile takes one literal percentage here (an "
                                          f"array of them has no reduction); got {params!r}.")
            self.percentage = float(params[0])
            frequency = params[1] if len(params) > 1 else 1
            if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
                raise UnsupportedFunction(f"percentile's frequency must be a literal integer "
                                          f"above 0 here; got {frequency!r}.")
        t = arg_types[0]
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise UnsupportedFunction(f"{function} of {t} has no reduction here (integers, "
                                      f"floats and doubles have).")
        self.frequency = frequency
        self.state_types = [pa.binary()]
        self.result_type = pa.float64()

    def reduce(self, args, offsets):
        values = single_array(args[0])
        valid = valid_mask(values)
        x = filled(values.cast(pa.float64(), safe=False), valid, 0.0).astype(np.float64)
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        counts = np.full(len(x), self.frequency, dtype=np.int64)
        return [_encode_counts(groups[valid], x[valid], counts[valid], len(offsets) - 1)]

    def merge(self, state, offsets):
        groups, x, counts = _decode_counts(single_array(state[0]))
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))[groups]
        return [_encode_counts(groups, x, counts, len(offsets) - 1)]

    def result(self, state):
        blobs = single_array(state[0])
        groups, x, counts = _decode_counts(blobs)
        out = np.full(len(blobs), np.nan)
        has = np.zeros(len(blobs), dtype=bool)
        starts = np.searchsorted(groups, np.arange(len(blobs) + 1))
        for g in range(len(blobs)):
            lo, hi = starts[g], starts[g + 1]
            if lo == hi:
                continue
            has[g] = True
            keys, accumulated = x[lo:hi], np.cumsum(counts[lo:hi])
            position = float(accumulated[-1] - 1) * self.percentage
            lower, higher = int(np.floor(position)), int(np.ceil(position))
            lower_key = keys[np.searchsorted(accumulated, lower + 1)]
            higher_key = keys[np.searchsorted(accumulated, higher + 1)]
            if higher == lower or higher_key == lower_key or (
                    np.isnan(lower_key) and np.isnan(higher_key)):
                out[g] = lower_key
            else:
                with np.errstate(invalid="ignore", over="ignore"):
                    # Spark's PercentileBase.getPercentile, term for term
                    out[g] = lower_key + (position - lower) * (higher_key - lower_key)
        return pa.array(out, pa.float64(), mask=~has)


def _encode_counts(groups, x, counts, n_groups):
    """Each group's distinct values (ascending, NaN last, -0.0 as 0.0) and their summed counts
    as one binary value: the values' float64 bytes, then their counts' int64 bytes."""
    x = np.where(x == 0, 0.0, x)
    x = np.where(np.isnan(x), np.nan, x)             # one NaN
    order = np.lexsort((x, groups))
    groups, x, counts = groups[order], x[order], counts[order]
    first = np.ones(len(x), dtype=bool)
    same_value = (x[1:] == x[:-1]) | (np.isnan(x[1:]) & np.isnan(x[:-1]))
    first[1:] = (groups[1:] != groups[:-1]) | ~same_value
    starts = np.flatnonzero(first)
    summed = np.add.reduceat(counts, starts) if len(starts) else counts[:0]
    groups, x = groups[starts], x[starts]
    per_group = np.bincount(groups, minlength=n_groups)
    blobs, at = [], 0
    for n in per_group:
        blobs.append(x[at:at + n].tobytes() + summed[at:at + n].tobytes())
        at += n
    return pa.array(blobs, pa.binary())


def _decode_counts(blobs):
    """(group of each value, values, counts) of :func:`_encode_counts`'s binary values (a
    null as no values), groups ascending."""
    groups, xs, counts = [], [], []
    for g, blob in enumerate(blobs.to_pylist()):
        if not blob:
            continue
        n = len(blob) // 16
        xs.append(np.frombuffer(blob, dtype=np.float64, count=n))
        counts.append(np.frombuffer(blob, dtype=np.int64, count=n, offset=8 * n))
        groups.append(np.full(n, g, dtype=np.int64))
    if not xs:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    return np.concatenate(groups), np.concatenate(xs), np.concatenate(counts)


FACTORIES = {"percentile": _Percentile, "median": _Percentile}
