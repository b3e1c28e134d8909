"""FISH (fish §4-5) behaviours beyond the common strategy contract."""
import numpy as np

import skewgroup


def test_hot_keys_get_more_candidates_than_cold_ones():
    keys = skewgroup.streams.zipf(1.4, 300_000, universe=10**5, seed=2)
    ids = skewgroup.partitioner("fish", 32).route(keys)
    hottest = np.unique(ids[keys == 0]).size
    cold = [np.unique(ids[keys == k]).size for k in range(200, 260)]
    assert hottest == 32  # f_top itself: index 0, d = n
    assert max(cold) <= 2


def test_epoch_decay_forgets_an_old_hot_key():
    # 20k tuples of key 1, then a stream of distinct keys: after a few epochs of decay (α = 0.2)
    # key 1 is no longer hot, so a single new occurrence goes to its 2 ring candidates only.
    p = skewgroup.partitioner("fish", 16, epoch=1000)
    p.route(np.ones(20_000, dtype=np.int64))
    before = p.stats()["head_keys"]
    p.route(np.arange(100, 20_100, dtype=np.int64))
    assert before >= 1 and p.stats()["head_keys"] == 0


def test_capacities_send_less_work_to_slow_workers():
    # P_w is the time a worker takes per tuple: worker 0 is four times slower than the rest.
    caps = (4.0,) + (1.0,) * 7
    p = skewgroup.partitioner("fish", 8, capacities=caps, interval=100)
    ids = p.route(np.zeros(80_000, dtype=np.int64))
    loads = np.bincount(ids, minlength=8)
    assert loads[0] < 0.5 * loads[1:].mean()


def test_resize_moves_a_small_share_of_candidates():
    from skewgroup._ring import Ring

    keys = np.arange(20_000, dtype=np.int64)
    hashes = skewgroup.hash_keys(keys, seed=1)
    old, new = Ring(16, 100, seed=1), Ring(17, 100, seed=1)
    pairs_old = [set(old.candidates(h, 2).tolist()) for h in hashes.tolist()]
    pairs_new = [set(new.candidates(h, 2).tolist()) for h in hashes.tolist()]
    # A cold key's candidates {owner, next clockwise} change only near the new worker's arcs.
    moved = np.mean([a != b for a, b in zip(pairs_old, pairs_new)])
    assert moved < 2.5 / 17

    p = skewgroup.partitioner("fish", 16, seed=1)
    p.route(keys)
    p.resize(17)
    ids = p.route(keys)
    assert p.workers == 17 and p.loads.shape == (17,)
    assert all(w in pair for w, pair in zip(ids.tolist(), pairs_new))
