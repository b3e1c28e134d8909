"""The papers' balance and cost metrics, over whole arrays of (key, worker) assignments.

* load imbalance LI = (max L - avg L) / avg L (Pd-Stream eq. 4, FlexD eq. 2);
* Nasir's I(t) = max - avg of the *fractional* loads after t tuples (d-choices §II);
* replication factor RF = sum over keys of |workers that saw k| / distinct keys (Pd-Stream eq. 7,
  FlexD eq. 3), which DKG calls DistCost;
* DKG's StdDev of the loads;
* memory overhead = distinct (key, worker) pairs, i.e. keys held by all workers, normalised to
  KG's (FISH §6.1; KG holds each key once, so this equals RF).
"""
import numpy as np


def loads(workers_of_tuples, workers):
    """Tuples per worker (int64 array of length ``workers``)."""
    return np.bincount(np.asarray(workers_of_tuples), minlength=workers).astype(np.int64)


def load_imbalance(load):
    """LI = (max - avg) / avg of a load vector; 0 for an empty one.

    >>> load_imbalance([3, 1, 2])
    0.5
    """
    load = np.asarray(load, dtype=np.float64)
    mean = load.mean() if load.size else 0.0
    return float((load.max() - mean) / mean) if mean > 0 else 0.0


def imbalance_over_time(workers_of_tuples, workers, points=100):
    """Nasir's I(t) = max_w L_w(t)/t - 1/n at ``points`` evenly spaced t (returns t, I(t)).

    >>> t, i = imbalance_over_time([0, 0, 1, 1], 2, points=2)
    >>> t.tolist(), i.tolist()
    ([2, 4], [0.5, 0.0])
    """
    ids = np.asarray(workers_of_tuples)
    m = ids.size
    if m == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    ts = np.unique(np.linspace(m / points, m, points).round().astype(np.int64).clip(1, m))
    out = np.empty(ts.size)
    counts = np.zeros(workers, dtype=np.int64)
    start = 0
    for j, t in enumerate(ts):
        counts += np.bincount(ids[start:t], minlength=workers)
        start = t
        out[j] = counts.max() / t - 1.0 / workers
    return ts, out


def replication_factor(keys, workers_of_tuples, workers):
    """RF: the mean number of distinct workers a key was sent to (1 for KG).

    >>> replication_factor([1, 1, 2], [0, 1, 0], 2)
    1.5
    """
    pairs = _distinct_pairs(keys, workers_of_tuples, workers)
    distinct_keys = np.unique(np.asarray(keys)).size
    return pairs / distinct_keys if distinct_keys else 0.0


def load_stddev(load):
    """DKG's StdDev: population standard deviation of the loads, in % of the total."""
    load = np.asarray(load, dtype=np.float64)
    total = load.sum()
    return float(np.std(100.0 * load / total)) if total > 0 else 0.0


def memory_overhead(keys, workers_of_tuples, workers):
    """Keys held over all workers (distinct (key, worker) pairs) normalised to KG's (FISH §6.1)."""
    return replication_factor(keys, workers_of_tuples, workers)


def _distinct_pairs(keys, workers_of_tuples, workers):
    keys = np.asarray(keys)
    ids = np.asarray(workers_of_tuples, dtype=np.int64)
    if keys.size != ids.size:
        raise ValueError(f"keys ({keys.size}) and worker ids ({ids.size}) differ in length")
    if keys.size == 0:
        return 0
    if keys.dtype.kind in "iu":
        key_codes = keys.astype(np.int64)
    else:
        key_codes = np.unique(keys, return_inverse=True)[1].astype(np.int64)
    lo = key_codes.min()
    span = int(key_codes.max() - lo) + 1
    if span <= (1 << 62) // max(1, workers):
        return np.unique((key_codes - lo) * workers + ids).size
    # Wide key ranges: compact the keys first so the pair code cannot overflow.
    compact = np.unique(key_codes, return_inverse=True)[1].astype(np.int64)
    return np.unique(compact * workers + ids).size
