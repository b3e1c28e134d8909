"""Stream generators."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewgroup import streams


def zipf_law(z, universe):
    w = np.arange(1, universe + 1, dtype=np.float64) ** -z
    return w / w.sum()


def test_zipf_is_seeded_int64_in_range():
    a = streams.zipf(1.2, 10_000, universe=500, seed=4)
    assert a.dtype == np.int64 and a.min() >= 0 and a.max() < 500
    assert np.array_equal(a, streams.zipf(1.2, 10_000, universe=500, seed=4))
    assert not np.array_equal(a, streams.zipf(1.2, 10_000, universe=500, seed=5))


@pytest.mark.parametrize("z", [0.5, 1.0, 1.3, 2.0])
def test_zipf_frequencies_follow_the_exact_law(z):
    m, universe = 400_000, 1000
    counts = np.bincount(streams.zipf(z, m, universe=universe, seed=1), minlength=universe)
    p = zipf_law(z, universe)
    sd = np.sqrt(m * p * (1 - p))
    # Every rank within 5 standard deviations, and the head exactly ordered by the law.
    assert np.all(np.abs(counts - m * p) < 5 * sd + 1)


@pytest.mark.parametrize("z", [1.0, 1.6, 2.0])
def test_zipf_distinct_keys_and_p1_match_the_law_at_a_million(z):
    m, universe = 1_000_000, 10**7
    keys = streams.zipf(z, m, universe=universe, seed=2)
    p = zipf_law(z, universe)
    seen = -np.expm1(-m * p)                    # P(key seen) under Poisson counts
    sd = np.sqrt((seen * (1 - seen)).sum())
    assert abs(np.unique(keys).size - seen.sum()) < 4 * sd
    assert np.mean(keys == 0) == pytest.approx(p[0], abs=4 * np.sqrt(p[0] / m))


def test_zipf_reproduces_pd_stream_table_iv_at_z_1_4():
    # Table IV: z = 1.4, 10 M messages over 10^7 keys -> 127 K distinct keys, p1 = 32.2 %.
    keys = streams.zipf(1.4, 10_000_000, seed=0)
    counts = np.bincount(keys)
    assert np.count_nonzero(counts) == pytest.approx(127_000, rel=0.02)
    assert counts[0] / keys.size == pytest.approx(0.322, rel=0.02)


def test_zipf_edge_cases_and_errors():
    assert np.all(streams.zipf(1.5, 100, universe=1) == 0)
    uniform = streams.zipf(0.0, 100_000, universe=10, seed=1)
    assert np.bincount(uniform).min() > 9_000
    assert streams.zipf(1.0, 0).size == 0
    with pytest.raises(ValueError, match="'z'"):
        streams.zipf(-1, 10)
    with pytest.raises(ValueError, match="'universe'"):
        streams.zipf(1.0, 10, universe=0)
    with pytest.raises(TypeError, match="'messages'"):
        streams.zipf(1.0, 10.5)


def test_drifting_zipf_replaces_the_hot_keys_at_each_change():
    keys = streams.drifting_zipf(2.0, 30_000, changes=[10_000, 20_000], universe=1000, seed=1)
    hottest = [np.bincount(keys[i:i + 10_000]).argmax() for i in (0, 10_000, 20_000)]
    assert hottest[0] == 0 and len(set(hottest)) == 3
    # Each phase still follows the law: its hottest key has ~p1 of its tuples.
    p1 = zipf_law(2.0, 1000)[0]
    for start, key in zip((0, 10_000, 20_000), hottest):
        assert np.mean(keys[start:start + 10_000] == key) == pytest.approx(p1, abs=0.02)


def test_drifting_zipf_ramp_blends_the_new_ranking_in_gradually():
    m, change, ramp = 40_000, 10_000, 20_000
    keys = streams.drifting_zipf(2.0, m, changes=[change], ramp=ramp, universe=1000, seed=3)
    new_hot = np.bincount(keys[change + ramp:]).argmax()
    assert new_hot != 0
    share_old = [np.mean(keys[a:a + 5000] == 0) for a in (change, change + 15_000)]
    share_new = [np.mean(keys[a:a + 5000] == new_hot) for a in (change, change + 15_000)]
    assert share_old[0] > share_old[1] and share_new[0] < share_new[1]
    with pytest.raises(ValueError, match="'changes'"):
        streams.drifting_zipf(1.0, 10, changes=[-1])


def test_skewed_gives_the_hot_key_its_share():
    s = streams.skewed(0.3, 100_000, keys=204, seed=2)
    assert s.max() < 204
    # key 0: its share plus its part of the uniform rest.
    assert np.mean(s == 0) == pytest.approx(0.3 + 0.7 / 204, abs=0.01)
    assert np.all(streams.skewed(1.0, 100) == 0)
    with pytest.raises(ValueError, match="'ratio'"):
        streams.skewed(1.5, 10)


def test_from_file_reads_a_column_in_order(tmp_path):
    table = pa.table({"user": ["b", "a", "b", None], "n": [1, 2, 3, 4]})
    pq.write_table(table, tmp_path / "t.parquet")
    (tmp_path / "t.csv").write_text("user,n\nb,1\na,2\nb,3\n")
    assert streams.from_file(tmp_path / "t.parquet", "user").to_pylist() == ["b", "a", "b", None]
    assert streams.from_file(tmp_path / "t.csv", "n").to_pylist() == [1, 2, 3]
    assert streams.from_file(tmp_path / "t.parquet", "n", limit=2).to_pylist() == [1, 2]
    with pytest.raises(ValueError, match=r"'column'.*\['user', 'n'\].*'nope'"):
        streams.from_file(tmp_path / "t.parquet", "nope")
    with pytest.raises(ValueError, match=r"'path'.*\.parquet.*'x\.json'"):
        streams.from_file("x.json", "user")
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        streams.from_file(tmp_path / "missing.csv", "user")


def test_split_sources_round_robin_or_by_column():
    assert streams.split_sources(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    by = np.array(["x", "y", "x", "z", "y"])
    ids = streams.split_sources(5, 2, by=by)
    assert ids[0] == ids[2] and ids[1] == ids[4] and set(ids.tolist()) <= {0, 1}
    assert streams.split_sources(3, 2, by=pa.array([5, 6, 5])).tolist() == [0, 1, 0]
    with pytest.raises(ValueError, match="one value per tuple"):
        streams.split_sources(4, 2, by=[1, 2])
