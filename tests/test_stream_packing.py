"""A stream's partial rows packed per bucket for the stateful stage, and unpacked
(skewgroup._aggregation.stream.packing), without Spark."""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.stream.packing import partial_packer, unpacker

STATE = pa.schema([("k", pa.int64()), ("s", pa.int64())])
TARGET = pa.schema([("bucket", pa.int32()), ("blob", pa.binary())])


def test_each_bucket_is_one_packed_value_and_unpacks_to_its_rows():
    hashes = np.array([3, 64 + 3, 5, -1], np.int64)       # buckets 3, 3, 5 and 63 of 64
    rows = pa.table({"k": [1, 2, 3, 4], "s": [10, 20, 30, 40], "h": hashes})
    pack = partial_packer(lambda table: [table], STATE.names, TARGET, key_hash="h",
                          bucket="bucket", buckets=64)
    packed = pa.Table.from_batches(list(pack(rows.to_batches())))
    by_bucket = dict(zip(packed.column("bucket").to_pylist(), packed.column("blob").to_pylist()))
    assert sorted(by_bucket) == [3, 5, 63]
    out = pa.Table.from_batches(list(unpacker(STATE)(
        [pa.record_batch([pa.array([by_bucket[3]], pa.binary())], names=["blob"])])))
    assert out.schema == STATE and sorted(out.column("k").to_pylist()) == [1, 2]


def test_a_partition_without_rows_packs_nothing():
    pack = partial_packer(lambda table: [table], STATE.names, TARGET, key_hash="h",
                          bucket="bucket", buckets=64)
    empty = pa.record_batch({"k": pa.array([], pa.int64()), "s": pa.array([], pa.int64()),
                             "h": pa.array([], pa.int64())})
    assert list(pack([empty])) == []
