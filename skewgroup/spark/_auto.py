"""What a sample of the keys tells the plan: ``plan="auto"``'s choice and the ``split`` placement.

Four plans can run a custom (Python) aggregate. The partial aggregate is the expensive part and
each stage's slowest task sets its pace, so each plan's critical path is estimated in units of
"all the rows' partial work":

* ``local``  -- the partial inside each input partition: the largest input partition's share
  of the rows, ``in_max``. No row shuffle, the least total work; but it runs at the input's
  parallelism and inherits the input's skew (an input partitioned by the key puts a hot key in
  one input task).
* ``hash``   -- groupBy's placement, ``repartition(n, keys)``: the largest hash partition's share.
  One partition per key: a hot key is one task.
* ``split``  -- the hot keys split over the workers, the tail hashed as groupBy does (below):
  the largest planned worker load, about ``1/n``. The tag is a Spark expression (no Python), so
  its cost is the scan's.
* ``routed`` -- every row routed by the strategy in a Python tag stage: ``1/n`` for the partial
  stage plus the tag on the largest input partition, ``TAG_COST`` of a row's partial work
  (measured in bench/RESULTS.md), ``1/n + TAG_COST * in_max``.

The cheapest estimate wins; within ``MARGIN`` of it the plan with less total work is preferred
(local, hash, split, routed: each shuffles or replicates more than the one before). A stream
cannot run a sampling job before its query starts, and its input's partitioning and skew are
not known up front: ``auto`` routes a stream's custom aggregates. Forcing ``local``, ``hash``
or ``routed`` skips the sampling job.

The sample. One light job of one stage, inside the input tasks: the key columns are scanned
and a row is kept with probability ``p = min(SAMPLE_FRACTION, SAMPLE_ROWS / (j + 1))``, j its
index in its input partition (``monotonically_increasing_id``'s low 33 bits), so a partition
gives all of its first ``SAMPLE_ROWS / SAMPLE_FRACTION`` rows' 2 % and then ever fewer: about
``SAMPLE_ROWS · (1 + ln(rows · SAMPLE_FRACTION / SAMPLE_ROWS))`` rows, 6,600 for a partition
of 10^6 rows, 11,200 for 10^7 (16 bytes each on the driver). Each kept row comes back, as
Arrow, with its input partition (``spark_partition_id()``), its hash partition
(``pmod(hash(keys), n)``, the expression ``repartition(n, keys)`` uses), a 64-bit key hash
(``xxhash64(keys)``) and its weight ``1 / p``; the driver counts the weights (Horvitz-Thompson:
unbiased counts of all the rows) per input partition, per hash partition and per key. Hot are
the keys with a share of at least ``1 / (5n)`` (the head of the D-Choices paper, §III) and two
sampled rows, at most 5n of them. Counting in Spark instead (a grouping, then one task that
ranks) was two stages: 2-7x the critical path and 2-4x the task time of this one
(bench/RESULTS.md, bench/bench_auto_sample.py).

The split placement is W-Choices' rule for the head (every head key may use any worker, the
least loaded first; D-Choices paper §III) applied once on the driver to the sampled loads
instead of per tuple: the tail's rows stay on their hash partitions (as groupBy places them),
and each hot key's rows, cut into ``SLOTS`` equal slices, water-fill the least loaded workers
one slice at a time. In the tag a row of a hot key picks one of its key's slots uniformly
(``rand``), so each worker gets its planned share in expectation; a tail row goes to its hash
partition. Replication stays that of KG except for the hot keys.
"""
import logging
from dataclasses import dataclass

import numpy as np
from pyspark.sql import functions as F

LOG = logging.getLogger("skewgroup.spark")

SAMPLE_FRACTION = 0.02   # the rate of a partition's first SAMPLE_ROWS / SAMPLE_FRACTION rows
SAMPLE_ROWS = 2_000      # then SAMPLE_ROWS / (row index + 1): 40,000 rows of 2 M in 32
                         # partitions (a share of 1/16 within ~2 %), 13,200 in 2 partitions
TAG_COST = 0.5           # routed tag cost per row / partial cost per row (expensive aggregate)
MARGIN = 1.1
PREFERENCE = ("local", "hash", "split", "routed")   # least total work first
SLOTS = 64               # slices of a hot key's rows in the split placement
SAMPLE_PARTITION, SAMPLE_P = "__sg_sample_partition", "__sg_sample_p"


