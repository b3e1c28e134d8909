"""What a sample of the keys tells the plan: ``plan="auto"``'s choice and the ``split`` placement.

Numpy in, no Spark: ``skewgroup.spark._plans`` takes the sample in one Spark job, times the
partial on a few of the input's rows, and asks this module.

Five plans can run a custom (Python) aggregate. Each stage's slowest task sets its pace, so each
plan's critical path is estimated, in seconds, as its partial stage's largest share of the
partial work plus the cost of its partial rows plus, for every plan but ``local``, the stage
its placement adds. The partial work is the rows times the partial's cost per row, timed on
the driver (:func:`partial_seconds`): what makes a cheap partial stay where it is and an
expensive one spread. When every cost from 0.01 to 100 µs a row picks the same plan
(:func:`cost_blind`: a wide even input keeps the partial local, an even input partitioned by
the key hashes it, whatever it costs), the partial is not timed.

* ``local``  -- the partial inside each input partition: the largest input partition's share
  of the rows, ``in_max``. No row shuffle, no stage of its own, the least total work; but it
  runs at the input's parallelism and inherits the input's skew (an input partitioned by the
  key puts a hot key in one input task). A key reaches the merge once per input partition that
  holds it.
* ``hash``   -- groupBy's placement, ``repartition(n, keys)``: the largest hash partition's share.
  One partition per key: a hot key is one task; one partial row per key.
* ``split``  -- the hot keys split over the workers, the tail hashed as groupBy does (below):
  the largest planned worker load, about ``1/n``. The tag is a Spark expression (no Python), so
  its cost is the scan's. A hot key reaches the merge from up to n workers.
* ``routed`` -- every row routed by the strategy in a Python tag stage: ``1/n`` for the partial
  stage plus the tag on the largest input partition, ``TAG_SECONDS`` a row (measured in
  bench/RESULTS.md); about one partial row per key, up to n for a hot key.
* ``spread`` -- the rows dealt to the workers in turn (a Spark expression,
  as ``repartition(n)`` deals them but without its sort): ``1/n`` of the rows per worker
  whatever the skew and the input, no tag (the papers' shuffle grouping with a local combine).
  Its price is replication: a key with c rows reaches about ``min(c, n)`` workers, so the
  merge gets that many partial rows of it.

Every plan but ``local`` shuffles the rows before the partial, which then runs in a stage of
its own: ``STAGE_SECONDS`` more on the critical path (one more round of task start-up, the
rows written and read once more; measured on the batch grid of bench/RESULTS.md, issue 26,
where the dealing stage's slowest task took 0.10-0.11 s). So a partial too cheap to gain that
much from spreading stays in the input tasks: at 0.17 µs a row, 2 M rows in 8 input partitions
gain 0.02 s from 16 workers.

Each plan's partial rows (one per key and place) cost twice: the partial stage makes them
(``GROUP_SECONDS`` each: a group's output crossing Arrow, Spark's partial aggregation and the
shuffle; its slowest task makes its share) and the merge merges them (``MERGE_SECONDS``, over n
tasks): ``MERGE_SECONDS["spark"]`` for fields Spark merges (``agg.custom``: its JVM
aggregation) and ``MERGE_SECONDS["python"]`` for Python aggregators (``agg.aggregator``: a
buffer decoded and merged in Python).

The partial rows per plan come from the sample and the input's distinct keys. With a Python
merge the keys are counted by a HyperLogLog over every row (Spark's ``approx_count_distinct``,
observed beside the sample: about 0.1 µs a row more in the sampling stage, 0.1 s on a
partition of 10^6 rows); with a Spark merge they are estimated from the sample alone (Chao1),
free but low on skewed keys (by 3-8x on Zipf z >= 1.0, measured against the truth on
bench_plans' keys): replication then looks cheaper than it is, which leaves spread and split to
``PREFERENCE``, where spread measured as fast or faster. A hot key has n partial rows in
spread, split and routed, and one per input partition it was sampled in for local; every other
key, its c rows dealt over p places (round robin's n, or the input partitions in arrival
order), reaches ``p (1 - (1 - 1/p)^c)`` places: c its own estimated count for a key sampled at
least twice, the mean of the rest for the others (the bound of a concave sum: it overcounts an
uneven tail, and local's partial rows on an input partitioned by the key, one a key).

The cheapest estimate wins; within ``MARGIN`` of it the first in ``PREFERENCE`` is preferred:
local and hash (the least rows shuffled, the least replicated), then spread before split (the
same estimate on skewed keys, where spread's balance is exact and split's an expectation from
a sample; measured as fast or faster in bench/RESULTS.md), then routed (a Python tag). A stream
cannot run a sampling job before its query starts, and its input's partitioning and skew are
not known up front: ``auto`` routes a stream's custom aggregates (even whatever they are, about one
partial row a key, and the balance observed per micro-batch); ``spread`` measured the same
there (bench/RESULTS.md) and is one argument away. Forcing a plan other than ``split`` skips
the sampling job.

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
import time
from dataclasses import dataclass, field

import numpy as np

from skewgroup._config import HEAD_DIVISOR

SAMPLE_FRACTION = 0.02   # the rate of a partition's first SAMPLE_ROWS / SAMPLE_FRACTION rows
SAMPLE_ROWS = 2_000      # then SAMPLE_ROWS / (row index + 1): 40,000 rows of 2 M in 32
                         # partitions (a share of 1/16 within ~2 %), 13,200 in 2 partitions
TAG_SECONDS = 0.5e-6     # the routed plan's Arrow tag, a row (measured 0.25-0.3 µs, rounded up)
GROUP_SECONDS = 1.0e-6   # making a partial row: a group's output crossing Arrow and the shuffle
MERGE_SECONDS = {"spark": 0.3e-6, "python": 1.0e-6}   # merging a partial row
STAGE_SECONDS = 0.1      # the stage a placement adds before the partial (bench/RESULTS.md)
MEASURE_ROWS = 4_096     # input rows the partial is timed on, on the driver
MEASURE_SECONDS = 0.03   # at most about this long a timed call
DEFAULT_ROW_SECONDS = 1.0e-6   # the partial's cost a row when it could not be timed
# Partial costs a row from 0.01 to 100 µs: a plan that every one of them picks needs no timing.
SPANNED_ROW_SECONDS = tuple(np.geomspace(1e-8, 1e-4, 9))
MARGIN = 1.1
PREFERENCE = ("local", "hash", "spread", "split", "routed")   # least work, then the surest
KEYS_RSD = 0.05          # relative standard deviation of the distinct key count
SLOTS = 64               # slices of a hot key's rows in the split placement


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
    keys: float             # distinct keys of the input (HyperLogLog, or Chao1 on the sample)
    hot_inputs: dict        # key hash -> input partitions the hot key was sampled in
    warm_rows: np.ndarray   # estimated rows of each other key sampled at least twice
    _slots: tuple = field(default=None, init=False, repr=False, compare=False)

    def shares(self):
        """(largest input partition's share, largest hash partition's share)."""
        total = max(self.total, 1.0)     # an empty sample: no share anywhere, no 0 / 0
        return (max(self.by_input.values(), default=0.0) / total,
                float(self.by_hash.max(initial=0.0)) / total)

    def estimates(self, merge, row_seconds):
        """Each plan's estimated critical path in seconds (see the module docstring);
        ``merge`` is "spark" or "python" (the dearest merge of the call), ``row_seconds`` the
        partial's cost a row."""
        n, rows, keys = self.workers, self.total, self.keys
        in_max, hash_max = self.shares()
        split_loads, _ = self.split_slots()
        work = row_seconds * rows
        partial = {"local": in_max * work, "hash": hash_max * work,
                   "split": float(split_loads.max()) * work,
                   "routed": work / n + TAG_SECONDS * in_max * rows, "spread": work / n}
        hot = len(self.hot)
        warm = self.warm_rows
        tail_keys = max(keys - hot - len(warm), 1.0)
        tail_rows = max(rows - sum(r for r, _ in self.hot.values()) - warm.sum(), tail_keys)
        inputs = len(self.by_input)

        def dealt(places):
            """Partial rows of the warm keys and the tail, their rows dealt over ``places``."""
            return (_dealt(warm, places).sum()
                    + min(tail_rows, tail_keys * _dealt(tail_rows / tail_keys, places)))

        # Partial rows the merge gets. Hashing: one a key. Split and routing: a hot key on up
        # to n workers, every other key whole. Dealt over p places (round robin, or input
        # partitions in arrival order), a key of c rows reaches p (1 - (1 - 1/p)^c) of them.
        pairs = {"hash": keys, "split": keys + (n - 1) * hot, "routed": keys + (n - 1) * hot,
                 "spread": n * hot + dealt(n),
                 "local": sum(self.hot_inputs.values()) + dealt(inputs)}
        # The partial stage's slowest task makes its share of the partial rows too: local's
        # largest input partition (its share of the rows stands for its share of the pairs),
        # a worker's 1/n elsewhere. The merge spreads them over n tasks.
        made = {plan: pairs[plan] * (in_max if plan == "local" else 1.0 / n) for plan in pairs}
        return {plan: partial[plan] + GROUP_SECONDS * made[plan]
                + MERGE_SECONDS[merge] * pairs[plan] / n
                + (0.0 if plan == "local" else STAGE_SECONDS) for plan in PREFERENCE}

    def split_slots(self):
        """Planned loads (shares per worker) and, per hot key, its SLOTS worker ids; worked
        out once (every plan's estimate at every cost reads them)."""
        if self._slots is None:
            self._slots = self._water_fill()
        return self._slots

    def _water_fill(self):
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
        return loads / max(self.total, 1.0), slots   # an empty input: no load anywhere


