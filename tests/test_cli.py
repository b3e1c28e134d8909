"""`skewgroup simulate` and `skewgroup reproduce` on tiny inputs, and their input errors."""
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewgroup.app.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path):
    return path.exists() and path.read_bytes()[:8] == PNG


def test_simulate_writes_table_json_and_plots(tmp_path, capsys):
    out = tmp_path / "sim"
    main(["simulate", "--messages", "20k", "--z", "2.0", "--workers", "8",
          "--strategies", "kg,pkg,pdstream", "--out", str(out), "--jobs", "1", "--cost", "1e-3",
          "--set", "pdstream.window=32"])
    printed = capsys.readouterr().out
    for name in ("kg", "pkg", "pdstream", "tuples/s", "simulate.json"):
        assert name in printed
    data = json.loads((out / "simulate.json").read_text())
    by = {r["label"]: r for r in data["results"]}
    assert set(by) == {"kg", "pkg", "pdstream"} and data["workers"] == 8
    assert by["pdstream"]["params"] == {"window": 32}
    # z = 2.0 puts ~60 % on one key: KG cannot balance it, Pd-Stream does.
    assert by["kg"]["li"] > 2 and by["pdstream"]["li"] < 1e-2 and by["kg"]["rf"] == 1.0
    assert by["pdstream"]["queue"]["throughput"] > 3 * by["kg"]["queue"]["throughput"]
    assert len(by["pkg"]["loads"]) == 8 and sum(by["pkg"]["loads"]) == 20_000
    for name in ("li_rf.png", "imbalance.png", "loads.png"):
        assert is_png(out / name)


def test_simulate_a_parquet_column_with_sources_split_by_column(tmp_path, capsys):
    rng = np.random.default_rng(1)
    keys = [f"user-{k}" for k in rng.zipf(1.5, 5000) % 300]
    pq.write_table(pa.table({"user": keys, "host": rng.integers(0, 4, 5000)}),
                   tmp_path / "events.parquet")
    out = tmp_path / "sim"
    main(["simulate", "--stream", str(tmp_path / "events.parquet"), "--column", "user",
          "--split", "host", "--sources", "2", "--workers", "4", "--strategies", "pkg,wchoices",
          "--out", str(out), "--jobs", "1", "--no-plots"])
    data = json.loads((out / "simulate.json").read_text())
    assert data["sources"] == 2 and data["stream"]["split"] == "host"
    r = data["results"][0]
    assert r["messages"] == 5000 and r["distinct"] == len(set(keys))
    assert not (out / "li_rf.png").exists()


def test_reproduce_all_on_a_tiny_grid(tmp_path, capsys):
    out = tmp_path / "rep"
    main(["reproduce", "all", "--out", str(out), "--messages", "20k", "--z", "2.0",
          "--workers", "64", "--jobs", "1"])
    report = (out / "README.md").read_text()
    for title in ("## Pd-Stream", "## D-Choices", "## FISH", "## FlexD", "## DKG",
                  "## Adaptive (ours)"):
        assert title in report
    assert "skewgroup reproduce all" in report and "Gaps over 5%" in report
    data = json.loads((out / "results.json").read_text())
    assert set(data["comparisons"]) == {"pd-stream", "d-choices", "fish", "flexd", "dkg",
                                        "adaptive"}
    table1 = [c for c in data["comparisons"]["dkg"] if c["figure"] == "Table 1"]
    assert len(table1) == 15 and not any(c["gap"] for c in table1)
    pkg = next(c for c in data["comparisons"]["pd-stream"]
               if c["figure"] == "Fig. 8" and c["strategy"] == "pkg")
    assert pkg["paper"] == 18.45 and pkg["ours"] == pytest.approx(18.45, rel=0.1)
    for c in (c for cs in data["comparisons"].values() for c in cs):
        assert not c["gap"] or c["why"]          # every gap has its sentence
    for name in ("pd_stream_li.png", "pd_stream_rf.png", "pd_stream_it.png",
                 "d_choices_imbalance.png", "fish_time.png", "fish_memory.png",
                 "flexd_imbalance.png", "dkg_country.png", "adaptive_zipf_z2.0.png",
                 "adaptive_python_identifiers.png", "adaptive_python_prose.png",
                 "adaptive_drift_z1.4.png"):
        assert is_png(out / name), name


