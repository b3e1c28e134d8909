"""Spark's aggregate functions as reductions over Arrow groups, with Spark 4.3's semantics.

A stream whose call has a Python aggregator merges every aggregate of the call in one stateful
Python step, so each Spark aggregate the call names needs a Python twin: ``reduce`` (grouped input
rows to one state per group), ``merge`` (grouped states to one per group) and ``result`` (Spark's
value of each state). ``make_reduction`` gives that twin for a function as Spark prints its name.

The state crosses pandas between Spark and Python, so its columns follow ``_reductions``'s rules:
a number column never holds a null (a filler, the validity in a count or flag column beside it),
strings and binary may be null, and a set or a sketch is one binary value per key (no list or
struct column).

Spark's semantics kept here, beyond ``reductions.Reduction``'s (count, sum, avg, min, max,
bool_and, bool_or, which this module wraps):

* stddev/std/stddev_samp, stddev_pop, variance/var_samp, var_pop, skewness, kurtosis: Spark's
  central-moment state (n, avg, m2[, m3[, m4]]), each row's state being what Spark's update makes
  of it from the empty state, states merged with Spark's pairwise formulas (Chan et al.; a tree of
  pairwise merges, so the last bits may differ from Spark's, whose order is a partition's).
  n == 0 gives null; a sample form of one value, and skewness/kurtosis with m2 == 0, give null
  (``spark.sql.legacy.statisticalAggregate`` false, Spark 4's default); NaN and infinities give
  NaN as Spark's do (an infinity's own m2 is inf * 0).
* count_if(boolean): the number of true values, never null.
* min_by(x, ord), max_by(x, ord): rows whose ord is null are skipped, x may be null, null where no
  ord is. Among rows tied on the extreme ord Spark keeps the LAST in input order (its update
  keeps the old value only when the old ord is strictly better), and so does this module
  (rows in group order, states in group order). Doubles order as Spark's: NaN above every
  number, NaN equal to NaN, -0.0 equal to 0.0; strings and binary by their bytes.
* bit_and, bit_or, bit_xor over byte, short, int, long: the input's type, null for a group of
  nulls.
* collect_set(x): the distinct non-null values (an empty array for a group of nulls), doubles
  and floats normalized as Spark's are (-0.0 as 0.0, one NaN).
* hll_sketch_agg, hll_union_agg, theta_sketch_agg, theta_union_agg, kll_sketch_agg_bigint /
  _float / _double, kll_merge_agg_bigint / _float / _double: the sketch bytes Spark's own
  functions read (hll_sketch_estimate, theta_sketch_estimate, kll_sketch_get_n_*, ...), each
  value hashed as Spark's sketch hashes it; a group of nulls gives Spark's empty sketch, byte
  for byte.

Refused (``UnsupportedFunction``), as their Spark semantics are not kept here: a nested
(array, struct, map) value in collect_set; binary input to hll_sketch_agg
and theta_sketch_agg, and theta's array input (Spark hashes raw bytes or int arrays, which
the datasketches package's update cannot take); any function not in ``FUNCTIONS``.

>>> import numpy as np, pyarrow as pa
>>> sd = make_reduction("stddev_samp", [pa.float64()])
>>> state = sd.reduce([pa.array([1.0, 2.0, None, 4.0])], np.array([0, 2, 4]))
>>> sd.result(sd.merge(state, np.array([0, 2]))).to_pylist()
[1.5275252316519468]
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewgroup._aggregation.reductions import (Reduction, _array, _filled, _numpy, _segment_sum,
                                               _valid, reducible)


class UnsupportedFunction(TypeError):
    """A Spark aggregate (or an argument type of it) whose semantics this module cannot keep."""


_BUILTIN = {"count": "count", "sum": "sum", "avg": "mean", "mean": "mean", "min": "min",
            "max": "max", "bool_and": "bool_and", "every": "bool_and", "bool_or": "bool_or",
            "some": "bool_or", "any": "bool_or"}
_MOMENTS = {"stddev": 2, "std": 2, "stddev_samp": 2, "stddev_pop": 2, "variance": 2,
            "var_samp": 2, "var_pop": 2, "skewness": 3, "kurtosis": 4}
_BITWISE = {"bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}


def make_reduction(function, arg_types, params=(), *, ansi=True, name=None):
    """The reduction of Spark's aggregate `function` (lower-case name as Spark prints it, e.g.
    "stddev_samp", "max_by", "kll_sketch_agg_double") over arguments of Arrow types `arg_types`
    (a list, one per column argument, in Spark's argument order), with literal `params` (a tuple
    of Python values: e.g. hll_sketch_agg's lgConfigK, kll's k). Raises UnsupportedFunction (a
    TypeError subclass) whose message says why: an unknown function, or an argument type whose
    Spark semantics this module cannot keep."""
    if not isinstance(function, str):
        raise UnsupportedFunction(f"The 'function' parameter must be a Spark aggregate's name "
                                  f"(a str). Got {function!r}.")
    key = function.lower()
    factory = _FACTORIES.get(key)
    if factory is None:
        raise UnsupportedFunction(
            f"Spark's aggregate {function!r} has no Python reduction here; supported: "
            f"{', '.join(FUNCTIONS)}.")
    arg_types = list(arg_types)
    params = tuple(params)
    reduction = factory(key, arg_types, params, ansi)
    reduction.kind = key
    reduction.name = name or key
    return reduction


def _expect(function, arg_types, params, n_args, max_params=0):
    if len(arg_types) != n_args:
        raise UnsupportedFunction(f"{function} takes {n_args} column argument(s); "
                                  f"got {len(arg_types)} ({arg_types}).")
    if len(params) > max_params:
        raise UnsupportedFunction(f"{function} takes at most {max_params} literal parameter(s); "
                                  f"got {params!r}.")


# --- the built-ins of ``_reductions`` ---------------------------------------------------------

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
            _expect(function, arg_types, params, 1)
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
                valid &= _valid(_array(a))
            return self._reduction.reduce(pa.array(valid, mask=~valid), offsets)
        return self._reduction.reduce(_array(args[0]), offsets)

    def merge(self, state, offsets):
        return self._reduction.merge([_array(s) for s in state], offsets)

    def result(self, state):
        return self._reduction.result([_array(s) for s in state])


# --- central moments --------------------------------------------------------------------------

class _Moments:
    """Spark's CentralMomentAgg: state (n, avg, m2[, m3[, m4]]), n a long here."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1)
        t = arg_types[0]
        if not (pa.types.is_floating(t) or pa.types.is_integer(t)):
            raise UnsupportedFunction(f"{function} takes a number (Spark casts it to double); "
                                      f"got {t}.")
        self.function = function
        self.order = _MOMENTS[function]
        self.state_types = [pa.int64()] + [pa.float64()] * self.order
        self.result_type = pa.float64()

    def reduce(self, args, offsets):
        values = _array(args[0])
        valid = _valid(values)
        x = _filled(values.cast(pa.float64()) if values.type != pa.float64() else values,
                    valid, 0.0).astype(np.float64)
        # each row's state is what Spark's update makes of it from the zero state (an infinity's
        # m2 being inf * 0 = NaN); a null row's state is the zero state
        with np.errstate(invalid="ignore", over="ignore"):
            delta = x
            delta_n = x
            m2 = delta * (delta - delta_n)
            columns = [valid.astype(np.float64), x, m2]
            if self.order >= 3:
                delta2 = delta * delta
                m3 = -3.0 * delta_n * m2 + delta * (delta2 - delta_n * delta_n)
                columns.append(m3)
            if self.order >= 4:
                m4 = (-4.0 * delta_n * m3 - 6.0 * delta_n * delta_n * m2
                      + delta * (delta * delta2 - delta_n * delta_n * delta_n))
                columns.append(m4)
        for c in columns[1:]:
            c[~valid] = 0.0
        return self._fold(columns, offsets)

    def merge(self, state, offsets):
        columns = [_numpy(state[0]).astype(np.float64)]
        columns += [_numpy(s).astype(np.float64) for s in state[1:]]
        return self._fold(columns, offsets)

    def _fold(self, columns, offsets):
        folded = _tree_fold(columns, offsets, self._pair)
        return ([pa.array(folded[0].astype(np.int64), pa.int64())]
                + [pa.array(c, pa.float64()) for c in folded[1:]])

    def _pair(self, left, right):
        """Spark's merge of two moment states (CentralMomentAgg.mergeExpressions)."""
        n1, n2 = left[0], right[0]
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            n = n1 + n2
            delta = right[1] - left[1]
            delta_n = np.where(n == 0.0, 0.0, delta / np.where(n == 0.0, 1.0, n))
            avg = left[1] + delta_n * n2
            m2 = left[2] + right[2] + delta * delta_n * n1 * n2
            out = [n, avg, m2]
            if self.order >= 3:
                m3 = (left[3] + right[3] + delta_n * delta_n * delta * n1 * n2 * (n1 - n2)
                      + 3.0 * delta_n * (n1 * right[2] - n2 * left[2]))
                out.append(m3)
            if self.order >= 4:
                m4 = (left[4] + right[4]
                      + delta_n * delta_n * delta_n * delta * n1 * n2 * (n1 * n1 - n1 * n2 + n2 * n2)
                      + 6.0 * delta_n * delta_n * (n1 * n1 * right[2] + n2 * n2 * left[2])
                      + 4.0 * delta_n * (n1 * right[3] - n2 * left[3]))
                out.append(m4)
        return out

    def result(self, state):
        n = _numpy(state[0]).astype(np.float64)
        m2 = _numpy(state[2]).astype(np.float64)
        f = self.function
        null = n == 0.0
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            safe_n = np.where(null, 1.0, n)
            if f in ("stddev_pop", "var_pop"):
                value = m2 / safe_n
            elif f in ("skewness", "kurtosis"):
                null = null | (m2 == 0.0)
                safe_m2 = np.where(m2 == 0.0, 1.0, m2)
                if f == "skewness":
                    m3 = _numpy(state[3]).astype(np.float64)
                    value = np.sqrt(safe_n) * m3 / np.sqrt(safe_m2 * safe_m2 * safe_m2)
                else:
                    m4 = _numpy(state[4]).astype(np.float64)
                    value = safe_n * m4 / (safe_m2 * safe_m2) - 3.0
            else:   # the sample forms: one value gives null (Spark 4's non-legacy default)
                null = null | (n == 1.0)
                value = m2 / np.where(n <= 1.0, 1.0, n - 1.0)
            if f in ("stddev", "std", "stddev_samp", "stddev_pop"):
                value = np.sqrt(value)
        return pa.array(np.where(null, 0.0, value), pa.float64(), mask=null)


