"""A stream's bucket of keys kept as runs: a small log-structured merge over the state store
(docs/stream.md), below the Spark layer (pyarrow and numpy only, no pyspark).

A state store writes each changed value whole at every commit. Kept as one value, a bucket's
state is rewritten whole by every micro-batch that touches it, so the checkpoint grows with
every key ever seen. Kept as runs, a micro-batch writes one new run: the keys it touched, each
with its merged state (``_groups.merge_runs``). A key's state is its row in the newest run that
has it. Runs are merged so that reads stay bounded:

* runs of one level merge into one run of the next level once ``FANOUT`` of them exist (a
  size-tiered LSM: a row is rewritten once per level, log_FANOUT of the micro-batches);
* the whole bucket is rewritten as one run (compacted) when superseded rows outnumber the live
  keys (a hot key touched by every micro-batch), or when keys leave it (windows closed in
  append mode: their rows are dropped only by rewriting the runs that hold them).

``store`` is a mapping of run ids to (level, Arrow IPC bytes): a ``transformWithStateInPandas``
MapState in the Spark layer, a dict in the tests. Bytes read back are untrusted: each run is
checked against the bucket's schema and validated before anything computes on it.
"""
from dataclasses import dataclass

import pyarrow as pa

from skewgroup._aggregation.groups import merge_runs

# Runs of one level merged into one of the next level. A row is rewritten once per level
# (log_FANOUT of the micro-batches), and a bucket holds up to FANOUT runs a level, each read
# back at every call (one MapState entry, one Arrow IPC decode: about 60 µs for 4,000 keys).
# Measured on 10^7 keys (docs/stream.md): 32 rewrote 32 micro-batches' runs at the 32nd, a
# third of the checkpoint of 40 micro-batches; 64 keeps that merge beyond the first 64.
FANOUT = 64
LAYOUT = "runs-1"  # the state's layout: a checkpoint of another layout is refused by name


class StoredStateError(ValueError):
    """A checkpoint's stored state that this layout cannot read."""


@dataclass
class Merged:
    """One call's outcome: ``emitted`` (as ``merge_runs`` gives it), ``live_keys`` (the key
    columns of every key the bucket keeps)."""

    emitted: dict
    live_keys: pa.Table


class BucketRuns:
    """The runs of one bucket: ``schema`` (keys and each state's columns), ``keys`` and
    ``states`` as ``merge_runs`` takes them."""

    def __init__(self, schema, keys, states, fanout=FANOUT):
        if fanout < 2:
            raise ValueError(f"fanout must be at least 2, got {fanout!r}")
        self.schema, self.keys, self.states, self.fanout = schema, list(keys), states, fanout

    def merge(self, store, new, closed=None):
        """Merge ``new`` partial rows into the bucket in ``store`` and write what changed."""
        runs = sorted(self._read(store), key=lambda run: -run[0])
        result = merge_runs([table for _, _, table in runs], new, self.keys, self.states,
                            closed)
        next_id = runs[0][0] + 1 if runs else 0
        live = result.live_keys.num_rows
        if result.dropped or result.superseded > live:
            self._compact(store, runs, result.live(), next_id)
        elif result.run.num_rows:
            self._put(store, next_id, 0, result.run)
            self._cascade(store, [(next_id, 0, result.run), *runs], next_id + 1)
        return Merged(result.emitted, result.live_keys)

    def _cascade(self, store, runs, next_id):
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
            for run_id, _, _ in same:
                store.remove(run_id)
            self._put(store, next_id, level + 1, merged)
            runs = [(next_id, level + 1, merged), *rest]
            next_id += 1

    def _compact(self, store, runs, live, next_id):
        for run_id, _, _ in runs:
            store.remove(run_id)
        if live.num_rows:
            level = max((level for _, level, _ in runs), default=0)
            self._put(store, next_id, level, live)

    def _put(self, store, run_id, level, table):
        sink = pa.BufferOutputStream()
        # The table's own schema: a key that is not nullable in Spark's schema is a nullable
        # field here (read back, each run is cast to the bucket's schema again).
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        store.put(run_id, level, sink.getvalue().to_pybytes())

    def _read(self, store):
        runs = []
        for run_id, level, blob in store.items():
            if not isinstance(blob, (bytes, bytearray)) or level is None or level < 0:
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
            try:
                table = table.cast(self.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise StoredStateError(
                    f"the stream's checkpoint holds state of other types than this query's "
                    f"({error}): a query restarts on its checkpoint with the same keys and "
                    f"aggregates") from None
            runs.append((run_id, level, table))
        return runs


class DictStore:
    """A store in a dict (run id -> (level, bytes)): the tests' and a reference."""

    def __init__(self):
        self.runs = {}

    def items(self):
        return [(run_id, level, blob) for run_id, (level, blob) in self.runs.items()]

    def put(self, run_id, level, blob):
        self.runs[run_id] = (level, blob)

    def remove(self, run_id):
        del self.runs[run_id]
