"""auto's estimate (skewgroup._planning.estimate) on sampled rows, and the partial's timing, without
Spark."""
import time

import numpy as np
import pyarrow as pa
import pytest

from skewgroup._planning import estimate as _estimate


@pytest.mark.parametrize("rows_per_key", [1, 3, 40, 400])
def test_auto_counts_the_partial_rows_spread_gives_the_merge(rows_per_key):
    """The estimate's merge term against the truth: keys of c rows each, dealt round robin
    over n workers, reach n (1 - (1 - 1/n)^c) workers on average (one for c = 1, all n for
    c >> n); the routed plan gives one partial row a key. Every row sampled (weight 1)."""
    n, keys, row_seconds = 16, 2_000, 2e-6
    kh = np.repeat(np.arange(keys, dtype=np.int64), rows_per_key)
    rng = np.random.default_rng(rows_per_key)
    rng.shuffle(kh)
    rows = len(kh)
    dealt = (np.arange(rows) + 5) % n                  # round robin from an offset
    true_pairs = len(np.unique(kh * n + dealt))
    stats = _estimate.from_sample(np.arange(rows) % 4, kh % n, kh, np.ones(rows), n, keys=keys)
    assert not stats.hot                               # no key near 1/(5n) of the rows
    estimates = stats.estimates("python", row_seconds)
    # made by a worker's 1/n, merged over n: seconds per partial row, over n
    per_pair = (_estimate.GROUP_SECONDS + _estimate.MERGE_SECONDS["python"]) / n
    fixed = {"spread": row_seconds * rows / n, "hash": row_seconds * rows * stats.shares()[1]}
    spread_pairs = (estimates["spread"] - fixed["spread"] - _estimate.STAGE_SECONDS) / per_pair
    hash_pairs = (estimates["hash"] - fixed["hash"] - _estimate.STAGE_SECONDS) / per_pair
    assert spread_pairs == pytest.approx(true_pairs, rel=0.1)
    assert hash_pairs == pytest.approx(keys)
    # A Spark merge (JVM) charges the same rows less.
    spark_spread = stats.estimates("spark", row_seconds)["spread"] - fixed["spread"]
    assert spark_spread - _estimate.STAGE_SECONDS == pytest.approx(
        spread_pairs * (_estimate.GROUP_SECONDS + _estimate.MERGE_SECONDS["spark"]) / n)


def zipf_sample(inputs, n=16, rows=200_000, z=1.4, universe=100_000):
    """Every row of a Zipf stream sampled (weight 1), dealt over ``inputs`` input partitions."""
    from skewgroup.streams import zipf

    keys = zipf(z, rows, universe=universe, seed=5).astype(np.int64)
    return _estimate.from_sample(np.arange(rows) % inputs, keys % n, keys, np.ones(rows), n,
                                 keys=float(len(np.unique(keys))))


def test_a_cheap_partial_stays_in_the_input_tasks_an_expensive_one_spreads():
    """The same skewed keys in 8 even input partitions: at 0.1 µs a row the stage a placement
    adds costs more than 16 workers save (local); at 20 µs a row spreading pays (spread)."""
    stats = zipf_sample(inputs=8)
    assert _estimate.choose(stats, "python", lambda: 0.1e-6)[0] == "local"
    plan, reason = _estimate.choose(stats, "python", lambda: 20e-6)
    assert plan == "spread"
    assert "a partial of 20 µs a row" in reason and "critical path in seconds" in reason
    # Not timed: a default cost, said so.
    assert "not timed" in _estimate.choose(stats, "python", None)[1]


