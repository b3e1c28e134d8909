"""A mapInArrow call's batches as one table, and tables packed as Arrow IPC bytes
(skewgroup._aggregation.batches), without Spark."""
import pyarrow as pa

from skewgroup._aggregation.batches import ipc_bytes, table_of, unpacked


def test_empty_batches_are_dropped_and_none_is_no_table():
    table = pa.table({"k": [1, 2, 3]})
    empty = [pa.record_batch({"k": pa.array([], pa.int64())})]
    assert table_of([*empty, *table.to_batches(), *empty]).equals(table)
    assert table_of(empty) is None and table_of([]) is None


def test_packed_tables_come_back_in_the_asked_schema():
    first, second = pa.table({"k": pa.array([1], pa.int32())}), pa.table({"k": [2, 3]})
    schema = pa.schema([("k", pa.int64())])
    got = unpacked([ipc_bytes(first), ipc_bytes(second)], schema)
    assert got.schema == schema and got.column("k").to_pylist() == [1, 2, 3]
    assert unpacked([], schema).equals(schema.empty_table())
