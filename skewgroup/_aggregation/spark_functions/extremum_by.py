"""Spark's min_by(x, ord) and max_by(x, ord) as reductions over Arrow groups, and the carrying
of a value of any type in a state (``_Carried``).
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewgroup._aggregation.arrow_columns import (as_integers, as_storage, fill_nulls, filled,
                                                  segment_sum, single_array, storage_type, to_numpy,
                                                  valid_mask)
from skewgroup._aggregation.spark_functions.arguments import UnsupportedFunction, expect


class _ExtremumBy:
    """Spark's max_by(x, ord) / min_by(x, ord): state (x's columns, ord filled, n of non-null
    ords). Ties on the extreme ord: the last row (or state) in group order, as Spark's."""

    def __init__(self, function, arg_types, params, ansi):
        expect(function, arg_types, params, 2)
        x_type, ord_type = arg_types
        if not _orderable(ord_type):
            raise UnsupportedFunction(
                f"{function}'s ordering argument must be a number, string, binary, boolean, date "
                f"or timestamp here; got {ord_type}.")
        self._x = _Carried(function, x_type)
        self.largest = function == "max_by"
        self.ord_type = ord_type
        self.state_types = self._x.types + [storage_type(ord_type), pa.int64()]
        self.result_type = x_type

    def reduce(self, args, offsets):
        x, order = single_array(args[0]), as_storage(single_array(args[1]))
        valid = valid_mask(order)
        chosen = pa.array(_extreme_index(order, valid, offsets, self.largest))
        # only each group's chosen value is encoded (a nested value's encoding costs)
        return self._state(self._x.encode(x.take(chosen)), order.take(chosen),
                           segment_sum(valid.astype(np.int64), offsets))

    def merge(self, state, offsets):
        width = len(self._x.types)
        counts = to_numpy(state[width + 1]).astype(np.int64)
        order = single_array(state[width])
        chosen = pa.array(_extreme_index(order, counts > 0, offsets, self.largest))
        return self._state([single_array(s).take(chosen) for s in state[:width]],
                           order.take(chosen),
                           segment_sum(counts, offsets))

    def _state(self, x_columns, order, counts):
        return self._x.fill(x_columns) + [fill_nulls(order), pa.array(counts, pa.int64())]

    def result(self, state):
        width = len(self._x.types)
        x = self._x.decode([single_array(s) for s in state[:width]])
        n = to_numpy(state[width + 1])
        return pc.if_else(pa.array(n == 0), pa.nulls(len(x), x.type), x)


def _orderable(t):
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_date(t) or pa.types.is_timestamp(t))


def _extreme_index(order, valid, offsets, largest):
    """Per group, the index of the LAST valid row whose ``order`` is the group's extreme in
    Spark's ordering (the group's first row where none is valid)."""
    g = len(offsets) - 1
    if g <= 0:
        return np.zeros(0, dtype=np.int64)
    starts = offsets[:-1]
    sizes = np.diff(offsets)
    t = order.type
    if pa.types.is_floating(t):
        key = filled(order, valid, 0.0).astype(np.float64)
        key = np.where(key == 0.0, 0.0, key)   # -0.0 equals 0.0, as Spark compares doubles
        nan = np.isnan(key)
        # Spark orders NaN above every number and equal to itself: rank NaN apart
        rank = np.where(nan, 1, 0)
        if largest:
            top_rank = np.maximum.reduceat(np.where(valid, rank, -1), starts)
        else:
            top_rank = np.minimum.reduceat(np.where(valid, rank, 2), starts)
        in_rank = valid & (rank == np.repeat(top_rank, sizes))
        number = np.where(nan, 0.0, key)
        if largest:
            best = np.maximum.reduceat(np.where(in_rank, number, -np.inf), starts)
        else:
            best = np.minimum.reduceat(np.where(in_rank, number, np.inf), starts)
        match = in_rank & (number == np.repeat(best, sizes))
    elif _numeric_like(t):
        key = as_integers(order, valid)
        info = np.iinfo(key.dtype)
        if largest:
            best = np.maximum.reduceat(np.where(valid, key, info.min), starts)
        else:
            best = np.minimum.reduceat(np.where(valid, key, info.max), starts)
        match = valid & (key == np.repeat(best, sizes))
    else:   # strings and binary, by their bytes
        masked = pc.if_else(pa.array(valid), order, pa.nulls(len(order), t))
        groups = np.repeat(np.arange(g), sizes)
        how = "max" if largest else "min"
        best = pa.table({"g": groups, "v": masked}).group_by("g", use_threads=False).aggregate(
            [("v", how)])
        best = best.sort_by("g").column(f"v_{how}").combine_chunks()
        extreme = best.take(pa.array(groups))
        match = valid & pc.fill_null(pc.equal(masked, extreme), False).to_numpy(
            zero_copy_only=False)
    index = np.arange(len(order), dtype=np.int64)
    chosen = np.maximum.reduceat(np.where(match, index, -1), starts)
    return np.where(chosen < 0, starts, chosen)


def _numeric_like(t):
    return (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date(t)
            or pa.types.is_timestamp(t))


class _Carried:
    """A value of any Arrow type carried in a state: a fixed-width value as (value filled,
    valid flag), so that no number column holds a null; a string or binary as is; a nested value
    (list, struct, map) as one binary value, its one-row Arrow IPC stream (null for a null)."""

    def __init__(self, function, value_type):
        t = value_type
        if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_temporal(t) or pa.types.is_decimal(t)):
            self.how = "fixed"
            self.types = [storage_type(t), pa.bool_()]
        elif (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
              or pa.types.is_large_binary(t)):
            self.how = "as is"
            self.types = [t]
        elif pa.types.is_nested(t):
            self.how = "ipc"
            self.types = [pa.binary()]
        else:
            raise UnsupportedFunction(
                f"{function}'s value argument of type {t} cannot be kept in a stream's state "
                f"here (numbers, booleans, dates, timestamps, decimals, strings, binary, arrays, "
                f"structs and maps can).")
        self.type = t

    def encode(self, values):
        if self.how == "as is":
            return [values]
        if self.how == "fixed":
            return [as_storage(values), pa.array(valid_mask(values))]
        schema = pa.schema([pa.field("v", self.type)])
        blobs = []
        for i, present in enumerate(valid_mask(values)):
            if not present:
                blobs.append(None)
                continue
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, schema) as writer:
                writer.write_batch(pa.record_batch([values.slice(i, 1)], schema=schema))
            blobs.append(sink.getvalue().to_pybytes())
        return [pa.array(blobs, pa.binary())]

    def fill(self, columns):
        if self.how != "fixed":
            return columns
        return [fill_nulls(columns[0]), pc.fill_null(columns[1], False)]

    def decode(self, columns):
        if self.how == "as is":
            return columns[0]
        if self.how == "fixed":
            valid = to_numpy(columns[1]).astype(bool)
            values = columns[0].view(self.type) if columns[0].type != self.type else columns[0]
            return pc.if_else(pa.array(valid), values, pa.nulls(len(valid), self.type))
        parts = [pa.nulls(1, self.type) if blob is None else
                 pa.ipc.open_stream(blob).read_all().column(0).combine_chunks()
                 for blob in columns[0].to_pylist()]
        return pa.concat_arrays(parts) if parts else pa.nulls(0, self.type)


FACTORIES = {"min_by": _ExtremumBy, "max_by": _ExtremumBy}
