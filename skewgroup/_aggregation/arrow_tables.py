"""Arrow batches as one table: what a ``mapInArrow`` function does first with the batches of its
partition (below the Spark layer: pyarrow only).

>>> import pyarrow as pa
>>> table = pa.table({"k": [1, 2]})
>>> empty = pa.record_batch({"k": pa.array([], pa.int64())})
>>> table_of([empty, *table.to_batches(), empty]).num_rows
2
>>> table_of([empty]) is None
True
"""
import pyarrow as pa


def table_of(batches):
    """``batches`` (an iterable of RecordBatches) as one table, or None when they hold no row
    (a stream's partition may get only empty batches, whose schema a caller need not meet)."""
    batches = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(batches) if batches else None
