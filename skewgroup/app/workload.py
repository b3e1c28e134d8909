"""The job's generated workload: keys drawn by a counter-based hash of the row number (a
replayed micro-batch draws the same keys), Zipf keys (:func:`draw_keys`) or a few hot keys beside
sessions that keep arriving (:func:`draw_sessions`), with an amount and a linear model's
features and response per row (drawn the same way), and the aggregates an ``--agg`` kind names:
a per-row Python score (``score``) and the shipped Python aggregators (``sample``,
``quantiles``, ``topk``, ``distinct``, ``lsq``). numpy only at import: the options and their
tests need no pyspark."""
import functools
import time

import numpy as np


@functools.lru_cache(maxsize=4)
def _zipf_cdf(z, universe):
    weights = np.arange(1, universe + 1, dtype=np.float64) ** -z
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def _uniform(row_numbers, seed):
    """A uniform number in [0, 1) per row number, counter-based (53 bits of its hash)."""
    from skewgroup import hash_keys

    return (hash_keys(row_numbers, seed) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _amounts(row_numbers, seed):
    """Each row's amount: cents in [0, 100), counter-based."""
    from skewgroup import hash_keys

    return (hash_keys(row_numbers, seed + 1) % np.uint64(10_000)).astype(np.float64) / 100.0


def draw_keys(row_numbers, z, universe, seed, drift_every=None):
    """Zipf keys (rank 0 hottest) and amounts for row numbers, counter-based: the same row
    number always draws the same key, so a replayed micro-batch is the same micro-batch.

    ``drift_every``: the key ranking is rotated every that many rows, so the hot keys are
    replaced by keys that were cold (FISH §6.1's time-evolving streams).
    """
    row_numbers = np.asarray(row_numbers, dtype=np.int64)
    uniform = _uniform(row_numbers, seed)
    keys = np.searchsorted(_zipf_cdf(z, universe), uniform, side="right").astype(np.int64)
    np.minimum(keys, universe - 1, out=keys)
    if drift_every:
        # A large odd step moves every rank far from where it was at each change.
        shift = (row_numbers // drift_every) * 7_919_993
        keys = (keys + shift) % universe
    return keys, _amounts(row_numbers, seed)


# Session keys start here, so that they never meet the hot keys (0 to hot_keys - 1) and sort
# after them.
FIRST_SESSION_KEY = 1_000_000_000


def draw_sessions(row_numbers, hot_keys, hot_share, new_keys, span, seed):
    """Keys as production sees them, and amounts, for row numbers, counter-based as
    :func:`draw_keys`: a share ``hot_share`` of the rows goes to ``hot_keys`` hot keys (a bot,
    a popular item: keys 0, 1, ..., hot key i drawing a share proportional to 1 / (i + 1)), the
    rest to sessions that keep arriving (device or session ids, millions ever seen).

    ``new_keys`` sessions start every ``span`` rows, evenly, and each lasts ``span`` rows: a
    session row goes to one of the ``new_keys`` sessions live then, uniformly. Over n rows
    about n / span * new_keys sessions start (plus the ``new_keys`` live at the first row),
    each with (1 - hot_share) * span / new_keys rows on average, mostly in two micro-batches
    when ``span`` is a micro-batch's rows: the state of a job keeps growing while the hot
    keys stay hot. Session s has the key ``FIRST_SESSION_KEY + s``.
    """
    row_numbers = np.asarray(row_numbers, dtype=np.int64)
    uniform = _uniform(row_numbers, seed)
    hot = uniform < hot_share
    # The same uniform number, rescaled within the hot rows, picks the hot key.
    weights = 1.0 / np.arange(1, hot_keys + 1)
    cdf = np.cumsum(weights) / weights.sum()
    hot_key = np.searchsorted(cdf, uniform / max(hot_share, 1e-300), side="right")
    # Session s starts at row s * span / new_keys - span (the first new_keys are live from
    # the stream's first row): at row n the live ones are the new_keys started last.
    newest = row_numbers * new_keys // span + new_keys - 1
    back = np.floor(_uniform(row_numbers, seed + 20) * new_keys).astype(np.int64)
    keys = np.where(hot, np.minimum(hot_key, hot_keys - 1),
                    FIRST_SESSION_KEY + newest - back).astype(np.int64)
    return keys, _amounts(row_numbers, seed)


FEATURES = 3          # x1, x2, x3 of the generated rows: y ~ 1 + x1 + x2 + x3 per key


def key_coefficients(keys, seed):
    """Each key's true coefficients (intercept first, then one per feature): whole numbers in
    [-10, 10] drawn by a hash of the key, so every key has a model of its own to fit."""
    from skewgroup import hash_keys

    keys = np.asarray(keys, dtype=np.int64)
    return np.column_stack([(hash_keys(keys, seed + 10 + j) % np.uint64(21)).astype(np.float64)
                            - 10.0 for j in range(FEATURES + 1)])


def draw_features(row_numbers, keys, seed):
    """(x, y) for rows drawn by :func:`draw_keys`: ``FEATURES`` features uniform in [0, 10)
    and y = the key's :func:`key_coefficients` applied to (1, x) plus noise uniform in
    [-0.5, 0.5), all counter-based on the row number as the keys are."""
    from skewgroup import hash_keys

    row_numbers = np.asarray(row_numbers, dtype=np.int64)

    def uniform(offset):
        return (hash_keys(row_numbers, seed + offset) >> np.uint64(11)).astype(np.float64) \
            * 2.0**-53

    x = np.column_stack([10.0 * uniform(2 + j) for j in range(FEATURES)])
    beta = key_coefficients(keys, seed)
    y = beta[:, 0] + np.einsum("ij,ij->i", beta[:, 1:], x) + uniform(2 + FEATURES) - 0.5
    return x, y


# The job's stand-in for a user's Python aggregate: Spark cannot combine it map-side, and in
# streaming it refuses pandas grouped-aggregate UDFs, so a hot key's rows all reach one task.
SCORE_ROUNDS = 160


_MASK64 = (1 << 64) - 1


_BATCH_ID = "streaming.sql.batchId"   # the local property Spark sets on a micro-batch's tasks


def score_row(value):
    """A per-row Python function standing in for a user's (a model's score, a parser, a lookup):
    ``SCORE_ROUNDS`` steps of a 64-bit linear congruential generator in pure Python, so that each
    row costs the interpreter real work, and an integer in [0, 1024) so that sums are exact."""
    if value is None:
        return 0
    x = int(value * 100) & _MASK64
    for _ in range(SCORE_ROUNDS):
        x = (x * 6364136223846793005 + 1442695040888963407) & _MASK64
    return x >> 54


class _AddPerTask:
    """Accumulates {(batch, partition): [seconds, rows]} from the tasks (an AccumulatorParam)."""

    def zero(self, value):
        return {}

    def addInPlace(self, total, update):
        for key, (seconds, rows) in update.items():
            before = total.get(key, (0.0, 0))
            total[key] = (before[0] + seconds, before[1] + rows)
        return total


def score_aggregate(column, timings=None):
    """``agg.custom``: the sum of :func:`score_row` over ``column``, vectorized per partition;
    ``timings`` (an accumulator of :class:`_AddPerTask`) receives each task's time in it."""
    from skewgroup.spark import agg

    def partial(rows, offsets):
        # CPU time of this thread: what the task would take on a core of its own, which a
        # wall clock on a shared machine (two tasks per core, other processes) overstates.
        started = time.thread_time()
        values = np.fromiter(map(score_row, rows.column(column).to_pylist()), dtype=np.int64,
                             count=rows.num_rows)
        if timings is not None:
            from pyspark import TaskContext

            task = TaskContext.get()
            timings.add({(task.getLocalProperty(_BATCH_ID), task.partitionId()):
                         (time.thread_time() - started, rows.num_rows)})
        sums = np.add.reduceat(values, offsets[:-1]) if rows.num_rows else values
        return {"score": sums}

    return agg.custom(partial, merge={"score": "sum"}, schema="score long", vectorized=True,
                      finish=lambda merged: merged["score"], name="score")


SAMPLE_ROWS = 5      # the rows ``--agg sample`` keeps per key


def python_aggregator(kind, column, schema):
    """The shipped aggregator (``skewgroup.aggregators``) an ``--agg`` kind names, and the
    columns it reads (``sample``: the value, then the row id; ``lsq``: y, then the features;
    fitted with an intercept)."""
    from skewgroup.aggregators import DistinctCount, KllQuantiles, LeastSquares, RowSample, TopK

    columns = column.split(",")
    item_type = schema[columns[0]].dataType.simpleString()
    if kind == "sample":
        return RowSample(SAMPLE_ROWS, item_type=item_type), columns
    if kind == "quantiles":
        return KllQuantiles((0.5, 0.9, 0.99)), columns
    if kind == "topk":
        return TopK(10, item_type=item_type), columns
    if kind == "distinct":
        return DistinctCount(item_type=item_type), columns
    return LeastSquares(len(columns) - 1, intercept=True), columns
