"""Routers as soft state: one :class:`~skewgroup.Partitioner` per (streaming query, input
partition), kept between micro-batches by the executors, never by Spark.

Where a row is routed never changes a result (the merge is per key), so a router is kept only
for balance: a router that is lost, stale or reset costs balance while it relearns the stream,
never correctness. That is why it may live outside Spark's checkpoint and state store, which
would cost a shuffle of the rows per micro-batch (a stateful operator keyed by source) and,
on windowed streams, hold back the watermark.

Where a router lives between two micro-batches:

* in memory, in the Python worker that ran the partition's last task (a module-level dict);
* as a snapshot file, ``<directory>/<query id>/<partition>/<batch id>``, its bytes after that
  batch (``Partitioner.to_bytes``), written when the task's rows are routed. The query id is
  Spark's, kept in the checkpoint, so the snapshot outlives the Python worker (Spark runs a
  partition's tasks in whichever of its Python workers is free), the query, the driver and the
  application: a query restarted on its checkpoint finds its routers where it left them.

A task of micro-batch ``b`` starts from the newest snapshot of a batch before ``b`` (the memory
copy when it is that one, else the file), so a replayed batch (a retried task, or the batch
that was running when the driver died) routes exactly as its first attempt did. With no
snapshot (a new query, a lost executor's partitions, another directory) the router starts cold.

The directory is Spark conf ``spark.skewgroup.routerSnapshots`` (default ``skewgroup-routers``
in each executor's temporary directory): executor-local by default, so an executor lost on a
cluster takes its snapshots along and its partitions start cold elsewhere; a directory shared
by every executor (e.g. beside the checkpoint on a shared file system) keeps them. ``"none"``
keeps routers in memory only. Each partition keeps its ``KEEP`` newest snapshots, each at most
the strategy's ``skewgroup.state_bound`` bytes.

Elastic workers: a snapshot of another number of workers is resized when its strategy can
(``Partitioner.resize``: FISH's ring); otherwise, as for another strategy, parameters or seed,
the router starts fresh.
"""
import os
import tempfile

from skewgroup import Partitioner

CONF = "spark.skewgroup.routerSnapshots"
KEEP = 3        # snapshots per partition: the batch being replayed needs the one before it
_MEMORY = {}    # (directory, query, partition) -> (batch id, Partitioner): this Python worker's


def directory_from_conf(conf_value):
    """The snapshot directory an executor uses for the conf value (None: memory only)."""
    if conf_value is None or conf_value == "":
        return os.path.join(tempfile.gettempdir(), "skewgroup-routers")
    if conf_value.lower() == "none":
        return None
    return conf_value


def acquire(directory, query, partition, batch, config, workers, seed):
    """(router for ``partition``'s rows of micro-batch ``batch``, whether it was restored)."""
    # Taken out until release: a task that fails half way leaves no half-advanced router.
    held = _MEMORY.pop((directory, query, partition), None)
    newest = None
    if directory is not None:
        newest = _newest_before(_partition_dir(directory, query, partition), batch)
        if held is not None and held[0] != newest:
            held = None   # a newer snapshot from another Python worker, or a replay
    elif held is not None and held[0] >= batch:
        held = None       # memory only: a replayed batch cannot find its start state
    router = None
    if held is not None:
        router = held[1]
    elif newest is not None:
        try:
            with open(os.path.join(_partition_dir(directory, query, partition), str(newest)),
                      "rb") as snapshot:
                router = Partitioner.from_bytes(snapshot.read())
        except (OSError, ValueError):
            router = None   # unreadable or damaged: soft state, start cold
    router = _fit(router, config, workers, seed)
    if router is None:
        return Partitioner(config, workers, seed), False
    return router, True


def release(directory, query, partition, batch, router):
    """Keep ``router`` (its state after ``batch``) in memory and as a snapshot file."""
    _MEMORY[(directory, query, partition)] = (batch, router)
    if directory is None:
        return
    folder = _partition_dir(directory, query, partition)
    try:
        os.makedirs(folder, exist_ok=True)
        temporary = os.path.join(folder, f".{batch}.{os.getpid()}.tmp")
        with open(temporary, "wb") as snapshot:
            snapshot.write(router.to_bytes())
        os.replace(temporary, os.path.join(folder, str(batch)))   # atomic: whole or absent
        for old in sorted(_batches(folder))[:-KEEP]:
            os.remove(os.path.join(folder, str(old)))
    except OSError:
        pass   # soft state: without a snapshot the next task starts from memory or cold


def _fit(router, config, workers, seed):
    """``router`` made to route for ``config`` over ``workers``, or None to start fresh."""
    if router is None or router.config != config or router.seed != seed:
        return None
    if router.workers != workers:
        try:
            router.resize(workers)
        except ValueError:   # the strategy cannot resize: its state is tied to n
            return None
    return router


def _partition_dir(directory, query, partition):
    return os.path.join(directory, query, str(partition))


def _batches(folder):
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [int(name) for name in names if name.isdigit()]


def _newest_before(folder, batch):
    earlier = [b for b in _batches(folder) if b < batch]
    return max(earlier) if earlier else None
