"""What a sample of the keys tells the plan: ``plan="auto"``'s choice and the ``split``
placement, in numpy (no Spark: ``skewgroup.spark._plans`` takes the sample in one Spark job and
times the partial on a few of the input's rows).

:func:`from_sample` turns the sampled rows (input partition, hash partition, key hash, weight)
into a :class:`Sample` (Horvitz-Thompson counts per input partition, hash partition and key,
the hot keys); :func:`choose` estimates each plan's critical path in seconds from it and the
partial's cost a row (:func:`partial_seconds`, timed only where it can change the plan:
:func:`cost_blind`) and picks one; :meth:`Sample.split_slots` water-fills the hot keys for the
split placement. docs/plans.md ("plan=auto", "The split placement") is the description of the
model, its constants and why; the constants below say where each figure comes from.
"""
import time
from dataclasses import dataclass, field, replace

import numpy as np

from skewgroup._routing.config import HEAD_DIVISOR

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
# A stream without sample=: what a micro-batch brings is unknown before the query starts.
STREAM_ROWS = 200_000    # the micro-batch the default weighs the partial's cost on


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

    def in_one_input(self):
        """This sample with every row in one input partition: a stream's micro-batch, whose
        input partitions are its source's and unknown before the query starts (a file source
        with ``maxFilesPerTrigger=1`` gives one), taken at its worst for the local plan."""
        return replace(self, by_input={0: self.total},
                       hot_inputs={key: 1 for key in self.hot_inputs})

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


def stream_default(row_seconds, workers, cores):
    """(plan, reason) for a stream without ``sample=``: ``row_seconds`` the partial's cost a
    row as timed on rows made from the stream's schema (None: it could not be timed),
    ``workers`` the partial's, ``cores`` the task slots the query has.

    Nothing of the stream is seen before it starts, so the micro-batch is taken at its worst
    for the local plan, as ``sample=`` takes it (one input partition, a file source read a
    file a trigger), of ``STREAM_ROWS`` rows. Spreading the partial over the workers runs it
    on ``min(workers, cores)`` cores at once, and costs the stage it adds once a wave of
    ``cores`` tasks. A partial that cannot be timed is taken as dear: spread, which balances
    whatever the keys and the input (docs/plans.md, "auto").
    """
    if row_seconds is None:
        return "spread", ("a stream without sample=, the partial could not be timed on rows "
                          "made from its schema: an expensive partial is assumed, dealt round "
                          "robin (spread), which balances whatever the keys and the input")
    parallel = max(1, min(workers, cores))
    waves = -(-workers // max(cores, 1))
    saved = row_seconds * STREAM_ROWS * (1.0 - 1.0 / parallel)
    added = STAGE_SECONDS * waves
    plan = "spread" if saved > added else "local"
    return plan, (f"a stream without sample=: a partial of {row_seconds * 1e6:.3g} µs a row "
                  f"(timed on rows made from the stream's schema); over a micro-batch of "
                  f"{STREAM_ROWS:,} rows in one input partition, spreading it over "
                  f"{parallel} of {cores} cores would save about {saved:.2f} s for "
                  f"{waves} wave(s) of {workers} workers' tasks at {STAGE_SECONDS:g} s each "
                  f"({added:.2f} s): {plan}")
