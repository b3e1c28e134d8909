"""Spark's DataSketches aggregates (HLL, theta, KLL: the sketches and their unions) as
reductions over Arrow groups, a sketch's bytes one binary value per key.

Spark's sketches are datasketches-java's; the datasketches package (C++) reads and writes the
same binary formats and hashes a value as Java does (MurmurHash3, seed 9001, a long as its 8
bytes, a double canonicalized, a string as its UTF-8 bytes, the empty string skipped). A
sketch's state is its bytes, one binary value per key. Per group the values go to the package
one call per row (its HLL, theta and items-KLL sketches take no array); HLL and theta ignore a
repeated value, so each group's distinct values go in, in the order they first come.
"""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.arrow_columns import filled, single_array, valid_mask
from skewgroup._aggregation.spark_functions.arguments import UnsupportedFunction, expect


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
    valid = valid_mask(values)
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
    items = single_array(array).to_pylist()
    return [[v for v in items[a:b] if v is not None] for a, b in zip(offsets[:-1], offsets[1:])]


class _Sketch:
    """The shared shape of a sketch aggregate: state and result one binary value per key."""
    state_types = [pa.binary()]
    result_type = pa.binary()

    def result(self, state):
        return single_array(state[0]).cast(pa.binary())

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
        expect(function, arg_types, params, 1, max_params=1)
        t = arg_types[0]
        if not (t in (pa.int32(), pa.int64()) or _is_text(t)):
            raise UnsupportedFunction(
                f"hll_sketch_agg takes an int, a long or a string here; got {t}. (Spark's binary "
                f"input is hashed as raw bytes, which the datasketches package cannot take.)")
        self.lg_k = _param(function, params, 0, 12, 4, 21, "lgConfigK")

    def reduce(self, args, offsets):
        out = []
        for items in _distinct_lists(single_array(args[0]), offsets):
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
        expect(function, arg_types, params, 1, max_params=1)
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
        return pa.array([b if b else empty for b in single_array(state[0]).to_pylist()],
                        pa.binary())


class _ThetaSketch(_Sketch):
    """theta_sketch_agg(x [, lgNomEntries=12]): a theta sketch rebuilt to its nominal entries,
    compact, ordered and compressed, as Spark's. An int is hashed as a long, a float as a
    double (Spark promotes both), a string by its UTF-8 bytes, the empty string skipped.
    Spark's merge: a union at lgNomEntries."""

    def __init__(self, function, arg_types, params, ansi):
        expect(function, arg_types, params, 1, max_params=1)
        t = arg_types[0]
        if not (t in (pa.int32(), pa.int64(), pa.float32(), pa.float64()) or _is_text(t)):
            raise UnsupportedFunction(
                f"theta_sketch_agg takes an int, a long, a float, a double or a string here; "
                f"got {t}. (Spark's binary and array inputs are hashed as raw bytes or ints, "
                f"which the datasketches package cannot take.)")
        self.lg_k = _param(function, params, 0, 12, 4, 26, "lgNomEntries")

    def reduce(self, args, offsets):
        values = single_array(args[0])
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
        expect(function, arg_types, params, 1, max_params=1)
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
        expect(function, arg_types, params, 1, max_params=1)
        self.item = function.rsplit("_", 1)[1]
        if arg_types[0] not in _KLL_INPUTS[self.item]:
            raise UnsupportedFunction(f"{function} takes {list(map(str, _KLL_INPUTS[self.item]))}"
                                      f"; got {arg_types[0]}.")
        self.k = _param(function, params, 0, 200, 8, 65535, "k")
        self._codec = _KllCodec(self.item)

    def reduce(self, args, offsets):
        values = single_array(args[0])
        valid = valid_mask(values)
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
            x = filled(values.cast(pa.float32() if self.item == "float" else pa.float64()),
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
        expect(function, arg_types, params, 1, max_params=1)
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
        return pa.array([b if b else empty for b in single_array(state[0]).to_pylist()],
                        pa.binary())


FACTORIES = {"hll_sketch_agg": _HllSketch, "hll_union_agg": _HllUnion,
             "theta_sketch_agg": _ThetaSketch, "theta_union_agg": _ThetaUnion,
             **{f"kll_sketch_agg_{kind}": _KllSketch for kind in _KLL_INPUTS},
             **{f"kll_merge_agg_{kind}": _KllMerge for kind in _KLL_INPUTS}}
