"""The papers' balance and cost metrics, and a queueing model, over whole arrays.

Inputs are the key (or a dense key code) and the worker id of every tuple, in stream order.

* load imbalance LI = (max L - avg L) / avg L (Pd-Stream eq. 4, FlexD eq. 2), over the whole
  stream or per window (:func:`windowed_imbalance`, FlexD's λ over windows S^w);
* Nasir's I(t) = max - avg of the *fractional* loads L_w(t) / t (d-choices §II);
* replication factor RF = sum over keys of |workers that saw k| / distinct keys (Pd-Stream
  eq. 7, FlexD eq. 3), which DKG calls DistCost (eq. 8);
* DKG's StdDev of the loads in % of the total (eq. 7);
* memory overhead = distinct (key, worker) pairs, i.e. keys held over all workers, normalised to
  KG's (FISH §6.1): KG holds each key once, so this is RF again;
* :func:`queue_model`: makespan, throughput and latency percentiles of FIFO workers.
"""
from dataclasses import asdict, dataclass

import numpy as np

from skewgroup._routing._validation import check_int, check_real


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


def windowed_imbalance(workers_of_tuples, workers, window):
    """LI of the loads inside each window of ``window`` consecutive tuples (returns ends, LI).

    FlexD (eq. 2) and Pd-Stream (eq. 4) define LI over a window S^w; this shows how a strategy
    copes when the stream drifts, which the whole-stream LI averages away. A last partial
    window is dropped.

    >>> end, li = windowed_imbalance([0, 0, 0, 1], 2, 2)
    >>> end.tolist(), li.tolist()
    ([2, 4], [1.0, 0.0])
    """
    ids = np.asarray(workers_of_tuples, dtype=np.int64)
    window = check_int("window", window, 1)
    count = ids.size // window
    if count == 0:
        return np.zeros(0, np.int64), np.zeros(0)
    win = np.repeat(np.arange(count, dtype=np.int64), window)
    per = np.bincount(win * workers + ids[:count * window], minlength=count * workers)
    per = per.reshape(count, workers).astype(np.float64)
    mean = per.mean(axis=1)
    return (np.arange(1, count + 1, dtype=np.int64) * window,
            (per.max(axis=1) - mean) / mean)


def key_codes(keys):
    """(dense codes 0 .. D-1 as int64, D distinct keys) for a 1-D array of keys.

    Small integer ranges (such as Zipf ranks) are coded in linear time with a presence table;
    anything else goes through one sort (``np.unique``).

    >>> codes, distinct = key_codes(np.array([7, 3, 7, 9]))
    >>> codes.tolist(), distinct
    ([1, 0, 1, 2], 3)
    """
    keys = np.asarray(keys)
    if keys.size == 0:
        return np.zeros(0, np.int64), 0
    if keys.dtype.kind in "iu":
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo < max(4 * keys.size, 1 << 20):
            present = np.zeros(hi - lo + 1, dtype=bool)
            offset = keys.astype(np.int64) - lo
            present[offset] = True
            remap = np.cumsum(present, dtype=np.int64) - 1
            return remap[offset], int(remap[-1]) + 1
    uniq, codes = np.unique(keys, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), int(uniq.size)


def distinct_pairs(codes, workers_of_tuples, workers, distinct=None):
    """Distinct (key, worker) pairs: the partial states all workers hold together.

    ``codes`` are dense key codes (see :func:`key_codes`), so a pair is one cell of a
    distinct x workers presence table; the count is then linear in the stream, which keeps a
    10^7-tuple cell far below the cost of sorting pair codes.
    """
    codes = np.asarray(codes, dtype=np.int64)
    ids = np.asarray(workers_of_tuples, dtype=np.int64)
    if codes.size != ids.size:
        raise ValueError(f"keys ({codes.size}) and worker ids ({ids.size}) differ in length")
    if codes.size == 0:
        return 0
    distinct = int(codes.max()) + 1 if distinct is None else distinct
    pair = codes * workers + ids
    if distinct * workers <= 1 << 31:
        seen = np.zeros(distinct * workers, dtype=bool)
        seen[pair] = True
        return int(np.count_nonzero(seen))
    return int(np.unique(pair).size)


def replication_factor(keys, workers_of_tuples, workers):
    """RF: the mean number of distinct workers a key was sent to (1 for KG).

    >>> replication_factor([1, 1, 2], [0, 1, 0], 2)
    1.5
    """
    codes, distinct = key_codes(keys)
    if distinct == 0:
        return 0.0
    return distinct_pairs(codes, workers_of_tuples, workers, distinct) / distinct


