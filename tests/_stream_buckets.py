"""A stream's bucket outside Spark, for the tests of skewgroup._aggregation.stream: a store in a
dict, an aggregator's partial rows, the emitted results."""
import numpy as np
import pyarrow as pa

SUM_BUFFER = pa.struct([("total", pa.int64()), ("n", pa.int64())])
SCHEMA = pa.schema([("k", pa.int64()), ("b", SUM_BUFFER)])


class DictStore:
    """A bucket's store in a dict (run id -> (level, bytes)), as ``BucketRuns`` reads and
    writes a MapState."""

    def __init__(self):
        self.runs = {}

    def items(self):
        return [(run_id, level, blob) for run_id, (level, blob) in self.runs.items()]

    def put(self, run_id, level, blob):
        self.runs[run_id] = (level, blob)

    def remove(self, run_id):
        del self.runs[run_id]


class ScopedStore(DictStore):
    """A DictStore read run by run (``ids``, ``get``), as the Spark layer's MapState is with a
    ``scope``; it counts the runs whose bytes it gave."""

    def __init__(self, scope):
        super().__init__()
        self.scope, self.given = scope, 0

    def items(self):
        self.given += len(self.runs)
        return super().items()

    def ids(self):
        return list(self.runs)

    def get(self, run_id):
        self.given += 1
        return self.runs[run_id]


def partials_of(adapter, keys, values):
    """One buffer per key of ``keys``, an Arrow struct (as the partial stage writes them)."""
    keys, values = np.asarray(keys), np.asarray(values)
    order = np.argsort(keys, kind="stable")
    unique, starts = np.unique(keys[order], return_index=True)
    offsets = np.append(starts, len(keys)).astype(np.int64)
    return pa.table({"k": unique, "b": adapter.reduce_arrow(pa.table({"x": values[order]}),
                                                             offsets)})


def emitted_of(merged, column="b"):
    return dict(zip(merged.emitted["k"].to_pylist(), merged.emitted[column].to_pylist()))


def stored_bytes(table, layout=None):
    """``table`` as a stored run: of ``layout`` (written in its metadata), or without one
    (the previous layout)."""
    if layout is not None:
        table = table.replace_schema_metadata({b"skewgroup.layout": layout.encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
