"""Arrow columns as a reduction's inputs and states: the helpers ``reductions`` and the
``spark_functions`` families share (one array from chunks, numpy views, the validity of values,
sums per group, nulls filled with a type's zero, temporal values as their integers).

A group is a run of rows given by ``offsets`` (g + 1 boundaries), as everywhere in
``_aggregation``; every helper works on whole arrays (numpy or Arrow), never row by row.
"""
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def single_array(values):
    """``values`` as one Arrow array (a ChunkedArray's chunks combined)."""
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def to_numpy(array):
    return single_array(array).to_numpy(zero_copy_only=False)


def valid_mask(values):
    """A numpy bool per value: whether it is not null."""
    if values.null_count == 0:
        return np.ones(len(values), dtype=bool)
    return pc.is_valid(values).to_numpy(zero_copy_only=False)


def filled(values, valid, filler):
    """``values`` as numpy, ``filler`` wherever ``valid`` is false (and at each null)."""
    out = (values.fill_null(filler) if values.null_count else values).to_numpy(
        zero_copy_only=False)
    return np.where(valid, out, filler)


def segment_sum(values, offsets):
    """The sum of each group of numpy ``values``."""
    if len(offsets) <= 1:
        return np.zeros(0, dtype=values.dtype)
    return np.add.reduceat(values, offsets[:-1])


def storage_type(t):
    """The type a value of ``t`` is kept as in a state: a date or time as its integer (pandas
    would turn a timestamp into its session's wall-clock time in nanoseconds)."""
    if pa.types.is_temporal(t):
        return pa.int32() if t.bit_width == 32 else pa.int64()
    return t


def as_storage(array):
    storage = storage_type(array.type)
    return array.view(storage) if storage != array.type else array


def as_integers(array, valid):
    """The integer view of a fixed-width, integer-ordered array (its nulls as 0)."""
    t = array.type
    if pa.types.is_boolean(t):
        return filled(array, valid, False).astype(np.int8)
    if pa.types.is_integer(t):
        return filled(array, valid, 0).astype(t.to_pandas_dtype())
    width = t.bit_width
    storage = pa.int32() if width == 32 else pa.int64()
    return filled(array.view(storage), valid, 0).astype(storage.to_pandas_dtype())


def zero_of(t):
    """A zero (the filler of a null) of a fixed-width Arrow type."""
    if pa.types.is_boolean(t):
        return pa.scalar(False)
    if pa.types.is_decimal(t):
        return pa.scalar(decimal.Decimal(0), t)
    if pa.types.is_floating(t):
        return pa.scalar(0.0, t)
    if pa.types.is_integer(t):
        return pa.scalar(0, t)
    storage = {32: pa.int32(), 64: pa.int64()}[t.bit_width]
    return pa.array([0], storage).view(t)[0]


def fill_nulls(array, *, dates_times_decimals=True):
    """``array`` with each null as its type's zero (``zero_of``), where the type is fixed-width:
    numbers, booleans and timestamps, and dates, times, durations and decimals unless
    ``dates_times_decimals`` is false; other types keep their nulls. A state's count or flag
    column beside it says which entries stand for null.

    ``reductions`` passes false: its value columns keep a date's (a time's, a decimal's) null
    in a stream's state, as its checkpoints hold them."""
    if not array.null_count:
        return array
    t = array.type
    if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_timestamp(t)
            or dates_times_decimals and (pa.types.is_date(t) or pa.types.is_time(t)
                                         or pa.types.is_duration(t) or pa.types.is_decimal(t))):
        return array.fill_null(zero_of(t))
    return array
