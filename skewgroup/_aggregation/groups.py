"""Rows grouped by key in Arrow: the partial's and the stream merge's grouping, below the Spark
layer (pyarrow and numpy only, no pyspark).

Keys group as Spark groups them: nulls one group, a struct key (a time window) split into its
validity and its fields, so that a null struct and a struct of nulls are two keys.

>>> import pyarrow as pa
>>> groups = group_rows(pa.table({"k": [3, 1, 3, None]}), ["k"])
>>> groups.keys["k"].to_pylist(), groups.offsets.tolist(), groups.order.to_pylist()
([3, 1, None], [0, 2, 3, 4], [0, 2, 1, 3])
"""
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)


@dataclass
class Grouped:
    """``table``'s rows grouped by key: ``order`` lists the row indices group by group,
    ``offsets`` the g + 1 group boundaries in it, ``keys`` one row per group (each key column
    with ``table``'s type)."""

    offsets: np.ndarray
    order: pa.Array
    keys: dict


def group_rows(table, keys):
    """Group ``table`` by the columns ``keys`` (one Arrow ``group_by``)."""
    work, group_keys = _flat_keys(table, keys)
    work = work.append_column("row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    grouped = work.group_by(group_keys, use_threads=False).aggregate(
        [("row", "list")])
    row_lists = grouped.column("row_list").combine_chunks()
    key_columns = _unflat_keys(grouped, table, keys)
    return Grouped(
        offsets=row_lists.offsets.to_numpy().astype(np.int64, copy=False),
        order=row_lists.flatten(),
        keys={k: key_columns[k].cast(table.schema.field(k).type) for k in keys})


def _flat_keys(table, keys):
    """(a table of the key columns with each struct key split into its validity and fields,
    the grouping columns). Only generated names: a user's column names never meet them."""
    columns = []
    for key in keys:
        column = table.column(key)
        if pa.types.is_struct(column.type):
            # A null struct and a struct of nulls are two keys, as in Spark: the validity is a
            # grouping column, and flatten() nulls a null struct's fields.
            columns.append(pa.compute.is_valid(column))
            chunks = [chunk.flatten() for chunk in column.chunks]
            for j, child in enumerate(column.type):
                columns.append(pa.chunked_array([c[j] for c in chunks], child.type))
        else:
            columns.append(column)
    names = [f"g{j}" for j in range(len(columns))]
    return pa.table(columns, names=names), names


def _unflat_keys(grouped, table, keys):
    """The key columns of ``grouped`` (grouped by ``_flat_keys``' columns) as ``table`` has
    them: struct keys rebuilt with their validity."""
    out, j = {}, 0
    for key in keys:
        key_type = table.schema.field(key).type
        if pa.types.is_struct(key_type):
            valid = grouped.column(f"g{j}").combine_chunks()
            children = [grouped.column(f"g{j + 1 + c}").combine_chunks()
                        for c in range(key_type.num_fields)]
            out[key] = pa.StructArray.from_arrays(children, fields=list(key_type),
                                                  mask=pa.compute.invert(valid))
            j += 1 + key_type.num_fields
        else:
            out[key] = grouped.column(f"g{j}")
            j += 1
    return out


class GroupedRows:
    """A partition's rows grouped by key once, for every aggregate of the partition: ``order``
    and ``offsets`` as :func:`group_rows` gives them, ``keys`` one row per group; ``rows`` the
    user's columns (the first ``len(user_columns)`` of ``table``, given their own names back:
    names may repeat) in group order, ``frame`` the same as one pandas DataFrame, each made
    once when first asked (what a custom partial sees, ``skewgroup._aggregation.custom``)."""

    def __init__(self, table, keys, user_columns):
        grouped = group_rows(table, keys)
        self.offsets = grouped.offsets
        self.order = grouped.order
        self.keys = grouped.keys
        self._table, self._user_columns = table, list(user_columns)
        self._rows = self._frame = None

    @property
    def rows(self):
        if self._rows is None:
            self._rows = (self._table.select(list(range(len(self._user_columns))))
                          .rename_columns(self._user_columns).take(self.order))
        return self._rows

    @property
    def frame(self):
        if self._frame is None:
            self._frame = self.rows.to_pandas()
        return self._frame
