"""The streaming job's options, checked before Spark starts, and its generated workload
(skewgroup.app.options, skewgroup.app.workload): no pyspark needed, except where a test says."""
import json
import subprocess
import sys

import numpy as np
import pytest

from skewgroup.app import baselines
from skewgroup.app.options import JOB_FILE, JobError, check_columns, parse_job_args, routing_config
from skewgroup.app.workload import (FEATURES, FIRST_SESSION_KEY, draw_features, draw_keys,
                                    draw_sessions, key_coefficients, score_row)


# --- options: errors before Spark starts ---------------------------------------------------


def parse_error(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        parse_job_args(list(argv))
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_missing_input_directory(capsys, tmp_path):
    err = parse_error(capsys, "--source", "files", "--input", str(tmp_path / "nope"))
    assert "--input must be an existing directory" in err and "does not exist" in err


def test_unknown_strategy(capsys):
    err = parse_error(capsys, "--strategy", "hotpotato")
    assert "--strategy" in err and "hotpotato" in err and "pdstream" in err


def test_bad_strategy_parameter(capsys):
    err = parse_error(capsys, "--strategy", "pdstream", "--param", "window=0")
    assert "--param" in err and "window" in err


def test_checkpoint_that_cannot_be_written(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    err = parse_error(capsys, "--checkpoint", str(blocker / "ck"))
    assert "--checkpoint must be a writable directory" in err


def test_parquet_sink_needs_output(capsys):
    err = parse_error(capsys, "--sink", "parquet")
    assert "--sink parquet needs --output" in err


def test_rate_source_cannot_run_available_now(capsys):
    err = parse_error(capsys, "--source", "rate", "--trigger", "availableNow")
    assert "rate source" in err


def test_bad_aggregate_and_trigger(capsys):
    assert "sum:COLUMN" in parse_error(capsys, "--agg", "sum")
    assert "availableNow" in parse_error(capsys, "--trigger", "soon")


def test_columns_of_fixed_schema_sources_are_checked_before_spark(capsys):
    err = parse_error(capsys, "--key", "user")
    assert "argument --key: 'user' is not a column of --source sessions; its columns are ts, " \
           "id, key, amount" in err
    err = parse_error(capsys, "--source", "zipf", "--agg", "count", "--agg", "sum:amt")
    assert "argument --agg sum:amt: 'amt' is not a column of --source zipf" in err
    err = parse_error(capsys, "--source", "rate", "--key", "key")
    assert "'key' is not a column of --source rate; its columns are timestamp, value" in err


def test_a_defaulted_column_is_named_as_the_default(tmp_path):
    (tmp_path / "part-0.parquet").write_bytes(b"")     # only its name is looked at here
    args = parse_job_args(["--source", "files", "--input", str(tmp_path)])
    with pytest.raises(JobError, match=r"^argument --key \(the default\): 'key' is not a "
                                           r"column of the parquet files in --input .*; its "
                                           r"columns are user, amount$"):
        check_columns(args, {"user": "string", "amount": "double"})


def test_input_directory_without_data_files(capsys, tmp_path):
    # What Spark skips does not count: _SUCCESS, hidden files, at any depth.
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".part-0.parquet.crc").write_text("")
    err = parse_error(capsys, "--source", "files", "--input", str(tmp_path))
    assert f"--input {tmp_path} has no files to infer a schema from" in err
    assert "parquet file" in err


def test_defaults_are_the_embedded_job():
    args = parse_job_args([])
    assert (args.source, args.key, args.agg, args.strategy, args.sink, args.batches) == (
        "sessions", ["key"], [("sample", "amount,id")], "adaptive", "memory", 20)
    assert (args.rows_per_batch, args.hot_keys, args.hot_share, args.new_keys) == (
        100_000, 4, 0.3, 75_000)
    # Every generated source samples by default; zipf and drift run their 10 micro-batches.
    zipf = parse_job_args(["--source", "zipf"])
    assert (zipf.agg, zipf.batches) == ([("sample", "amount,id")], 10)
    assert parse_job_args(["--source", "rate"]).agg == [("count", None)]


def test_sample_needs_a_value_and_an_integer_row_id(capsys, tmp_path):
    """Each error names the option, what is allowed and what was given, before Spark starts."""
    err = parse_error(capsys, "--agg", "sample:amount")
    assert "argument --agg: expected sample:VALUE,ID (2 columns), got 'sample:amount' " \
           "(1 column)" in err
    err = parse_error(capsys, "--agg", "sample:amount,id,key")
    assert "expected sample:VALUE,ID (2 columns), got 'sample:amount,id,key' (3 columns)" in err
    assert "expected sample:VALUE,ID, got 'sample'" in parse_error(capsys, "--agg", "sample")
    err = parse_error(capsys, "--agg", "sample:amount,ts")
    assert ("argument --agg sample:amount,ts: the row id 'ts' must be an integer column "
            "(tinyint, smallint, int, bigint); it is timestamp. The integer columns of "
            "--source sessions: id, key") in err
    err = parse_error(capsys, "--source", "rate", "--agg", "sample:value,timestamp")
    assert "the row id 'timestamp' must be an integer column" in err and ": value" in err
    # The default is named as such; a file source's types are checked once Spark read them.
    (tmp_path / "part-0.parquet").write_bytes(b"")
    args = parse_job_args(["--source", "files", "--input", str(tmp_path), "--key", "user",
                           "--agg", "sample:amount,user"])
    with pytest.raises(JobError, match=r"^argument --agg sample:amount,user: the row id 'user' "
                                       r"must be an integer column .* it is string\. The "
                                       r"integer columns of the parquet files in --input .*: "
                                       r"none$"):
        check_columns(args, {"user": "string", "amount": "double"})
    args = parse_job_args(["--source", "zipf"])
    args.defaulted.add("--agg")
    with pytest.raises(JobError, match=r"sample:amount,id \(the default\): the row id 'id'"):
        check_columns(args, {"key": "bigint", "amount": "double", "id": "double"})
    assert "expected lsq:Y,X1[,X2...] (2 or more columns)" in parse_error(capsys, "--agg",
                                                                          "lsq:y")
    assert "expected sum:COLUMN (one column)" in parse_error(capsys, "--agg", "sum:amount,y")
    assert "expected a share in [0, 1], got '1.5'" in parse_error(capsys, "--hot-share", "1.5")


def test_python_aggregators_mix_with_builtins_and_their_columns_are_checked(capsys):
    args = parse_job_args(["--agg", "quantiles:amount", "--agg", "count", "--agg", "sum:amount"])
    assert args.agg == [("quantiles", "amount"), ("count", None), ("sum", "amount")]
    err = parse_error(capsys, "--agg", "lsq:amount,nope")
    assert "argument --agg lsq:amount,nope: 'nope' is not a column" in err
    args = parse_job_args(["--agg", "lsq:amount,key", "--agg", "topk:key"])
    assert args.agg == [("lsq", "amount,key"), ("topk", "key")]


def test_generated_keys_are_counter_based_and_zipf():
    rows = np.arange(200_000)
    keys, amounts = draw_keys(rows, 1.4, 10_000, seed=3)
    again, _ = draw_keys(rows[50_000:60_000], 1.4, 10_000, seed=3)
    assert (again == keys[50_000:60_000]).all()          # a replayed batch draws the same keys
    p1 = (1.0 / np.arange(1, 10_001) ** 1.4)
    p1 = p1[0] / p1.sum()
    assert abs((keys == 0).mean() - p1) < 0.005 and keys.min() >= 0 and keys.max() < 10_000
    assert amounts.min() >= 0 and amounts.max() < 100
    drifted, _ = draw_keys(rows, 1.4, 10_000, seed=3, drift_every=100_000)
    assert (drifted[:100_000] == keys[:100_000]).all()
    hot_after = np.bincount(drifted[100_000:]).argmax()
    assert hot_after != 0 and (drifted[100_000:] == hot_after).mean() == pytest.approx(p1, abs=0.01)


def test_sessions_are_counter_based_hot_keys_beside_keys_that_keep_arriving():
    rows = np.arange(1_000_000)
    keys, amounts = draw_sessions(rows, 4, 0.3, 30_000, 100_000, seed=2)
    again, again_amounts = draw_sessions(rows[300_000:400_000], 4, 0.3, 30_000, 100_000, seed=2)
    assert (again == keys[300_000:400_000]).all()        # a replayed batch draws the same keys
    assert (again_amounts == amounts[300_000:400_000]).all()
    hot = keys < 4
    assert hot.mean() == pytest.approx(0.3, abs=0.005)
    # Hot key i draws a share of the hot rows proportional to 1 / (i + 1).
    weights = 1 / np.arange(1, 5)
    np.testing.assert_allclose(np.bincount(keys[hot]) / hot.sum(), weights / weights.sum(),
                               atol=0.005)
    sessions = keys[~hot] - FIRST_SESSION_KEY
    assert sessions.min() >= 0
    # 30k sessions start per 100k rows: (10 + 1) x 30k over the run, each in one window of
    # 100k rows, so a batch of 100k rows meets sessions of its own and the previous batch's.
    assert sessions.max() < 11 * 30_000 and len(np.unique(sessions)) > 0.8 * 11 * 30_000
    batch = rows[~hot] // 100_000
    first = {}
    for session, b in zip(sessions.tolist(), batch.tolist()):
        first.setdefault(session, b)
        assert b - first[session] <= 1
    new_per_batch = np.bincount([b for b in first.values()])
    assert (np.abs(new_per_batch[1:] - 30_000) < 3_000).all(), new_per_batch
    assert amounts.min() >= 0 and amounts.max() < 100


def test_generated_features_are_counter_based_and_fit_each_keys_model():
    rows = np.arange(100_000)
    keys, _ = draw_keys(rows, 1.4, 1_000, seed=5)
    x, y = draw_features(rows, keys, seed=5)
    again_x, again_y = draw_features(rows[40_000:50_000], keys[40_000:50_000], seed=5)
    assert (again_x == x[40_000:50_000]).all() and (again_y == y[40_000:50_000]).all()
    assert x.shape == (100_000, FEATURES) and x.min() >= 0 and x.max() < 10
    # Each key has its own model; its rows' least-squares fit recovers it (noise is +-0.5).
    truth = key_coefficients(np.arange(3), seed=5)
    assert len({tuple(t) for t in truth}) == 3
    for key in range(3):
        mine = keys == key
        design = np.column_stack([np.ones(mine.sum()), x[mine]])
        fitted = np.linalg.lstsq(design, y[mine], rcond=None)[0]
        np.testing.assert_allclose(fitted, truth[key], atol=0.05)


def measurement(seconds, state_bytes=None, critical=None, unavailable=None, tasks=None):
    from skewgroup.app.figures import Measurement

    return Measurement(seconds=seconds, state_bytes=state_bytes or [1] * len(seconds),
                       critical_path_s=critical, task_s=tasks, unavailable=unavailable)


def test_a_ways_figures_are_medians_of_all_and_of_the_last_five():
    from skewgroup.app.figures import way_figures

    # Seven micro-batches: the first two slow (a cold start), the last five 1.0-1.4 s.
    m = measurement([9.0, 8.0, 1.4, 1.0, 1.2, 1.3, 1.1], state_bytes=[10, 20, 30, 40, 50, 60, 70],
                    critical=[5.0, None, 0.5, 0.4, 0.6, 0.3, 0.2],
                    tasks=[9.0, None, 1.5, 0.9, 1.1, 1.2, 1.0])
    assert way_figures("partial", m) == {
        "way": "partial", "micro_batches": 7, "micro_batch_s": 1.3, "late_micro_batch_s": 1.2,
        # A micro-batch the UI no longer holds is left out of the critical path's medians.
        "critical_path_s": 0.45, "late_critical_path_s": 0.4,
        "task_s": 1.15, "late_task_s": 1.1, "state_bytes": 70}
    # Fewer than five: the late medians are over all of them; an even count's is the mean of
    # the middle two; no UI: no critical path.
    short = way_figures("spark", measurement([0.2, 0.4, 0.3, 0.1], state_bytes=[5, None, 7, None]))
    assert (short["micro_batch_s"], short["late_micro_batch_s"]) == (0.25, 0.25)
    assert short["critical_path_s"] is None and short["late_critical_path_s"] is None
    assert short["task_s"] is None and short["late_task_s"] is None
    assert short["state_bytes"] == 7     # the last measured


def test_the_best_way_on_a_figure_counts_ties_as_shown():
    from skewgroup.app.figures import best

    rows = [{"way": "skew_group", "s": 1.004}, {"way": "bucketed", "s": 0.996},
            {"way": "partial", "s": 2.0}, {"way": "spark", "s": None}]
    # 1.004 and 0.996 both show as 1.00 s: a tie, its value the least of the two.
    assert best(rows, "s", 2) == (["skew_group", "bucketed"], 0.996)
    assert best(rows, "s", 3) == (["bucketed"], 0.996)
    assert best([{"way": "spark", "s": None}], "s", 2) is None


def test_each_figure_names_its_best_way_and_how_far_skew_group_is():
    from skewgroup.app.figures import verdict

    rows = [{"way": "skew_group", "x": 3.0, "b": 1_000_000}, {"way": "spark", "x": 1.5,
                                                               "b": 4_000_000},
            {"way": "partial", "x": 6.0, "b": 1_000_000}]
    assert verdict(rows, "x", "micro-batch, median", "s", 2) == (
        "micro-batch, median: best spark, 1.50 s; not skew_group: skew_group 3.00 s, 2.0x as long")
    assert verdict(rows, "b", "state", "bytes", 0) == (
        "state: best skew_group and partial (tied), 1.00 MB; the next, spark, 4.00 MB, "
        "4.0x as much")
    # Near 1, two decimals: one would show 1.1x for a 7 % gap.
    rows[0]["x"] = 1.4
    assert verdict(rows, "x", "m", "s", 2) == "m: best skew_group, 1.40 s; the next, spark, " \
                                              "1.50 s, 1.07x as long"
    rows[0]["x"] = None
    assert verdict(rows, "x", "m", "s", 2) == "m: best spark, 1.50 s; skew_group: unavailable"
    assert verdict([dict(r, x=None) for r in rows], "x", "m", "s", 2) == "m: unavailable"


def test_the_comparison_names_every_way_and_the_best_on_each_figure():
    from skewgroup.app.display import measured_comparison

    args = parse_job_args(["--agg", "lsq:y,x1,x2,x3"])
    assert baselines.ways(args) == ["skew_group", "bucketed", "partial", "foreachBatch",
                                    "spark"]
    critical = [0.5] * 3
    measured = {"skew_group": measurement([2.0, 1.0, 1.2], [100, 200, 300], critical,
                                          tasks=[1.1, 0.9, 1.0]),
                "bucketed": measurement([0.9, 0.8, 3.0], [100, 200, 900], critical,
                                        tasks=[2.0] * 3),
                "partial": measurement([1.5, 1.5, 1.5], [100, 200, 800], critical,
                                       tasks=[3.0] * 3),
                "foreachBatch": measurement([2.0, 2.0, 2.1], [100, 200, 700], critical,
                                            tasks=[4.0] * 3),
                "spark": measurement([0.5, 0.4, 0.6], [100, 200, 400], [0.2, 0.3, 0.1],
                                     tasks=[1.6, 1.5, 1.4])}
    measured["foreachBatch"].table_versions, measured["foreachBatch"].latest_table_bytes = 3, 250
    lines = measured_comparison(measured, args, 3)
    assert "the same 3 micro-batches" in lines[0]
    table = {line.split()[0]: line.split()[1:] for line in lines[3:8]}
    assert table == {"skew_group": ["1.20", "0.50", "1.00", "300", "bytes"],
                     "bucketed": ["0.90", "0.50", "2.00", "900", "bytes"],
                     "partial": ["1.50", "0.50", "3.00", "800", "bytes"],
                     "foreachBatch": ["2.00", "0.50", "4.00", "700", "bytes", "(its", "table's",
                                      "3", "versions,", "all", "kept;", "the", "latest", "alone",
                                      "250", "bytes)"],
                     "spark": ["0.50", "0.20", "1.50", "400", "bytes"]}
    assert any("X^T X" in line for line in lines)
    # Three micro-batches: no "last 5" column, no late verdicts.
    assert lines[2].split() == ["way", "median", "median", "median", "after", "the", "last",
                                "micro-batch"]
    assert not any("last 5" in line for line in lines)
    assert lines[-4:] == [
        "micro-batch, median: best spark, 0.50 s; not skew_group: skew_group 1.20 s, 2.4x as long",
        "critical path, median: best spark, 0.20 s; not skew_group: skew_group 0.50 s, 2.5x as "
        "long",
        "total task time, median: best skew_group, 1.00 s; the next, spark, 1.50 s, 1.5x as "
        "long",
        "state held after the last micro-batch: best skew_group, 300 bytes; the next, spark, "
        "400 bytes, 1.3x as much"]
    # Spark's way does each Python-merged aggregate with its own function, named in the label.
    topk = parse_job_args(["--agg", "lsq:y,x1", "--agg", "topk:key", "--agg", "distinct:key"])
    assert baselines.ways(topk)[-1] == "spark"
    label = baselines.label("spark", topk)
    assert "X^T X" in label and "approx_top_k" in label and "size(collect_set)" in label
    assert "kll_sketch_agg_double" in baselines.label(
        "spark", parse_job_args(["--agg", "quantiles:amount"]))
    # The default sample: Spark's way keeps every row.
    default = parse_job_args([])
    assert baselines.ways(default)[-1] == "spark"
    assert baselines.label("spark", default).endswith(
        "collect_list of every row, sorted and sliced after")


def test_the_comparison_shows_the_last_five_and_an_unreadable_ui():
    from skewgroup.app.display import measured_comparison

    unreadable = "Spark's UI is off (spark.ui.enabled=false)"
    measured = {"skew_group": measurement([3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                                          unavailable=unreadable),
                "spark": measurement([1.0, 2.0, 2.0, 2.0, 2.0, 2.0], unavailable=unreadable)}
    lines = measured_comparison(measured, parse_job_args([]), 7)
    assert lines[2].split()[:5] == ["way", "median", "last", "5", "median"]
    assert lines[3].split() == ["skew_group", "1.00", "1.00", "-", "-", "-", "-", "1", "bytes"]
    assert lines[4].split() == ["spark", "2.00", "2.00", "-", "-", "-", "-", "1", "bytes",
                                "(over", "6)"]
    assert f"critical path and total task time unavailable: {unreadable}" in lines
    assert "critical path, median: unavailable" in lines
    assert "total task time, median of the last 5: unavailable" in lines
    assert "micro-batch, median of the last 5: best skew_group, 1.00 s; the next, spark, " \
           "2.00 s, 2.0x as long" in lines


def test_metrics_lines_are_json_objects_a_way_with_its_figures():
    from skewgroup.app.figures import metrics_lines, way_figures

    lines = metrics_lines([way_figures("skew_group", measurement([1.0, 2.0], [3, 4]))])
    assert len(lines) == 1 and lines[0].endswith("\n")
    assert json.loads(lines[0]) == {"way": "skew_group", "micro_batches": 2, "micro_batch_s": 1.5,
                                    "late_micro_batch_s": 1.5, "critical_path_s": None,
                                    "late_critical_path_s": None, "task_s": None,
                                    "late_task_s": None, "state_bytes": 4}


def test_an_unreachable_spark_ui_is_unavailable_not_a_crash():
    import socket
    from types import SimpleNamespace

    from skewgroup.app import rest

    # A port just freed on this machine: nothing listens there, the connection is refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spark = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=f"http://127.0.0.1:{port}",
                                                         applicationId="local-1"))
    with pytest.raises(rest.Unavailable, match=rf"^Spark's UI at http://127.0.0.1:{port} could "
                                               r"not be read \(.*refused.*\)$"):
        rest.stage_times(spark, "run", [0])
    spark.sparkContext.uiWebUrl = None
    with pytest.raises(rest.Unavailable, match=r"spark.ui.enabled=false"):
        rest.stage_times(spark, "run", [0])


