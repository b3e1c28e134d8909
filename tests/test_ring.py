import numpy as np

import skewgroup
from skewgroup._ring import Ring


def test_candidates_are_distinct_live_workers():
    ring = Ring(16, 100, seed=3)
    for key in range(0, 2**64 - 1, 2**58):
        for d in (1, 2, 5, 16, 40):
            c = ring.candidates(key, d)
            assert len(c) == min(d, 16) and len(set(c.tolist())) == len(c)
            assert c.min() >= 0 and c.max() < 16


def test_first_candidate_is_spread_evenly():
    keys = skewgroup.hash_keys(np.arange(200_000))
    owners = Ring(16, 100).first_candidates(keys)
    share = np.bincount(owners, minlength=16) / keys.size
    assert share.max() < 1.35 / 16 and share.min() > 0.65 / 16  # 100 virtual nodes each


def test_adding_or_removing_a_worker_moves_only_its_arcs():
    keys = skewgroup.hash_keys(np.arange(100_000))
    before = Ring(16, 100, seed=1).first_candidates(keys)
    grown = Ring(17, 100, seed=1).first_candidates(keys)
    moved = before != grown
    # Only keys now owned by the new worker move, about 1/17 of them.
    assert np.all(grown[moved] == 16)
    assert 0.5 / 17 < moved.mean() < 1.5 / 17
    shrunk = Ring(15, 100, seed=1).first_candidates(keys)
    moved = before != shrunk
    assert np.all(before[moved] == 15)
    assert 0.5 / 16 < moved.mean() < 1.5 / 16
