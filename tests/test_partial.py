"""The partial stage on an executor (skewgroup._aggregation.partial), without Spark: one grouping
shared by the steps, the built-ins' rows passed after, every table of the target schema."""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.partial import partial_batches, partial_tables
from skewgroup._aggregation.reductions import Reduction
from skewgroup._aggregation.steps import ReductionStep

TABLE = pa.table({"k": [2, 1, 2, 2], "x": [1, 2, 3, 4], "h": [7, 5, 7, 7]})


def total_step(groups, table, target):
    """A step as ``steps.Step`` says: one value per group, in group order."""
    values = table.column("x").take(groups.order).to_numpy()
    return [("total", pa.array(np.add.reduceat(values, groups.offsets[:-1])))]


def test_steps_share_one_grouping_and_the_rows_behind_each_are_counted():
    target = pa.schema([("k", pa.int64()), ("h", pa.int64()), ("total", pa.int64()),
                        ("n", pa.int64()), ("rows", pa.int64())])
    count = ReductionStep(Reduction("count", pa.int64()), None, ["n"])
    partial_of = partial_tables(target, ["k"], [total_step, count], rows="rows",
                                carried=["h"])
    (part,) = partial_of(TABLE)
    assert part.schema == target
    assert sorted(part.to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "h": 5, "total": 2, "n": 1, "rows": 1},
        {"k": 2, "h": 7, "total": 8, "n": 3, "rows": 3}]


def test_built_ins_rows_follow_with_the_other_fields_null():
    target = pa.schema([("k", pa.int64()), ("x", pa.int64()), ("raw", pa.bool_()),
                        ("total", pa.int64()), ("rows", pa.int64())])
    partial_of = partial_tables(target, ["k"], [total_step], spark_inputs=["x"],
                                passes_rows=True, raw="raw", rows="rows")
    per_key, rows = partial_of(TABLE)
    assert per_key.column("raw").null_count == per_key.num_rows
    assert rows.column("x").to_pylist() == [1, 2, 3, 4]
    assert rows.column("raw").to_pylist() == [True] * 4
    assert rows.column("total").null_count == 4 and rows.column("rows").to_pylist() == [0] * 4


def test_a_partition_of_empty_batches_yields_nothing():
    target = pa.schema([("k", pa.int64()), ("total", pa.int64())])
    partial = partial_batches(partial_tables(target, ["k"], [total_step]))
    empty = pa.record_batch({"k": pa.array([], pa.int64()), "x": pa.array([], pa.int64())})
    assert list(partial([empty])) == []
    batches = list(partial([empty, *TABLE.select(["k", "x"]).to_batches()]))
    assert pa.Table.from_batches(batches).num_rows == 2
