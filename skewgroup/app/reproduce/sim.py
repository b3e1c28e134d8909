"""The simulator: route a stream with one strategy from s sources and measure every metric.

A *cell* is one (stream, strategy, parameters, n, s) run, described by a plain dict so it can
cross a process boundary. Streams are described by a spec dict too and built by
:func:`make_stream`; each process keeps the last stream it built (keys, hashes, dense key
codes), so consecutive cells on one stream (a grid ordered by stream) generate and hash it
once per process instead of once per cell.

The sources are the papers' upstream routers (d-choices §V-A): each is its own partitioner with
its own state and local load vector, all with the same hash seed so their choices agree. They
share nothing, so routing each source's sub-stream in one call gives exactly the ids an
interleaved run would.
"""
import json
import multiprocessing
import os
import time

import numpy as np

from skewgroup import hash_keys, partitioner
from skewgroup import metrics, streams

# --- streams -----------------------------------------------------------------------------------


def make_stream(spec):
    """(keys, values of the split column or None) for a stream spec dict.

    Kinds: ``zipf`` (z, messages, universe, seed), ``drift`` (z, messages, changes, universe,
    ramp, seed), ``skewed`` (ratio, messages, keys, seed), ``hot_tail`` (ratio, messages,
    tail_z, universe, seed: one hot key plus a Zipf tail), ``file`` (path, column, split,
    limit), ``python`` (source: identifiers or prose, limit: see
    :func:`skewgroup.streams.python_source`).
    """
    kind = spec["kind"]
    args = {k: v for k, v in spec.items() if k != "kind"}
    if kind == "zipf":
        return streams.zipf(**args), None
    if kind == "drift":
        return streams.drifting_zipf(**args), None
    if kind == "skewed":
        return streams.skewed(**args), None
    if kind == "hot_tail":
        return hot_tail(**args), None
    if kind == "python":
        return streams.python_source(args["source"], limit=args.get("limit")), None
    if kind == "file":
        keys = streams.from_file(args["path"], args["column"], limit=args.get("limit"))
        split = args.get("split")
        values = None
        if split:
            values = streams.from_file(args["path"], split, limit=args.get("limit"))
        return keys, values
    raise ValueError(f"unknown stream kind {kind!r}")


def hot_tail(ratio, messages, tail_z=1.0, universe=10**6, seed=0):
    """One hot key (key 0) with share ``ratio``, the rest a Zipf(tail_z) tail over keys 1..U.

    Stands in for a real stream with one dominant key (DKG's twitter-election: 68 %).
    """
    rng = np.random.default_rng([seed, 2])
    keys = streams.zipf(tail_z, messages, universe=universe, seed=seed) + 1
    keys[rng.random(messages) < ratio] = 0
    return keys


class Prepared:
    """A stream ready for cells: hashes for routing, dense codes for RF, summary statistics."""

    def __init__(self, spec, seed):
        keys, self.split_values = make_stream(spec)
        start = time.perf_counter()
        self.hashes = hash_keys(keys, seed)
        self.hash_ns = (time.perf_counter() - start) / max(1, len(self.hashes)) * 1e9
        # 64-bit hashes identify keys (a collision among 10^7 keys has odds ~1e-6), so file
        # streams of strings are coded without touching Python objects.
        source = keys if isinstance(keys, np.ndarray) else self.hashes
        self.codes, self.distinct = metrics.key_codes(source)
        self.messages = len(self.hashes)
        counts = np.bincount(self.codes, minlength=self.distinct) if self.messages else np.zeros(1)
        self.p1 = float(counts.max() / self.messages) if self.messages else 0.0
        self.counts = counts

    def rf_bound(self, workers):
        """The least RF of a perfectly balanced routing: a key with share p needs ⌈p·n⌉ workers
        (each can take m/n tuples), every key at least one (docs/adaptive.md)."""
        if not self.messages:
            return 0.0
        need = np.ceil(self.counts * (workers / self.messages) - 1e-9)
        return float(np.maximum(need, 1).sum() / self.distinct)


_CACHE = {}


def prepared(spec, seed):
    key = (json.dumps(spec, sort_keys=True), seed)
    if key not in _CACHE:
        _CACHE.clear()          # one stream per process: 10^7 tuples weigh ~250 MB
        _CACHE[key] = Prepared(spec, seed)
    return _CACHE[key]


