"""FlexD (flexd §4.3-4.4, Algorithm 1): segments, T_f growth, pruning, the router contract."""
import numpy as np
import pytest

import skewgroup
from skewgroup._routing.config import FlexDConfig
from skewgroup._routing._flexd import FlexD, flexd_limits
from skewgroup.metrics import load_imbalance, loads, replication_factor

from _routers import (check_chunking_invariance, check_deterministic_per_seed,
                      check_ids_in_range, check_round_trip, hashes, route)


def small(n=16, seed=0):
    # l = 1,000, f = 0.005 (5 occurrences), ε = f/2, prunings every 7,000 tuples keeping 20.
    return FlexD(n, seed, 1.5, 1_000, 0.005, 400, 7_000, 20)


@pytest.fixture(scope="module")
def zipf_hashes(zipf_keys):
    return hashes(zipf_keys, seed=3)


def test_default_limits():
    # f·l = 5; a key gains workers at 5·1.5^j <= 100,000, j = 0 .. 24: at most 26 workers.
    # Entries: 50,000 + (10 + 1) segments * 100,000 / (5 - 2.5) new hot keys per segment.
    config = FlexDConfig()
    assert (config.segment, config.threshold, config._capacity()) == (100_000, 5e-5, 40_000)
    max_set, max_entries, thresholds = flexd_limits(64, 1.5, 100_000, 5e-5, 40_000,
                                                    1_000_000, 50_000)
    assert (max_set, max_entries) == (26, 490_000)
    assert thresholds[0] == 5 and thresholds.size == 25 and thresholds[-1] <= 100_000
    assert flexd_limits(8, 1.5, 100_000, 5e-5, 40_000, 1_000_000, 50_000)[0] == 8


def test_ids_in_range_and_loads_add_up(zipf_hashes):
    check_ids_in_range(small, zipf_hashes[:200_000], 13)


def test_deterministic_per_seed(zipf_keys):
    check_deterministic_per_seed(small, zipf_keys[:100_000])


def test_chunking_invariance(zipf_hashes):
    # Cuts on segment and pruning boundaries too.
    check_chunking_invariance(small, zipf_hashes[:200_000], [1_000, 6_999, 7_000, 14_000, 14_001])


@pytest.mark.parametrize("cut", [21_000, 70_500, 123_457])  # 21,000: segment and pruning
def test_state_round_trip_mid_stream_continues_identically(zipf_hashes, cut):
    check_round_trip(lambda: small(24), zipf_hashes[:250_000], cut)


def test_low_frequency_keys_stay_on_one_worker():
    keys = np.repeat(np.arange(1000, dtype=np.int64), 3)
    ids = skewgroup.partitioner("flexd", 16).route(keys)
    per_key = [np.unique(ids[keys == k]).size for k in range(0, 1000, 37)]
    assert max(per_key) == 1


def test_a_hot_key_gains_workers_as_its_frequency_passes_f_delta_powers():
    # One key at 100 % of a segment of l = 1000 with f = 0.01: hashed until f_t reaches f
    # (10 tuples), then its first worker with T_f = f, then one more worker each time f_t
    # passes T_f = f·δ^j: j = 0 .. floor(log_δ(1/f)) = 11, so 1 + 12 = 13 hot workers.
    p = skewgroup.partitioner("flexd", 64, segment=1000, threshold=0.01, delta=1.5)
    ids = p.route(np.zeros(1000, dtype=np.int64))
    hot_workers = 1 + int(np.floor(np.log(1 / 0.01) / np.log(1.5))) + 1
    assert np.unique(ids[:9]).size == 1  # the hash worker
    assert np.unique(ids[9:]).size == hot_workers
    assert p.stats()["table_entries"] == hot_workers


def test_first_hot_tuple_goes_to_the_least_loaded_worker_and_sets_grow_by_least_unused():
    router = FlexD(8, 0, 2.0, 1_000, 0.01, 200, 10**6, 100)
    h = hashes([0, 1, 2])
    # Load workers unevenly with cold keys first (each stays under f = 10 occurrences).
    warm = np.repeat(hashes(np.arange(100, 140)), 3)
    route(router, warm)
    before = router.loads
    ids = route(router, np.full(10, h[0]))
    assert ids[9] == np.argmin(before + np.bincount(ids[:9], minlength=8))  # ties: lowest id
    # The 11th tuple passes T_f = f (11 >= 10): the least loaded worker not yet in the set.
    before = router.loads
    unused = before.astype(float)
    unused[ids[9]] = np.inf
    assert route(router, h[:1])[0] == np.argmin(unused)
    assert len(router.worker_sets()[int(h[0])]) == 2