def _tree_fold(columns, offsets, pair):
    """Each group's columns folded into one row by ``pair(left, right)`` (lists of numpy arrays),
    neighbours first (a balanced tree), the earlier row always on the left."""
    columns = [np.asarray(c) for c in columns]
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    while len(columns[0]) > len(sizes):
        rows = len(columns[0])
        starts = np.repeat(offsets[:-1], sizes)
        rank = np.arange(rows, dtype=np.int64) - starts
        size_of = np.repeat(sizes, sizes)
        is_left = (rank % 2 == 0) & (rank + 1 < size_of)
        keep = (rank % 2 == 0)
        left = np.flatnonzero(is_left)
        merged = pair([c[left] for c in columns], [c[left + 1] for c in columns])
        position = (np.cumsum(keep) - 1)[left]
        out = []
        for c, m in zip(columns, merged):
            kept = c[keep].copy()
            kept[position] = m
            out.append(kept)
        columns = out
        sizes = (sizes + 1) // 2
        offsets = np.concatenate([[0], np.cumsum(sizes)])
    return columns


# --- count_if ---------------------------------------------------------------------------------

class _CountIf:
    """Spark's count_if(boolean): the true values, a long, 0 (never null) without any."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1)
        if not pa.types.is_boolean(arg_types[0]):
            raise UnsupportedFunction(f"count_if takes a boolean; got {arg_types[0]}.")
        self.state_types = [pa.int64()]
        self.result_type = pa.int64()

    def reduce(self, args, offsets):
        values = _array(args[0])
        true = _filled(values, _valid(values), False).astype(bool)
        return [pa.array(_segment_sum(true.astype(np.int64), offsets), pa.int64())]

    def merge(self, state, offsets):
        return [pa.array(_segment_sum(_numpy(state[0]).astype(np.int64), offsets), pa.int64())]

    def result(self, state):
        return _array(state[0])


# --- bit_and, bit_or, bit_xor -----------------------------------------------------------------

class _Bitwise:
    """Spark's bit_and/bit_or/bit_xor of integers: state (value, n), the input's type."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1)
        t = arg_types[0]
        if not pa.types.is_signed_integer(t):
            raise UnsupportedFunction(f"{function} takes a byte, short, int or long; got {t}.")
        self.op = _BITWISE[function]
        self.identity = -1 if function == "bit_and" else 0
        self.state_types = [t, pa.int64()]
        self.result_type = t

    def _combine(self, values, valid, offsets):
        x = np.where(valid, _filled(values, valid, 0), self.identity).astype(
            values.type.to_pandas_dtype())
        if len(offsets) <= 1:
            return pa.array(x[:0], values.type)
        combined = self.op.reduceat(x, offsets[:-1])
        n = _segment_sum(valid.astype(np.int64), offsets)
        return pa.array(np.where(n > 0, combined, 0).astype(x.dtype), values.type)

    def reduce(self, args, offsets):
        values = _array(args[0])
        valid = _valid(values)
        return [self._combine(values, valid, offsets),
                pa.array(_segment_sum(valid.astype(np.int64), offsets), pa.int64())]

    def merge(self, state, offsets):
        values, n = _array(state[0]), _numpy(state[1]).astype(np.int64)
        return [self._combine(values, n > 0, offsets),
                pa.array(_segment_sum(n, offsets), pa.int64())]

    def result(self, state):
        values, n = _array(state[0]), _numpy(state[1])
        return pc.if_else(pa.array(n == 0), pa.nulls(len(values), values.type), values)


