"""Adaptive (docs/adaptive.md): the tail on its hash, hot sets grown by need, the contract."""
import numpy as np
import pytest

import skewgroup
from skewgroup import partitioner, streams
from skewgroup._routing._adaptive import Adaptive, adaptive_limits
from skewgroup._routing.config import AdaptiveConfig
from skewgroup.metrics import load_imbalance, loads, replication_factor, windowed_imbalance

from _routers import (check_chunking_invariance, check_deterministic_per_seed,
                      check_ids_in_range, check_round_trip, hashes, route)


def small(n=16, seed=0):
    # θ = 0.01 with 2/θ = 200 counters; epochs of 1,000 tuples (a decay and a pruning each).
    return Adaptive(n, seed, 0.01, 1_000, 0.5, 4, 0.1, 200, 12)


@pytest.fixture(scope="module")
def zipf_hashes(zipf_keys):
    return hashes(zipf_keys, seed=3)


def test_defaults_follow_n():
    theta, epoch, capacity = AdaptiveConfig()._resolved(128)
    assert theta == 1 / 4096 and epoch == 8 * 4096 and capacity == 2 * 4096
    assert adaptive_limits(128, theta, epoch, capacity) == (8192, 4096)
    assert adaptive_limits(4, 0.5, 10, 3) == (3, 2)     # entries never above the counters


def test_ids_in_range_and_loads_add_up(zipf_hashes):
    check_ids_in_range(small, zipf_hashes[:200_000], 13)
    check_ids_in_range(small, zipf_hashes[:50_000], 1)
    check_ids_in_range(small, zipf_hashes[:50_000], 70)     # two words per worker set


def test_deterministic_per_seed(zipf_keys):
    check_deterministic_per_seed(small, zipf_keys[:100_000])


def test_chunking_invariance(zipf_hashes):
    # Cuts on epoch boundaries (decay and pruning before tuples 1,000, 2,000, ...) too.
    check_chunking_invariance(small, zipf_hashes[:200_000], [999, 1_000, 1_001, 7_000, 70_000])


@pytest.mark.parametrize("cut", [1_000, 70_500, 123_457])
def test_state_round_trip_mid_stream_continues_identically(zipf_hashes, cut):
    check_round_trip(lambda: small(24), zipf_hashes[:250_000], cut)
    check_round_trip(lambda: small(70), zipf_hashes[:150_000], cut)


def test_tail_keys_stay_on_their_hash_worker():
    # Keys far below θ never leave h_1(k): key grouping's placement, RF contribution 1.
    keys = np.repeat(np.arange(20_000, dtype=np.int64), 3)
    np.random.default_rng(0).shuffle(keys)
    ids = partitioner("adaptive", 16, seed=2).route(keys)
    kg = partitioner("kg", 16, seed=2).route(keys)
    assert np.array_equal(ids, kg)


def test_a_hot_key_grows_by_need_up_to_its_cap():
    # One key at 50 % on a uniform tail, n = 32: it needs about 16 workers, its cap is
    # ⌈0.5·32/H·1.1⌉ + 1 with H ≈ 0.5 + the hot part of the tail, and balance is exact.
    n = 32
    rng = np.random.default_rng(1)
    keys = rng.integers(1, 200_000, size=400_000)
    keys[rng.random(keys.size) < 0.5] = 0
    p = partitioner("adaptive", n, seed=1)
    ids = p.route(keys)
    held = np.unique(ids[keys == 0]).size
    assert 16 <= held <= n
    assert load_imbalance(loads(ids, n)) * (keys.size / n) <= 4  # within a few tuples
    sets = p._router.worker_sets()
    (hot,) = skewgroup.hash_keys([0], seed=1)
    assert np.array_equal(np.sort(sets[int(hot)]), np.unique(ids[keys == 0]))


def test_balance_and_replication_on_zipf(zipf_keys):
    # A seeded check that the figures of docs/adaptive.md are not lost (10^6 keys).
    for n in (16, 64):
        ids = partitioner("adaptive", n).route(zipf_keys)
        assert load_imbalance(loads(ids, n)) < 1e-3
        assert replication_factor(zipf_keys, ids, n) < 1.10


def test_drift_is_balanced_again_within_a_window():
    # Hot keys replaced at 300,000; windows of 1,000·n tuples after it keep LI <= 1e-2.
    n = 16
    keys = streams.drifting_zipf(1.6, 600_000, changes=[300_000], universe=10_000, seed=2)
    ids = partitioner("adaptive", n).route(keys)
    end, li = windowed_imbalance(ids, n, 1_000 * n)
    assert li[end > 300_000].max() <= 1e-2


def test_state_is_bounded_by_the_table_limit():
    n = 8
    p = partitioner("adaptive", n, theta=0.05, epoch=200)
    rng = np.random.default_rng(3)
    for _ in range(5):
        p.route(rng.integers(0, 50, size=20_000))   # every key hot at some point
        assert p.stats()["head_keys"] <= adaptive_limits(n, 0.05, 200, 40)[0]
    assert p.stats()["state_bytes"] <= skewgroup.state_bound("adaptive", n, theta=0.05,
                                                             epoch=200)


@pytest.mark.parametrize("params, words", [
    ({"theta": 0.0}, "'theta' parameter must be a real number in (0.0, 1.0]. Got 0.0"),
    ({"theta": "0.1"}, "'theta'"),
    ({"epoch": 0}, "'epoch' parameter must be an int in [1,"),
    ({"decay": 0.0}, "'decay' parameter must be a real number in (0.0, 1.0]"),
    ({"decay": 1.5}, "Got 1.5 instead"),
    ({"slack": -1}, "'slack' parameter must be an int in [0,"),
    ({"slack": 1.5}, "'slack'"),
    ({"headroom": -0.1}, "'headroom' parameter must be a real number in [0.0,"),
    ({"capacity": 0}, "'capacity' parameter must be an int in [1, 16777216]"),
    ({"burst": 1}, "'burst' parameter must be 0 or at least slack = 4. Got 1"),
    ({"burst": -1}, "'burst' parameter must be an int in [0,"),
    ({"hold": 3}, "'hold' parameter must be 0 or at least slack = 4. Got 3"),
    ({"window": 3}, "Unknown parameter(s) ['window'] for strategy 'adaptive'"),
])
def test_bad_parameters_are_named(params, words):
    with pytest.raises((TypeError, ValueError)) as info:
        partitioner("adaptive", 8, **params)
    assert words in str(info.value)
