"""The runs a process has decoded, kept for the next call on the same bucket (:class:`RunCache`):
runs are immutable, so a call then fetches only the run ids and the runs it has not seen, where
it would carry every run's bytes from the state store and decode them again (PySpark's MapState
iterator, one pickled value per run). Below the Spark layer (pyarrow only).
"""
from collections import OrderedDict

# The decoded runs a process keeps (:class:`RunCache`) by default, in bytes of Arrow buffers
# (the Spark layer's ``spark.skewgroup.keptRunsBytes``).
RUN_CACHE_BYTES = 256 << 20


class RunCache:
    """The runs a process has decoded, bucket by bucket (a store's ``scope``), for the next
    call on the bucket: a run's id names its bytes for good (``bucket.RANDOM_BITS``), so a kept
    run is the stored one. Bounded by ``limit`` bytes of Arrow buffers.

    Each micro-batch reads the buckets in turn, where dropping the least recently read bucket
    would drop each one just before it is read again. So past the limit a bucket goes only
    once it has not been read for ``IDLE_ROUNDS`` rounds of the kept buckets (a stopped
    query's); else a new run is not kept (read from the store again; the kept ones stay)."""

    IDLE_ROUNDS = 4

    def __init__(self, limit=RUN_CACHE_BYTES):
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
_PROCESS_CACHE = RunCache()


def process_cache(limit):
    """This process's :class:`RunCache`, bounded from now on by ``limit`` bytes (the bound of
    the query whose task asks: the Spark layer's ``spark.skewgroup.keptRunsBytes``)."""
    _PROCESS_CACHE.limit = limit
    return _PROCESS_CACHE
