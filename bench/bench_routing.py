"""Routing cost per tuple, every strategy.

    pytest bench/bench_routing.py --benchmark-only

route() of 10^6 Zipf (z = 1.4) int64 keys at n = 128 for each strategy (hash + route, and the
native route alone on pre-hashed keys), string keys (a pyarrow string array, hashed from its
buffers), the hashing alone, and a pure-Python PKG as a peer. Each test records ns/tuple (min
over rounds, a fresh partitioner per round); the session summary prints them and saves them under
bench/results/. Targets: <= 50 ns/tuple for every strategy, <= 10 ns for kg and pkg,
<= 100 ns on string keys; the public route() figure includes hashing. The peer should be >= 100x
slower than our route(). Adaptive <= 1.2 x pdstream's route_hashes ns/tuple in the
same run, on the Zipf z = 1.4 keys above, on z = 1.0 and 2.0 keys, and on the natural-order
and drift streams of docs/reproduction/adaptive (test_adaptive_against_pdstream, which times
the two interleaved).
"""
import numpy as np
import pytest

import skewgroup
from skewgroup import STRATEGIES, partitioner
from skewgroup.streams import zipf

N_KEYS = 1_000_000
WORKERS = 128
FAST = ("kg", "pkg")

_NS = {}  # ns/tuple by (strategy, what), for the peer ratio


@pytest.fixture(scope="module")
def int_keys():
    return zipf(1.4, N_KEYS, seed=1)


@pytest.fixture(scope="module")
def str_keys(int_keys):
    import pyarrow as pa

    return pa.array([f"user-{k:08d}" for k in int_keys.tolist()])


def _per_tuple(benchmark, figures, name, count, what, target=None):
    ns = benchmark.stats.stats.min / count * 1e9
    _NS[name, what] = ns
    row = dict(strategy=name, what=what, ns_per_tuple=round(ns, 2), workers=WORKERS, tuples=count)
    if target is not None:
        row.update(target_ns=target, target_met=bool(ns <= target))
    benchmark.extra_info.update(row)
    figures.add(**row)
    return ns


def _int_target(name):
    return 10 if name in FAST else 50


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_route_hashed_int64(benchmark, figures, name, int_keys):
    hashes = skewgroup.hash_keys(int_keys)
    # A fresh router per round: routing state must start empty for every measurement.
    benchmark.pedantic(lambda p: p.route_hashes(hashes),
                       setup=lambda: ((partitioner(name, WORKERS),), {}), rounds=7)
    _per_tuple(benchmark, figures, name, N_KEYS, "route_hashes int64", _int_target(name))


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_route_int64_keys(benchmark, figures, name, int_keys):
    benchmark.pedantic(lambda p: p.route(int_keys),
                       setup=lambda: ((partitioner(name, WORKERS),), {}), rounds=7)
    _per_tuple(benchmark, figures, name, N_KEYS, "route int64 (hash + route)", _int_target(name))


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_route_string_keys(benchmark, figures, name, str_keys):
    benchmark.pedantic(lambda p: p.route(str_keys),
                       setup=lambda: ((partitioner(name, WORKERS),), {}), rounds=5)
    _per_tuple(benchmark, figures, name, N_KEYS, "route str (hash + route)", 100)


@pytest.mark.parametrize("kind", ["int64", "str"])
def test_hash_keys_alone(benchmark, figures, kind, int_keys, str_keys):
    keys = int_keys if kind == "int64" else str_keys
    benchmark.pedantic(skewgroup.hash_keys, args=(keys,), rounds=7)
    _per_tuple(benchmark, figures, "-", N_KEYS, f"hash_keys {kind}")


def python_pkg(keys, n):
    """The textbook PKG in pure Python: two hash choices, the less loaded wins."""
    loads = [0] * n
    out = []
    for k in keys:
        a = hash((k, 1)) % n
        b = hash((k, 2)) % n
        w = a if loads[a] <= loads[b] else b
        loads[w] += 1
        out.append(w)
    return out


def test_peer_pure_python_pkg(benchmark, figures, int_keys):
    keys = int_keys[:200_000].tolist()
    benchmark.pedantic(python_pkg, args=(keys, WORKERS), rounds=3)
    ns = _per_tuple(benchmark, figures, "pkg-python", len(keys), "pure Python PKG")
    ours = _NS.get(("pkg", "route int64 (hash + route)"))
    if ours is not None:  # the ratio needs test_route_int64_keys[pkg] in the same run
        figures.add(strategy="pkg-python", ratio_python_over_route_pkg=round(ns / ours, 1),
                    target=100, target_met=bool(ns / ours >= 100))


def _adaptive_stream_keys(stream):
    """The keys of one of adaptive's target streams: Zipf (10^6 keys), the natural-order ones
    (python_source), or the drift stream of docs/reproduction/adaptive (4 M, hot keys replaced
    at 2 M)."""
    from skewgroup import streams

    if stream.startswith("zipf"):
        return zipf(float(stream[4:]), N_KEYS, seed=1)
    if stream == "drift":
        return streams.drifting_zipf(1.4, 4_000_000, changes=[2_000_000], universe=10**6)
    return streams.python_source(stream)


@pytest.mark.parametrize("stream", ["zipf1.0", "zipf1.4", "zipf2.0", "identifiers", "prose",
                                    "drift"])
def test_adaptive_against_pdstream(benchmark, figures, stream):
    """Adaptive's route_hashes <= 1.2 x pdstream's, same keys, same process; the two
    are timed alternately (min of 7 rounds each) so that the machine's slow and fast spells
    fall on both."""
    import time

    hashes = skewgroup.hash_keys(_adaptive_stream_keys(stream))
    best = {"adaptive": float("inf"), "pdstream": float("inf")}
    for _ in range(7):
        for name in best:
            p = partitioner(name, WORKERS)
            start = time.perf_counter()
            p.route_hashes(hashes)
            best[name] = min(best[name], time.perf_counter() - start)
    benchmark.pedantic(lambda p: p.route_hashes(hashes),
                       setup=lambda: ((partitioner("adaptive", WORKERS),), {}), rounds=1)
    ours, theirs = (best[name] / hashes.size * 1e9 for name in ("adaptive", "pdstream"))
    figures.add(strategy="adaptive", what=f"route_hashes vs pdstream, {stream}",
                ns_per_tuple=round(ours, 2), pdstream_ns_per_tuple=round(theirs, 2),
                ratio=round(ours / theirs, 3), target=1.2, target_met=bool(ours <= 1.2 * theirs),
                workers=WORKERS, tuples=int(hashes.size))