def test_jobs_are_read_as_their_stream_run_and_micro_batch():
    from skewgroup.app.rest import _batch_jobs

    jobs = [{"jobGroup": "r1", "description": "null\nid = q\nrunId = r1\nbatch = 3", "id": 1},
            {"jobGroup": "r1", "description": "null\nid = q\nrunId = r1\nbatch = 3", "id": 2},
            {"jobGroup": "r2", "description": "null\nid = q\nrunId = r2\nbatch = 4", "id": 3},
            {"jobGroup": "r1", "description": "collect at x.py:1", "id": 4},
            {"jobGroup": None, "description": None, "id": 5}]
    assert {b: [j["id"] for j in js] for b, js in _batch_jobs(jobs, "r1").items()} == {3: [1, 2]}


def test_plot_option_errors_before_spark(capsys, tmp_path, monkeypatch):
    from importlib import metadata

    from skewgroup.app import options

    assert "--plot must name a .png file; got 'p.svg'" in parse_error(capsys, "--plot", "p.svg")
    err = parse_error(capsys, "--plot", str(tmp_path / "p.png"), "--agg", "count")
    assert "--plot draws the ways compared after the run" in err and "got --agg count" in err
    err = parse_error(capsys, "--source", "rate", "--agg", "distinct:value", "--plot",
                      str(tmp_path / "p.png"))
    assert "--plot draws the ways" in err and "and no --batches" in err
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    err = parse_error(capsys, "--plot", str(blocker / "p.png"))
    assert "--plot (its directory) must be a writable directory" in err
    args = parse_job_args(["--plot", str(tmp_path / "sub" / "p.png")])
    assert args.plot == str(tmp_path / "sub" / "p.png")

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    err = parse_error(capsys, "--plot", str(tmp_path / "p.png"))
    assert ('--plot needs matplotlib >= 3.8, which is not installed: pip install '
            '"skewgroup[cli]"') in err
    monkeypatch.setattr(metadata, "version", lambda name: "3.4.3")
    assert "--plot needs matplotlib >= 3.8, and 3.4.3 is installed" in parse_error(
        capsys, "--plot", str(tmp_path / "p.png"))
    assert options._matplotlib_problem() == "and 3.4.3 is installed"