# --- min_by, max_by ---------------------------------------------------------------------------

class _ExtremumBy:
    """Spark's max_by(x, ord) / min_by(x, ord): state (x's columns, ord filled, n of non-null
    ords). Ties on the extreme ord: the last row (or state) in group order, as Spark's."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 2)
        x_type, ord_type = arg_types
        if not _orderable(ord_type):
            raise UnsupportedFunction(
                f"{function}'s ordering argument must be a number, string, binary, boolean, date "
                f"or timestamp here; got {ord_type}.")
        self._x = _Carried(function, x_type)
        self.largest = function == "max_by"
        self.ord_type = ord_type
        self.state_types = self._x.types + [_storage_type(ord_type), pa.int64()]
        self.result_type = x_type

    def reduce(self, args, offsets):
        x, order = _array(args[0]), _as_storage(_array(args[1]))
        valid = _valid(order)
        chosen = pa.array(_extreme_index(order, valid, offsets, self.largest))
        # only each group's chosen value is encoded (a nested value's encoding costs)
        return self._state(self._x.encode(x.take(chosen)), order.take(chosen),
                           _segment_sum(valid.astype(np.int64), offsets))

    def merge(self, state, offsets):
        width = len(self._x.types)
        counts = _numpy(state[width + 1]).astype(np.int64)
        order = _array(state[width])
        chosen = pa.array(_extreme_index(order, counts > 0, offsets, self.largest))
        return self._state([_array(s).take(chosen) for s in state[:width]], order.take(chosen),
                           _segment_sum(counts, offsets))

    def _state(self, x_columns, order, counts):
        return self._x.fill(x_columns) + [_fill_nulls(order), pa.array(counts, pa.int64())]

    def result(self, state):
        width = len(self._x.types)
        x = self._x.decode([_array(s) for s in state[:width]])
        n = _numpy(state[width + 1])
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
        key = _filled(order, valid, 0.0).astype(np.float64)
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
        key = _as_integers(order, valid)
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


def _as_integers(array, valid):
    """The integer view of a fixed-width, integer-ordered array (its nulls as 0)."""
    t = array.type
    if pa.types.is_boolean(t):
        return _filled(array, valid, False).astype(np.int8)
    if pa.types.is_integer(t):
        return _filled(array, valid, 0).astype(t.to_pandas_dtype())
    width = t.bit_width
    storage = pa.int32() if width == 32 else pa.int64()
    return _filled(array.view(storage), valid, 0).astype(storage.to_pandas_dtype())


class _Carried:
    """A value of any Arrow type carried in a state: a fixed-width value as (value filled,
    valid flag), so that no number column holds a null; a string or binary as is; a nested value
    (list, struct, map) as one binary value, its one-row Arrow IPC stream (null for a null)."""

    def __init__(self, function, value_type):
        t = value_type
        if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_temporal(t) or pa.types.is_decimal(t)):
            self.how = "fixed"
            self.types = [_storage_type(t), pa.bool_()]
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
            return [_as_storage(values), pa.array(_valid(values))]
        schema = pa.schema([pa.field("v", self.type)])
        blobs = []
        for i, present in enumerate(_valid(values)):
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
        return [_fill_nulls(columns[0]), pc.fill_null(columns[1], False)]

    def decode(self, columns):
        if self.how == "as is":
            return columns[0]
        if self.how == "fixed":
            valid = _numpy(columns[1]).astype(bool)
            values = columns[0].view(self.type) if columns[0].type != self.type else columns[0]
            return pc.if_else(pa.array(valid), values, pa.nulls(len(valid), self.type))
        parts = [pa.nulls(1, self.type) if blob is None else
                 pa.ipc.open_stream(blob).read_all().column(0).combine_chunks()
                 for blob in columns[0].to_pylist()]
        return pa.concat_arrays(parts) if parts else pa.nulls(0, self.type)


# --- collect_set ------------------------------------------------------------------------------

class _CollectSet:
    """Spark's collect_set(x): the distinct non-null values, an array (empty, never null, for a
    group of nulls), in no specified order (here: by the values' bits or bytes). Doubles and
    floats are normalized as Spark's are: -0.0 as 0.0, every NaN one NaN. State: one binary value
    per key, the set's encoding: a fixed-width type's values end to end (native byte order); a
    string's or binary's as a uint32 count, that many int32 lengths, then the bytes."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1)
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
        valid = _valid(values)
        if pa.types.is_floating(t):
            x = _filled(values, valid, 0.0).astype(t.to_pandas_dtype())
            x = np.where(x == 0, x.dtype.type(0), x)              # -0.0 -> 0.0
            x = np.where(np.isnan(x), x.dtype.type(np.nan), x)   # one NaN
        elif pa.types.is_boolean(t):
            x = _filled(values, valid, False).astype(np.uint8)
        else:
            x = _as_integers(_as_storage(values) if pa.types.is_temporal(t) else values, valid)
        return np.ascontiguousarray(x).view(f"u{self.width}"), valid

    def _from_bits(self, bits):
        t = self.type
        if pa.types.is_boolean(t):
            return pa.array(bits.astype(bool))
        if pa.types.is_floating(t):
            return pa.array(bits.view(t.to_pandas_dtype()), t)
        storage = _storage_type(t)
        array = pa.array(bits.view(f"i{self.width}"), storage)
        return array.view(t) if storage != t else array

    def reduce(self, args, offsets):
        values = _array(args[0])
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        if self.width is None:
            valid = _valid(values)
            return [self._encode_variable(groups[valid], values.filter(pa.array(valid)),
                                          len(offsets) - 1)]
        bits, valid = self._bits(values)
        return [self._encode_fixed(groups[valid], bits[valid], len(offsets) - 1)]

    def merge(self, state, offsets):
        groups, values = self._decode(_array(state[0]))
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))[groups]
        if self.width is None:
            return [self._encode_variable(groups, values, len(offsets) - 1)]
        return [self._encode_fixed(groups, values, len(offsets) - 1)]

    def result(self, state):
        groups, values = self._decode(_array(state[0]))
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


