"""Python aggregators: a partial per (worker, key), then a merge per key, with the merge in Python.

``adapt(obj, columns)`` wraps a user's aggregate object in a ``PythonAggregator``, the one
interface the Spark layer calls. Nothing here imports pyspark: rows come in as Arrow tables,
buffers travel as Arrow columns of the aggregator's declared buffer type (``wire_type``; a
pickle per accumulator only for a Beam CombineFn that declares none), results go out as Arrow
arrays. Python objects exist only inside the user's own methods. This module is the face: the
adapter itself is ``skewgroup._aggregation.python_aggregator``, the shipped aggregators
``skewgroup._aggregation.shipped``.

Two protocols are accepted, detected by their methods:

* Spark's ``pyspark.sql.aggregator.Aggregator``: ``zero()``, ``reduce(buffer, value)``,
  ``merge(buffer1, buffer2)``, ``finish(buffer)``, with ``bufferSchema`` and ``outputType``.
  A buffer is a tuple in bufferSchema's field order; ``value`` is the tuple of the named
  columns' values of one row (Python scalars, None for null). Every buffer is checked against
  the Arrow struct type of bufferSchema (``buffer_type``), every result against ``output_type``.
* Apache Beam's ``CombineFn``: ``create_accumulator()``, ``add_input(acc, element)`` and/or
  ``add_inputs(acc, elements)``, ``merge_accumulators(accumulators)``, ``extract_output(acc)``,
  optionally ``setup()`` (called once per process before use) and ``compact(acc)`` (called
  before an accumulator is encoded). An element is the column's value when one column is
  named, else the tuple of values. Accumulators are any picklable object, pickled between
  stages, unless the CombineFn declares their Arrow type (``buffer_type=`` or an
  ``arrow_buffer_type`` attribute: each accumulator converts to it with ``pa.array`` and comes
  back as a tuple of its fields for a struct type, else as ``to_pylist`` gives it); results are checked against ``output_type``.

The vectorized form (optional, on the same object; used when present, for either protocol):

* ``reduce_groups(rows, offsets)``: ``rows`` is a ``pyarrow.Table`` of the named columns, in
  that order, grouped by key; group i is ``rows[offsets[i]:offsets[i + 1]]`` (``offsets`` is
  int64, starts at 0, ends at ``rows.num_rows``, non-decreasing; a group may be empty). Returns
  one buffer per group, in order.
* ``merge_groups(buffers, offsets)``: ``buffers`` is a list grouped by key the same way;
  returns one merged buffer per group (an empty group merges to the zero buffer).

The batch protocol over Arrow (optional; preferred to the two above when present): buffers
never become Python objects.

* ``reduce_arrow(rows, offsets)``: ``rows`` and ``offsets`` as for ``reduce_groups``; returns a
  ``pyarrow.Array`` of ``wire_type``, one buffer per group.
* ``merge_arrow(buffers, offsets)``: ``buffers`` a ``pyarrow.Array`` of ``wire_type`` grouped
  by ``offsets``; returns one merged buffer per group (an empty group: the zero buffer). It is
  given only the groups of several buffers (or none): a group of one is that buffer.
* ``finish_arrow(buffers)``: a ``pyarrow.Array`` of ``output_type``, one result per buffer.

Without them the adapter loops over the groups in Python with the scalar methods (one
``reduce`` call per row, one ``merge`` per extra buffer); Beam's ``add_inputs``, when present,
is called once per group with the group's elements. A group of one buffer is not merged: it
passes through as its Arrow value.

Results are exact when ``merge`` is associative and commutative, as both protocols require:
partials are formed and merged in whatever order the cluster runs them.

Examples
--------
>>> import pyarrow as pa, numpy as np
>>> class Mean:
...     bufferSchema, outputType = "total double, n bigint", "double"
...     def zero(self): return (0.0, 0)
...     def reduce(self, buffer, value): return (buffer[0] + value[0], buffer[1] + 1)
...     def merge(self, a, b): return (a[0] + b[0], a[1] + b[1])
...     def finish(self, buffer): return buffer[0] / buffer[1] if buffer[1] else None
>>> mean = adapt(Mean(), ["x"], output_type=pa.float64(),
...              buffer_type=pa.struct([("total", pa.float64()), ("n", pa.int64())]))
>>> parts = mean.reduce_arrow(pa.table({"x": [1.0, 3.0, 5.0]}), np.array([0, 2, 3]))
>>> parts.to_pylist()
[{'total': 4.0, 'n': 2}, {'total': 5.0, 'n': 1}]
>>> mean.from_arrow(parts)
[(4.0, 2), (5.0, 1)]
>>> merged = mean.merge_arrow(parts, np.array([0, 2]))
>>> mean.finish_arrow(merged).to_pylist()
[3.0]
"""
from skewgroup._aggregation.python_aggregator import PythonAggregator, protocol_of
from skewgroup._aggregation.shipped import (DistinctCount, KllQuantiles, LeastSquares, RowSample,
                                            TopK)

__all__ = ["adapt", "protocol_of", "PythonAggregator", "DistinctCount", "KllQuantiles",
           "LeastSquares", "RowSample", "TopK"]


def adapt(obj, columns, *, buffer_type=None, output_type=None, name=None, protocol=None):
    """Wrap an aggregate object following Spark's Aggregator or Beam's CombineFn protocol.

    Parameters
    ----------
    obj : object
        The user's aggregate (see the module docstring for both protocols and the optional
        batch forms: ``reduce_arrow``/``merge_arrow``/``finish_arrow`` over Arrow, or
        ``reduce_groups``/``merge_groups`` over Python buffers).
    columns : str or sequence of str
        The input columns, in the order the aggregate reads them.
    buffer_type : pyarrow.DataType, optional
        Spark protocol: the Arrow struct type of ``bufferSchema``. Beam protocol: the Arrow
        type of the accumulators, if they have one (else they are pickled). Defaults to the
        object's ``arrow_buffer_type`` attribute when it has one (skewgroup's shipped
        aggregators do).
    output_type : pyarrow.DataType
        The Arrow type of the result (``outputType``). Defaults to ``arrow_output_type``.
    name : str, optional
        The name errors use; defaults to the object's class name.
    protocol : str, optional
        What :func:`protocol_of` returned for ``obj``, when the caller asked it already;
        detected otherwise.

    Returns
    -------
    PythonAggregator
    """
    return PythonAggregator(obj, columns, buffer_type=buffer_type, output_type=output_type,
                            name=name, protocol=protocol)
