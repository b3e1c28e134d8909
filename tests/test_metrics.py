"""Metrics on hand-computed cases, and the queueing model against closed forms."""
import numpy as np
import pytest

from skewgroup import metrics


def test_load_imbalance_and_stddev_by_hand():
    assert metrics.load_imbalance([3, 1, 2]) == pytest.approx(0.5)      # (3 - 2) / 2
    assert metrics.load_imbalance([4, 4]) == 0.0
    assert metrics.load_imbalance([0, 0]) == 0.0
    # loads 25 %, 25 %, 50 %: deviations -8.33, -8.33, +16.67 -> sqrt(138.9)
    assert metrics.load_stddev([1, 1, 2]) == pytest.approx(np.sqrt(1250 / 9))
    assert metrics.loads([2, 0, 2], 4).tolist() == [1, 0, 2, 0]


def test_imbalance_over_time_is_nasirs_fractional_max_minus_avg():
    ids = [0, 0, 0, 1, 1, 1]
    t, i = metrics.imbalance_over_time(ids, 2, points=3)
    # after 2 tuples: L0 = 1 -> 1 - 1/2; after 4: 3/4 - 1/2; after 6: 1/2 - 1/2.
    assert t.tolist() == [2, 4, 6]
    assert i.tolist() == pytest.approx([0.5, 0.25, 0.0])


def test_windowed_imbalance_per_window():
    ids = [0, 0, 1, 1, 0, 0, 0, 1, 1]          # last partial window dropped
    end, li = metrics.windowed_imbalance(ids, 2, 4)
    assert end.tolist() == [4, 8]
    assert li.tolist() == pytest.approx([0.0, 0.5])     # (3 - 2) / 2 in the second window


def test_key_codes_dense_for_small_ranges_and_any_type():
    codes, distinct = metrics.key_codes(np.array([10, 3, 10, 7]))
    assert codes.tolist() == [2, 0, 2, 1] and distinct == 3
    codes, distinct = metrics.key_codes(np.array([2**60, 5, 2**60]))   # wide range: sorting
    assert codes.tolist() == [1, 0, 1] and distinct == 2
    codes, distinct = metrics.key_codes(np.array(["b", "a", "b"]))
    assert codes.tolist() == [1, 0, 1] and distinct == 2


def test_replication_factor_and_memory_by_hand():
    keys = [1, 1, 2, 3, 3, 3]
    ids = [0, 1, 0, 2, 2, 1]
    # pairs (1,0) (1,1) (2,0) (3,2) (3,1): 5 partial states for 3 keys.
    assert metrics.replication_factor(keys, ids, 3) == pytest.approx(5 / 3)
    assert metrics.memory_overhead(keys, ids, 3) == pytest.approx(5 / 3)
    codes, distinct = metrics.key_codes(np.array(keys))
    assert metrics.distinct_pairs(codes, ids, 3, distinct) == 5
    # The presence table would not fit: the sorting path gives the same count.
    assert metrics.distinct_pairs(codes, ids, 2**30, distinct) == 5
    with pytest.raises(ValueError, match="differ in length"):
        metrics.distinct_pairs(codes, ids[:2], 3)


def test_queue_batch_makespan_is_the_slowest_workers_load():
    # Everything queued at 0: worker w finishes at L_w * c / P_w.
    ids = np.array([0, 0, 0, 1, 1, 2])
    q = metrics.queue_model(ids, 3, cost=2.0, capacities=[1.0, 0.5, 4.0])
    assert q.makespan == pytest.approx(max(3 * 2.0, 2 * 4.0, 1 * 0.5))
    # latencies: w0 2, 4, 6; w1 4, 8; w2 0.5.
    lat = [2, 4, 6, 4, 8, 0.5]
    assert q.latency_mean == pytest.approx(np.mean(lat))
    assert q.latency_max == pytest.approx(8)
    assert q.worst_worker_mean == pytest.approx(6)
    assert q.throughput == pytest.approx(6 / 8)


def test_queue_under_capacity_no_tuple_waits():
    # Deterministic arrivals at rate 0.9 n / c, round robin: each worker sees a gap n/rate > c.
    n, c, m = 4, 1.0, 1000
    q = metrics.queue_model(np.arange(m) % n, n, cost=c, rate=0.9 * n / c)
    assert q.latency_p99 == pytest.approx(c) and q.latency_max == pytest.approx(c)
    assert q.makespan == pytest.approx((m - 1) / (0.9 * n / c) + c)


def test_queue_overloaded_single_worker_closed_form():
    # Arrivals every 0.5, service 1: the j-th tuple (0-based) leaves at j + 1.
    m = 101
    q = metrics.queue_model(np.zeros(m, dtype=int), 1, cost=1.0, rate=2.0)
    j = np.arange(m)
    assert q.makespan == pytest.approx(m)
    assert q.latency_max == pytest.approx((m - 1) + 1 - (m - 1) / 2)
    assert q.latency_mean == pytest.approx(np.mean(j + 1 - j / 2))
    assert q.throughput == pytest.approx(1.0)


def test_queue_md1_mean_latency_is_pollaczek_khinchine():
    # M/D/1 at ρ = 0.5: mean latency s + ρ s / (2 (1 - ρ)) = 1.5 s.
    q = metrics.queue_model(np.zeros(200_000, dtype=int), 1, cost=1.0, rate=0.5,
                            poisson=True, seed=3)
    assert q.latency_mean == pytest.approx(1.5, rel=0.03)


def test_queue_rejects_bad_parameters():
    with pytest.raises(ValueError, match="'capacities'.*3 positive"):
        metrics.queue_model([0, 1], 3, capacities=[1, 2])
    with pytest.raises(ValueError, match="'cost'"):
        metrics.queue_model([0], 1, cost=0)
    with pytest.raises(ValueError, match="'rate'"):
        metrics.queue_model([0], 1, rate=-1)
    assert metrics.queue_model([], 2).makespan == 0.0