def test_a_streams_sample_stands_for_a_micro_batch_in_one_input_partition():
    """A stream's sample= is a batch read of many files, a micro-batch may be one: with two
    workers, 5 input partitions make local look 2.5x cheaper than the workers for any cost;
    taken as one input partition an expensive partial goes to the workers, a cheap one stays."""
    files = zipf_sample(inputs=5, n=2)
    assert _estimate.choose(files, "python", lambda: 20e-6)[0] == "local"
    one = files.in_one_input()
    assert one.shares()[0] == 1.0 and set(one.hot_inputs.values()) == {1}
    assert one.hot == files.hot and one.total == files.total
    assert _estimate.choose(one, "python", lambda: 20e-6)[0] == "spread"
    assert _estimate.choose(one, "python", lambda: 0.1e-6)[0] == "local"


def test_the_partial_is_timed_only_where_its_cost_can_change_the_plan():
    """Many even input partitions: local for any cost (no timing); a few: it depends."""
    wide = zipf_sample(inputs=64)
    assert _estimate.cost_blind(wide, "python") == "local"
    plan, reason = _estimate.choose(wide, "python", lambda: pytest.fail("timed needlessly"))
    assert plan == "local" and "for any partial cost from 0.01 to 100 µs a row" in reason
    assert _estimate.cost_blind(zipf_sample(inputs=8), "python") is None


def test_the_partial_is_timed_per_row_whatever_a_call_costs():
    """A partial costing 5 ms a call plus 20 µs a row (sleeps: the slope is the rows' cost),
    and a grouping that would differ if every row kept its own key: all rows get one key."""
    calls, groups = [], []

    def partial(batches):
        table = pa.Table.from_batches(list(batches))
        calls.append(table.num_rows)
        groups.append(len(set(table.column("k").to_pylist())))
        time.sleep(5e-3 + 20e-6 * table.num_rows)
        yield table.slice(0, 1)

    rows = pa.table({"k": np.arange(2_048), "x": np.ones(2_048)})
    seconds = _estimate.partial_seconds(partial, rows, ["k"])
    assert seconds == pytest.approx(20e-6, rel=0.25)
    assert set(groups) == {1}
    assert min(calls) == 256 and max(calls) <= 2_048
    assert _estimate.partial_seconds(partial, rows.slice(0, 10), ["k"]) is None


@pytest.mark.parametrize("rows", [0, 1, 3])
def test_a_tiny_or_empty_sample_estimates_without_a_warning(rows):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")      # numpy's RuntimeWarning (0 / 0) fails the test
        stats = _estimate.from_sample(np.zeros(rows, np.int64), np.zeros(rows, np.int32),
                                      np.arange(rows, dtype=np.int64), np.ones(rows), 4)
        assert stats.shares() == ((0.0, 0.0) if rows == 0 else (1.0, 1.0))
        assert set(stats.estimates("spark", 1e-6)) == {"local", "hash", "spread", "split",
                                                       "routed"}
        stats.split_slots()


@pytest.mark.parametrize("row_seconds, workers, cores, plan", [
    (0.15e-6, 16, 2, "local"),    # the grid's cheap reduce
    (17e-6, 16, 2, "spread"),     # its expensive one
    (4e-6, 16, 2, "local"),       # 0.4 s saved for 8 waves of 16 tasks on 2 cores
    (4e-6, 2, 2, "spread"),       # the same with workers = cores: one wave
    (17e-6, 16, 1, "local"),      # one core: spreading saves nothing
    (None, 16, 2, "spread"),      # not timed: taken as dear
])
def test_a_stream_without_a_sample_spreads_only_a_partial_the_cores_can_share(
        row_seconds, workers, cores, plan):
    """Without sample= the micro-batch is taken as STREAM_ROWS rows in one input partition:
    spread when what the cores save on the partial passes the stage's cost a wave."""
    chosen, reason = _estimate.stream_default(row_seconds, workers, cores)
    assert chosen == plan
    assert "without sample=" in reason
    if row_seconds is not None:
        saved = row_seconds * _estimate.STREAM_ROWS * (1 - 1 / min(workers, cores))
        waves = -(-workers // cores)
        assert (saved > _estimate.STAGE_SECONDS * waves) == (plan == "spread")
        assert f"{_estimate.STREAM_ROWS:,} rows" in reason
