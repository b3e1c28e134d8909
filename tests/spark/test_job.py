"""The streaming job (skewgroup.app): a file-sourced run against pandas, the ways its summary
compares held equal to skew_group, and a driver killed with SIGKILL mid-stream then restarted
on its checkpoint (exactly once, routers continued), a restart with other --workers (exactly
once) and with other keys (refused).

Job runs are subprocesses (`python -m skewgroup run ...`), as a user starts them: the job owns
its SparkSession, and a killed driver must not take the test process with it.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewgroup.app import baselines, query, workload
from skewgroup.aggregators import RowSample
from skewgroup.app.options import parse_job_args
from skewgroup.streams import zipf

FILES = 6
ROWS_PER_FILE = 20_000


def job_command(*options):
    return [sys.executable, "-m", "skewgroup", "run", *options]


def run_job(*options, cwd, timeout=240):
    result = subprocess.run(job_command(*options), cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env=_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _env():
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    return env


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    """FILES parquet files of Zipf keys (z = 1.4) and amounts, written one by one."""
    directory = tmp_path_factory.mktemp("events")
    keys = zipf(1.4, FILES * ROWS_PER_FILE, universe=10_000, seed=11)
    amounts = np.random.default_rng(11).integers(0, 1000, size=keys.size).astype(np.float64)
    for i in range(FILES):
        part = slice(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE)
        pq.write_table(pa.table({"key": keys[part], "amount": amounts[part]}),
                       directory / f"part-{i:03d}.parquet")
        # The file source takes files in modification-time order: make it the name order.
        os.utime(directory / f"part-{i:03d}.parquet", (1_700_000_000 + i, 1_700_000_000 + i))
    scores = np.array([workload.score_row(a) for a in amounts.tolist()], dtype=np.int64)
    expected = (pd.DataFrame({"key": keys, "amount": amounts, "score": scores}).groupby("key")
                .agg(count=("amount", "size"), sum_amount=("amount", "sum"),
                     score_amount=("score", "sum")).reset_index())
    return directory, expected


def file_options(events_dir, out, checkpoint, metrics, workers=4):
    return ["--source", "files", "--input", str(events_dir), "--format", "parquet",
            "--max-files-per-trigger", "1", "--key", "key", "--agg", "count",
            "--agg", "sum:amount", "--agg", "score:amount", "--strategy", "pdstream",
            "--workers", str(workers),
            "--trigger", "availableNow", "--sink", "parquet", "--output", str(out),
            "--checkpoint", str(checkpoint), "--metrics", str(metrics), "--quiet"]


def read_metrics(path):
    """Per batch id, the last reported figures (a replayed batch reports again); the compared
    ways' lines, told apart by their ``way`` key, are left out."""
    by_batch = {}
    for line in path.read_text().splitlines():
        figures = json.loads(line)
        if "way" not in figures:
            by_batch[figures["batch"]] = figures
    return by_batch


def assert_equals_groupby(result, expected):
    assert list(result["key"]) == list(expected["key"])
    assert (result["count"].to_numpy() == expected["count"].to_numpy()).all()
    np.testing.assert_allclose(result["sum_amount"], expected["sum_amount"], rtol=1e-12)
    # The job's Python aggregate: integer sums, bit for bit.
    assert (result["score_amount"].to_numpy() == expected["score_amount"].to_numpy()).all()


