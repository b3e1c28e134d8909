"""A bucket's run as the state store keeps it, and read back: an Arrow IPC stream whose schema
metadata names the state's layout (:data:`LAYOUT`) and the bucket's live keys once it was
written. Bytes read back from a checkpoint are untrusted: :func:`decoded_run` checks each run
against the bucket's schema and validates it before anything computes on it, and migrates a
run of the previous layout. Below the Spark layer (pyarrow only).
"""
import pyarrow as pa

# The state's layout, written in each run's schema metadata. "runs-2": every column as Spark
# types it, a Python aggregator's buffers as its declared Arrow type. "runs-1" (no metadata):
# the columns as they crossed pandas (timestamps as epoch microseconds, ...) and every buffer
# one pickle; such a run is migrated when read. Any other layout is refused by name.
LAYOUT = "runs-2"
PREVIOUS_LAYOUT = "runs-1"
LAYOUT_KEY = b"skewgroup.layout"
LIVE_KEY = b"skewgroup.live"     # the bucket's live keys once the run was written


class StoredStateError(ValueError):
    """A checkpoint's stored state that this layout cannot read."""


def encoded_run(table, live):
    """``table`` as a stored run's bytes: its own schema (a key that is not nullable in
    Spark's schema is a nullable field here; read back, each run is cast to the bucket's
    schema again), its metadata the layout and ``live``, the bucket's live keys once this run
    is written."""
    sink = pa.BufferOutputStream()
    schema = table.schema.with_metadata({LAYOUT_KEY: LAYOUT.encode(),
                                         LIVE_KEY: str(int(live)).encode()})
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def decoded_run(run_id, level, blob, schema, states):
    """Stored run ``run_id`` (its ``level`` and bytes ``blob``, untrusted) of a bucket whose
    rows have Arrow ``schema`` and whose states are ``states`` (``states``), checked: (level,
    table, the bucket's live keys it records or None). A run of the previous layout is
    migrated."""
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
    if table.schema.names != schema.names:
        raise StoredStateError(
            f"the stream's checkpoint holds state with the columns {table.schema.names}; "
            f"this query keeps {schema.names}: a query restarts on its checkpoint "
            f"with the same keys and aggregates (workers and plan may change)")
    metadata = table.schema.metadata or {}
    layout = metadata.get(LAYOUT_KEY, PREVIOUS_LAYOUT.encode()).decode("utf-8", "replace")
    live = _count(metadata.get(LIVE_KEY))
    if layout == PREVIOUS_LAYOUT:
        table = _migrated(run_id, table, schema, states)
    elif layout != LAYOUT:
        raise StoredStateError(
            f"the stream's checkpoint holds a run {run_id!r} of state layout "
            f"{layout!r}; this version of skewgroup reads {LAYOUT!r} and migrates "
            f"{PREVIOUS_LAYOUT!r}: start the query on a new checkpoint, or with the "
            f"version that wrote it")
    try:
        table = table.cast(schema)
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


def _migrated(run_id, table, schema, states):
    """A run of the previous layout in this one: each Python aggregator's pickled buffers
    as its declared Arrow type (the rest casts, or is refused by :func:`decoded_run`)."""
    for state in states:
        migrate = getattr(state, "migrated", None)
        if migrate is None:
            continue
        for column in state.columns:
            at = table.schema.get_field_index(column)
            stored = table.column(at)
            if stored.type == schema.field(column).type:
                continue
            try:
                table = table.set_column(at, column, migrate(stored))
            except (TypeError, ValueError) as error:
                raise StoredStateError(
                    f"the stream's checkpoint holds a run {run_id!r} of state layout "
                    f"{PREVIOUS_LAYOUT!r} whose column {column!r} cannot be migrated to "
                    f"{LAYOUT!r} ({error}): start the query on a new checkpoint") from None
    return table


def _count(recorded):
    """A run's recorded count of live keys (metadata bytes), or None: not recorded, or not a
    count (untrusted bytes)."""
    try:
        count = int(recorded)
    except (TypeError, ValueError):
        return None
    return count if count >= 0 else None
