"""Spark's collect_set(x) as a reduction over Arrow groups: a set per key as one binary value.
"""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.arrow_columns import (as_integers, as_storage, filled, single_array,
                                                  storage_type, valid_mask)
from skewgroup._aggregation.spark_functions.arguments import UnsupportedFunction, expect


class _CollectSet:
    """Spark's collect_set(x): the distinct non-null values, an array (empty, never null, for a
    group of nulls), in no specified order (here: by the values' bits or bytes). Doubles and
    floats are normalized as Spark's are: -0.0 as 0.0, every NaN one NaN. State: one binary value
    per key, the set's encoding: a fixed-width type's values end to end (native byte order); a
    string's or binary's as a uint32 count, that many int32 lengths, then the bytes."""

    def __init__(self, function, arg_types, params, ansi):
        expect(function, arg_types, params, 1)
        t = arg_types[0]
        if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_temporal(t)):
            self.width = 1 if pa.types.is_boolean(t) else t.bit_width // 8
        elif (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
              or pa.types.is_large_binary(t)):
            self.width = None
        else:
            raise UnsupportedFunction(
                f"collect_set of {t} has no reduction here (numbers, booleans, dates, timestamps, "
                f"strings and binary have).")
        self.type = t
        self.state_types = [pa.binary()]
        self.result_type = pa.list_(pa.field("element", t, nullable=False))

    # a fixed-width value as an unsigned integer of its bits, floats normalized first
    def _bits(self, values):
        t = self.type
        valid = valid_mask(values)
        if pa.types.is_floating(t):
            x = filled(values, valid, 0.0).astype(t.to_pandas_dtype())
            x = np.where(x == 0, x.dtype.type(0), x)              # -0.0 -> 0.0
            x = np.where(np.isnan(x), x.dtype.type(np.nan), x)   # one NaN
        elif pa.types.is_boolean(t):
            x = filled(values, valid, False).astype(np.uint8)
        else:
            x = as_integers(as_storage(values) if pa.types.is_temporal(t) else values, valid)
        return np.ascontiguousarray(x).view(f"u{self.width}"), valid

    def _from_bits(self, bits):
        t = self.type
        if pa.types.is_boolean(t):
            return pa.array(bits.astype(bool))
        if pa.types.is_floating(t):
            return pa.array(bits.view(t.to_pandas_dtype()), t)
        storage = storage_type(t)
        array = pa.array(bits.view(f"i{self.width}"), storage)
        return array.view(t) if storage != t else array

    def reduce(self, args, offsets):
        values = single_array(args[0])
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        if self.width is None:
            valid = valid_mask(values)
            return [self._encode_variable(groups[valid], values.filter(pa.array(valid)),
                                          len(offsets) - 1)]
        bits, valid = self._bits(values)
        return [self._encode_fixed(groups[valid], bits[valid], len(offsets) - 1)]

    def merge(self, state, offsets):
        groups, values = self._decode(single_array(state[0]))
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))[groups]
        if self.width is None:
            return [self._encode_variable(groups, values, len(offsets) - 1)]
        return [self._encode_fixed(groups, values, len(offsets) - 1)]

    def result(self, state):
        groups, values = self._decode(single_array(state[0]))
        counts = np.bincount(groups, minlength=len(state[0]))
        list_offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        if self.width is not None:
            values = self._from_bits(values)
        return pa.ListArray.from_arrays(list_offsets, values, type=self.result_type)

    def _encode_fixed(self, groups, bits, n_groups):
        order = np.lexsort((bits, groups))
        groups, bits = groups[order], bits[order]
        first = np.ones(len(bits), dtype=bool)
        first[1:] = (groups[1:] != groups[:-1]) | (bits[1:] != bits[:-1])
        groups, bits = groups[first], bits[first]
        counts = np.bincount(groups, minlength=n_groups)
        byte_offsets = np.concatenate([[0], np.cumsum(counts) * self.width]).astype(np.int32)
        data = np.ascontiguousarray(bits).view(np.uint8)
        return pa.BinaryArray.from_buffers(pa.binary(), n_groups, [
            None, pa.py_buffer(byte_offsets), pa.py_buffer(data.tobytes())])

    def _encode_variable(self, groups, values, n_groups):
        table = pa.table({"g": pa.array(groups, pa.int64()), "v": values})
        distinct = table.group_by(["g", "v"], use_threads=False).aggregate([]).sort_by(
            [("g", "ascending"), ("v", "ascending")])
        groups = distinct.column("g").to_numpy()
        values = distinct.column("v").combine_chunks().cast(pa.large_binary())
        counts = np.bincount(groups, minlength=n_groups)
        starts = np.concatenate([[0], np.cumsum(counts)])
        value_offsets = np.frombuffer(values.buffers()[1], np.int64)[
            values.offset:values.offset + len(values) + 1]
        data = values.buffers()[2]
        data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        lengths = np.diff(value_offsets).astype(np.int32)
        blobs = []
        for g in range(n_groups):
            a, b = starts[g], starts[g + 1]
            blobs.append(np.uint32(b - a).tobytes() + lengths[a:b].tobytes()
                         + data[value_offsets[a]:value_offsets[b]].tobytes())
        return pa.array(blobs, pa.binary())

    def _decode(self, blobs):
        """(the state row of each value, the values: bits, or an Arrow array of the type)."""
        n = len(blobs)
        if self.width is not None:
            blob_offsets = np.frombuffer(blobs.buffers()[1], np.int32)[
                blobs.offset:blobs.offset + n + 1]
            data = blobs.buffers()[2]
            raw = (np.frombuffer(data, np.uint8)[blob_offsets[0]:blob_offsets[-1]]
                   if data is not None else np.zeros(0, np.uint8))
            bits = raw.view(f"u{self.width}")
            counts = np.diff(blob_offsets) // self.width
            return np.repeat(np.arange(n), counts), bits
        lengths, chunks, counts = [], [], np.zeros(n, dtype=np.int64)
        for i, blob in enumerate(blobs.to_pylist()):
            count = int(np.frombuffer(blob, np.uint32, 1)[0])
            counts[i] = count
            lengths.append(np.frombuffer(blob, np.int32, count, 4))
            chunks.append(blob[4 + 4 * count:])
        lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
        value_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), len(lengths),
            [None, pa.py_buffer(value_offsets), pa.py_buffer(b"".join(chunks))])
        return np.repeat(np.arange(n), counts), values.cast(self.type)


FACTORIES = {"collect_set": _CollectSet}
