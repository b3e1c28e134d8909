"""DKG (dkg §4) behaviours beyond the common strategy contract."""
import numpy as np
import pytest

import skewgroup
from skewgroup._dkg import dkg_table
from skewgroup.metrics import load_imbalance, loads

# DKG Table 1: machines -> (ideal load %, threshold load %, max machines)
TABLE_1 = {5: (20.00, 24.47, 5), 10: (10.00, 13.16, 8), 20: (5.00, 7.24, 14),
           50: (2.00, 3.41, 30), 100: (1.00, 2.00, 51)}


@pytest.mark.parametrize("machines", sorted(TABLE_1))
def test_reproduces_table_1(machines):
    ideal, threshold, most = dkg_table(machines)
    assert round(ideal, 2) == TABLE_1[machines][0]
    assert round(threshold, 2) == TABLE_1[machines][1]
    assert most == TABLE_1[machines][2]


def test_two_adjacent_machines_per_key_by_default():
    keys = np.repeat(np.arange(200, dtype=np.int64), 2)
    p = skewgroup.partitioner("dkg", 16)
    ids = p.route(keys)
    for k in range(0, 200, 17):
        used = np.unique(ids[keys == k])
        assert used.size <= 2
        if used.size == 2:
            assert (used[1] - used[0]) % 16 in (1, 15)


def test_only_a_skewed_key_in_old_space_scales_out():
    keys = skewgroup.streams.zipf(1.4, 200_000, universe=10**4, seed=8)
    p = skewgroup.partitioner("dkg", 16, warmup=5_000, promote_every=2_000, promote_every_old=4_000)
    ids = p.route(keys)
    hottest = np.unique(ids[keys == 0]).size
    assert 2 < hottest <= dkg_table(16)[2]
    assert np.unique(ids[keys == 500]).size <= 2
    assert 1 <= p.stats()["head_keys"] <= 10  # Old space: 10 % of the 100 expected keys


def test_no_scale_out_during_warm_up():
    ids = skewgroup.partitioner("dkg", 16, warmup=10**9).route(np.zeros(50_000, dtype=np.int64))
    assert np.unique(ids).size == 2


def test_dkg_balances_better_than_key_grouping(zipf_keys):
    dkg = load_imbalance(loads(skewgroup.partitioner("dkg", 64).route(zipf_keys), 64))
    kg = load_imbalance(loads(skewgroup.partitioner("kg", 64).route(zipf_keys), 64))
    assert dkg < kg / 5
