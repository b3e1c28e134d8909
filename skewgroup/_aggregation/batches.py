"""Arrow batches as a ``mapInArrow`` call hands them over, and tables packed as Arrow IPC bytes
(the values a stream's stateful merge passes): below the Spark layer (pyarrow only).

>>> import pyarrow as pa
>>> table = pa.table({"k": [1, 2]})
>>> empty = pa.record_batch({"k": pa.array([], pa.int64())})
>>> table_of([empty, *table.to_batches(), empty]).num_rows
2
>>> table_of([]) is None
True
>>> unpacked([ipc_bytes(table)], table.schema).equals(table)
True
"""
import pyarrow as pa


def table_of(batches):
    """A ``mapInArrow`` call's batches as one table, or None when they hold no row (a stream's
    partition may get only empty batches)."""
    batches = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(batches) if batches else None


def ipc_bytes(table):
    """``table`` as the bytes of one Arrow IPC stream (its own schema)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def unpacked(blobs, schema):
    """The rows of packed values ``blobs`` (Arrow IPC streams this query wrote), as one table
    of ``schema``."""
    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables([t.cast(schema) for t in tables])
