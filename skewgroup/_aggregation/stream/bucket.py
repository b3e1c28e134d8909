"""A stream's bucket of keys kept as runs in a store, a small log-structured merge over the state
store (docs/stream.md), below the Spark layer (pyarrow and numpy only, no pyspark):
:class:`BucketRuns` reads a bucket's runs, merges a micro-batch into them (``runs.merge_runs``)
and writes what changed.

A state store writes each changed value whole at every commit. Kept as one value, a bucket's
state is rewritten whole by every micro-batch that touches it, so the checkpoint grows with
every key ever seen. Kept as runs, a micro-batch writes one new run: the keys it touched, each
with its merged state. A key's state is its row in the newest run that has it. Runs are
merged so that reads stay bounded:

* runs of one level merge into one run of the next level once ``FANOUT`` of them exist (a
  size-tiered LSM: a row is rewritten once per level, log_FANOUT of the micro-batches);
* the whole bucket is rewritten as one run (compacted) when superseded rows exceed
  ``SUPERSEDED_PER_LIVE`` times the live keys (a hot key touched by every micro-batch), or
  when keys leave it (windows closed in append mode: their rows are dropped only by rewriting
  the runs that hold them).

``store`` is a mapping of run ids to (level, Arrow IPC bytes: ``stored.encoded_run``): a
``transformWithStateInPandas`` MapState in the Spark layer (``items``, ``put``, ``remove``;
with a ``scope``, also ``ids`` and ``get``). Bytes read back are untrusted: each run is
checked and validated before anything computes on it (``stored.decoded_run``).

A process keeps the runs it decoded (``cache.RunCache``) for the next call on the same bucket
(a store with a ``scope``). A run id names one content: its high bits count the bucket's
writes, its low bits are random, so a micro-batch replayed after a failure writes its runs
under new ids (:data:`RANDOM_BITS`).
"""
import secrets

import pyarrow as pa
import pyarrow.compute as pc

from skewgroup._aggregation.stream.runs import merge_runs
from skewgroup._aggregation.stream.stored import decoded_run, encoded_run

# Runs of one level merged into one of the next level. A row is rewritten once per level
# (log_FANOUT of the micro-batches), and a bucket holds up to FANOUT runs a level, each
# probed for the touched keys at every call (decoded once a Python worker: RunCache).
# Measured on 10^7 keys (docs/stream.md): 32 rewrote 32 micro-batches' runs at the 32nd, a
# third of the checkpoint of 40 micro-batches; 64 keeps that merge beyond the first 64.
FANOUT = 64
# A run id: the bucket's write count above RANDOM_BITS random bits. Ids sort as the writes
# did; a write replayed after a failure gets other random bits (the same ones: odds 2^-31), so
# a run a worker kept from the failed attempt is not found among the bucket's ids. Ids that
# earlier versions wrote (0, 1, 2, ...) count as write 0, older than any run written now.
RANDOM_BITS = 31
# A bucket is rewritten as one run once its superseded rows exceed this many times its live
# keys: its stored rows stay within (1 + this) times the live ones, and a run's rows are
# rewritten by a compaction about once in (this) micro-batches that supersede them all. 2 is
# RocksDB's universal compaction default (``max_size_amplification_percent`` = 200). At 1,
# the Zipf 1.0 stream of bench_stream_growth rewrote its buckets whole in its last 3 of 24
# micro-batches (docs/stream.md).
SUPERSEDED_PER_LIVE = 2