# --- DataSketches: HLL, theta, KLL ----------------------------------------------------------
# Spark's sketches are datasketches-java's; the datasketches package (C++) reads and writes the
# same binary formats and hashes a value as Java does (MurmurHash3, seed 9001, a long as its 8
# bytes, a double canonicalized, a string as its UTF-8 bytes, the empty string skipped). A
# sketch's state is its bytes, one binary value per key. Per group the values go to the package
# one call per row (its HLL, theta and items-KLL sketches take no array); HLL and theta ignore a
# repeated value, so each group's distinct values go in, in the order they first come.

def _param(function, params, index, default, low, high, what):
    value = params[index] if len(params) > index else default
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (
            low <= value <= high):
        raise ValueError(f"{function}'s {what} must be an integer from {low} to {high}, as "
                         f"Spark's; got {value!r}.")
    return int(value)


def _is_text(t):
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _distinct_lists(values, offsets):
    """Each group's distinct non-null values, as Python objects, in first-come order."""
    n_groups = len(offsets) - 1
    valid = _valid(values)
    groups = np.repeat(np.arange(n_groups), np.diff(offsets))[valid]
    table = pa.table({"g": pa.array(groups, pa.int64()), "v": values.filter(pa.array(valid))})
    distinct = table.group_by(["g", "v"], use_threads=False).aggregate([])
    g = distinct.column("g").to_numpy()
    order = np.argsort(g, kind="stable")
    items = distinct.column("v").take(pa.array(order)).to_pylist()
    bounds = np.concatenate([[0], np.cumsum(np.bincount(g, minlength=n_groups))])
    return [items[bounds[i]:bounds[i + 1]] for i in range(n_groups)]


