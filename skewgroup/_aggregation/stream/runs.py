"""A micro-batch's partial rows merged into a bucket stored as runs (:func:`merge_runs`), its
outcome a :class:`MergeOutcome`: whole-array numpy and Arrow, below the Spark layer. Which runs
are read and written, and when they merge, is ``bucket``'s.
"""
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from skewgroup._aggregation.groups import group_rows


@dataclass
class MergeOutcome:
    """What one micro-batch does to a bucket stored as runs (``bucket.BucketRuns``).

    ``emitted``: the emitted keys' columns and each state's results, by column.
    ``run``: the keys this micro-batch touched that stay, each with its merged state (the new
    run; only these rows are written). ``live()``: every key that stays with its newest state
    (a compaction's one run). ``live_keys``: their key columns. ``superseded``: the stored rows a
    newer row of the same key replaces once ``run`` is written; ``dropped``: whether a key
    that leaves (closed) had stored rows, which only a compaction removes; ``fresh_keys``:
    the keys ``new`` touched that had no stored row."""

    emitted: dict
    run: pa.Table
    live: object
    live_keys: pa.Table
    superseded: int
    dropped: bool
    fresh_keys: int = 0


def merge_runs(runs, new, keys, states, closed=None):
    """Merge ``new`` partial rows (keys and each state's columns) into a bucket stored as
    ``runs``: tables of the same schema, newest first, each holding one row per key it has,
    that key's whole state when the run was written. A key's state is its row in the newest
    run that has it; older rows of it are superseded.

    ``states``: objects with ``columns`` (their column names) and ``merge(arrays, offsets)``,
    which merges grouped arrays of those columns into one value per group and returns (the
    merged arrays, a function from a bool mask over the groups to the masked groups' results by
    output column): a Python aggregator's ``states.BufferState``, a built-in's or a custom merge
    rule's ``states.ReducedState``.
    ``closed``: None emits every key ``new`` touches and keeps every key (update mode); else a
    function from the merged keys (a table) to a bool mask of keys whose result is final, which
    are emitted and leave the bucket (a window the watermark passed, append mode).

    Only the keys this call touches or emits are merged, each from its new rows and its newest
    stored row; the rest are not read beyond their keys.
    """
    # One schema: a merged run's fields (from the grouping) may differ from the stored runs'
    # in nullability or a list's field name, which concatenation refuses.
    table = pa.concat_tables([new, *[run if run.schema.equals(new.schema) else
                                     run.cast(new.schema) for run in runs]])
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
    return MergeOutcome(
        emitted=emitted,
        run=merged.filter(pa.array(keep & touched)),
        live=lambda: merged.filter(kept),
        live_keys=merged.select(keys).filter(kept),
        superseded=int((lengths - new_rows - stored).sum() + (stored & touched & keep).sum()),
        dropped=bool((stored & ~keep).any()),
        fresh_keys=int((touched & ~stored).sum()))


def _array(values):
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
