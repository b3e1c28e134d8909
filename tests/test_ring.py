"""The consistent-hash ring of FISH §5 (skewgroup._routing._ring)."""
import numpy as np
import pytest

from skewgroup._routing._hash import hash_int64
from skewgroup._routing._ring import Ring


def hashes(count, seed=0, start=0):
    out = np.empty(count, dtype=np.uint64)
    hash_int64(np.arange(start, start + count, dtype=np.int64), seed, out)
    return out


def test_candidates_are_distinct_live_workers_in_ring_order():
    ring = Ring(16, 100, seed=3)
    keys = hashes(200, seed=3)
    for d in (1, 2, 5, 16, 40):
        many = ring.candidates_many(keys, d)
        assert many.shape == (200, min(d, 16))
        assert all(len(set(row)) == len(row) for row in many.tolist())
        assert many.min() >= 0 and many.max() < 16
        # Prefixes: the first d candidates are the first d of any longer list.
        assert np.array_equal(many, ring.candidates_many(keys, 16)[:, :min(d, 16)])
    assert np.array_equal(ring.candidates_many(keys, 1)[:, 0], ring.first_candidates(keys))
    assert np.array_equal(ring.candidates_many(keys, 2), ring.pairs(keys))
    assert ring.candidates(int(keys[0]), 3).tolist() == ring.candidates_many(keys[:1], 3)[0].tolist()


def test_first_candidate_is_spread_evenly():
    owners = Ring(16, 100).first_candidates(hashes(200_000))
    share = np.bincount(owners, minlength=16) / owners.size
    assert share.max() < 1.35 / 16 and share.min() > 0.65 / 16  # 100 virtual nodes each


@pytest.mark.parametrize("n", [8, 16, 64])
def test_adding_a_worker_moves_only_the_keys_of_its_arcs(n):
    keys = hashes(100_000, seed=1)
    ring = Ring(n, 100, seed=1)
    before = ring.first_candidates(keys)
    ring.add_worker(n)
    after = ring.first_candidates(keys)
    moved = before != after
    assert np.all(after[moved] == n)  # only keys that now belong to the new worker move
    assert abs(moved.mean() - 1 / (n + 1)) < 0.35 / (n + 1)  # about its share, 1/(n+1)
    # The same ring as one built with n + 1 workers from the start.
    assert np.array_equal(after, Ring(n + 1, 100, seed=1).first_candidates(keys))


@pytest.mark.parametrize("n", [8, 16, 64])
def test_removing_a_worker_moves_only_its_keys(n):
    keys = hashes(100_000, seed=2)
    ring = Ring(n, 100, seed=2)
    before = ring.first_candidates(keys)
    ring.remove_worker(3)
    after = ring.first_candidates(keys)
    moved = before != after
    assert np.array_equal(moved, before == 3)  # exactly the removed worker's keys move
    assert abs(moved.mean() - 1 / n) < 0.35 / n
    assert 3 not in set(ring.candidates_many(keys[:500], n).ravel().tolist())
    ring.add_worker(3)
    assert np.array_equal(ring.first_candidates(keys), before)  # history does not matter


def test_a_cold_keys_pair_changes_only_near_the_new_workers_arcs():
    keys = hashes(50_000, seed=5)
    ring = Ring(16, 100, seed=5)
    before = ring.pairs(keys)
    ring.add_worker(16)
    after = ring.pairs(keys)
    changed = np.any(before != after, axis=1)
    # A pair changes when the new worker becomes the first or the second candidate: ~2/17.
    assert changed.mean() < 2.5 / 17
    assert np.all(np.any(after[changed] == 16, axis=1))


def test_workers_ids_need_not_be_contiguous():
    ring = Ring(4, 50, seed=9)
    ring.add_worker(10)
    ring.remove_worker(0)
    assert ring.live_workers.tolist() == [1, 2, 3, 10] and ring.workers == 4
    got = set(ring.candidates_many(hashes(2_000), 4).ravel().tolist())
    assert got == {1, 2, 3, 10}


def test_state_round_trip_gives_the_same_ring():
    ring = Ring(12, 64, seed=7)
    ring.remove_worker(5)
    ring.add_worker(20)
    copy = Ring(1, 1)
    copy.set_state(ring.get_state())
    keys = hashes(20_000, seed=7)
    assert copy.live_workers.tolist() == ring.live_workers.tolist()
    assert np.array_equal(copy.candidates_many(keys, 6), ring.candidates_many(keys, 6))
    assert np.array_equal(copy.pairs(keys), ring.pairs(keys))


def test_bad_changes_are_clear_errors():
    ring = Ring(2, 10)
    with pytest.raises(ValueError, match="already on the ring"):
        ring.add_worker(1)
    with pytest.raises(ValueError, match="not on the ring"):
        ring.remove_worker(7)
    with pytest.raises(ValueError, match="'worker'"):
        ring.add_worker(-1)
    ring.remove_worker(0)
    with pytest.raises(ValueError, match="last one"):
        ring.remove_worker(1)
    with pytest.raises(ValueError, match="'vnodes'"):
        Ring(2, 0)
    with pytest.raises(ValueError, match="'workers'"):
        Ring(0)
