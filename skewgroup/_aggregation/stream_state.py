"""A stream's state: its buckets of keys kept as runs, a small log-structured merge over the
state store (docs/stream.md), below the Spark layer (pyarrow and numpy only, no pyspark).

The room holds the whole of it: :class:`BucketRuns` (the runs of a bucket in a store),
:func:`merge_runs` (a micro-batch's partial rows merged into them, its outcome a
:class:`RunsMerge`), and the two kinds of state a bucket keeps per key: a Python aggregator's
buffer (:class:`BufferState`) and a reduction with Spark's semantics (:class:`ReducedState`:
a built-in, a custom aggregate's merge rule, a Spark function).

A state store writes each changed value whole at every commit. Kept as one value, a bucket's
state is rewritten whole by every micro-batch that touches it, so the checkpoint grows with
every key ever seen. Kept as runs, a micro-batch writes one new run: the keys it touched, each
with its merged state (:func:`merge_runs`). A key's state is its row in the newest run that
has it. Runs are merged so that reads stay bounded:

* runs of one level merge into one run of the next level once ``FANOUT`` of them exist (a
  size-tiered LSM: a row is rewritten once per level, log_FANOUT of the micro-batches);
* the whole bucket is rewritten as one run (compacted) when superseded rows exceed
  ``SUPERSEDED_PER_LIVE`` times the live keys (a hot key touched by every micro-batch), or
  when keys leave it (windows closed in
  append mode: their rows are dropped only by rewriting the runs that hold them).

``store`` is a mapping of run ids to (level, Arrow IPC bytes): a ``transformWithStateInPandas``
MapState in the Spark layer (``items``, ``put``, ``remove``; with a ``scope``, also ``ids`` and
``get``). Bytes read back are untrusted: each run is checked against the bucket's schema and
validated before anything computes on it.

Runs are immutable, so a process keeps the runs it decoded (:class:`RunCache`) for the next
call on the same bucket (a store with a ``scope``): a call then fetches only the run ids and the
runs it has not seen, where it would carry every run's bytes from the state store and decode
them again (PySpark's MapState iterator, one pickled value per run). A run id names one content:
its high bits count the bucket's writes, its low bits are random, so a micro-batch replayed
after a failure writes its runs under new ids (:data:`RANDOM_BITS`).
"""
import secrets
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewgroup._aggregation.groups import group_rows

# Runs of one level merged into one of the next level. A row is rewritten once per level
# (log_FANOUT of the micro-batches), and a bucket holds up to FANOUT runs a level, each
# probed for the touched keys at every call (decoded once a Python worker: RunCache).
# Measured on 10^7 keys (docs/stream.md): 32 rewrote 32 micro-batches' runs at the 32nd, a
# third of the checkpoint of 40 micro-batches; 64 keeps that merge beyond the first 64.
FANOUT = 64
# The state's layout, written in each run's schema metadata. "runs-2": every column as Spark
# types it, a Python aggregator's buffers as its declared Arrow type. "runs-1" (no metadata):
# the columns as they crossed pandas (timestamps as epoch microseconds, ...) and every buffer
# one pickle; such a run is migrated when read. Any other layout is refused by name.
LAYOUT = "runs-2"
PREVIOUS_LAYOUT = "runs-1"
LAYOUT_KEY = b"skewgroup.layout"
LIVE_KEY = b"skewgroup.live"     # the bucket's live keys once the run was written
# A run id: the bucket's write count above RANDOM_BITS random bits. Ids sort as the writes
# did; a write replayed after a failure gets other random bits (the same ones: odds 2^-31), so
# a run a worker kept from the failed attempt is not found among the bucket's ids. Ids that
# earlier versions wrote (0, 1, 2, ...) count as write 0, older than any run written now.
RANDOM_BITS = 31
# The decoded runs a process keeps (:class:`RunCache`) by default, in bytes of Arrow buffers
# (the Spark layer's ``spark.skewgroup.keptRunsBytes``).
KEPT_RUNS_BYTES = 256 << 20
# A bucket is rewritten as one run once its superseded rows exceed this many times its live
# keys: its stored rows stay within (1 + this) times the live ones, and a run's rows are
# rewritten by a compaction about once in (this) micro-batches that supersede them all. 2 is
# RocksDB's universal compaction default (``max_size_amplification_percent`` = 200). At 1,
# the Zipf 1.0 stream of bench_stream_growth rewrote its buckets whole in its last 3 of 24
# micro-batches (docs/stream.md); the runs are no longer fetched at every call (RunCache).
SUPERSEDED_PER_LIVE = 2


