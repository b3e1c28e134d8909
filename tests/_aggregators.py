"""Python aggregators the tests share, each in Spark's Aggregator protocol: a (sum, count) of a
column, its total and its mean, and a key's row count (scalar methods only, or with the vectorized
reduce). A Spark test ships this module by value (``cloudpickle.register_pickle_by_value``):
Spark's Python workers cannot import tests/."""
import numpy as np


class SumCount:
    """(sum, count) of an integer column, nulls skipped; the result (total, n). Scalar methods
    only."""

    bufferSchema = "total bigint, n bigint"
    outputType = "struct<total: bigint, n: bigint>"

    def zero(self):
        return (0, 0)

    def reduce(self, buffer, value):
        return buffer if value[0] is None else (buffer[0] + value[0], buffer[1] + 1)

    def merge(self, buffer1, buffer2):
        return (buffer1[0] + buffer2[0], buffer1[1] + buffer2[1])

    def finish(self, buffer):
        return {"total": buffer[0], "n": buffer[1]}


class Total(SumCount):
    """The same, finished as the total alone."""

    outputType = "bigint"

    def finish(self, buffer):
        return buffer[0]


class Mean(SumCount):
    """The same over a double column, finished as the mean, as pyspark's docs write one."""

    bufferSchema = "total double, n bigint"
    outputType = "double"

    def zero(self):
        return (0.0, 0)

    def finish(self, buffer):
        return buffer[0] / buffer[1] if buffer[1] else None


class RowCount:
    """A key's rows, merged in Python; groupBy's twin is ``count(1)``. Scalar methods only."""

    bufferSchema = "n bigint"
    outputType = "bigint"

    def zero(self):
        return (0,)

    def reduce(self, buffer, value):
        return (buffer[0] + 1,)

    def merge(self, buffer1, buffer2):
        return (buffer1[0] + buffer2[0],)

    def finish(self, buffer):
        return buffer[0]


class VectorizedRowCount(RowCount):
    """The same with the vectorized reduce."""

    def reduce_groups(self, rows, offsets):
        # No value becomes a Python object (a timestamp of year 9999 in a zone east of UTC has
        # none).
        return [(int(n),) for n in np.diff(offsets)]