def kill_after_two_commits(options, commits, cwd):
    """Start the job and SIGKILL its driver once two micro-batches are committed."""
    # Its own process group: SIGKILL takes the driver's JVM and Python workers down with it,
    # as a crashed driver machine would.
    driver = subprocess.Popen(job_command(*options), cwd=cwd, env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and driver.poll() is None:
            if commits.is_dir() and len([p for p in commits.iterdir() if p.name.isdigit()]) >= 2:
                break
            time.sleep(0.05)
        assert driver.poll() is None, "the job ended before it could be killed mid-stream"
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def uninterrupted(events, tmp_path_factory):
    events_dir, _ = events
    base = tmp_path_factory.mktemp("uninterrupted")
    run_job(*file_options(events_dir, base / "out", base / "ck", base / "metrics.jsonl"),
            cwd=base)
    return base


# --- runs -------------------------------------------------------------------------------------


def test_file_stream_equals_groupby(uninterrupted, events):
    _, expected = events
    assert_equals_groupby(query.final_result(uninterrupted / "out"), expected)
    metrics = read_metrics(uninterrupted / "metrics.jsonl")
    assert sorted(metrics) == list(range(FILES))
    assert all(f["rows"] == ROWS_PER_FILE for f in metrics.values())
    # pdstream spreads the hot key (p1 ≈ 32 %, > 1/4 of the rows on one worker under KG).
    assert max(f["load_imbalance"] for f in metrics.values()) < 0.02


def test_sigkill_mid_stream_then_restart_is_exactly_once(uninterrupted, events, tmp_path):
    events_dir, expected = events
    options = file_options(events_dir, tmp_path / "out", tmp_path / "ck",
                           tmp_path / "metrics.jsonl")
    commits = tmp_path / "ck" / "commits"
    kill_after_two_commits(options, commits, tmp_path)
    done_before = len([p for p in commits.iterdir() if p.name.isdigit()])
    assert 2 <= done_before <= FILES - 2

    run_job(*options, cwd=tmp_path)

    # Nothing lost, nothing counted twice: the same final aggregates as the uninterrupted run
    # and as pandas over the input.
    result = query.final_result(tmp_path / "out")
    assert_equals_groupby(result, expected)
    pd.testing.assert_frame_equal(result, query.final_result(uninterrupted / "out"))
    # The routers continued: every micro-batch, before and after the kill, put exactly as many
    # rows on each worker as the uninterrupted run (a router reset at the restart would not).
    # A batch committed in the instant before the kill may have no line in the metrics file;
    # every batch the restarted job ran has one.
    whole = read_metrics(uninterrupted / "metrics.jsonl")
    restarted = read_metrics(tmp_path / "metrics.jsonl")
    # Spark may replan the batch the kill interrupted with more than one file (its source log
    # written, its offsets not: one CI run's restarted batch 2 read two files), so the batches
    # after the kill are counted from the checkpoint's commits, not from the files.
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    assert set(range(done_before, last + 1)) <= set(restarted) <= set(range(last + 1))
    assert sum(f["rows"] for b, f in restarted.items() if b >= done_before) == (
        sum(f["rows"] for b, f in whole.items() if b >= done_before))
    # The routers continued: each batch with the same input as the uninterrupted run's (all of
    # them unless Spark replanned one, which shifts the files of the batches after it) put the
    # same rows on each worker.
    same_input = [b for b in sorted(restarted) if b < done_before]
    for b in range(done_before, last + 1):
        if restarted[b]["rows"] != whole[b]["rows"]:
            break
        same_input.append(b)
    assert ({b: restarted[b]["rows_per_worker"] for b in same_input}
            == {b: whole[b]["rows_per_worker"] for b in same_input})
    # That takes the routers' snapshots (executor-local soft state, skewgroup.spark._routers);
    # what holds without them too: the restarted job is balanced from its first batch.
    assert max(f["load_imbalance"] for f in restarted.values()) < 0.02


def test_python_aggregators_after_sigkill_are_exactly_once(events, tmp_path):
    """The Python-merged state (per bucket of keys, in Spark's checkpoint) survives a driver
    killed mid-stream: the restarted job's distinct counts and top-k, and the count and sum
    merged beside them in the same state, equal pandas' exactly."""
    events_dir, _ = events
    options = ["--source", "files", "--input", str(events_dir), "--format", "parquet",
               "--max-files-per-trigger", "1", "--key", "key", "--agg", "distinct:amount",
               "--agg", "count", "--agg", "topk:amount", "--agg", "sum:amount", "--workers", "3", "--trigger", "availableNow",
               "--sink", "parquet", "--output", str(tmp_path / "out"),
               "--checkpoint", str(tmp_path / "ck"), "--quiet"]
    commits = tmp_path / "ck" / "commits"
    kill_after_two_commits(options, commits, tmp_path)
    assert 2 <= len([p for p in commits.iterdir() if p.name.isdigit()]) <= FILES - 2
    run_job(*options, cwd=tmp_path)
    result = query.final_result(tmp_path / "out")
    frame = pd.concat([pq.read_table(f).to_pandas() for f in sorted(events_dir.glob("*.parquet"))])
    want = frame.groupby("key")["amount"].nunique()
    assert list(result["key"]) == list(want.index)
    assert (result["distinct_amount"].to_numpy() == want.to_numpy()).all()
    assert (result["count"].to_numpy() == frame.groupby("key").size().to_numpy()).all()
    assert (result["sum_amount"].to_numpy() == frame.groupby("key")["amount"].sum().to_numpy()).all()
    # TopK's counts never undercount and never pass count + error (SpaceSaving's bound); a
    # batch counted twice after the restart would break the upper bound.
    counts = frame.groupby(["key", "amount"]).size()
    for key, top in zip(result["key"], result["topk_amount"]):
        for entry in top:
            truth = counts[(key, entry["item"])]
            assert truth <= entry["count"] <= truth + entry["error"]


def test_restart_with_other_workers_is_exactly_once(events, tmp_path):
    """Elastic workers: three files with 4 workers, then the other three on the same checkpoint
    with 6 workers. The merge is keyed by the grouping key, not by worker: the final
    aggregates equal pandas', and the new workers are balanced from their first batch."""
    events_dir, expected = events
    first_dir = tmp_path / "in"
    first_dir.mkdir()
    files = sorted(events_dir.glob("*.parquet"))
    for f in files[:3]:
        shutil.copy2(f, first_dir / f.name)
    metrics = tmp_path / "metrics.jsonl"
    run_job(*file_options(first_dir, tmp_path / "out", tmp_path / "ck", metrics, workers=4),
            cwd=tmp_path)
    for f in files[3:]:
        shutil.copy2(f, first_dir / f.name)
    run_job(*file_options(first_dir, tmp_path / "out", tmp_path / "ck", metrics, workers=6),
            cwd=tmp_path)
    assert_equals_groupby(query.final_result(tmp_path / "out"), expected)
    figures = read_metrics(metrics)
    assert sorted(figures) == list(range(FILES))
    assert [len(figures[b]["rows_per_worker"]) for b in range(FILES)] == [4] * 3 + [6] * 3
    assert all(sum(f["rows_per_worker"]) == ROWS_PER_FILE for f in figures.values())
    assert max(f["load_imbalance"] for f in figures.values()) < 0.02


def test_embedded_default_runs_and_stops_by_itself(tmp_path):
    """The README's first command, with fewer and smaller batches: the generated sessions
    stream (hot keys beside keys that keep arriving) on local Spark through a sample of 5 rows
    per key, that ends after --batches micro-batches, measures every hand-written way on the
    same micro-batches and names the fastest, and prints the first keys, and nothing on stderr
    but Spark's start-up notes: stopping cancels the batch that runs then, which must not
    show."""
    result = run_job("--batches", "3", "--rows-per-batch", "20k", "--metrics",
                     str(tmp_path / "m.jsonl"), "--plot", str(tmp_path / "p.png"), cwd=tmp_path,
                     timeout=600)
    for noise in ("Traceback", "BrokenPipeError", "ERROR", "Exception", "Warning"):
        assert noise not in result.stderr, result.stderr[-3000:]
        assert noise not in result.stdout, result.stdout[-3000:]
    assert "3 micro-batches, 60,000 rows" in result.stdout
    # Every batch line shows its plan (auto's choice, said once above them) and its balance:
    # rows, the busiest task of the partial and LI. The hot keys are the routed tag's figure.
    plan = next(x for x in result.stdout.splitlines() if x.startswith("skew_group plan="))
    chosen = plan[len("skew_group plan="):].split(":")[0]
    assert chosen in ("local", "spread") and "without sample=" in plan, plan
    batch_lines = [x for x in result.stdout.splitlines() if x.startswith("batch ")]
    assert len(batch_lines) == 3
    for line in batch_lines:
        fields = line.split(" | ")
        assert fields[1] == f"plan {chosen}", line
        assert "skew_group -" not in line and "(LI -)" not in line and " - ms" not in line, line
    # The comparison: each way measured on the same 3 micro-batches, a row of its figures (its
    # median micro-batch, critical path from Spark's UI, state held), and the best way named on
    # each figure as measured.
    lines = result.stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("the same 3 micro-batches"))
    table = {}
    for line in lines[start + 3:]:
        if not line.startswith("  "):
            break
        # Three micro-batches: a median each, no column of the last 5.
        way, micro_batch, critical_path, total_task = line.split()[:4]
        table[way] = float(micro_batch), float(critical_path), float(total_task)
    assert list(table) == ["skew_group", "bucketed", "partial", "foreachBatch", "spark"]
    # skew_group's figures are the live run's (a fresh checkpoint, the memory sink): it does
    # not run again, the four others do.
    again = [x for x in lines if x.startswith("measuring on")]
    assert len(again) == 4 and not any("skew_group" in x for x in again), again
    # A stage's slowest task is part of the stage's total.
    assert all(m > 0 and 0 < c <= t for m, c, t in table.values()), table
    fastest = min(table, key=lambda way: table[way][0])
    verdict = next(x for x in lines[start:] if x.startswith("micro-batch, median: "))
    assert verdict.startswith(f"micro-batch, median: best {fastest}, {table[fastest][0]:.2f} s")
    assert ("not skew_group" in verdict) == (fastest != "skew_group")
    assert not any("unavailable" in x for x in lines)
    # The same figures in --metrics, one JSON object a way after the micro-batches' lines.
    ways = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()
            if "way" in json.loads(x)]
    assert [w["way"] for w in ways] == list(table)
    for figures in ways:
        assert figures["micro_batches"] == 3
        assert (round(figures["micro_batch_s"], 2), round(figures["critical_path_s"], 2),
                round(figures["task_s"], 2)) == table[figures["way"]]
        for key in ("micro_batch_s", "late_micro_batch_s", "critical_path_s",
                    "late_critical_path_s", "task_s", "late_task_s"):
            assert isinstance(figures[key], float) and figures[key] > 0, figures
        assert isinstance(figures["state_bytes"], int) and figures["state_bytes"] > 0, figures
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {tmp_path / 'p.png'}" in result.stdout
    # The first keys: key 0 is the hottest; its sample is RowSample's of its rows as drawn
    # (amounts are cents: printed exactly).
    top = result.stdout.split("first keys by key")[1].splitlines()
    first_row = next(line for line in top if line.startswith("│"))
    assert first_row.split("│")[1].strip() == "0"
    printed = [float(a) for a in first_row.split("│")[2].strip(" []").split(",")]
    rows = np.arange(60_000)
    keys, amounts = workload.draw_sessions(rows, 4, 0.3, 75_000, 20_000, 0)
    hot = keys == 0
    sample = RowSample(5)
    drawn = sample.reduce_arrow(pa.table({"amount": amounts[hot], "id": rows[hot]}),
                                np.array([0, hot.sum()]))
    assert printed == sample.finish_arrow(drawn).to_pylist()[0]
    figures = read_metrics(tmp_path / "m.jsonl")
    assert sorted(figures) == [0, 1, 2]
    for f in figures.values():
        # The partial's tasks: the 2 input partitions (local) or the 8 workers (spread), each
        # its share of the rows whatever the keys.
        assert sum(f["rows_per_worker"]) == 20_000
        assert len(f["rows_per_worker"]) == (2 if chosen == "local" else 8)
        assert f["load_imbalance"] < 0.05
        # groupBy's hash placement puts the hottest key (14 % of the rows) with others on one
        # of its 8 partitions.
        assert f["groupby_busiest_rows"] > 0.2 * 20_000


