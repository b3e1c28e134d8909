"""Routers as soft state (skewgroup.spark._routers), without Spark: continuation between
micro-batches, replays, snapshots across Python workers, elastic workers."""
import numpy as np

import skewgroup
from skewgroup._routing.config import make_config
from skewgroup.spark import _routers

KEYS = skewgroup.streams.zipf(1.4, 30_000, universe=2_000, seed=5)
HASHES = skewgroup.hash_keys(KEYS, 0)
BATCHES = np.array_split(HASHES, 3)


def uninterrupted(strategy, workers=4):
    router = skewgroup.partitioner(strategy, workers)
    return [router.route_hashes(b) for b in BATCHES]


def run_batch(directory, batch, strategy="pdstream", workers=4, query="q", partition=0):
    router, restored = _routers.acquire(directory, query, partition, batch,
                                        make_config(strategy, {}), workers, 0)
    ids = router.route_hashes(BATCHES[batch % len(BATCHES)])
    _routers.release(directory, query, partition, batch, router)
    return ids, restored


def test_batches_continue_and_a_replay_routes_as_its_first_attempt(tmp_path):
    want = uninterrupted("pdstream")
    first, restored = run_batch(str(tmp_path), 0)
    assert not restored and (first == want[0]).all()
    assert (run_batch(str(tmp_path), 1)[0] == want[1]).all()
    # Batch 1 again (a retried task, or the batch running when the driver died).
    again, restored = run_batch(str(tmp_path), 1)
    assert restored and (again == want[1]).all()
    assert (run_batch(str(tmp_path), 2)[0] == want[2]).all()


def test_another_python_worker_continues_from_the_snapshot(tmp_path):
    want = uninterrupted("sg")
    run_batch(str(tmp_path), 0, "sg")
    _routers._MEMORY.clear()           # batch 1 runs in another Python worker (or process)
    ids, restored = run_batch(str(tmp_path), 1, "sg")
    assert restored and (ids == want[1]).all()
    assert sorted(int(p.name) for p in (tmp_path / "q" / "0").iterdir()) == [0, 1]


def test_memory_only_and_a_lost_snapshot_start_cold(tmp_path):
    want = uninterrupted("sg")
    run_batch(None, 0, "sg")
    assert (run_batch(None, 1, "sg")[0] == want[1]).all()      # memory continues
    ids, restored = run_batch(None, 1, "sg")                   # a replay cannot: cold
    assert not restored
    run_batch(str(tmp_path), 0, "sg", query="r")
    (tmp_path / "r" / "0" / "0").write_bytes(b"damaged")
    _routers._MEMORY.clear()
    assert run_batch(str(tmp_path), 1, "sg", query="r")[1] is False


def test_only_the_newest_snapshots_are_kept(tmp_path):
    for batch in range(6):
        run_batch(str(tmp_path), batch)
    names = sorted(p.name for p in (tmp_path / "q" / "0").iterdir())
    assert names == [str(b) for b in range(6 - _routers.KEEP, 6)]


def test_other_workers_resize_fish_and_start_others_fresh(tmp_path):
    run_batch(str(tmp_path), 0, "fish", workers=4, query="f")
    router, restored = _routers.acquire(str(tmp_path), "f", 0, 1, make_config("fish", {}), 5, 0)
    assert restored and router.workers == 5
    run_batch(str(tmp_path), 0, "pdstream", workers=4, query="p")
    router, restored = _routers.acquire(str(tmp_path), "p", 0, 1, make_config("pdstream", {}), 5,
                                        0)
    assert not restored and router.workers == 5
    # Another strategy on the same query: fresh.
    router, restored = _routers.acquire(str(tmp_path), "p", 0, 1, make_config("pkg", {}), 4, 0)
    assert not restored and router.strategy == "pkg"
