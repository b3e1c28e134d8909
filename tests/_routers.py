"""Helpers for the tests of one strategy's router (test_dkg, test_flexd, test_fish): keys to
hashes, a raw router's route call, and the router contract checked with the strategy's own
small configuration and boundary points (cycles, segments, prunings), which the generic
tests in test_partitioner.py, at default parameters, never reach."""
import numpy as np

import skewgroup


def hashes(keys, seed=0):
    return skewgroup.hash_keys(np.asarray(keys, dtype=np.int64), seed)


def route(router, h):
    out = np.empty(len(h), dtype=np.int32)
    router.route(np.ascontiguousarray(h, dtype=np.uint64), out)
    return out


def check_ids_in_range(make, h, n):
    """Ids of ``make(n)`` fall in 0..n-1 and its loads count them."""
    router = make(n)
    ids = route(router, h)
    assert ids.min() >= 0 and ids.max() < n
    assert np.array_equal(router.loads, np.bincount(ids, minlength=n))


def check_deterministic_per_seed(make, keys):
    """The same seed routes the same; another seed (keys hashed with it) routes otherwise."""
    a = route(make(seed=4), hashes(keys, 4))
    assert np.array_equal(a, route(make(seed=4), hashes(keys, 4)))
    assert not np.array_equal(a, route(make(seed=5), hashes(keys, 5)))


def check_chunking_invariance(make, h, boundaries):
    """Routing ``h`` in chunks cut at random points and at ``boundaries`` gives the ids of
    routing it whole."""
    whole = route(make(), h)
    router = make()
    cuts = np.sort(np.random.default_rng(0).choice(h.size, size=60, replace=False))
    cuts = np.unique(np.concatenate([cuts, boundaries]))
    parts = [route(router, chunk) for chunk in np.split(h, cuts)]
    assert np.array_equal(np.concatenate(parts), whole)


def check_round_trip(make, h, cut):
    """A router restored from another's state after ``h[:cut]`` routes the rest the same."""
    router = make()
    route(router, h[:cut])
    clone = make()
    # The router's own check (from_bytes runs it) accepts a state it wrote, with its own
    # parameters; the state stays within the router's own bound.
    clone.check_state(router.get_state())
    assert router.state_bytes() <= router.state_bound()
    clone.set_state(router.get_state())
    assert clone.stats() == router.stats()
    assert clone.state_bytes() == router.state_bytes()
    assert np.array_equal(route(clone, h[cut:]), route(router, h[cut:]))
    assert np.array_equal(clone.loads, router.loads)