def test_every_compared_way_fits_as_skew_group_does(spark):
    """The ways the job compares compute what skew_group computes: on the same two small
    micro-batches of the default stream, each one's least-squares coefficients per key equal
    skew_group's (float tolerance: sums in another order), and null for the same keys (fewer
    rows than coefficients)."""
    args = parse_job_args(["--source", "zipf", "--agg", "lsq:y,x1,x2,x3", "--rows-per-batch",
                           "3000", "--batches", "2", "--universe", "300", "--workers", "4"])
    ours = baselines.results(spark, args, 2, "skew_group")
    name = "lsq_y_x1_x2_x3"
    assert len(ours) > 100 and ours[name].isna().sum() > 0 and ours[name].notna().sum() > 50
    for way in baselines.ways(args)[1:]:
        theirs = baselines.results(spark, args, 2, way)
        assert list(theirs["key"]) == list(ours["key"]), way
        for key, a, b in zip(ours["key"], ours[name], theirs[name]):
            assert (a is None) == (b is None), (way, key, a, b)
            if a is not None:
                np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-8, err_msg=f"{way} {key}")


def test_every_compared_way_samples_as_skew_group_does(spark):
    """The default aggregate, a sample of 5 rows per key of the sessions stream: every way the
    job compares gives each key the same values in the same order as skew_group, Spark's own
    (collect_list of every row, sorted and sliced after) too; hot keys have more rows than 5,
    sessions fewer, and some sessions span both micro-batches."""
    args = parse_job_args(["--rows-per-batch", "3000", "--batches", "2", "--new-keys", "600",
                           "--workers", "4"])
    assert args.agg == [("sample", "amount,id")] and baselines.ways(args)[-1] == "spark"
    ours = baselines.results(spark, args, 2, "skew_group")
    sizes = ours["sample_amount_id"].map(len)
    assert len(ours) > 500 and (sizes[ours["key"] < 4] == 5).all() and (sizes < 5).sum() > 500
    # skew_group's samples are RowSample's of each key's rows as drawn (ids: row numbers).
    rows = np.arange(6_000)
    keys, amounts = workload.draw_sessions(rows, 4, 0.3, 600, 3_000, 0)
    assert len(set(keys[:3_000]) & set(keys[3_000:]) - set(range(4))) > 100
    order = np.argsort(keys, kind="stable")
    distinct, starts = np.unique(keys[order], return_index=True)
    sample = RowSample(5)
    drawn = sample.reduce_arrow(pa.table({"amount": amounts[order], "id": rows[order]}),
                                np.append(starts, len(keys)))
    assert list(ours["key"]) == distinct.tolist()
    assert [list(s) for s in ours["sample_amount_id"]] == sample.finish_arrow(drawn).to_pylist()
    for way in baselines.ways(args)[1:]:
        theirs = baselines.results(spark, args, 2, way)
        assert list(theirs["key"]) == list(ours["key"]), way
        assert [list(s) for s in theirs["sample_amount_id"]] == \
            [list(s) for s in ours["sample_amount_id"]], way