def test_each_segment_restarts_the_frequencies():
    # Segment l = 1000, f·l = 10: in the second segment the key's count starts again at 1,
    # so its first 9 tuples there are low-frequency and go to the hash worker again (§4.3).
    p = skewgroup.partitioner("flexd", 16, segment=1000, threshold=0.01)
    ids = p.route(np.zeros(2000, dtype=np.int64))
    assert np.array_equal(ids[1000:1009], ids[:9])
    assert np.unique(ids[1009:]).size == np.unique(ids[9:1000]).size  # no new workers: T_f kept


def test_pruning_keeps_the_most_recently_used_entries():
    p = skewgroup.partitioner("flexd", 8, segment=100, threshold=0.05, prune_every=10_000,
                              prune_keep=5)
    # A different key is hot in every segment; after the pruning at tuple 10,000 only the 5
    # most recently used entries are left, plus the keys hot since then.
    keys = np.repeat(np.arange(105, dtype=np.int64), 100)
    p.route(keys[:10_000])
    assert p.stats()["head_keys"] == 100
    p.route(keys[10_000:])
    assert p.stats()["head_keys"] == 5 + 5
    kept = set(p._router.worker_sets())
    assert kept == set(skewgroup.hash_keys(np.arange(95, 105)).tolist())


def test_entries_stay_under_max_entries_on_an_adversarial_stream():
    # Every key occurs exactly f·l = 5 times in its segment: as many hot keys as possible.
    router = FlexD(16, 0, 1.5, 1_000, 0.005, 400, 7_000, 20)
    keys = np.repeat(np.arange(30_000, dtype=np.int64), 5)
    most = 0
    for chunk in np.split(hashes(keys), 150):
        route(router, chunk)
        most = max(most, router.stats()["head_keys"])
    assert 20 < most <= router.max_entries


def test_state_stays_bounded_over_a_million_distinct_keys():
    n, config = 64, FlexDConfig()
    router = config.build(n, 0)
    sizes = []
    for block in range(3):
        keys = np.arange(block * 500_000, (block + 1) * 500_000, dtype=np.int64)
        keys[np.random.default_rng(block).random(keys.size) < 0.2] = -1  # one hot key at 20 %
        route(router, hashes(keys))
        sizes.append(router.state_bytes())
    # Documented bound (FlexDConfig.state_bound): SpaceSaving plus at most 490,000 entries.
    assert sizes[-1] == sizes[0] <= config.state_bound(n)
    assert sizes[-1] < 8 * 2**20  # in practice: the 40,000 counters and one hot key


def test_worker_sets_never_exceed_max_set(zipf_hashes):
    router = FlexDConfig().build(128, 3)
    route(router, zipf_hashes)
    assert router.max_set == 26
    assert max(len(s) for s in router.worker_sets().values()) <= router.max_set


def test_flexd_is_balanced_on_zipf_at_n_64(zipf_keys, zipf_hashes, li):
    # Zipf z = 1.4, p_1 = 0.32: the hottest key needs ~p_1·n = 21 workers and grows to 24
    # (2 + log_1.5(0.32 / 5e-5)); FlexD balances it while splitting little (RF ~1.15).
    n = 64
    ids = route(FlexDConfig().build(n, 3), zipf_hashes)
    assert li(ids, n) < 1e-2
    assert replication_factor(zipf_keys, ids, n) < 1.3
    pkg = li(skewgroup.partitioner("pkg", n, seed=3).route_hashes(zipf_hashes), n)
    assert li(ids, n) < pkg / 100


def test_flexd_balances_far_better_than_pkg_on_zipf(zipf_keys):
    flexd = load_imbalance(loads(skewgroup.partitioner("flexd", 64).route(zipf_keys), 64))
    pkg = load_imbalance(loads(skewgroup.partitioner("pkg", 64).route(zipf_keys), 64))
    assert flexd < pkg / 5


def test_bad_parameters_are_clear_errors():
    with pytest.raises(ValueError, match="'delta'"):
        skewgroup.partitioner("flexd", 4, delta=1.0)
    with pytest.raises(ValueError, match="'threshold'"):
        skewgroup.partitioner("flexd", 4, threshold=0.0)
    with pytest.raises(TypeError, match="'segment'"):
        skewgroup.partitioner("flexd", 4, segment=10.5)
