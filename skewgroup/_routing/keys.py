"""Turn user keys (numpy, Arrow, Python lists) into seeded 64-bit hashes, whole arrays at a time.

The per-element work happens in the compiled ``_hash`` (``skewgroup._routing._hash``) over
Arrow/numpy buffers; this module only picks the kernel for a type. See ``_hash`` for how each
type hashes.
"""
import numbers

import numpy as np
import pyarrow as pa

from skewgroup._routing import _hash

_INTEGER_LIKE = (
    pa.types.is_integer,
    pa.types.is_boolean,
    pa.types.is_temporal,
)


def hash_keys(keys, seed=0):
    """Hash ``keys`` to a uint64 numpy array, one hash per key.

    Parameters
    ----------
    keys : numpy.ndarray (1-D), pyarrow.Array, pyarrow.ChunkedArray or list
        Integers, floats, bools, strings, bytes, dates/timestamps; ``None``/nulls hash to one
        fixed value. A list must hold values of one type.
    seed : int
        Hash seed, 0 <= seed < 2**64.
    """
    arrow = to_arrow(keys)
    out = np.empty(len(arrow), dtype=np.uint64)
    if isinstance(arrow, pa.ChunkedArray):
        start = 0
        for chunk in arrow.chunks:
            _hash_array(chunk, seed, out[start:start + len(chunk)])
            start += len(chunk)
    else:
        _hash_array(arrow, seed, out)
    return out