def _dealt(rows, places):
    """Places reached by a key of ``rows`` rows (a number or an array) dealt uniformly over
    ``places`` places: ``p (1 - (1 - 1/p)^c)``."""
    return places * -np.expm1(np.asarray(rows) * np.log1p(-1.0 / places)) if places > 1 \
        else np.minimum(np.asarray(rows), 1.0)


def from_sample(i, h, kh, w, workers, keys=None):
    """The :class:`Sample` of sampled rows (numpy): input partition ``i``, hash partition
    ``h``, key hash ``kh`` and weight ``w`` of each; ``keys`` the input's distinct keys, or
    None: estimated from the sample (Chao1: seen + f1^2 / (2 f2), f1 and f2 the keys sampled
    once and twice; low on skewed keys, see the module docstring)."""
    by_input_rows = np.bincount(i, weights=w)
    by_input = {int(p): float(by_input_rows[p]) for p in np.flatnonzero(by_input_rows)}
    by_hash = np.bincount(h, weights=w, minlength=workers)
    total = float(w.sum())
    key_hashes, first, inverse = np.unique(kh, return_index=True, return_inverse=True)
    key_rows = np.bincount(inverse, weights=w)
    # The head: f_k / m >= 1 / (5n), seen at least twice, the 5n largest.
    head = np.flatnonzero((key_rows * (HEAD_DIVISOR * workers) >= total)
                          & (np.bincount(inverse) >= 2))
    head = head[np.lexsort((key_hashes[head], -key_rows[head]))][:HEAD_DIVISOR * workers]
    hot = {int(key_hashes[j]): (float(key_rows[j]), int(h[first[j]])) for j in head}
    # The input partitions each hot key was sampled in: its partial rows in the local plan.
    hot_inputs = {int(key_hashes[j]): len(np.unique(i[inverse == j])) for j in head}
    seen = np.bincount(inverse)
    if keys is None:
        f1, f2 = int((seen == 1).sum()), int((seen == 2).sum())
        keys = len(key_hashes) + (f1 * f1 / (2 * f2) if f2 else f1 * (f1 - 1) / 2)
    # Keys sampled at least twice have a usable count of their own (the rest stand for the
    # tail's mean): the partial rows they give are estimated key by key.
    warm = seen >= 2
    warm[head] = False
    return Sample(workers, len(w), total, by_input, by_hash, hot, max(keys, len(key_hashes)),
                  hot_inputs, key_rows[warm])