def _binary_groups(array, offsets):
    """Each group's list of bytes values, nulls skipped."""
    items = _array(array).to_pylist()
    return [[v for v in items[a:b] if v is not None] for a, b in zip(offsets[:-1], offsets[1:])]


class _Sketch:
    """The shared shape of a sketch aggregate: state and result one binary value per key."""
    state_types = [pa.binary()]
    result_type = pa.binary()

    def result(self, state):
        return _array(state[0]).cast(pa.binary())

    def merge(self, state, offsets):
        groups = _binary_groups(state[0], offsets)
        return [pa.array([g[0] if len(g) == 1 else self._merge_bytes(g) for g in groups],
                         pa.binary())]


class _SketchUnion(_Sketch):
    """A union aggregate of sketch bytes: its input rows and its states are both sketches, so
    a reduce is a merge, each group's bytes united by ``_union``."""

    def reduce(self, args, offsets):
        return self.merge(args, offsets)

    def merge(self, state, offsets):
        return [pa.array([self._union(g) for g in _binary_groups(state[0], offsets)],
                         pa.binary())]


class _HllSketch(_Sketch):
    """hll_sketch_agg(x [, lgConfigK=12]): an HLL_8 sketch's updatable bytes, as Spark's. An int
    is hashed as a long (Java widens it), a string by its UTF-8 bytes, the empty string
    skipped. Spark's merge: a union at the sketch's lgConfigK, its HLL_8 result."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1, max_params=1)
        t = arg_types[0]
        if not (t in (pa.int32(), pa.int64()) or _is_text(t)):
            raise UnsupportedFunction(
                f"hll_sketch_agg takes an int, a long or a string here; got {t}. (Spark's binary "
                f"input is hashed as raw bytes, which the datasketches package cannot take.)")
        self.lg_k = _param(function, params, 0, 12, 4, 21, "lgConfigK")

    def reduce(self, args, offsets):
        out = []
        for items in _distinct_lists(_array(args[0]), offsets):
            sketch = _datasketches().hll_sketch(self.lg_k, _datasketches().HLL_8)
            update = sketch.update
            for v in items:
                update(v)
            out.append(sketch.serialize_updatable())
        return [pa.array(out, pa.binary())]

    def _merge_bytes(self, blobs):
        sketches = [_datasketches().hll_sketch.deserialize(b) for b in blobs]
        union = _datasketches().hll_union(sketches[0].lg_config_k)
        for sketch in sketches:
            union.update(sketch)
        return union.get_result(_datasketches().HLL_8).serialize_updatable()


class _HllUnion(_SketchUnion):
    """hll_union_agg(sketch [, allowDifferentLgConfigK=false]): the union of HLL sketches at the
    first sketch's lgConfigK, its HLL_8 updatable bytes; sketches of another lgConfigK fail
    unless allowed, as Spark's do. State: the union's bytes, empty where no sketch came yet."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1, max_params=1)
        if not (pa.types.is_binary(arg_types[0]) or pa.types.is_large_binary(arg_types[0])):
            raise UnsupportedFunction(f"hll_union_agg takes a binary sketch; got {arg_types[0]}.")
        allow = params[0] if params else False
        if not isinstance(allow, (bool, np.bool_)):
            raise ValueError(f"hll_union_agg's allowDifferentLgConfigK must be a boolean; got "
                             f"{allow!r}.")
        self.allow = bool(allow)

    def _union(self, blobs):
        union = None
        for blob in blobs:
            if not blob:
                continue
            try:
                sketch = _datasketches().hll_sketch.deserialize(blob)
            except Exception as error:
                raise ValueError("[HLL_INVALID_INPUT_SKETCH_BUFFER] hll_union_agg: a value is not "
                                 "an HLL sketch's bytes.") from error
            if union is None:
                union = _datasketches().hll_union(sketch.lg_config_k)
            elif not self.allow and union.lg_config_k != sketch.lg_config_k:
                raise ValueError(
                    f"[HLL_UNION_DIFFERENT_LG_K] hll_union_agg: sketches have different "
                    f"lgConfigK values ({union.lg_config_k} and {sketch.lg_config_k}); set "
                    f"allowDifferentLgConfigK to true to union them, as in Spark.")
            union.update(sketch)
        return b"" if union is None else union.get_result(_datasketches().HLL_8).serialize_updatable()


    def result(self, state):
        empty = _datasketches().hll_union(12).get_result(_datasketches().HLL_8).serialize_updatable()
        return pa.array([b if b else empty for b in _array(state[0]).to_pylist()], pa.binary())