def test_the_plot_is_a_png_of_every_way(tmp_path):
    pytest.importorskip("matplotlib")
    from skewgroup.app.plot import draw

    measured = {"skew_group": measurement([1.0, 0.5, 0.6], [10, None, 30]),
                "spark": measurement([0.4, 0.3], [5, 6])}
    draw(tmp_path / "p.png", measured, 3)
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_job_module_imports_neither_the_cli_nor_rich_and_agg_lists_aggregates():
    pytest.importorskip("pyspark")
    code = ("import sys, skewgroup.app.main; from skewgroup.spark import agg; "
            "print(sorted(m for m in ('rich', 'matplotlib', 'skewgroup.app.cli') if m in sys.modules)); "
            "print(dir(agg) == sorted(agg.__all__), 'Callable' in dir(agg))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/").stdout.split("\n")
    assert out[:2] == ["[]", "True False"]


def test_score_row_is_an_exact_integer_per_row():
    values = [score_row(a) for a in (0.0, 12.34, 99.99, None)]
    assert all(isinstance(v, int) and 0 <= v < 1024 for v in values) and values[-1] == 0
    assert values == [score_row(a) for a in (0.0, 12.34, 99.99, None)]


def test_restart_with_other_keys_or_aggregates_is_refused(capsys, tmp_path):
    """Spark's state in the checkpoint holds the groups and aggregates: refused before Spark
    starts, naming the option."""
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    saved = routing_config(parse_job_args(["--key", "amount", "--agg", "count"]))
    (checkpoint / JOB_FILE).write_text(json.dumps(saved))
    err = parse_error(capsys, "--checkpoint", str(checkpoint), "--agg", "count")
    assert "other --key (--key ['amount'] -> ['key'])" in err and "new --checkpoint" in err
    err = parse_error(capsys, "--checkpoint", str(checkpoint), "--key", "amount",
                      "--agg", "count", "--agg", "max:amount")
    assert "other --agg" in err and "--agg [['count', None]] ->" in err
    # Routing options may change: no error.
    parse_job_args(["--checkpoint", str(checkpoint), "--key", "amount", "--agg", "count",
                    "--workers", "3", "--strategy", "fish", "--seed", "7"])


def test_the_job_runs_the_default_plan_unless_a_plan_or_a_strategy_is_named(capsys):
    """What a user who writes no plan= gets (auto), unless --plan names one; a strategy or its
    parameters route rows, so they ask for the routed plan and go with no other."""
    assert parse_job_args([]).plan == "auto"
    assert parse_job_args(["--plan", "spread"]).plan == "spread"
    routed = parse_job_args(["--strategy", "pdstream"])
    assert (routed.plan, routed.strategy) == ("routed", "pdstream")
    assert parse_job_args(["--param", "window=64", "--strategy", "pdstream"]).plan == "routed"
    assert parse_job_args(["--plan", "routed"]).strategy == "adaptive"
    err = parse_error(capsys, "--plan", "local", "--strategy", "pdstream")
    assert "--strategy and --param route rows" in err and "--plan local" in err
    err = parse_error(capsys, "--plan", "split")
    assert "--plan" in err and "split" in err