def test_a_measured_way_without_spark_ui_has_no_critical_path(spark):
    """The tests' session runs without Spark's UI: a way's measure still gives each
    micro-batch's seconds and the state it holds after each, and says why it has no critical
    path instead of failing."""
    args = parse_job_args(["--rows-per-batch", "2000", "--batches", "3", "--universe", "300",
                           "--workers", "4"])
    measured = baselines.measure(spark, args, 3, "spark")
    assert len(measured.seconds) == 3 and all(s > 0 for s in measured.seconds)
    assert measured.critical_path_s is None and measured.task_s is None
    assert measured.unavailable == "Spark's UI is off (spark.ui.enabled=false)"
    # Spark's state store keeps a file a micro-batch: the state held grows with each.
    assert all(isinstance(b, int) for b in measured.state_bytes)
    assert 0 < measured.state_bytes[0] < measured.state_bytes[1] < measured.state_bytes[2]


def test_compared_ways_take_an_aggregate_of_a_key_column(spark):
    """An aggregate may read the grouping key itself (a distinct count of the key, 1 per key):
    each way reads the column once and counts as skew_group does."""
    args = parse_job_args(["--source", "zipf", "--rows-per-batch", "2000", "--batches", "2",
                           "--universe", "300", "--workers", "4", "--agg", "distinct:key"])
    ours = baselines.results(spark, args, 2, "skew_group")
    assert len(ours) > 100 and (ours["distinct_key"] == 1).all()
    assert baselines.ways(args)[1:] == ["bucketed", "partial", "foreachBatch", "spark"]
    for way in baselines.ways(args)[1:]:
        theirs = baselines.results(spark, args, 2, way)
        pd.testing.assert_frame_equal(theirs, ours, check_dtype=False, obj=way)