class _ThetaSketch(_Sketch):
    """theta_sketch_agg(x [, lgNomEntries=12]): a theta sketch rebuilt to its nominal entries,
    compact, ordered and compressed, as Spark's. An int is hashed as a long, a float as a
    double (Spark promotes both), a string by its UTF-8 bytes, the empty string skipped.
    Spark's merge: a union at lgNomEntries."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1, max_params=1)
        t = arg_types[0]
        if not (t in (pa.int32(), pa.int64(), pa.float32(), pa.float64()) or _is_text(t)):
            raise UnsupportedFunction(
                f"theta_sketch_agg takes an int, a long, a float, a double or a string here; "
                f"got {t}. (Spark's binary and array inputs are hashed as raw bytes or ints, "
                f"which the datasketches package cannot take.)")
        self.lg_k = _param(function, params, 0, 12, 4, 26, "lgNomEntries")

    def reduce(self, args, offsets):
        values = _array(args[0])
        if pa.types.is_floating(values.type):
            values = values.cast(pa.float64())
        out = []
        for items in _distinct_lists(values, offsets):
            sketch = _datasketches().update_theta_sketch(self.lg_k)
            update = sketch.update
            for v in items:
                update(v)
            sketch.trim()   # Spark's rebuild: down to the nominal entries
            out.append(_theta_bytes(sketch.compact()))
        return [pa.array(out, pa.binary())]

    def _merge_bytes(self, blobs):
        union = _datasketches().theta_union(self.lg_k)
        for blob in blobs:
            union.update(_datasketches().compact_theta_sketch.deserialize(blob))
        return _theta_bytes(union.get_result())


def _theta_bytes(compact):
    """A compact theta sketch's compressed bytes as datasketches-java writes them: an empty
    sketch without its seed hash (bytes 6-7 zero), where the C++ library writes it."""
    blob = compact.serialize(True)
    if compact.is_empty() and len(blob) == 8:
        blob = blob[:6] + b"\x00\x00"
    return blob


class _ThetaUnion(_SketchUnion):
    """theta_union_agg(sketch [, lgNomEntries=12]): the union of theta sketches, compact and
    compressed, as Spark's (an empty sketch's bytes for a group of nulls)."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1, max_params=1)
        if not (pa.types.is_binary(arg_types[0]) or pa.types.is_large_binary(arg_types[0])):
            raise UnsupportedFunction(f"theta_union_agg takes a binary sketch; got "
                                      f"{arg_types[0]}.")
        self.lg_k = _param(function, params, 0, 12, 4, 26, "lgNomEntries")

    def _union(self, blobs):
        union = _datasketches().theta_union(self.lg_k)
        for blob in blobs:
            try:
                sketch = _datasketches().compact_theta_sketch.deserialize(blob)
            except Exception as error:
                raise ValueError("[THETA_INVALID_INPUT_SKETCH_BUFFER] theta_union_agg: a value "
                                 "is not a theta sketch's bytes.") from error
            union.update(sketch)
        return _theta_bytes(union.get_result())



