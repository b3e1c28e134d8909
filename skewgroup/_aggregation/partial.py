"""The partial stage on an executor: a partition's rows grouped by key once, each aggregate's
step (``steps.Step``) run over the groups, the partial rows as tables of the target schema.
Below the Spark layer (pyarrow and numpy, no pyspark): the Spark layer
(``skewgroup.spark._partial``) hands it the keys, the steps and the flags of a call's layout.

    placed rows (partition == worker) --mapInArrow(partial_batches)--> partial rows
"""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.batches import table_of
from skewgroup._aggregation.groups import GroupedRows


def partial_batches(partial_of):
    """mapInArrow function: the partial rows of one partition's batches, ``partial_of`` (a
    function of :func:`partial_tables`) of their table."""
    def partial(batches):
        table = table_of(batches)
        if table is None:
            return
        for part in partial_of(table):
            yield from part.to_batches()

    return partial


def partial_tables(target, keys, steps, *, user_columns=(), spark_inputs=(),
                   passes_rows=False, raw=None, rows=None, carried=()):
    """(table -> the partial rows of one partition, as tables of Arrow schema ``target``).

    In the routed, split, spread and hash plans a partition is one worker; in the local plan
    it is one input partition. The ``steps`` of the aggregates that make a partial row per
    key share one grouping of the rows by ``keys`` (their fields side by side; a custom
    partial sees the first columns under ``user_columns``' names); with ``passes_rows`` the
    built-ins' rows follow (their keys, ``spark_inputs`` and the flag column ``raw``), the
    other fields null, which Spark's merge functions skip. ``rows``: the column of the rows
    behind each partial row, where ``target`` has it. ``carried``: input columns whose value
    is a function of the key (the stream merge's key hash), each partial row given its key's.
    """
    keys, spark_inputs, carried = list(keys), list(spark_inputs), list(carried)

    def partial(table):
        parts = []
        if steps:
            groups = GroupedRows(table, keys, user_columns)
            per_key = pa.table(groups.keys)
            if carried:
                firsts = groups.order.take(pa.array(groups.offsets[:-1]))
                for name in carried:
                    per_key = per_key.append_column(name, table.column(name).take(firsts))
            for step in steps:
                for name, column in step(groups, table, target):
                    per_key = per_key.append_column(name, column)
            if rows in target.names:
                per_key = per_key.append_column(rows, pa.array(np.diff(groups.offsets)))
            parts.append(per_key)
        if passes_rows:
            input_rows = table.select([*keys, *carried, *spark_inputs])
            parts.append(input_rows.append_column(raw, pa.repeat(True, table.num_rows)))
        return [_complete(part, target, rows) for part in parts]

    return partial


def _complete(part, target, rows):
    """``part`` with the target schema: missing partial fields null, rows 0 (the built-ins'
    passed rows are no partial row)."""
    columns = []
    for f in target:
        if f.name == rows and rows not in part.column_names:
            columns.append(pa.repeat(pa.scalar(0, pa.int64()), part.num_rows))
        elif f.name in part.column_names:
            columns.append(part.column(f.name).cast(f.type))
        else:
            columns.append(pa.nulls(part.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=target)
