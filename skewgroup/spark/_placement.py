"""Exact placement: make ``repartition(n, col)`` put a row in Spark partition ``w``.

Spark's hash partitioning sends a row to ``pmod(murmur3_x86_32(col, seed=42), n)`` (``F.hash``);
an int column hashes its 4 little-endian bytes. For each worker w we precompute the smallest
int v_w >= 0 whose hash lands on w, and repartition on v_w: row -> partition w, exactly.
``mmh3`` is the reference MurmurHash3 implementation; the test suite checks it against F.hash.
The values are computed on the driver: executors never import ``mmh3``.
"""
from functools import lru_cache

import numpy as np
from pyspark.sql import functions as F

SPARK_HASH_SEED = 42


def spark_int_hash(value):
    """Spark's ``hash(CAST(value AS INT))``: MurmurHash3 x86_32 of the int's 4 LE bytes, seed 42."""
    import mmh3

    return mmh3.hash(int(value).to_bytes(4, "little", signed=True), SPARK_HASH_SEED)


@lru_cache(maxsize=64)
def placement_values(workers):
    """int32 array v with ``pmod(hash(v[w]), workers) == w`` for every worker w."""
    values = np.full(workers, -1, dtype=np.int64)
    missing = workers
    candidate = 0
    while missing:
        w = spark_int_hash(candidate) % workers  # Python's % is pmod for a positive modulus
        if values[w] < 0:
            values[w] = candidate
            missing -= 1
        candidate += 1
    values = values.astype(np.int32)
    values.flags.writeable = False  # shared by every caller through the cache
    return values


def row_index():
    """A row's index inside its input partition: ``monotonically_increasing_id`` keeps the
    partition id above bit 33 and the index below it (Spark's documented layout)."""
    return F.monotonically_increasing_id().bitwiseAND(F.lit((1 << 33) - 1))


def place(tagged, workers, names):
    """``tagged`` (a ``names.worker`` column) with the rows of worker w in Spark partition w
    exactly."""
    values = placement_values(workers)
    value = F.element_at(F.array(*[F.lit(int(v)) for v in values]), F.col(names.worker) + 1)
    # The projection also turns a Python stage's rows into UnsafeRows before the exchange.
    return tagged.withColumn(names.place, value).repartition(workers, names.place)


def deal(df, workers, names):
    """``df`` with its rows dealt to the workers in turn, as ``repartition(n)`` (round robin)
    deals them: within an input partition row j goes to worker (j + offset) mod n, the offset
    a hash of the partition's id. On a batch DataFrame the worker is an expression placed
    exactly (no sort: round robin sorts every partition first so that a retried task deals
    its rows alike; the row index is already deterministic). A stream has no row index
    (``monotonically_increasing_id`` is refused in streaming): it takes ``repartition(n)``."""
    if df.isStreaming:
        return df.repartition(workers)
    worker = F.pmod(row_index() + F.hash(F.spark_partition_id()), F.lit(workers)).cast("int")
    return place(df.withColumn(names.worker, worker), workers, names)
