"""Spark's aggregates of one value per key, folded group by group: the built-ins of
``reductions.Reduction`` (count, sum, avg, min, max, bool_and, bool_or) under this package's
interface, count_if, and bit_and/bit_or/bit_xor.
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewgroup._aggregation.arrow_columns import (filled, segment_sum, single_array, to_numpy,
                                                  valid_mask)
from skewgroup._aggregation.reductions import Reduction, reducible
from skewgroup._aggregation.spark_functions.arguments import UnsupportedFunction, expect


_BUILTIN = {"count": "count", "sum": "sum", "avg": "mean", "mean": "mean", "min": "min",
            "max": "max", "bool_and": "bool_and", "every": "bool_and", "bool_or": "bool_or",
            "some": "bool_or", "any": "bool_or"}
_BITWISE = {"bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}


class _Builtin:
    """``reductions.Reduction`` under this module's interface (a list of argument arrays)."""

    def __init__(self, function, arg_types, params, ansi):
        kind = _BUILTIN[function]
        if kind == "count":
            if not arg_types:
                raise UnsupportedFunction("count takes at least one column argument; count(*) "
                                          "is count of a column without nulls.")
            if params:
                raise UnsupportedFunction(f"count takes no literal parameter; got {params!r}.")
        else:
            expect(function, arg_types, params, 1)
        value_type = pa.bool_() if kind == "count" else arg_types[0]
        if not reducible(kind, value_type):
            raise UnsupportedFunction(f"{function} over {value_type} has no reduction here that "
                                      f"keeps Spark's semantics.")
        self._reduction = Reduction(kind, value_type, ansi=ansi, name=function)
        self.state_types = self._reduction.state_types
        self.result_type = self._reduction.result_type

    def reduce(self, args, offsets):
        if self._reduction.kind == "count":
            # count(a, b, ...) counts the rows where every argument is non-null, as Spark's does
            valid = np.ones(len(args[0]), dtype=bool)
            for a in args:
                valid &= valid_mask(single_array(a))
            return self._reduction.reduce(pa.array(valid, mask=~valid), offsets)
        return self._reduction.reduce(single_array(args[0]), offsets)

    def merge(self, state, offsets):
        return self._reduction.merge([single_array(s) for s in state], offsets)

    def result(self, state):
        return self._reduction.result([single_array(s) for s in state])


# --- count_if ---------------------------------------------------------------------------------

class _CountIf:
    """Spark's count_if(boolean): the true values, a long, 0 (never null) without any."""

    def __init__(self, function, arg_types, params, ansi):
        expect(function, arg_types, params, 1)
        if not pa.types.is_boolean(arg_types[0]):
            raise UnsupportedFunction(f"count_if takes a boolean; got {arg_types[0]}.")
        self.state_types = [pa.int64()]
        self.result_type = pa.int64()

    def reduce(self, args, offsets):
        values = single_array(args[0])
        true = filled(values, valid_mask(values), False).astype(bool)
        return [pa.array(segment_sum(true.astype(np.int64), offsets), pa.int64())]

    def merge(self, state, offsets):
        return [pa.array(segment_sum(to_numpy(state[0]).astype(np.int64), offsets), pa.int64())]

    def result(self, state):
        return single_array(state[0])


# --- bit_and, bit_or, bit_xor -----------------------------------------------------------------

class _Bitwise:
    """Spark's bit_and/bit_or/bit_xor of integers: state (value, n), the input's type."""

    def __init__(self, function, arg_types, params, ansi):
        expect(function, arg_types, params, 1)
        t = arg_types[0]
        if not pa.types.is_signed_integer(t):
            raise UnsupportedFunction(f"{function} takes a byte, short, int or long; got {t}.")
        self.op = _BITWISE[function]
        self.identity = -1 if function == "bit_and" else 0
        self.state_types = [t, pa.int64()]
        self.result_type = t

    def _combine(self, values, valid, offsets):
        x = np.where(valid, filled(values, valid, 0), self.identity).astype(
            values.type.to_pandas_dtype())
        if len(offsets) <= 1:
            return pa.array(x[:0], values.type)
        combined = self.op.reduceat(x, offsets[:-1])
        n = segment_sum(valid.astype(np.int64), offsets)
        return pa.array(np.where(n > 0, combined, 0).astype(x.dtype), values.type)

    def reduce(self, args, offsets):
        values = single_array(args[0])
        valid = valid_mask(values)
        return [self._combine(values, valid, offsets),
                pa.array(segment_sum(valid.astype(np.int64), offsets), pa.int64())]

    def merge(self, state, offsets):
        values, n = single_array(state[0]), to_numpy(state[1]).astype(np.int64)
        return [self._combine(values, n > 0, offsets),
                pa.array(segment_sum(n, offsets), pa.int64())]

    def result(self, state):
        values, n = single_array(state[0]), to_numpy(state[1])
        return pc.if_else(pa.array(n == 0), pa.nulls(len(values), values.type), values)


FACTORIES = {**{f: _Builtin for f in _BUILTIN}, **{f: _Bitwise for f in _BITWISE},
             "count_if": _CountIf}