@pytest.mark.parametrize("argv, words", [
    (["simulate", "--workers", "0"], ["--workers", "[1, 1,048,576]", "'0'"]),
    (["simulate", "--messages", "lots"], ["--messages", "1M", "'lots'"]),
    (["simulate", "--strategies", "pkg,nope"], ["--strategies", "'pdstream'", "'pkg,nope'"]),
    (["simulate", "--z", "-1"], ["--z", ">= 0", "'-1'"]),
    (["simulate", "--stream", "nowhere.parquet", "--column", "k"], ["--stream", "nowhere.parquet"]),
    (["simulate", "--stream", "data.json"], ["--stream", "zipf", ".parquet", "'data.json'"]),
    (["simulate", "--set", "pdstream.bogus=1"], ["--set", "bogus", "window"]),
    (["simulate", "--set", "window=1"], ["--set", "STRATEGY.PARAMETER=VALUE", "'window=1'"]),
    (["simulate", "--split", "host"], ["--split", "--stream FILE"]),
    (["reproduce", "everything", "--out", "x"], ["pd-stream", "'everything'"]),
    (["reproduce", "all"], ["--out"]),
    (["reproduce", "all", "--out", "x", "--workers", "8,zero"], ["--workers", "'zero'"]),
])
def test_bad_input_names_the_option_the_allowed_values_and_the_value(argv, words, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, (word, err)


def test_simulate_parquet_without_column_is_an_error(tmp_path, capsys):
    pq.write_table(pa.table({"k": [1, 2]}), tmp_path / "t.parquet")
    with pytest.raises(SystemExit):
        main(["simulate", "--stream", str(tmp_path / "t.parquet")])
    assert "--column" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "--stream", str(tmp_path / "t.parquet"), "--column", "key",
              "--out", str(tmp_path / "o"), "--jobs", "1"])
    err = capsys.readouterr().err
    assert "--column" in err and "['k']" in err and "'key'" in err
    with pytest.raises(SystemExit):
        main(["simulate", "--stream", str(tmp_path / "t.parquet"), "--column", "k",
              "--split", "host", "--sources", "2"])
    err = capsys.readouterr().err
    assert "--split" in err and "['k']" in err and "'host'" in err


def test_unbuilt_source_tree_says_what_to_do(tmp_path):
    """Run from a checkout that was never built, its skewgroup/ hides the installed package:
    the import says in one line how to build it or where to run from, not a circular import."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import skewgroup

    package = Path(skewgroup.__file__).parent
    shutil.copytree(package, tmp_path / "skewgroup",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    for argv in (["-c", "import skewgroup"], ["-m", "skewgroup", "--help"]):
        result = subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode != 0, argv
        last = result.stderr.strip().splitlines()[-1]
        assert "compiled modules are not built in this source tree" in last, result.stderr
        assert str(tmp_path / "skewgroup") in last and "build_ext --inplace" in last
        assert "circular import" not in result.stderr
    # `python -m skewgroup` prints that one line and nothing else.
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# --- help, and what each entry point imports -------------------------------------------------


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_help_is_plain_text(capsys):
    text = _help(capsys)
    assert "``" not in text and ":func:" not in text
    for command in ("simulate", "reproduce", "run"):
        assert command in text


def test_simulate_help_describes_and_gives_every_default(capsys):
    import re

    text = _help(capsys, "simulate")
    assert "Route one stream with each strategy" in text
    options = re.split(r"\n  (?=-)", text.split("options:", 1)[1])[1:]
    assert len(options) > 15
    for option in options:
        if option.startswith("-h"):
            continue
        assert "default" in option, option


def test_run_help_needs_no_spark(capsys):
    """`skewgroup run --help` and the job's option errors come from skewgroup.app.options, before
    pyspark is imported (the job's parser is one, shared with spark-submit skewgroup/app/job.py)."""
    text = _help(capsys, "run")
    assert "--agg AGG[:COLUMN]" in text and "score:COL" in text
    with pytest.raises(SystemExit):
        main(["run", "--workers", "0"])
    assert "--workers" in capsys.readouterr().err


def test_core_imports_no_cli_libraries():
    """A cluster's executors import the core and the Spark layer, never rich or matplotlib
    (the cli extra), and the job's options never import the command line module."""
    import subprocess
    import sys

    code = ("import sys, skewgroup, skewgroup.app.options; "
            "print(sorted(m for m in ('rich', 'matplotlib', 'skewgroup.app.cli', 'pyspark') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/").stdout
    assert out.strip() == "[]"
