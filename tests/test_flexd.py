"""FlexD (flexd §4.4) behaviours beyond the common strategy contract."""
import numpy as np

import skewgroup
from skewgroup.metrics import load_imbalance, loads


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


def test_flexd_balances_far_better_than_pkg_on_zipf(zipf_keys):
    flexd = load_imbalance(loads(skewgroup.partitioner("flexd", 64).route(zipf_keys), 64))
    pkg = load_imbalance(loads(skewgroup.partitioner("pkg", 64).route(zipf_keys), 64))
    assert flexd < pkg / 5


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
