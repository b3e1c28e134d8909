"""A stream's partial rows packed for the stateful stage, on an executor: one Arrow IPC value
per bucket of keys (and, in append mode, per window end), and the stage's packed output rows
unpacked (docs/stream.md, "What crosses the stateful stage"). Below the Spark layer (pyarrow
and numpy, no pyspark).
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from skewgroup._aggregation.batches import ipc_bytes, table_of, unpacked
from skewgroup._aggregation.groups import group_rows


def partial_packer(partial_tables, state_columns, target, *, key_hash, bucket, buckets,
                   window=None, event=None, rows_column=None, summary=None):
    """mapInArrow function: a partition's partial rows (``partial_tables`` of its table, each
    row with its key's hash in column ``key_hash``) as one packed value (the row's
    ``state_columns``) per bucket of keys, one of ``buckets`` (a power of two), in column
    ``bucket``; in append mode (``window``: the time window key) per window end too, in column
    ``event``. With a ``summary`` function (hashes, rows behind each, packed rows -> columns),
    the task's figures on its first packed row, from the rows behind each partial row
    (``rows_column``). Its rows are of Arrow schema ``target``."""
    by = [bucket, *([event] if window is not None else [])]

    def pack(batches):
        table = table_of(batches)
        if table is None:
            return
        rows = pa.concat_tables(partial_tables(table))
        hashes = rows.column(key_hash).to_numpy()
        # pmod(hash, buckets) as Spark computes it: the low bits of the two's complement.
        packing = {bucket: pa.array((hashes & (buckets - 1)).astype(np.int32))}
        if window is not None:
            packing[event] = pa.compute.struct_field(rows.column(window), [1])
        groups = group_rows(pa.table(packing), by)
        ordered = rows.select(state_columns).take(groups.order)
        bounds = zip(groups.offsets[:-1].tolist(), groups.offsets[1:].tolist())
        blobs = pa.array([ipc_bytes(ordered.slice(a, b - a)) for a, b in bounds], pa.binary())
        columns = [*[groups.keys[k] for k in by], blobs]
        if summary is not None:
            behind = rows.column(rows_column).to_numpy()    # 0 on a built-in's passed row
            columns += summary(hashes[behind > 0], behind[behind > 0], len(blobs))
        yield from pa.Table.from_arrays(
            [c.cast(f.type) for c, f in zip(columns, target)], schema=target).to_batches()

    return pack


def unpacker(schema):
    """mapInArrow function: the stateful stage's packed output rows, unpacked as tables of
    ``schema``."""
    def unpack(batches):
        for batch in batches:
            if batch.num_rows:
                yield from unpacked(batch.column(0).to_pylist(), schema).to_batches()

    return unpack