def test_sparks_way_for_a_top_k_is_approx_top_k(spark):
    """Spark's own way for ``topk`` (approx_top_k): each key's most frequent value and its
    count equal TopK's wherever TopK's count is exact (error 0)."""
    args = parse_job_args(["--source", "zipf", "--rows-per-batch", "2000", "--batches", "2",
                           "--universe", "300", "--workers", "4", "--agg", "topk:key"])
    assert baselines.ways(args)[-1] == "spark"
    ours = baselines.results(spark, args, 2, "skew_group")
    theirs = baselines.results(spark, args, 2, "spark")
    assert list(theirs["key"]) == list(ours["key"])
    for top, spark_top in zip(ours["topk_key"], theirs["topk_key"]):
        assert top[0]["error"] == 0
        assert (spark_top[0]["item"], spark_top[0]["count"]) == (top[0]["item"], top[0]["count"])


def test_file_source_column_errors_are_one_line_exit_2(events, tmp_path):
    """A file source's columns are known once Spark has read its schema: a --key or --agg
    column it lacks ends the job before the query starts, with one error line and exit 2, both
    as `skewgroup run` and under spark-submit (the script users submit)."""
    from pyspark.find_spark_home import _find_spark_home

    events_dir, _ = events
    options = ["--source", "files", "--input", str(events_dir), "--sink", "parquet",
               "--output", str(tmp_path / "out"), "--quiet"]
    script = subprocess.run([sys.executable, "-c", "import skewgroup.app.job as j; print(j.__file__)"],
                            cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    submit = [os.path.join(_find_spark_home(), "bin", "spark-submit"), "--master", "local[1]",
              "--conf", "spark.ui.enabled=false", script]
    for command, extra, wrong in (
            (job_command(), ["--key", "user"], "argument --key: 'user'"),
            (submit, ["--agg", "sum:amt"], "argument --agg sum:amt: 'amt'")):
        result = subprocess.run(command + options + extra, cwd=tmp_path, capture_output=True,
                                text=True, timeout=120, env=_env())
        # spark-submit merges the Python driver's stderr into its own stdout.
        printed = result.stdout + result.stderr
        assert result.returncode == 2, printed[-3000:]
        assert "Traceback" not in printed, printed[-3000:]
        lines = [line for line in printed.splitlines() if "error:" in line]
        assert lines == [f"skewgroup run: error: {wrong} is not a column of the parquet files "
                         f"in --input {events_dir}; its columns are key, amount"], printed
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_files_without_columns_are_one_line_exit_2(tmp_path):
    """Files Spark finds no column in (an empty JSON file): one error line, not a failed query
    or a check of --key against no columns."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "empty.json").write_text("")
    result = subprocess.run(job_command("--source", "files", "--input", str(tmp_path / "in"),
                                        "--format", "json", "--quiet"),
                            cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env=_env())
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert lines == [f"skewgroup run: error: --input {tmp_path / 'in'}: Spark finds no columns "
                     f"in its json files (are they empty?); put a non-empty json file in it"]


def filtered(lines, stopped):
    """What the job's stderr filter copies of ``lines``, before or once the job stops its
    query."""
    import io
    import threading

    from skewgroup.app._stderr import copy_without_hangups

    stopping = threading.Event()
    if stopped:
        stopping.set()
    out = io.BytesIO()
    copy_without_hangups(iter(lines), out, stopping)
    return out.getvalue()


def test_worker_hangup_tracebacks_are_left_out_once_stopping():
    """What the job does with the local JVM's stderr (skewgroup.app._stderr): pyspark's
    daemon's tracebacks of a worker whose socket was closed are left out once the job stops the
    query; any other line or traceback, and those before the stop, pass unchanged."""
    import io
    import threading

    from skewgroup.app._stderr import copy_without_hangups

    daemon = "/x/pyspark.zip/pyspark/daemon.py"
    hangup = [b"Traceback (most recent call last):\n",
              f'  File "{daemon}", line 264, in manager\n'.encode(),
              f'  File "{daemon}", line 95, in worker\n'.encode(),
              b"BrokenPipeError: [Errno 32] Broken pipe\n"]
    flush = ([b"PySpark daemon failed to flush the output to the worker process:\n"]
             + hangup[:-1] + [b"ConnectionResetError: [Errno 104] Connection reset by peer\n"])
    other = [b"Traceback (most recent call last):\n", b'  File "udf.py", line 3, in f\n',
             b"    return 1 / 0\n", b"ZeroDivisionError: division by zero\n"]
    pipe_elsewhere = [b"Traceback (most recent call last):\n", b'  File "mine.py", line 1\n',
                      b"BrokenPipeError: [Errno 32] Broken pipe\n"]
    lines = ([b"WARN starting\n"] + hangup + other + flush + pipe_elsewhere
             + [b"last line\n", b"Traceback (most recent call last):\n"])
    stopping = threading.Event()
    for stopped, expected in ((False, lines),
                              (True, [b"WARN starting\n"] + other + pipe_elsewhere
                               + [b"last line\n", b"Traceback (most recent call last):\n"])):
        if stopped:
            stopping.set()
        out = io.BytesIO()
        copy_without_hangups(iter(lines), out, stopping)
        assert out.getvalue() == b"".join(expected)


def test_the_stateful_driver_workers_progress_lines_are_left_out():
    """PySpark's transformWithStateInPandas driver worker prints its progress, each line
    followed by an empty one: left out, with their empty lines; other lines, an empty line of
    their own and that worker's traceback pass."""
    name = b"Streaming TransformWithStateInPandas Python worker"
    progress = [b"Starting " + name + b".\n", b"\n",
                name + b" finish init stage of Python runner. Received UDF from JVM: f.\n",
                b"\n", name + b" Completed execution of UDF: f.\n", b"\n"]
    failure = [b"Traceback (most recent call last):\n", b'  File "x.py", line 1\n',
               b"ValueError: bad\n"]
    lines = [b"before\n", b"\n"] + progress + failure + [b"after\n"]
    for stopped in (False, True):
        assert filtered(lines, stopped) == b"".join([b"before\n", b"\n"] + failure + [b"after\n"])
    # Right after the stream thread's stop-check overflow (the job's query stopped, the
    # comparison's first stateful stage starting): left out as well.
    overflow = [b'Exception in thread "stream execution thread for skewgroup [id = 1, runId = 2]"'
                b" java.lang.StackOverflowError\n",
                b"\tat java.base/java.util.regex.Pattern$Loop.match(Pattern.java:4898)\n"]
    assert filtered(overflow + progress + [b"after\n"], True) == b"after\n"


def test_the_starts_machine_warnings_are_left_out_and_other_warnings_pass():
    """The JVM's incubator-module line and Hadoop's NativeCodeLoader warning (no native
    library) are left out at any time; a warning of anything else passes."""
    machine = [b"WARNING: Using incubator modules: jdk.incubator.vector\n",
               b"26/11/29 02:42:44 WARN NativeCodeLoader: Unable to load native-hadoop library "
               b"for your platform... using builtin-java classes where applicable\n"]
    other = [b"26/11/29 02:42:45 WARN SparkConf: something else\n",
             b"WARNING: An illegal reflective access operation has occurred\n"]
    lines = [b"before\n", machine[0], other[0], machine[1], other[1], b"after\n"]
    for stopped in (False, True):
        assert filtered(lines, stopped) == b"".join([b"before\n", other[0], other[1], b"after\n"])


def test_interleaved_worker_hangups_are_left_out_once_stopping():
    """Two workers cut off at once write their tracebacks line by line into one pipe: the
    tail of the second (its daemon frames and its hang-up) comes after the end of the first.
    Both are left out once stopping; before, every line passes."""
    import io
    import threading

    from skewgroup.app._stderr import copy_without_hangups

    daemon = "/x/pyspark.zip/pyspark/daemon.py"

    def traceback(error):
        return [b"PySpark daemon failed to flush the output to the worker process:\n",
                b"Traceback (most recent call last):\n",
                f'  File "{daemon}", line 264, in manager\n'.encode(),
                f'  File "{daemon}", line 95, in worker\n'.encode(), error]

    first = traceback(b"BrokenPipeError: [Errno 32] Broken pipe\n")
    second = traceback(b"ConnectionResetError: [Errno 104] Connection reset by peer\n")
    lines = ([b"before\n"] + first[:3] + second[:2] + first[3:] + second[2:]
             + [b"after\n"])
    stopping = threading.Event()
    for stopped, expected in ((False, lines), (True, [b"before\n", b"after\n"])):
        if stopped:
            stopping.set()
        out = io.BytesIO()
        copy_without_hangups(iter(lines), out, stopping)
        assert out.getvalue() == b"".join(expected)


def test_the_stream_threads_stop_check_overflow_is_left_out_once_stopping():
    """Spark's check whether stop() interrupted the stream thread (a regex over the cancelled
    job's message) can overflow the thread's stack: left out once stopping, with its frames
    only; another error of that thread, or one of another thread, passes."""
    import io
    import threading

    from skewgroup.app._stderr import copy_without_hangups

    header = (b'Exception in thread "stream execution thread for skewgroup [id = 1, runId = 2]" '
              b"java.lang.StackOverflowError\n")
    overflow = ([header] + [b"\tat java.base/java.util.regex.Pattern$Loop.match(Pattern.java:4898)\n"]
                * 3 + [b"\tat scala.util.matching.Regex.findFirstIn(Regex.scala:416)\n",
                       b"\tat org.apache.spark.sql.execution.streaming.runtime.StreamExecution$"
                       b".isInterruptionException(StreamExecution.scala:866)\n"])
    other_error = [header.replace(b"StackOverflowError", b"NullPointerException"),
                   b"\tat org.apache.spark.sql.execution.SomeOperator.run(X.scala:1)\n"]
    elsewhere = [header.replace(b"stream execution thread", b"main"), overflow[1]]
    lines = [b"before\n"] + overflow + other_error + elsewhere + [b"after\n"] + overflow
    stopping = threading.Event()
    for stopped, expected in ((False, lines),
                              (True, [b"before\n"] + other_error + elsewhere + [b"after\n"])):
        if stopped:
            stopping.set()
        out = io.BytesIO()
        copy_without_hangups(iter(lines), out, stopping)
        assert out.getvalue() == b"".join(expected)
