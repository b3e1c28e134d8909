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


def test_the_comparison_names_every_way_and_the_fastest_as_measured():
    from skewgroup.app.display import measured_comparison

    args = parse_job_args(["--agg", "lsq:y,x1,x2,x3"])
    assert baselines.ways(args) == ["skew_group", "bucketed", "partial", "foreachBatch",
                                    "spark"]
    measured = {"skew_group": [2.0, 1.0, 1.2], "bucketed": [0.9, 0.8, 3.0],
                "partial": [1.5, 1.5, 1.5], "foreachBatch": [2.0, 2.0, 2.1],
                "spark": [0.5, 0.4, 0.6]}
    lines = measured_comparison(measured, args, 3)
    assert "the same 3 micro-batches" in lines[0]
    medians = {line.split()[0]: line.split()[1] for line in lines[1:-1]}
    assert medians == {"skew_group": "1.20", "bucketed": "0.90", "partial": "1.50",
                       "foreachBatch": "2.00", "spark": "0.50"}
    assert "X^T X" in lines[-2]
    assert lines[-1] == ("fastest: spark (0.50 s), not skew_group: skew_group took 2.4x as "
                         "long here")
    measured["skew_group"] = [0.3, 0.3, 0.3]
    assert measured_comparison(measured, args, 3)[-1] == (
        "fastest: skew_group (0.30 s); the next, spark, took 1.7x as long")
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