# --- cells -------------------------------------------------------------------------------------


def cell(stream, strategy, workers, *, params=None, label=None, sources=1, seed=0,
         points=100, window=None, queue=None, tags=None):
    """A cell dict (see the module docstring). ``queue``: keyword arguments of
    :func:`skewgroup.metrics.queue_model` (cost, rate, capacities, poisson)."""
    return dict(stream=stream, strategy=strategy, params=dict(params or {}),
                label=label or strategy, workers=workers, sources=sources, seed=seed,
                points=points, window=window, queue=queue, tags=dict(tags or {}))


def route(c, prep):
    """(worker ids in stream order, routing ns per tuple, stats of the first source)."""
    n, s = c["workers"], c["sources"]
    m = prep.messages
    ids = np.empty(m, dtype=np.int32)
    if s == 1:
        selections = [slice(None)]
    elif prep.split_values is None:
        selections = [slice(j, None, s) for j in range(s)]
    else:
        source_of = streams.split_sources(m, s, by=prep.split_values)
        selections = [np.flatnonzero(source_of == j) for j in range(s)]
    elapsed = 0.0
    stats = None
    for sel in selections:
        p = partitioner(c["strategy"], n, seed=c["seed"], **c["params"])
        hashes = np.ascontiguousarray(prep.hashes[sel])
        start = time.perf_counter()
        part = p.route_hashes(hashes)
        elapsed += time.perf_counter() - start
        if part.size and (part.min() < 0 or part.max() >= n):
            # A broken router must not index the metrics' tables out of bounds.
            raise RuntimeError(f"strategy {c['strategy']!r} routed to worker {int(part.max())} "
                               f"(or {int(part.min())}) outside 0..{n - 1}")
        ids[sel] = part
        stats = stats or p.stats()
    return ids, elapsed / max(1, m) * 1e9, stats


def run_cell(c):
    """Route one cell and return its measurements as a JSON-ready dict."""
    prep = prepared(c["stream"], c["seed"])
    ids, ns, stats = route(c, prep)
    n = c["workers"]
    load = metrics.loads(ids, n)
    pairs = metrics.distinct_pairs(prep.codes, ids, n, prep.distinct)
    t, it = metrics.imbalance_over_time(ids, n, points=c["points"])
    out = dict(c["tags"], label=c["label"], strategy=c["strategy"], params=c["params"],
               workers=n, sources=c["sources"], seed=c["seed"], messages=prep.messages,
               distinct=prep.distinct, p1=prep.p1,
               li=metrics.load_imbalance(load), rf=pairs / max(1, prep.distinct),
               rf_bound=prep.rf_bound(n),
               stddev=metrics.load_stddev(load), pairs=pairs,
               i_final=float(it[-1]) if it.size else 0.0,
               imbalance_t=t.tolist(), imbalance=it.tolist(), loads=load.tolist(),
               ns_per_tuple=ns, hash_ns_per_tuple=prep.hash_ns,
               state_bytes=stats["state_bytes"],
               stats={k: v for k, v in stats.items() if isinstance(v, (int, float))})
    if c["window"]:
        end, li = metrics.windowed_imbalance(ids, n, c["window"])
        out["window_end"], out["window_li"] = end.tolist(), li.tolist()
    if c["queue"]:
        out["queue"] = metrics.queue_model(ids, n, **c["queue"]).as_dict()
    return out


def run_cells(cells, jobs=1, on_result=None):
    """Run ``cells`` (in their order, on ``jobs`` processes); returns the results in order.

    ``on_result(result)`` is called as each one arrives (a progress bar). Cells are handed out
    one at a time in order, so cells sharing a stream should be adjacent.
    """
    results = []
    jobs = max(1, min(jobs, len(cells)))
    if jobs == 1:
        iterator = map(run_cell, cells)
        pool = None
    else:
        # fork: the children inherit the imported core; nothing of the parent's streams is
        # big at this point because streams are built inside the workers.
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        pool = multiprocessing.get_context(method).Pool(jobs)
        iterator = pool.imap(run_cell, cells, chunksize=1)
    try:
        for result in iterator:
            results.append(result)
            if on_result:
                on_result(result)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    return results


def default_jobs():
    """Both cores of the 2-core machines this project runs on; more where there are more."""
    return max(1, min(os.cpu_count() or 1, 8))