_KLL_INPUTS = {
    "bigint": (pa.int8(), pa.int16(), pa.int32(), pa.int64()),
    "float": (pa.float32(),),
    "double": (pa.float32(), pa.float64()),
}


def _datasketches():
    """The datasketches package, imported where a sketch is first made (it is the spark
    extra's, not the routing core's)."""
    import datasketches
    return datasketches


class _KllCodec:
    """A KLL sketch of Spark's kind (bigint: KllLongsSketch, as the package's items sketch of
    8-byte little-endian longs; float; double) made, read and written by the package."""

    def __init__(self, kind):
        self.kind = kind
        if kind == "bigint":
            self._serde = _datasketches().PyLongsSerDe()

    def __reduce__(self):      # shipped to the executors: the package's SerDe does not pickle
        return (_KllCodec, (self.kind,))

    def new(self, k):
        ds = _datasketches()
        return {"bigint": ds.kll_items_sketch, "float": ds.kll_floats_sketch,
                "double": ds.kll_doubles_sketch}[self.kind](k)

    def load(self, blob):
        ds = _datasketches()
        if self.kind == "bigint":
            return ds.kll_items_sketch.deserialize(blob, self._serde)
        return {"float": ds.kll_floats_sketch, "double": ds.kll_doubles_sketch}[
            self.kind].deserialize(blob)

    def dump(self, sketch):
        return sketch.serialize(self._serde) if self.kind == "bigint" else sketch.serialize()