def load_stddev(load):
    """DKG's StdDev (eq. 7): population standard deviation of the loads in % of the total.

    >>> load_stddev([1, 1, 2])   # loads 25 %, 25 %, 50 %
    11.785113019775793
    """
    load = np.asarray(load, dtype=np.float64)
    total = load.sum()
    return float(np.std(100.0 * load / total)) if total > 0 else 0.0


def memory_overhead(keys, workers_of_tuples, workers):
    """Keys held over all workers (distinct (key, worker) pairs) normalised to KG's (FISH §6.1).

    KG holds every key on exactly one worker, so this equals :func:`replication_factor`.
    """
    return replication_factor(keys, workers_of_tuples, workers)


# --- queueing model ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueStats:
    """What :func:`queue_model` returns; times in the unit of ``cost``."""

    makespan: float          # first arrival to last departure
    throughput: float        # tuples per unit time over the makespan
    latency_mean: float      # arrival to departure, over all tuples
    latency_p50: float
    latency_p95: float
    latency_p99: float
    latency_max: float
    worst_worker_mean: float  # max over workers of their mean latency (d-choices Fig. 14)

    def as_dict(self):
        return asdict(self)


def queue_model(workers_of_tuples, workers, cost=1.0, capacities=None, rate=None,
                poisson=False, seed=0):
    """Run a routed stream through n FIFO single-server workers; makespan, throughput, latency.

    The model, enough for the papers' throughput and latency comparisons without a cluster:

    * tuple i arrives at ``i / rate`` (or after exponential gaps of mean ``1 / rate`` when
      ``poisson``); ``rate=None`` means all tuples are waiting at time 0, the "execution time"
      of FISH §6.1's simulations and DKG's latency (first to last output);
    * worker w serves its tuples one at a time in arrival order, each in ``cost / P_w`` (P_w in
      ``capacities``, default all 1; FISH §6.4 makes half of them twice as fast);
    * nothing else costs time: no network, no merge of partial states (compare RF for that).

    Per worker this is Lindley's recursion D_j = max(a_j, D_{j-1}) + s, i.e.
    D_j = (j + 1) s + max_{i <= j} (a_i - i s), one cumulative maximum over its tuples.

    Closed forms it meets (see tests): with all tuples at time 0 the makespan is
    max_w L_w cost / P_w; under capacity with deterministic arrivals and round robin no tuple
    waits (latency = service time); M/D/1 with Poisson arrivals has mean latency
    s + ρ s / (2 (1 - ρ)) (Pollaczek-Khinchine).

    >>> q = queue_model([0, 0, 1], 2, cost=2.0)
    >>> q.makespan, q.latency_mean
    (4.0, 2.6666666666666665)
    """
    ids = np.asarray(workers_of_tuples, dtype=np.int64)
    workers = check_int("workers", workers, 1)
    cost = check_real("cost", cost, 0.0, None, closed="neither")
    m = ids.size
    if m == 0:
        return QueueStats(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if capacities is None:
        service = np.full(workers, cost)
    else:
        caps = np.asarray(capacities, dtype=np.float64)
        if caps.shape != (workers,) or not np.all(caps > 0):
            raise ValueError(f"The 'capacities' parameter must give {workers} positive values. "
                             f"Got {caps.tolist()!r} instead.")
        service = cost / caps
    if rate is None:
        arrivals = np.zeros(m)
    else:
        rate = check_real("rate", rate, 0.0, None, closed="neither")
        if poisson:
            gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=m)
            arrivals = np.cumsum(gaps) - gaps[0]
        else:
            arrivals = np.arange(m, dtype=np.float64) / rate
    order = np.argsort(ids, kind="stable")      # each worker's tuples, in arrival order
    counts = np.bincount(ids, minlength=workers)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    latency = np.empty(m)
    worst_mean = 0.0
    last_departure = 0.0
    for w in np.flatnonzero(counts):
        idx = order[bounds[w]:bounds[w + 1]]
        a = arrivals[idx]
        s = service[w]
        j = np.arange(idx.size, dtype=np.float64)
        departure = np.maximum.accumulate(a - j * s) + (j + 1) * s
        lat = departure - a
        latency[idx] = lat
        worst_mean = max(worst_mean, float(lat.mean()))
        last_departure = max(last_departure, float(departure[-1]))
    makespan = last_departure - float(arrivals[0])
    p50, p95, p99 = np.percentile(latency, [50, 95, 99])
    return QueueStats(makespan=makespan, throughput=m / makespan,
                      latency_mean=float(latency.mean()), latency_p50=float(p50),
                      latency_p95=float(p95), latency_p99=float(p99),
                      latency_max=float(latency.max()), worst_worker_mean=worst_mean)