class StoredStateError(ValueError):
    """A checkpoint's stored state that this layout cannot read."""


class BucketRuns:
    """The runs of one bucket: ``schema`` (keys and each state's columns), ``keys`` and
    ``states`` as ``merge_runs`` takes them."""

    def __init__(self, schema, keys, states, fanout=FANOUT):
        if fanout < 2:
            raise ValueError(f"fanout must be at least 2, got {fanout!r}")
        self.schema, self.keys, self.states, self.fanout = schema, list(keys), states, fanout

    def merge(self, store, new, closed=None):
        """Merge ``new`` partial rows into the bucket in ``store`` and write what changed: the
        :class:`RunsMerge` (its ``emitted`` rows are what a caller reads; ``live_keys`` too in
        append mode)."""
        runs, live = self._read(store)
        runs.sort(key=lambda run: -run[0])
        write = (runs[0][0] >> RANDOM_BITS) + 1 if runs else 0    # the next write's count
        if closed is None and runs and live is not None:
            touched = self._merge_touched(store, runs, new, live, write)
            if touched is not None:
                return touched
        result = merge_runs([table for _, _, table in runs], new, self.keys, self.states,
                            closed)
        live = result.live_keys.num_rows
        if result.dropped or result.superseded > SUPERSEDED_PER_LIVE * live:
            self._compact(store, runs, result.live(), write)
        elif result.run.num_rows:
            run_id = self._put(store, write, 0, result.run, live)
            self._cascade(store, [(run_id, 0, result.run), *runs], write + 1, live)
        return result

    def _merge_touched(self, store, runs, new, live, write):
        """Update mode, where no key leaves: only the stored rows that may hold a key of
        ``new`` are grouped and merged (each run filtered by its keys' membership among the
        new keys, Arrow's ``is_in``: a superset of the exact matches, which the grouping then
        finds), so a call costs a hash probe per stored row, not a grouping of the bucket.
        The bucket's live keys are counted in the runs' metadata (``live``: the newest run's
        count). None where a key type has no membership test (the whole bucket is grouped)."""
        try:
            wanted = [pc.unique(leaf) for key in self.keys for leaf in _leaves(new.column(key))]
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
            return None
        candidates = []
        for _, _, table in runs:
            rows = _rows_with_keys_of(table, wanted, self.keys)
            if rows is None:
                return None
            candidates.append(rows)
        result = merge_runs(candidates, new, self.keys, self.states)
        live += result.fresh_keys
        rows_after = sum(table.num_rows for _, _, table in runs) + result.run.num_rows
        if rows_after - live > SUPERSEDED_PER_LIVE * live:
            whole = merge_runs([result.run, *[table for _, _, table in runs]],
                               self.schema.empty_table(), self.keys, self.states).live()
            self._compact(store, runs, whole, write)
        elif result.run.num_rows:
            run_id = self._put(store, write, 0, result.run, live)
            self._cascade(store, [(run_id, 0, result.run), *runs], write + 1, live)
        return result

    def _cascade(self, store, runs, write, live):
        """Merge the newest runs of one level into one of the next while ``fanout`` of them
        exist. Levels only grow with age, so the runs of the lowest level are the newest."""
        while True:
            level = runs[0][1]
            same = runs[:next((i for i, run in enumerate(runs) if run[1] != level), len(runs))]
            if len(same) < self.fanout:
                return
            rest = runs[len(same):]
            merged = merge_runs([table for _, _, table in same], self.schema.empty_table(),
                                self.keys, self.states).live()
            self._remove(store, [run_id for run_id, _, _ in same])
            run_id = self._put(store, write, level + 1, merged, live)
            runs = [(run_id, level + 1, merged), *rest]
            write += 1

    def _compact(self, store, runs, live, write):
        self._remove(store, [run_id for run_id, _, _ in runs])
        if live.num_rows:
            level = max((level for _, level, _ in runs), default=0)
            self._put(store, write, level, live, live.num_rows)

    def _remove(self, store, run_ids):
        scope = getattr(store, "scope", None)
        for run_id in run_ids:
            store.remove(run_id)
            if scope is not None:
                KEPT_RUNS.discard(scope, run_id)

    def _put(self, store, write, level, table, live):
        """Write ``table`` as the bucket's ``write``-th run; its id."""
        run_id = (write << RANDOM_BITS) | secrets.randbits(RANDOM_BITS)
        sink = pa.BufferOutputStream()
        # The table's own schema: a key that is not nullable in Spark's schema is a nullable
        # field here (read back, each run is cast to the bucket's schema again). Its metadata:
        # the layout, and the bucket's live keys once this run is written.
        schema = table.schema.with_metadata({LAYOUT_KEY: LAYOUT.encode(),
                                             LIVE_KEY: str(int(live)).encode()})
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_table(table)
        store.put(run_id, level, sink.getvalue().to_pybytes())
        scope = getattr(store, "scope", None)
        if scope is not None:
            KEPT_RUNS.add(scope, run_id, (level, table.cast(self.schema), int(live)))
        return run_id

    def _read(self, store):
        """(the runs (id, level, table), checked; the bucket's live keys as the newest run
        records them, or None). A store with a ``scope`` is read through :data:`KEPT_RUNS`:
        the run ids, then the bytes of the runs this process has not decoded (each by
        ``get``, or all of them by ``items`` where most are new to it)."""
        scope = getattr(store, "scope", None)
        if scope is None:
            runs = [(run_id, *self._decoded(run_id, level, blob))
                    for run_id, level, blob in store.items()]
        else:
            ids = store.ids()
            known = KEPT_RUNS.bucket(scope, ids)
            missing = [run_id for run_id in ids if run_id not in known]
            fetched = (store.items() if 2 * len(missing) > len(ids) else
                       [(run_id, *store.get(run_id)) for run_id in missing])
            for run_id, level, blob in fetched:
                if run_id not in known:
                    known[run_id] = self._decoded(run_id, level, blob)
                    KEPT_RUNS.add(scope, run_id, known[run_id])
            runs = [(run_id, *known[run_id]) for run_id in ids]
        newest = max(runs, key=lambda run: run[0], default=None)
        return [(run_id, level, table) for run_id, level, table, _ in runs], (
            newest[3] if newest is not None else None)

    def _decoded(self, run_id, level, blob):
        """One stored run, checked: (level, table, the bucket's live keys it records or
        None)."""
        if (not isinstance(run_id, int) or not isinstance(blob, (bytes, bytearray))
                or not isinstance(level, int) or level < 0):
            raise StoredStateError(
                f"the stream's checkpoint holds a run {run_id!r} that is not of skewgroup's "
                f"state layout {LAYOUT!r}: start the query on a new checkpoint")
        try:
            table = pa.ipc.open_stream(blob).read_all()
            table.validate(full=True)
        except (pa.ArrowInvalid, OSError) as error:
            raise StoredStateError(
                f"the stream's checkpoint holds a run {run_id!r} that is not an Arrow table "
                f"of skewgroup's state layout {LAYOUT!r} ({error})") from None
        if table.schema.names != self.schema.names:
            raise StoredStateError(
                f"the stream's checkpoint holds state with the columns {table.schema.names}; "
                f"this query keeps {self.schema.names}: a query restarts on its checkpoint "
                f"with the same keys and aggregates (workers and plan may change)")
        metadata = table.schema.metadata or {}
        layout = metadata.get(LAYOUT_KEY, PREVIOUS_LAYOUT.encode()).decode("utf-8", "replace")
        live = _count(metadata.get(LIVE_KEY))
        if layout == PREVIOUS_LAYOUT:
            table = self._migrated(run_id, table)
        elif layout != LAYOUT:
            raise StoredStateError(
                f"the stream's checkpoint holds a run {run_id!r} of state layout "
                f"{layout!r}; this version of skewgroup reads {LAYOUT!r} and migrates "
                f"{PREVIOUS_LAYOUT!r}: start the query on a new checkpoint, or with the "
                f"version that wrote it")
        try:
            table = table.cast(self.schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            if layout == PREVIOUS_LAYOUT:
                raise StoredStateError(
                    f"the stream's checkpoint holds a run {run_id!r} of state layout "
                    f"{PREVIOUS_LAYOUT!r} whose columns cannot be migrated to {LAYOUT!r} "
                    f"({error}): start the query on a new checkpoint") from None
            raise StoredStateError(
                f"the stream's checkpoint holds state of other types than this query's "
                f"({error}): a query restarts on its checkpoint with the same keys and "
                f"aggregates") from None
        return level, table, live

    def _migrated(self, run_id, table):
        """A run of the previous layout in this one: each Python aggregator's pickled buffers
        as its declared Arrow type (the rest casts, or is refused by ``_read``)."""
        for state in self.states:
            migrate = getattr(state, "migrated", None)
            if migrate is None:
                continue
            for column in state.columns:
                at = table.schema.get_field_index(column)
                stored = table.column(at)
                if stored.type == self.schema.field(column).type:
                    continue
                try:
                    table = table.set_column(at, column, migrate(stored))
                except (TypeError, ValueError) as error:
                    raise StoredStateError(
                        f"the stream's checkpoint holds a run {run_id!r} of state layout "
                        f"{PREVIOUS_LAYOUT!r} whose column {column!r} cannot be migrated to "
                        f"{LAYOUT!r} ({error}): start the query on a new checkpoint") from None
        return table


class RunCache:
    """The runs a process has decoded, bucket by bucket (a store's ``scope``), for the next
    call on the bucket: a run's id names its bytes for good (:data:`RANDOM_BITS`), so a kept
    run is the stored one. Bounded by ``limit`` bytes of Arrow buffers.

    Each micro-batch reads the buckets in turn, where dropping the least recently read bucket
    would drop each one just before it is read again. So past the limit a bucket goes only
    once it has not been read for ``IDLE_ROUNDS`` rounds of the kept buckets (a stopped
    query's); else a new run is not kept (read from the store again; the kept ones stay)."""

    IDLE_ROUNDS = 4

    def __init__(self, limit=KEPT_RUNS_BYTES):
        self.limit, self.size, self.reads = limit, 0, 0
        self.buckets = OrderedDict()      # scope -> (its last read, {run id: run}), by read

    def bucket(self, scope, ids):
        """The kept runs of bucket ``scope`` (a copy: run id -> (level, table, live)), now
        its last read; runs not among ``ids`` (removed since) are dropped."""
        self.reads += 1
        _, runs = self.buckets.pop(scope, (0, {}))
        wanted = set(ids)
        for run_id in [run_id for run_id in runs if run_id not in wanted]:
            self.size -= _nbytes(runs.pop(run_id))
        self.buckets[scope] = (self.reads, runs)
        return dict(runs)

    def add(self, scope, run_id, run):
        """Keep ``run`` of bucket ``scope`` if it fits (an idle bucket dropped for it)."""
        self.discard(scope, run_id)
        size = _nbytes(run)
        while self.size + size > self.limit:
            oldest, (last_read, runs) = next(iter(self.buckets.items()), (None, (0, {})))
            if (oldest is None or oldest == scope
                    or self.reads - last_read <= self.IDLE_ROUNDS * len(self.buckets)):
                return
            del self.buckets[oldest]
            self.size -= sum(_nbytes(kept) for kept in runs.values())
        if scope not in self.buckets:
            self.buckets[scope] = (self.reads, {})
        self.buckets[scope][1][run_id] = run
        self.size += size

    def discard(self, scope, run_id):
        run = self.buckets.get(scope, (0, {}))[1].pop(run_id, None)
        if run is not None:
            self.size -= _nbytes(run)


def _nbytes(run):
    return run[1].get_total_buffer_size()


# This process's decoded runs (a Python worker of Spark's keeps them between tasks).
KEPT_RUNS = RunCache()


@dataclass
class RunsMerge:
    """What one micro-batch does to a bucket stored as runs (:class:`BucketRuns`).

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


class BufferState:
    """A Python aggregator's state in a bucket: one buffer column, ``column``, of the
    adapter's ``wire_type``, merged with its ``merge_arrow`` and finished with its
    ``finish_arrow`` (``skewgroup.aggregators.PythonAggregator``); its result goes out under
    the same name."""

    def __init__(self, adapter, column):
        self.adapter, self.column, self.columns = adapter, column, [column]

    def migrated(self, stored):
        """Buffers of the previous layout (one pickle each) as this one's Arrow column."""
        if not pa.types.is_binary(stored.type):
            raise TypeError(f"expected pickled buffers (binary), got {stored.type}")
        adapter = self.adapter
        return adapter.to_arrow(adapter.decode(stored))

    def finished(self, buffers, offsets):
        """The result of each group of ``buffers`` (``offsets``: the g + 1 group boundaries):
        merged per group and finished (a batch merge)."""
        adapter = self.adapter
        return adapter.finish_arrow(adapter.merge_arrow(buffers, offsets))

    def merge(self, arrays, offsets):
        adapter, column = self.adapter, self.columns[0]
        merged = adapter.merge_arrow(arrays[0], offsets)

        def results(mask):
            return {column: adapter.finish_arrow(merged.filter(pa.array(mask, pa.bool_())))}

        return [merged], results


def merge_runs(runs, new, keys, states, closed=None):
    """Merge ``new`` partial rows (keys and each state's columns) into a bucket stored as
    ``runs``: tables of the same schema, newest first, each holding one row per key it has,
    that key's whole state when the run was written. A key's state is its row in the newest
    run that has it; older rows of it are superseded.

    ``states``: objects with ``columns`` (their column names) and ``merge(arrays, offsets)``,
    which merges grouped arrays of those columns into one value per group and returns (the
    merged arrays, a function from a bool mask over the groups to the masked groups' results by
    output column): a Python aggregator's :class:`BufferState`, a built-in's or a custom merge
    rule's :class:`ReducedState`.
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
    return RunsMerge(
        emitted=emitted,
        run=merged.filter(pa.array(keep & touched)),
        live=lambda: merged.filter(kept),
        live_keys=merged.select(keys).filter(kept),
        superseded=int((lengths - new_rows - stored).sum() + (stored & touched & keep).sum()),
        dropped=bool((stored & ~keep).any()),
        fresh_keys=int((touched & ~stored).sum()))


def _count(recorded):
    """A run's recorded count of live keys (metadata bytes), or None: not recorded, or not a
    count (untrusted bytes)."""
    try:
        count = int(recorded)
    except (TypeError, ValueError):
        return None
    return count if count >= 0 else None


def _rows_with_keys_of(table, wanted, keys):
    """The rows of ``table`` whose every leaf of its key columns (a column, or a struct's
    validity and fields) holds a value of ``wanted``'s (the new keys' distinct values, leaf by
    leaf): a superset of the rows with one of the new keys (a null matches a null, a NaN a
    NaN). None where Arrow has no membership test for a key's type."""
    mask = pa.array(np.ones(table.num_rows, bool))
    leaves = (leaf for key in keys for leaf in _leaves(table.column(key)))
    try:
        for stored, values in zip(leaves, wanted):
            mask = pc.and_(mask, pc.is_in(stored, value_set=values, skip_nulls=False))
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    return table.filter(mask)


def _leaves(column):
    """A key column's leaves: itself, or a struct's validity and its fields' leaves (a null
    struct's fields null)."""
    if pa.types.is_struct(column.type):
        yield column.is_valid()
        for i in range(column.type.num_fields):
            yield from _leaves(pc.struct_field(column, [i]))
    else:
        yield column


def _array(values):
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


class ReducedState:
    """A reduction's state in a stream's bucket (:func:`merge_runs`): its columns
    (value and ``n``, or ``n`` for count) and the output column its result goes out under."""

    def __init__(self, reduction, columns, output):
        if len(columns) != len(reduction.state_types):
            raise ValueError(f"{reduction.kind} keeps {len(reduction.state_types)} state "
                             f"column(s); got {list(columns)}.")
        self.reduction, self.columns, self.output = reduction, list(columns), output

    def merge(self, arrays, offsets):
        state = self.reduction.merge(arrays, offsets)

        def results(mask):
            mask = pa.array(mask, pa.bool_())
            return {self.output: self.reduction.result([a.filter(mask) for a in state])}

        return state, results