class BucketRuns:
    """The runs of one bucket: ``schema`` (keys and each state's columns), ``keys`` and
    ``states`` as ``merge_runs`` takes them; ``cache``: the decoded runs a process keeps
    (``cache.RunCache``), read for a store with a ``scope``, or None."""

    def __init__(self, schema, keys, states, fanout=FANOUT, cache=None):
        if fanout < 2:
            raise ValueError(f"fanout must be at least 2, got {fanout!r}")
        self.schema, self.keys, self.states, self.fanout = schema, list(keys), states, fanout
        self.cache = cache

    def merge(self, store, new, closed=None):
        """Merge ``new`` partial rows into the bucket in ``store`` and write what changed: the
        ``runs.MergeOutcome`` (its ``emitted`` rows are what a caller reads; ``live_keys`` too
        in append mode)."""
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
        candidates = _rows_with_keys_of([table for _, _, table in runs], wanted, self.keys)
        if candidates is None:
            return None
        result = merge_runs(candidates, new, self.keys, self.states)
        live += result.fresh_keys
        rows_after = sum(table.num_rows for _, _, table in runs) + result.run.num_rows
        if rows_after - live > SUPERSEDED_PER_LIVE * live:
            live_rows = merge_runs([result.run, *[table for _, _, table in runs]],
                                   self.schema.empty_table(), self.keys, self.states).live()
            self._compact(store, runs, live_rows, write)
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

    def _scope(self, store):
        """The bucket's name in :attr:`cache` (the store's ``scope``), or None: not kept."""
        return None if self.cache is None else getattr(store, "scope", None)

    def _remove(self, store, run_ids):
        scope = self._scope(store)
        for run_id in run_ids:
            store.remove(run_id)
            if scope is not None:
                self.cache.discard(scope, run_id)

    def _put(self, store, write, level, table, live):
        """Write ``table`` as the bucket's ``write``-th run; its id."""
        run_id = (write << RANDOM_BITS) | secrets.randbits(RANDOM_BITS)
        store.put(run_id, level, encoded_run(table, live))
        scope = self._scope(store)
        if scope is not None:
            self.cache.add(scope, run_id, (level, table.cast(self.schema), int(live)))
        return run_id

    def _read(self, store):
        """(the runs (id, level, table), checked; the bucket's live keys as the newest run
        records them, or None). A store with a ``scope`` is read through :attr:`cache`:
        the run ids, then the bytes of the runs this process has not decoded (each by
        ``get``, or all of them by ``items`` where most are new to it)."""
        scope = self._scope(store)
        if scope is None:
            runs = [(run_id, *self._decoded(run_id, level, blob))
                    for run_id, level, blob in store.items()]
        else:
            ids = store.ids()
            known = self.cache.bucket(scope, ids)
            missing = [run_id for run_id in ids if run_id not in known]
            fetched = (store.items() if 2 * len(missing) > len(ids) else
                       [(run_id, *store.get(run_id)) for run_id in missing])
            for run_id, level, blob in fetched:
                if run_id not in known:
                    known[run_id] = self._decoded(run_id, level, blob)
                    self.cache.add(scope, run_id, known[run_id])
            runs = [(run_id, *known[run_id]) for run_id in ids]
        newest = max(runs, key=lambda run: run[0], default=None)
        return [(run_id, level, table) for run_id, level, table, _ in runs], (
            newest[3] if newest is not None else None)

    def _decoded(self, run_id, level, blob):
        return decoded_run(run_id, level, blob, self.schema, self.states)


def _rows_with_keys_of(tables, wanted, keys):
    """The rows of ``tables`` (runs, newest first) whose every leaf of its key columns (a
    column, or a struct's validity and fields) holds a value of ``wanted``'s (the new keys'
    distinct values, leaf by leaf): a superset of the rows with one of the new keys (a null
    matches a null, a NaN a NaN), as tables in the runs' order, newest first. None where
    Arrow has no membership test for a key's type.

    The runs are tested as one table (their chunks side by side, no copy): a membership test
    and a filter a call, not one a run; a bucket holds up to ``FANOUT`` runs a level, and each
    test costs a call its fixed overhead whatever its rows. Runs whose schemas differ (none
    written now) are tested one by one."""
    if not tables:
        return []
    try:
        together = [pa.concat_tables(tables)] if len(tables) > 1 else tables
    except pa.ArrowInvalid:
        together = tables
    found = []
    for table in together:
        mask = None
        leaves = (leaf for key in keys for leaf in _leaves(table.column(key)))
        try:
            for stored, values in zip(leaves, wanted):
                member = pc.is_in(stored, value_set=values, skip_nulls=False)
                mask = member if mask is None else pc.and_(mask, member)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
            return None
        found.append(table if mask is None else table.filter(mask))
    return found


def _leaves(column):
    """A key column's leaves: itself, or a struct's validity and its fields' leaves (a null
    struct's fields null)."""
    if pa.types.is_struct(column.type):
        yield column.is_valid()
        for i in range(column.type.num_fields):
            yield from _leaves(pc.struct_field(column, [i]))
    else:
        yield column