@dataclass
class Sample:
    """Estimated row counts (sums of the sampled rows' weights): per input partition, per hash
    partition, and per hot key."""

    workers: int
    sampled: int            # rows in the sample
    total: float            # estimated rows of the input
    by_input: dict          # input partition -> rows
    by_hash: np.ndarray     # [n] rows per hash partition (every key, hot ones included)
    hot: dict               # key hash (xxhash64) -> (rows, hash partition)

    def shares(self):
        """(largest input partition's share, largest hash partition's share)."""
        return max(self.by_input.values()) / self.total, self.by_hash.max() / self.total

    def split_slots(self):
        """Planned loads (shares per worker) and, per hot key, its SLOTS worker ids."""
        loads = self.by_hash.astype(np.float64)
        for rows, partition in self.hot.values():
            loads[partition] -= rows   # the tail stays where hashing puts it
        slots = {}
        for key_hash, (rows, _) in sorted(self.hot.items(), key=lambda kv: (-kv[1][0], kv[0])):
            chosen = np.empty(SLOTS, dtype=np.int32)
            for s in range(SLOTS):   # ties to the lowest id, as every strategy here
                chosen[s] = int(np.argmin(loads))
                loads[chosen[s]] += rows / SLOTS
            slots[key_hash] = chosen
        return loads / self.total, slots


def sample(df, keys, workers):
    """The :class:`Sample` of ``df``: one job of one stage, the key columns only."""
    key_columns = [F.col(k) for k in keys]
    index = F.monotonically_increasing_id().bitwiseAND(F.lit((1 << 33) - 1))
    keep = F.least(F.lit(SAMPLE_FRACTION), F.lit(float(SAMPLE_ROWS)) / (index + 1))
    # The partition and the row index over every row, the hashes over the kept rows only (a
    # filter on rand is not pushed below a projection).
    table = (df.select(*key_columns, F.spark_partition_id().alias(SAMPLE_PARTITION),
                       keep.alias(SAMPLE_P))
             .filter(F.rand(seed=0) < F.col(SAMPLE_P))
             .select(F.col(SAMPLE_PARTITION).alias("i"),
                     F.pmod(F.hash(*key_columns), F.lit(workers)).alias("h"),
                     F.xxhash64(*key_columns).alias("kh"),
                     (1.0 / F.col(SAMPLE_P)).alias("w"))).toArrow()
    i, h, kh, w = (table.column(c).to_numpy() for c in ("i", "h", "kh", "w"))
    by_input_rows = np.bincount(i, weights=w)
    by_input = {int(p): float(by_input_rows[p]) for p in np.flatnonzero(by_input_rows)}
    by_hash = np.bincount(h, weights=w, minlength=workers)
    total = float(w.sum())
    key_hashes, first, inverse = np.unique(kh, return_index=True, return_inverse=True)
    key_rows = np.bincount(inverse, weights=w)
    # The head: f_k / m >= 1 / (5n), seen at least twice, the 5n largest.
    head = np.flatnonzero((key_rows * (5 * workers) >= total) & (np.bincount(inverse) >= 2))
    head = head[np.lexsort((key_hashes[head], -key_rows[head]))][:5 * workers]
    hot = {int(key_hashes[j]): (float(key_rows[j]), int(h[first[j]])) for j in head}
    return Sample(workers, len(w), total, by_input, by_hash, hot)


def choose(df, keys, workers):
    """(plan, reason, sample or None) for a custom aggregate over ``df`` grouped by ``keys``."""
    if df.isStreaming:
        return "routed", ("a stream: its input's partitioning and skew are unknown before the "
                          "query starts, and routing is even whatever they are"), None
    stats = sample(df, keys, workers)
    if stats.sampled == 0:
        return "local", "the sample is empty: no row to balance", stats
    in_max, hash_max = stats.shares()
    split_loads, _ = stats.split_slots()
    estimates = {"local": in_max, "hash": hash_max, "split": float(split_loads.max()),
                 "routed": 1.0 / workers + TAG_COST * in_max}
    best = min(estimates.values())
    plan = next(p for p in PREFERENCE if estimates[p] <= MARGIN * best)
    shown = ", ".join(f"{p} {estimates[p]:.3f}" for p in PREFERENCE)
    reason = (f"largest input partition {in_max:.1%} of the rows, largest hash partition "
              f"{hash_max:.1%}, a worker's share {1 / workers:.1%}, {len(stats.hot)} hot keys "
              f"({stats.sampled:,} of about {stats.total:,.0f} rows sampled); estimated "
              f"critical path in units of the whole partial work: {shown}")
    return plan, reason, stats


def split_worker(keys, stats):
    """The split placement's worker id of every row, as a Spark expression (no Python)."""
    key_columns = [F.col(k) for k in keys]
    tail = F.pmod(F.hash(*key_columns), F.lit(stats.workers))
    _, slots = stats.split_slots()
    if not slots:
        return tail
    # A literal map from key hash to the key's slots; a row of a hot key takes a random slot.
    table = F.create_map(*[c for key_hash, chosen in slots.items()
                           for c in (F.lit(key_hash), F.array(*[F.lit(int(w)) for w in chosen]))])
    hot_slots = F.try_element_at(table, F.xxhash64(*key_columns))
    slot = (F.rand(seed=0) * SLOTS).cast("int") + 1
    return F.when(hot_slots.isNull(), tail).otherwise(F.element_at(hot_slots, slot))
