"""The adapter below ``skewgroup.aggregators``: a user's aggregate object as batch operations
over Arrow (``PythonAggregator``), whichever of the two protocols it follows (``protocol_of``).

``skewgroup.aggregators`` is the face: its docstring documents both protocols, the optional
batch forms and the wire format this module keeps; ``adapt`` there makes a ``PythonAggregator``.
Nothing here imports pyspark.
"""
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SPARK = "Spark Aggregator"
_BEAM = "Beam CombineFn"
_METHODS = {
    _SPARK: ("zero", "reduce", "merge", "finish"),
    _BEAM: ("create_accumulator", "add_input or add_inputs", "merge_accumulators",
            "extract_output"),
}
# Everything a pyarrow conversion of a user's values may raise.
_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                      TypeError, ValueError, OverflowError)


class PythonAggregator:
    """A user's aggregate as batch operations over Arrow: partials, merges, results, bytes.

    Made by ``skewgroup.aggregators.adapt``, whose name for it users import. Picklable (plain
    pickle and cloudpickle) when the wrapped object is.

    Attributes
    ----------
    name : str
    columns : tuple of str
    protocol : str
        ``"Spark Aggregator"`` or ``"Beam CombineFn"``.
    buffer_type : pyarrow.DataType or None
        A struct for a Spark Aggregator; None for a CombineFn that declares no type, whose
        accumulators are pickled and not type-checked.
    wire_type : pyarrow.DataType
        The Arrow type a buffer has between stages and in a stream's state: ``buffer_type``,
        or binary (one pickle per accumulator).
    output_type : pyarrow.DataType
    """

    def __init__(self, obj, columns, *, buffer_type=None, output_type=None, name=None,
                 protocol=None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"The 'name' parameter must be a str or None. "
                            f"Got {type(name).__name__} instead.")
        self.name = name or type(obj).__name__
        if protocol not in (None, _SPARK, _BEAM):
            raise ValueError(f"The 'protocol' parameter must be {_SPARK!r}, {_BEAM!r} or None. "
                             f"Got {protocol!r}.")
        self.protocol = protocol or protocol_of(obj, self.name)
        self.obj = obj
        self.columns = _check_columns(columns)
        if output_type is None:
            output_type = getattr(obj, "arrow_output_type", None)
        if output_type is None:
            raise TypeError(f"Aggregator {self.name!r} has no Arrow output type: pass "
                            f"output_type= (the Arrow type of its outputType).")
        if not isinstance(output_type, pa.DataType):
            raise TypeError(f"The 'output_type' parameter must be a pyarrow DataType. "
                            f"Got {type(output_type).__name__} instead.")
        self.output_type = output_type
        if self.protocol == _SPARK:
            if buffer_type is None:
                buffer_type = getattr(obj, "arrow_buffer_type", None)
            if not isinstance(buffer_type, pa.StructType):
                raise TypeError(
                    f"The 'buffer_type' parameter must be a pyarrow struct type (the Arrow type "
                    f"of aggregator {self.name!r}'s bufferSchema). Got "
                    f"{type(buffer_type).__name__} instead.")
        else:
            if buffer_type is None:
                buffer_type = getattr(obj, "arrow_buffer_type", None)
            if buffer_type is not None and not isinstance(buffer_type, pa.DataType):
                raise TypeError(f"The 'buffer_type' parameter must be a pyarrow DataType (the "
                                f"Arrow type of Beam CombineFn {self.name!r}'s accumulators) "
                                f"or None (pickled). Got {type(buffer_type).__name__} instead.")
        self.buffer_type = buffer_type
        self._set_up = False

    def __repr__(self):
        return (f"PythonAggregator({self.name!r}, {self.protocol}, columns={self.columns}, "
                f"output_type={self.output_type})")

    @property
    def wire_type(self):
        return pa.binary() if self.buffer_type is None else self.buffer_type

    def __getstate__(self):
        # Beam's setup() runs once per process: a copy on another worker must run it again.
        return {key: value for key, value in self.__dict__.items() if key != "_set_up"}

    def __setstate__(self, state):
        self.__dict__.update(state, _set_up=False)

    # --- the batch operations -------------------------------------------------------------

    def reduce_groups(self, rows, offsets):
        """One buffer per group of ``rows``: the partial aggregate of the group's rows.

        Parameters
        ----------
        rows : pyarrow.Table or pyarrow.RecordBatch
            Holds the named columns (others are ignored), grouped by key.
        offsets : array-like of int
            Group i is ``rows[offsets[i]:offsets[i + 1]]``; from 0 to ``rows.num_rows``.

        Returns
        -------
        list
            ``len(offsets) - 1`` buffers.
        """
        if self._has("reduce_arrow") and not self._has("reduce_groups"):
            return self.from_arrow(self.reduce_arrow(rows, offsets))
        buffers, method = self._reduced(rows, offsets)
        self._wire(buffers, method)
        return buffers

    def reduce_arrow(self, rows, offsets):
        """``reduce_groups`` with its buffers as one Arrow array of ``wire_type``."""
        table = self._select(rows)
        offsets = _check_offsets(offsets, table.num_rows, "rows")
        if self._has("reduce_arrow"):
            self._setup()
            return self._arrow_result("reduce_arrow", self.obj.reduce_arrow(table, offsets),
                                      len(offsets) - 1, self.wire_type)
        return self._wire(*self._reduced(table, offsets))

    def _reduced(self, rows, offsets):
        """(one Python buffer per group, the method that made buffer i: for errors)."""
        table = self._select(rows)
        offsets = _check_offsets(offsets, table.num_rows, "rows")
        self._setup()
        groups = len(offsets) - 1
        if self._has("reduce_groups"):
            return self._vectorized("reduce_groups", table, offsets, groups), "reduce_groups"
        empty = offsets[:-1] == offsets[1:]
        if self.protocol == _SPARK:
            return (self._reduce_spark(table, offsets),
                    lambda i: "zero" if empty[i] else "reduce")
        adds = "add_inputs" if self._has("add_inputs") else "add_input"
        return (self._reduce_beam(table, offsets),
                lambda i: "create_accumulator" if empty[i] else adds)

    def merge_groups(self, buffers, offsets):
        """One merged buffer per group of ``buffers`` (grouped by key contiguously).

        Parameters
        ----------
        buffers : list
            Buffers from ``reduce_groups``, ``merge_groups`` or ``from_arrow``.
        offsets : array-like of int
            Group i is ``buffers[offsets[i]:offsets[i + 1]]``; from 0 to ``len(buffers)``.

        Returns
        -------
        list
            ``len(offsets) - 1`` buffers; an empty group gives the zero buffer.
        """
        buffers = list(buffers)
        offsets = _check_offsets(offsets, len(buffers), "buffers")
        if self._has("merge_arrow") and not self._has("merge_groups"):
            return self.from_arrow(self.merge_arrow(self._wire(buffers, "merge_groups"),
                                                    offsets))
        merged, method = self._merged(buffers, offsets)
        self._wire(merged, method)
        return merged

    def merge_arrow(self, buffers, offsets):
        """One merged buffer per group of ``buffers`` (an Arrow array of ``wire_type``, grouped
        by key contiguously), as an Arrow array of ``wire_type``. A group of one buffer is
        that buffer, not merged."""
        buffers = self._arrow_buffers(buffers, "buffers")
        offsets = _check_offsets(offsets, len(buffers), "buffers")
        self._setup()
        sizes = np.diff(offsets)
        several = np.flatnonzero(sizes != 1)
        if not len(several):
            return buffers
        # Only the groups of several buffers (or none) are merged; the others pass through.
        sub = np.concatenate([[0], np.cumsum(sizes[several])]).astype(np.int64)
        if len(several) == len(sizes):
            picked = buffers
        else:
            rows = np.repeat(offsets[several] - sub[:-1], sizes[several]) + np.arange(
                sub[-1], dtype=np.int64)
            picked = buffers.take(pa.array(rows))
        if self._has("merge_arrow"):
            merged = self._arrow_result("merge_arrow", self.obj.merge_arrow(picked, sub),
                                        len(several), self.wire_type)
        else:
            merged = self._wire(*self._merged(self.from_arrow(picked), sub))
        if len(several) == len(sizes):
            return merged
        place = offsets[:-1].copy()
        place[several] = len(buffers) + np.arange(len(several))
        return pa.concat_arrays([buffers, merged]).take(pa.array(place))

    def _merged(self, buffers, offsets):
        groups = len(offsets) - 1
        if self._has("merge_groups"):
            return self._vectorized("merge_groups", buffers, offsets, groups), "merge_groups"
        obj = self.obj
        if self.protocol == _SPARK:
            empty = offsets[:-1] == offsets[1:]
            return (self._merge_spark(buffers, offsets),
                    lambda i: "zero" if empty[i] else "merge")
        merged = []
        for start, stop in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
            merged.append(obj.merge_accumulators(buffers[start:stop]) if stop > start
                          else obj.create_accumulator())
        return merged, "merge_accumulators"

    def finish(self, buffers):
        """The results of ``buffers`` as a pyarrow Array of ``output_type``."""
        self._setup()
        method = "finish" if self.protocol == _SPARK else "extract_output"
        function = getattr(self.obj, method)
        results = [function(buffer) for buffer in buffers]
        try:
            return pa.array(results, type=self.output_type)
        except _CONVERSION_ERRORS as error:
            i, reason = _first_bad(results, self.output_type, error)
            raise TypeError(
                f"Aggregator {self.name!r} method {method} returned a value that does not "
                f"convert to its output type: expected {self.output_type}, got "
                f"{_describe(results[i])} ({reason}).") from None

    def finish_arrow(self, buffers):
        """The results of ``buffers`` (an Arrow array of ``wire_type``) as a pyarrow Array of
        ``output_type``."""
        buffers = self._arrow_buffers(buffers, "buffers")
        if self._has("finish_arrow"):
            self._setup()
            return self._arrow_result("finish_arrow", self.obj.finish_arrow(buffers),
                                      len(buffers), self.output_type, nulls=True)
        return self.finish(self.from_arrow(buffers))

    # --- the Arrow form of buffers ----------------------------------------------------------

    def to_arrow(self, buffers):
        """Buffers as an Arrow array of ``wire_type``: a struct per buffer (Spark protocol, or
        a CombineFn's declared type), else one pickle per accumulator."""
        return self._wire(list(buffers), "to_arrow")

    def from_arrow(self, array):
        """Python buffers from an Arrow array of ``wire_type`` (``to_arrow``'s, a stage's or a
        stream's state): a tuple of its fields for a struct type (every Spark Aggregator's).

        Raises
        ------
        ValueError
            When a value is null or is not a buffer of this aggregator.
        """
        array = self._arrow_buffers(array, "array")
        if self.buffer_type is None:
            return self.decode(array)
        if not pa.types.is_struct(self.buffer_type):
            return array.to_pylist()
        if not self.buffer_type.num_fields:
            return [()] * len(array)
        return list(zip(*(field.to_pylist() for field in array.flatten())))

    def _wire(self, buffers, method):
        """``buffers`` as an Arrow array of ``wire_type``, or one error naming the first bad
        buffer and the method that made it (a name, or a function of its index)."""
        if self.buffer_type is None:
            return self.encode(buffers)
        method_of = method if callable(method) else (lambda i: method)
        if self.protocol == _SPARK:
            fields = self.buffer_type.num_fields
            for i, buffer in enumerate(buffers):
                if not isinstance(buffer, tuple) or len(buffer) != fields:
                    raise TypeError(self._bad_buffer(method_of(i), buffer))
        try:
            return pa.array(buffers, type=self.buffer_type)
        except _CONVERSION_ERRORS as batch_error:
            i, reason = _first_bad(buffers, self.buffer_type, batch_error)
            if self.protocol == _SPARK:
                raise TypeError(self._bad_buffer(method_of(i), buffers[i], reason)) from None
            raise TypeError(f"Aggregator {self.name!r} method {method_of(i)} returned an "
                            f"accumulator that does not convert to its buffer_type "
                            f"{self.buffer_type}: got {_describe(buffers[i])} ({reason}).") \
                from None

    def _arrow_buffers(self, array, parameter):
        """``array`` as one Arrow array of ``wire_type`` with no null (a buffer is never
        null), or an error naming ``parameter``."""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
        if not isinstance(array, pa.Array) or array.type != self.wire_type:
            raise TypeError(f"The '{parameter}' parameter must be a pyarrow Array of aggregator "
                            f"{self.name!r}'s buffers ({self.wire_type}). Got "
                            f"{getattr(array, 'type', type(array).__name__)}.")
        if array.null_count:
            raise ValueError(f"Aggregator {self.name!r} got a null buffer among {len(array)} "
                             f"(a buffer is never null).")
        return array

    def _arrow_result(self, method, result, length, arrow_type, nulls=False):
        """The Arrow array a batch-protocol ``method`` returned, checked: ``length`` values of
        ``arrow_type`` (no null unless ``nulls``)."""
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        if not isinstance(result, pa.Array):
            raise TypeError(f"Aggregator {self.name!r} method {method} must return a pyarrow "
                            f"Array of {arrow_type}. Got {_describe(result)}.")
        if result.type != arrow_type:
            try:
                result = result.cast(arrow_type)
            except _CONVERSION_ERRORS as error:
                raise TypeError(f"Aggregator {self.name!r} method {method} must return a "
                                f"pyarrow Array of {arrow_type}. Got an Array of {result.type} "
                                f"({_shorten(str(error), 120)}).") from None
        if len(result) != length:
            raise TypeError(f"Aggregator {self.name!r} method {method} must return one value "
                            f"per group: expected {length}, got {len(result)}.")
        if result.null_count and not nulls:
            raise TypeError(f"Aggregator {self.name!r} method {method} returned a null buffer "
                            f"(a buffer is never null).")
        result.validate()
        return result

    def _has(self, method):
        return callable(getattr(self.obj, method, None))

    # --- the wire format ------------------------------------------------------------------

    def encode(self, buffers):
        """Buffers as a pyarrow BinaryArray, one pickle (protocol 5) per buffer: a Beam
        accumulator's form between stages when it declares no type (``to_arrow`` is every
        aggregator's), and bytes for a store of one's own."""
        self._setup()
        compact = getattr(self.obj, "compact", None) if self.protocol == _BEAM else None
        blobs = []
        for buffer in buffers:
            if compact is not None:
                buffer = compact(buffer)
            try:
                blobs.append(pickle.dumps(buffer, protocol=5))
            except (pickle.PicklingError, TypeError, AttributeError) as error:
                raise TypeError(
                    f"Aggregator {self.name!r} has a buffer that plain pickle cannot "
                    f"serialize ({error}); buffers must be built from types importable by "
                    f"module name. Got {_describe(buffer)}.") from None
        return pa.array(blobs, type=pa.binary())

    def decode(self, array):
        """Buffers from ``encode`` output (a pyarrow binary Array or ChunkedArray).

        Raises
        ------
        ValueError
            When a value is null or is not a buffer of this aggregator.
        """
        if not isinstance(array, (pa.Array, pa.ChunkedArray)) or not (
                pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
            raise TypeError(f"The 'array' parameter must be a pyarrow binary array made by "
                            f"encode(). Got {getattr(array, 'type', type(array).__name__)}.")
        buffers = []
        for i, blob in enumerate(array.to_pylist()):
            if blob is None:
                raise ValueError(f"Aggregator {self.name!r} cannot decode buffer {i}: it is "
                                 f"null.")
            # Unpickling runs code named in the bytes, so they must come from this query's own
            # stages or checkpoint (whose writers run the query's code anyway); what this
            # guards against is damage, which pickle reports in many ways.
            try:
                buffers.append(pickle.loads(blob))
            except Exception as error:
                raise ValueError(
                    f"Aggregator {self.name!r} cannot decode buffer {i} ({len(blob)} bytes): "
                    f"{type(error).__name__}: {error}") from None
        return self._checked(buffers, "decode", ValueError)

    def buffer_bytes(self, encoded):
        """Mean bytes per buffer of ``encode`` output (for a state-bytes-per-key report)."""
        if len(encoded) == 0:
            return 0.0
        return pc.sum(pc.binary_length(encoded)).as_py() / len(encoded)

    # --- internals ------------------------------------------------------------------------

    def _setup(self):
        if not self._set_up:
            setup = getattr(self.obj, "setup", None) if self.protocol == _BEAM else None
            if setup is not None:
                setup()
            self._set_up = True

    def _select(self, rows):
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if not isinstance(rows, pa.Table):
            raise TypeError(f"The 'rows' parameter must be a pyarrow Table or RecordBatch. "
                            f"Got {type(rows).__name__} instead.")
        missing = [column for column in self.columns if column not in rows.column_names]
        if missing:
            raise ValueError(f"The 'rows' parameter must hold the columns {list(self.columns)} "
                             f"of aggregator {self.name!r}. Got columns {rows.column_names}, "
                             f"without {missing}.")
        return rows.select(list(self.columns))

    def _vectorized(self, method, data, offsets, groups):
        result = getattr(self.obj, method)(data, offsets)
        try:
            result = list(result)
        except TypeError:
            raise TypeError(f"Aggregator {self.name!r} method {method} must return a sequence "
                            f"of {groups} buffers. Got {_describe(result)}.") from None
        if len(result) != groups:
            raise TypeError(f"Aggregator {self.name!r} method {method} must return one buffer "
                            f"per group: expected {groups}, got {len(result)}.")
        return result

    def _call_spark(self, method, *args):
        # A shape check per call, so that a wrong buffer is reported by the method that made
        # it rather than by a later reduce that trips over it; types are checked per batch.
        buffer = getattr(self.obj, method)(*args)
        if not isinstance(buffer, tuple) or len(buffer) != self.buffer_type.num_fields:
            raise TypeError(self._bad_buffer(method, buffer))
        return buffer

    def _reduce_spark(self, table, offsets):
        rows = list(zip(*(column.to_pylist() for column in table.columns)))
        bounds = list(zip(offsets[:-1].tolist(), offsets[1:].tolist()))
        zero, reduce = self.obj.zero, self.obj.reduce
        buffers = []
        # The loop a user would write, nothing more per row; the batch's buffers are checked
        # once after (``_wire``). Should the loop fail, the failing group is replayed with a
        # check per call, so the error names the call that made a bad buffer.
        try:
            for start, stop in bounds:
                buffer = zero()
                for value in rows[start:stop]:
                    buffer = reduce(buffer, value)
                buffers.append(buffer)
        except Exception:
            start, stop = bounds[len(buffers)]
            buffer = self._call_spark("zero")
            for value in rows[start:stop]:
                buffer = self._call_spark("reduce", buffer, value)
            raise
        return buffers

    def _merge_spark(self, buffers, offsets):
        bounds = list(zip(offsets[:-1].tolist(), offsets[1:].tolist()))
        merge = self.obj.merge
        merged = []
        try:                           # as in _reduce_spark: checked only on a replay
            for start, stop in bounds:
                buffer = self._call_spark("zero") if start == stop else buffers[start]
                for other in buffers[start + 1:stop]:
                    buffer = merge(buffer, other)
                merged.append(buffer)
        except Exception:
            start, stop = bounds[len(merged)]
            if start == stop:
                self._call_spark("zero")
            buffer = buffers[start] if stop > start else None
            for other in buffers[start + 1:stop]:
                buffer = self._call_spark("merge", buffer, other)
            raise
        return merged

    def _reduce_beam(self, table, offsets):
        obj = self.obj
        if table.num_columns == 1:
            elements = table.column(0).to_pylist()
        else:
            elements = list(zip(*(column.to_pylist() for column in table.columns)))
        add_inputs = getattr(obj, "add_inputs", None)
        add_input = getattr(obj, "add_input", None)
        accumulators = []
        for start, stop in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
            accumulator = obj.create_accumulator()
            if callable(add_inputs):
                accumulator = add_inputs(accumulator, elements[start:stop])
            else:
                for element in elements[start:stop]:
                    accumulator = add_input(accumulator, element)
            accumulators.append(accumulator)
        return accumulators

    def _checked(self, buffers, method, error=TypeError):
        """``buffers``, once each converts to ``buffer_type`` (Spark protocol); else one error
        (of class ``error``) naming the first bad buffer and the method."""
        if self.protocol != _SPARK:
            return buffers
        try:
            self._wire(buffers, method)
        except TypeError as bad:
            raise error(str(bad)) from None
        return buffers

    def _bad_buffer(self, method, buffer, reason=None):
        verb = "decoded" if method == "decode" else f"method {method} returned"
        return (f"Aggregator {self.name!r} {verb} a buffer that does not match its "
                f"bufferSchema: expected a tuple of {self.buffer_type.num_fields} fields "
                f"{_fields(self.buffer_type)}, got {_describe(buffer)}"
                + (f" ({reason})." if reason else "."))


def protocol_of(obj, name):
    """Which protocol ``obj`` follows ("Spark Aggregator" or "Beam CombineFn"), or a TypeError
    naming the aggregator ``name`` and the missing methods of both."""
    def missing(protocol):
        gaps = []
        for method in _METHODS[protocol]:
            alternatives = method.split(" or ")
            if not any(callable(getattr(obj, each, None)) for each in alternatives):
                gaps.append(method)
        return gaps

    spark, beam = missing(_SPARK), missing(_BEAM)
    if not spark:
        return _SPARK
    if not beam:
        return _BEAM
    raise TypeError(
        f"Aggregator {name!r} follows neither protocol. Spark's Aggregator needs the methods "
        f"{', '.join(_METHODS[_SPARK])} (missing: {', '.join(spark)}); Beam's CombineFn needs "
        f"{', '.join(_METHODS[_BEAM])} (missing: {', '.join(beam)}).")


def _check_columns(columns):
    if isinstance(columns, str):
        columns = (columns,)
    try:
        columns = tuple(columns)
    except TypeError:
        raise TypeError(f"The 'columns' parameter must be a str or a sequence of str. "
                        f"Got {type(columns).__name__} instead.") from None
    if not columns or not all(isinstance(column, str) for column in columns):
        raise TypeError(f"The 'columns' parameter must be a str or a non-empty sequence of "
                        f"str. Got {columns!r}.")
    return columns


def _check_offsets(offsets, length, what):
    array = np.asarray(offsets)
    if array.ndim != 1 or array.shape[0] < 1 or array.dtype.kind not in "iu":
        raise TypeError(f"The 'offsets' parameter must be a 1-D integer array of at least one "
                        f"value. Got {_describe(offsets)}.")
    array = array.astype(np.int64, copy=False)
    if array[0] != 0 or array[-1] != length or (np.diff(array) < 0).any():
        raise ValueError(f"The 'offsets' parameter must be non-decreasing from 0 to the length "
                         f"of '{what}' ({length}). Got {_describe(array.tolist())}.")
    return array


def _first_bad(values, arrow_type, batch_error):
    """(index of the first value that does not convert to ``arrow_type``, Arrow's reason).

    Called once a whole batch failed; when every value converts alone (a batch too large for
    one array), the batch's own reason and its first value."""
    for i, value in enumerate(values):
        try:
            pa.array([value], type=arrow_type)
        except _CONVERSION_ERRORS as error:
            return i, _shorten(str(error), 120)
    return 0, _shorten(f"the batch failed to convert: {batch_error}", 120)


def _fields(struct_type):
    return "(" + ", ".join(f"{field.name}: {field.type}" for field in struct_type) + ")"


def _describe(value):
    return f"{type(value).__name__} {_shorten(repr(value), 80)}"


def _shorten(text, limit):
    return text if len(text) <= limit else text[:limit - 3] + "..."