def to_arrow(keys):
    """``keys`` as a pyarrow Array or ChunkedArray, or a clear error naming what was given."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return keys
    if isinstance(keys, np.ndarray):
        if keys.ndim != 1:
            raise ValueError(
                f"The 'keys' parameter must be one-dimensional. Got an array of shape {keys.shape}."
            )
        if keys.dtype.kind not in "biufUSOMm":
            raise TypeError(
                f"The 'keys' parameter must hold integers, floats, bools, strings, bytes or "
                f"datetimes. Got a numpy array of dtype {keys.dtype}."
            )
        if keys.dtype.kind in "biufMm":
            return pa.array(keys)
        return _from_python(keys.tolist(), "a numpy array of dtype object")
    if isinstance(keys, (list, tuple)):
        return _from_python(list(keys), "a list")
    if isinstance(keys, (str, bytes)) or np.isscalar(keys):
        raise TypeError(
            f"The 'keys' parameter must be a sequence of keys (numpy array, pyarrow array or "
            f"list). Got a single {type(keys).__name__} {keys!r}; wrap it in a list."
        )
    raise TypeError(
        f"The 'keys' parameter must be a numpy array, a pyarrow Array/ChunkedArray or a list. "
        f"Got {type(keys).__name__} instead."
    )


def _kind(t):
    """The key kind of a Python type: one hash family per kind (bool, int, float, str, bytes)."""
    for kind in (bool, np.bool_, numbers.Integral, numbers.Real, str, bytes):
        if issubclass(t, kind):
            return {np.bool_: bool, numbers.Integral: int, numbers.Real: float}.get(kind, kind)
    return t


def _from_python(values, what):
    # Arrow would read [1, 2.5] as float64 and [b"a", "a"] as one column; then the key 1 would
    # hash (and route) differently than in an all-int batch. One kind per input, or an error.
    kinds = {_kind(t) for t in {type(v) for v in values if v is not None}}
    if len(kinds) > 1:
        names = sorted(k.__name__ for k in kinds)
        raise TypeError(
            f"The 'keys' parameter must hold values of one type (ints, floats, strs or bytes; "
            f"None for null). Got {what} mixing {', '.join(names)}."
        )
    try:
        arrow = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise TypeError(
            f"The 'keys' parameter must hold values of one type (ints, floats, strs or bytes; "
            f"None for null). Got {what} that Arrow cannot read as one column: {exc}"
        ) from None
    if pa.types.is_nested(arrow.type):
        raise TypeError(
            f"The 'keys' parameter must hold scalar keys. Got {what} of {arrow.type} values."
        )
    return arrow


def _validity(arr):
    """(bitmap as uint8 numpy array or None, bit offset) of an Arrow array."""
    if arr.null_count == 0:
        return None, 0
    buf = arr.buffers()[0]
    return np.frombuffer(buf, dtype=np.uint8), arr.offset


def _hash_array(arr, seed, out):
    t = arr.type
    if len(arr) == 0:
        return
    if pa.types.is_dictionary(t):
        table = np.empty(len(arr.dictionary), dtype=np.uint64)
        _hash_array(arr.dictionary, seed, table)
        indices = arr.indices.cast(pa.int64())
        validity, offset = _validity(indices)
        filled = indices.fill_null(0) if indices.null_count else indices
        _hash.take(table, filled.to_numpy(zero_copy_only=False), seed, out, validity, offset)
        return
    if pa.types.is_null(t):
        _hash.fill_null(seed, out)
        return
    if pa.types.is_struct(t):
        # A struct key (such as Spark's time window) hashes its fields in order; a null struct
        # is the null key.
        if t.num_fields == 0:
            raise TypeError("The 'keys' parameter has a struct type without fields.")
        _hash_array(arr.field(0), seed, out)
        for i in range(1, t.num_fields):
            child = np.empty(len(arr), dtype=np.uint64)
            _hash_array(arr.field(i), seed, child)
            _hash.combine(out, child)
        if arr.null_count:
            validity, offset = _validity(arr)
            _hash.take(out.copy(), np.arange(len(arr), dtype=np.int64), seed, out, validity, offset)
        return
    if pa.types.is_floating(t):
        values = arr.cast(pa.float64()) if t != pa.float64() else arr
        validity, offset = _validity(values)
        data = np.frombuffer(values.buffers()[1], dtype=np.float64)[values.offset:values.offset + len(values)]
        _hash.hash_float64(np.ascontiguousarray(data), seed, out, validity, offset)
        return
    if pa.types.is_unsigned_integer(t) and t.bit_width == 64:
        values = arr
        validity, offset = _validity(values)
        data = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset:values.offset + len(values)]
        _hash.hash_int64(np.ascontiguousarray(data), seed, out, validity, offset)
        return
    if any(check(t) for check in _INTEGER_LIKE):
        values = arr if t == pa.int64() else _as_int64(arr)
        validity, offset = _validity(values)
        data = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset:values.offset + len(values)]
        _hash.hash_int64(np.ascontiguousarray(data), seed, out, validity, offset)
        return
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    if large or pa.types.is_string(t) or pa.types.is_binary(t):
        validity, offset = _validity(arr)
        bufs = arr.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)
        offsets = offsets[arr.offset:arr.offset + len(arr) + 1]
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
        _hash.hash_binary(np.ascontiguousarray(offsets), data, seed, out, validity, offset)
        return
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        _hash_array(arr.cast(pa.large_binary()), seed, out)
        return
    if pa.types.is_decimal(t) or pa.types.is_fixed_size_binary(t):
        _hash_array(arr.cast(pa.string()) if pa.types.is_decimal(t) else arr.cast(pa.binary()), seed, out)
        return
    raise TypeError(
        f"The 'keys' parameter has Arrow type {t}, which skewgroup cannot hash; supported: "
        f"integers, floats, bool, strings, binary, dates, times, timestamps, durations, "
        f"decimals, dictionary-encoded of those, null."
    )


def _as_int64(arr):
    """Integer-like Arrow array widened to int64 by value (bool -> 0/1, temporal -> its int)."""
    t = arr.type
    if pa.types.is_boolean(t):
        return pa.array(arr.to_numpy(zero_copy_only=False).astype(np.int64) if arr.null_count == 0
                        else arr.cast(pa.int8()).cast(pa.int64()))
    if pa.types.is_temporal(t):
        storage = pa.int32() if t.bit_width == 32 else pa.int64()
        return arr.view(storage).cast(pa.int64()) if t.bit_width in (32, 64) else arr.cast(pa.int64())
    return arr.cast(pa.int64())
