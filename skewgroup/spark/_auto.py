"""How ``plan="auto"`` picks a plan for a custom aggregate: the least estimated critical path.

Three plans can run a custom (Python) aggregate; each stage's slowest task sets its pace, and the
partial aggregate is the expensive part, so each plan's critical path is, in units of "all the
rows' partial work":

* ``local``  -- the partial inside each input partition: the largest input partition's share
  of the rows, ``in_max``. No row shuffle, the least total work; but it runs at the input's
  parallelism and inherits the input's skew (an input partitioned by the key puts a hot key in
  one input task).
* ``hash``   -- groupBy's placement, ``repartition(n, keys)``: the largest hash partition's share,
  ``hash_max``. One partition per key: a hot key is one task.
* ``routed`` -- every row routed by the strategy: the partial stage is even (``1/n``), plus
  the tag inside the input tasks, a fraction ``TAG_COST`` of a row's partial work, on the
  largest input partition: ``1/n + TAG_COST * in_max``.

Both shares are measured before the query by one light job over a sample of the key columns:
``spark_partition_id()`` gives each sampled row's input partition and ``pmod(hash(keys), n)``
its hash partition (the expression ``repartition(n, keys)`` uses). The cheapest estimate wins;
within ``MARGIN`` of it the plan with less total work is preferred (local, then hash, then
routed), because a plan that shuffles fewer rows is cheaper in total task time.

A stream cannot run such a job before its query starts, and its input's partitioning and skew
are not known up front: ``auto`` routes a stream's custom aggregates. Force a plan to skip the
sampling job (``plan="local"``, ``"hash"`` or ``"routed"``).
"""
import logging

from pyspark.sql import functions as F

LOG = logging.getLogger("skewgroup.spark")

SAMPLE_FRACTION = 0.02   # ~2 % of the rows: the shares' sampling error is then ~1 % at 10^6 rows
TAG_COST = 0.2           # tag cost per row / partial cost per row, for an expensive aggregate
MARGIN = 1.1
PREFERENCE = ("local", "hash", "routed")   # least total work first


def choose(df, keys, workers):
    """(plan, reason) for a custom aggregate over ``df`` grouped by ``keys`` on ``workers``."""
    if df.isStreaming:
        return "routed", ("a stream: its input's partitioning and skew are unknown before the "
                          "query starts, and routing is even whatever they are")
    in_max, hash_max, sampled = _shares(df, keys, workers)
    if sampled == 0:
        return "local", "the sample is empty: no row to balance"
    estimates = {"local": in_max, "hash": hash_max,
                 "routed": 1.0 / workers + TAG_COST * in_max}
    best = min(estimates.values())
    plan = next(p for p in PREFERENCE if estimates[p] <= MARGIN * best)
    shown = ", ".join(f"{p} {estimates[p]:.3f}" for p in PREFERENCE)
    reason = (f"largest input partition {in_max:.1%} of the rows, largest hash partition "
              f"{hash_max:.1%}, a worker's share {1 / workers:.1%} ({sampled:,} rows sampled); "
              f"estimated critical path in units of the whole partial work: {shown}")
    return plan, reason


def _shares(df, keys, workers):
    """(largest input partition's share, largest hash partition's share, rows sampled)."""
    counts = (df.sample(fraction=SAMPLE_FRACTION, seed=0)
              .select(F.spark_partition_id().alias("i"),
                      F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(workers)).alias("h"))
              .groupBy("i", "h").count().collect())
    total = sum(row["count"] for row in counts)
    if total == 0:
        return 0.0, 0.0, 0
    by_input, by_hash = {}, {}
    for row in counts:
        by_input[row["i"]] = by_input.get(row["i"], 0) + row["count"]
        by_hash[row["h"]] = by_hash.get(row["h"], 0) + row["count"]
    return max(by_input.values()) / total, max(by_hash.values()) / total, total