class _KllSketch(_Sketch):
    """kll_sketch_agg_bigint / _float / _double(x [, k=200]): a KLL sketch's bytes; nulls (and,
    as in Spark's sketch, NaN) skipped; Spark's merge: one sketch merged into the other."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1, max_params=1)
        self.item = function.rsplit("_", 1)[1]
        if arg_types[0] not in _KLL_INPUTS[self.item]:
            raise UnsupportedFunction(f"{function} takes {list(map(str, _KLL_INPUTS[self.item]))}"
                                      f"; got {arg_types[0]}.")
        self.k = _param(function, params, 0, 200, 8, 65535, "k")
        self._codec = _KllCodec(self.item)

    def reduce(self, args, offsets):
        values = _array(args[0])
        valid = _valid(values)
        out = []
        if self.item == "bigint":
            items = values.cast(pa.int64()).to_pylist()
            for a, b in zip(offsets[:-1], offsets[1:]):
                sketch = self._codec.new(self.k)
                update = sketch.update
                for v in items[a:b]:
                    if v is not None:
                        update(v)
                out.append(self._codec.dump(sketch))
        else:
            dtype = np.float32 if self.item == "float" else np.float64
            x = _filled(values.cast(pa.float32() if self.item == "float" else pa.float64()),
                        valid, 0.0).astype(dtype)
            for a, b in zip(offsets[:-1], offsets[1:]):
                sketch = self._codec.new(self.k)
                chunk = x[a:b][valid[a:b]]
                if len(chunk):
                    sketch.update(np.ascontiguousarray(chunk))
                out.append(self._codec.dump(sketch))
        return [pa.array(out, pa.binary())]

    def _merge_bytes(self, blobs):
        sketch = self._codec.load(blobs[0])
        for blob in blobs[1:]:
            sketch.merge(self._codec.load(blob))
        return self._codec.dump(sketch)


class _KllMerge(_SketchUnion):
    """kll_merge_agg_bigint / _float / _double(sketch [, k]): the merge of KLL sketches into one
    of k (given) or of the first sketch's k, as Spark's; an empty sketch of k (default 200) for
    a group of nulls. State: the merged bytes, empty where no sketch came yet and k is not
    given."""

    def __init__(self, function, arg_types, params, ansi):
        _expect(function, arg_types, params, 1, max_params=1)
        if not (pa.types.is_binary(arg_types[0]) or pa.types.is_large_binary(arg_types[0])):
            raise UnsupportedFunction(f"{function} takes a binary sketch; got {arg_types[0]}.")
        self.item = function.rsplit("_", 1)[1]
        self.k = _param(function, params, 0, 200, 8, 65535, "k") if params else None
        self._codec = _KllCodec(self.item)
        self.function = function

    def _union(self, blobs):
        merged = None if self.k is None else self._codec.new(self.k)
        for blob in blobs:
            if not blob:
                continue
            try:
                sketch = self._codec.load(blob)
            except Exception as error:
                raise ValueError(f"[KLL_INVALID_INPUT_SKETCH_BUFFER] {self.function}: a value "
                                 f"is not a KLL sketch's bytes.") from error
            if merged is None:
                merged = self._codec.new(sketch.k)
            merged.merge(sketch)
        return b"" if merged is None else self._codec.dump(merged)


    def result(self, state):
        empty = self._codec.dump(self._codec.new(self.k or 200))
        return pa.array([b if b else empty for b in _array(state[0]).to_pylist()], pa.binary())


# --- helpers ----------------------------------------------------------------------------------

def _storage_type(t):
    """The type a value of ``t`` is kept as in a state: a date or time as its integer (pandas
    would turn a timestamp into its session's wall-clock time in nanoseconds)."""
    if pa.types.is_temporal(t):
        return pa.int32() if t.bit_width == 32 else pa.int64()
    return t


def _as_storage(array):
    storage = _storage_type(array.type)
    return array.view(storage) if storage != array.type else array


def _zero(t):
    """A zero (the filler of a null) of a fixed-width Arrow type."""
    if pa.types.is_boolean(t):
        return pa.scalar(False)
    if pa.types.is_decimal(t):
        import decimal
        return pa.scalar(decimal.Decimal(0), t)
    if pa.types.is_floating(t):
        return pa.scalar(0.0, t)
    if pa.types.is_integer(t):
        return pa.scalar(0, t)
    storage = {32: pa.int32(), 64: pa.int64()}[t.bit_width]
    return pa.array([0], storage).view(t)[0]


def _fill_nulls(array):
    """``array`` without nulls where its type is fixed-width (a null as the type's zero)."""
    if not array.null_count:
        return array
    t = array.type
    if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t)
            or pa.types.is_duration(t) or pa.types.is_decimal(t)):
        return array.fill_null(_zero(t))
    return array


# --- percentile and median: exact, as Spark's own state is -----------------------------------

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
            _expect(function, arg_types, params, 1)
            self.percentage, frequency = 0.5, 1
        else:
            if len(arg_types) != 1:
                raise UnsupportedFunction(
                    f"percentile takes one column and one literal percentage here (an array "
                    f"of percentages, or a frequency column, has no reduction: write one "
                    f"percentile(x, p) a percentage); got {len(arg_types)} column arguments.")
            _expect(function, arg_types, params, 1, max_params=2)
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
        values = _array(args[0])
        valid = _valid(values)
        x = _filled(values.cast(pa.float64(), safe=False), valid, 0.0).astype(np.float64)
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        counts = np.full(len(x), self.frequency, dtype=np.int64)
        return [_encode_counts(groups[valid], x[valid], counts[valid], len(offsets) - 1)]

    def merge(self, state, offsets):
        groups, x, counts = _decode_counts(_array(state[0]))
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))[groups]
        return [_encode_counts(groups, x, counts, len(offsets) - 1)]

    def result(self, state):
        blobs = _array(state[0])
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


_FACTORIES = {}
_FACTORIES.update({f: _Builtin for f in _BUILTIN})
_FACTORIES.update({f: _Moments for f in _MOMENTS})
_FACTORIES.update({f: _Bitwise for f in _BITWISE})
_FACTORIES.update({"count_if": _CountIf, "min_by": _ExtremumBy, "max_by": _ExtremumBy,
                   "collect_set": _CollectSet,
                   "hll_sketch_agg": _HllSketch, "hll_union_agg": _HllUnion,
                   "theta_sketch_agg": _ThetaSketch, "theta_union_agg": _ThetaUnion,
                   "percentile": _Percentile, "median": _Percentile})
_FACTORIES.update({f"kll_sketch_agg_{kind}": _KllSketch for kind in _KLL_INPUTS})
_FACTORIES.update({f"kll_merge_agg_{kind}": _KllMerge for kind in _KLL_INPUTS})

FUNCTIONS = tuple(sorted(_FACTORIES))
