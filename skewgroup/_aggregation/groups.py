"""Rows grouped by key in Arrow, and a bucket of keys' buffers merged: the partial's and the
stream merge's grouping, below the Spark layer (pyarrow and numpy only, no pyspark).

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

from skewgroup._aggregation.reductions import crosses_with_status, with_status


@dataclass
class Grouped:
    """``table``'s rows grouped by key: ``order`` lists the row indices group by group,
    ``offsets`` the g + 1 group boundaries in it, ``keys`` one row per group (each key column
    with ``table``'s type), ``extra`` each extra column's per-group aggregate."""

    offsets: np.ndarray
    order: pa.Array
    keys: dict
    extra: dict


def group_rows(table, keys, extra=()):
    """Group ``table`` by the columns ``keys`` (one Arrow ``group_by``); ``extra``: (column,
    Arrow aggregate) pairs also computed per group, e.g. ``("touched", "max")``."""
    work, group_keys = _flat_keys(table, keys)
    work = work.append_column("row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    for column, _ in extra:
        work = work.append_column(column, table.column(column))
    grouped = work.group_by(group_keys, use_threads=False).aggregate(
        [("row", "list"), *extra])
    row_lists = grouped.column("row_list").combine_chunks()
    key_columns = _unflat_keys(grouped, table, keys)
    return Grouped(
        offsets=row_lists.offsets.to_numpy().astype(np.int64, copy=False),
        order=row_lists.flatten(),
        keys={k: key_columns[k].cast(table.schema.field(k).type) for k in keys},
        extra={f"{column}_{how}": grouped.column(f"{column}_{how}").combine_chunks()
               for column, how in extra})


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


# --- a bucket of a stream's keys: stored runs merged with a micro-batch's partials ------------


@dataclass
class RunsMerge:
    """What one micro-batch does to a bucket stored as runs (``skewgroup._aggregation.stream_state``).

    ``emitted``: the emitted keys' columns and each state's results, by column.
    ``run``: the keys this micro-batch touched that stay, each with its merged state (the new
    run; only these rows are written). ``live()``: every key that stays with its newest state
    (a compaction's one run). ``live_keys``: their key columns. ``stored_rows``: the rows the
    runs held; ``superseded``: those a newer row of the same key replaces once ``run`` is
    written; ``dropped``: whether a key that leaves (closed) had stored rows, which only a
    compaction removes."""

    emitted: dict
    run: pa.Table
    live: object
    live_keys: pa.Table
    stored_rows: int
    superseded: int
    dropped: bool


class BufferState:
    """A Python aggregator's state in a bucket: one encoded buffer column, ``column``, merged
    with the adapter's ``decode``, ``merge_groups``, ``encode`` and finished with ``finish``
    (``skewgroup.aggregators.PythonAggregator``); its result goes out under the same name."""

    def __init__(self, adapter, column):
        self.adapter, self.column, self.columns = adapter, column, [column]
        # A number's result leaves the stream's merge filled, with its status beside it.
        self.status_column = (column + "__s" if crosses_with_status(adapter.output_type)
                              else None)

    def finished(self, encoded, offsets):
        """The result of each group of ``encoded`` buffers (``offsets``: the g + 1 group
        boundaries): decoded, merged per group and finished (a batch merge)."""
        adapter = self.adapter
        return adapter.finish(adapter.merge_groups(adapter.decode(encoded), offsets))

    def merge(self, arrays, offsets):
        adapter, column = self.adapter, self.columns[0]
        buffers = adapter.merge_groups(adapter.decode(arrays[0]), offsets)

        def results(mask):
            result = adapter.finish([b for b, m in zip(buffers, mask) if m])
            if self.status_column is None:
                return {column: result}
            return with_status(column, self.status_column, result)

        return [adapter.encode(buffers)], results


def merge_runs(runs, new, keys, states, closed=None):
    """Merge ``new`` partial rows (keys and each state's columns) into a bucket stored as
    ``runs``: tables of the same schema, newest first, each holding one row per key it has,
    that key's whole state when the run was written. A key's state is its row in the newest
    run that has it; older rows of it are superseded.

    ``states``: objects with ``columns`` (their column names) and ``merge(arrays, offsets)``,
    which merges grouped arrays of those columns into one value per group and returns (the
    merged arrays, a function from a bool mask over the groups to the masked groups' results by
    output column): a Python aggregator's :class:`BufferState`, a built-in's or a custom merge
    rule's ``skewgroup._aggregation.reductions.ReducedState``.
    ``closed``: None emits every key ``new`` touches and keeps every key (update mode); else a
    function from the merged keys (a table) to a bool mask of keys whose result is final, which
    are emitted and leave the bucket (a window the watermark passed, append mode).

    Only the keys this call touches or emits are decoded and merged, each from its new rows and
    its newest stored row; the rest stay as their bytes.
    """
    table = pa.concat_tables([new, *runs])
    fresh = new.num_rows
    groups = group_rows(table, keys)
    offsets, order = groups.offsets, groups.order.to_numpy()
    starts, lengths = offsets[:-1], np.diff(offsets)
    # A group lists its rows in table order: its new rows, then its stored rows newest first.
    new_rows = (np.add.reduceat((order < fresh).astype(np.int64), starts) if len(starts)
                else np.zeros(0, np.int64))
    stored = lengths > new_rows
    newest_stored = np.minimum(starts + new_rows, offsets[1:] - 1)
    merged = pa.table({k: groups.keys[k] for k in keys})
    touched = new_rows > 0
    emit = touched if closed is None else np.asarray(
        closed(merged).to_numpy(zero_copy_only=False), bool)
    keep = np.ones(len(starts), bool) if closed is None else ~emit
    active = np.flatnonzero(touched | emit)
    # The active groups' new rows and newest stored row, and their offsets among themselves.
    picked = new_rows[active] + stored[active]
    picked_offsets = np.concatenate([[0], np.cumsum(picked)]).astype(np.int64)
    at = np.repeat(starts[active] - picked_offsets[:-1], picked) + np.arange(
        picked_offsets[-1], dtype=np.int64)
    rows = pa.array(order[at])
    emitted_active = emit[active]
    # Each group's newest row (a new-only group's is replaced), then the merged values: a take
    # puts each active group's merged value in its place.
    newest = pa.array(order[newest_stored])
    place = np.arange(merged.num_rows, dtype=np.int64)
    place[active] = merged.num_rows + np.arange(len(active))
    place = pa.array(place)
    results = {}
    for state in states:
        values, finish = state.merge([table.column(c).take(rows) for c in state.columns],
                                     picked_offsets)
        for column, value in zip(state.columns, values):
            firsts = table.column(column).take(newest).combine_chunks()
            both = pa.concat_arrays([firsts, _array(value).cast(firsts.type)])
            merged = merged.append_column(column, both.take(place))
        results.update(finish(emitted_active))
    emitted = {k: merged.column(k).filter(pa.array(emit)) for k in keys}
    emitted.update(results)
    kept = pa.array(keep)
    return RunsMerge(
        emitted=emitted,
        run=merged.filter(pa.array(keep & touched)),
        live=lambda: merged.filter(kept),
        live_keys=merged.select(keys).filter(kept),
        stored_rows=table.num_rows - fresh,
        superseded=int((lengths - new_rows - stored).sum() + (stored & touched & keep).sum()),
        dropped=bool((stored & ~keep).any()))


def _array(values):
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


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