def partial_seconds(partial, rows, keys):
    """The partial's cost a row in seconds, timed here, or None with too few rows.

    ``partial`` is the partial stage's function (Arrow batches in, partial rows out), ``rows``
    a table of its input (the input's first rows), ``keys`` its key columns. Every row is given
    the first row's key, so that the cost is the rows' (the groups' is ``GROUP_SECONDS``),
    and the call is timed on the first eighth of the rows and on more of them (up to about
    ``MEASURE_SECONDS``, best of two each, after a call that warms up imports and caches): the
    slope between the two leaves out what a call costs whatever its rows.
    """
    n = rows.num_rows
    if n < 64:
        return None
    first = np.zeros(n, dtype=np.int64)
    for key in keys:
        rows = rows.set_column(rows.schema.get_field_index(key), key,
                               rows.column(key).take(first))

    def timed(table):
        start = time.perf_counter()
        for _ in partial(iter(table.to_batches())):
            pass
        return time.perf_counter() - start

    small = rows.slice(0, n // 8)
    timed(small)
    small_seconds = min(timed(small), timed(small))
    per_row = small_seconds / small.num_rows
    more = n if per_row * n <= MEASURE_SECONDS else max(
        2 * small.num_rows, int(MEASURE_SECONDS / max(per_row, 1e-12)))
    large = rows.slice(0, min(more, n))
    large_seconds = min(timed(large), timed(large))
    return max(large_seconds - small_seconds, 0.0) / (large.num_rows - small.num_rows)


def cost_blind(stats, merge="spark"):
    """The plan that every partial cost of ``SPANNED_ROW_SECONDS`` picks, or None: then the
    partial's cost decides and is worth timing (a small job and a few calls on the driver)."""
    if stats.sampled == 0:
        return "local"
    picks = {_pick(stats.estimates(merge, cost)) for cost in SPANNED_ROW_SECONDS}
    return picks.pop() if len(picks) == 1 else None


def _pick(estimates):
    """The least estimate, or within ``MARGIN`` of it the first plan in ``PREFERENCE``."""
    best = min(estimates.values())
    return next(p for p in PREFERENCE if estimates[p] <= MARGIN * best)


def choose(stats, merge="spark", timer=None):
    """(plan, reason) for custom aggregates from ``stats`` (a :class:`Sample`); ``merge`` is
    "python" when a Python aggregator is among them, else "spark"; ``timer()`` gives the
    partial's cost a row (:func:`partial_seconds`) or None, and is called only when that cost
    can change the plan (:func:`cost_blind`)."""
    if stats.sampled == 0:
        return "local", "the sample is empty: no row to balance"
    in_max, hash_max = stats.shares()
    blind = cost_blind(stats, merge)
    row_seconds = timer() if timer is not None and blind is None else None
    timed = row_seconds is not None
    row_seconds = row_seconds if timed else DEFAULT_ROW_SECONDS
    estimates = stats.estimates(merge, row_seconds)
    plan = _pick(estimates)
    shown = ", ".join(f"{p} {estimates[p]:.3f}" for p in PREFERENCE)
    if timed:
        cost = f"a partial of {row_seconds * 1e6:.3g} µs a row"
    elif blind is not None:
        cost = (f"the same plan for any partial cost from {SPANNED_ROW_SECONDS[0] * 1e6:g} to "
                f"{SPANNED_ROW_SECONDS[-1] * 1e6:g} µs a row, so not timed (shown at "
                f"{row_seconds * 1e6:g} µs)")
    else:
        cost = f"a partial not timed (taken as {row_seconds * 1e6:.3g} µs a row)"
    reason = (f"largest input partition {in_max:.1%} of the rows, largest hash partition "
              f"{hash_max:.1%}, a worker's share {1 / stats.workers:.1%}, {len(stats.hot)} hot "
              f"keys ({stats.sampled:,} of about {stats.total:,.0f} rows sampled), about "
              f"{stats.keys:,.0f} keys, {cost}, a {merge} merge; estimated critical path in "
              f"seconds: {shown}")
    return plan, reason
