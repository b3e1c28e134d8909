"""The job on a real Spark standalone cluster (a master and one worker on 127.0.0.1).

The master and the worker are the JVM daemons bundled with pip's pyspark (bin/spark-class) and
the job is submitted with spark-submit, so the driver, the executors and their Python workers are
separate processes, as in production. The cluster's output must equal the same job run on
local[2] and a pandas groupby of the input, also when the executor is killed mid-query, and when
the executors' Python and skewgroup come only from a packed environment shipped with
``--archives`` (the README's "Executors without skewgroup installed").
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pyspark = pytest.importorskip("pyspark")

import skewgroup  # noqa: E402
from skewgroup.app.query import final_result  # noqa: E402

STARTUP_SECONDS = 60
JOB_SECONDS = 180
FILES = 3
ROWS_PER_FILE = 60_000


# --- processes -------------------------------------------------------------------------------


def spark_home():
    from pyspark.find_spark_home import _find_spark_home
    return Path(_find_spark_home())


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tail(path, lines=40):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(cmd, log, env, cwd):
    # A session of its own, so that stopping its process group also stops what it spawned (the
    # worker's executors, the driver's Python process).
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)


def stop(process):
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            pass


def finish(process, log, deadline):
    """Wait for ``process`` until the ``deadline`` (monotonic); fail with its log's tail."""
    try:
        process.wait(max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(process.args)} did not finish in time:\n{tail(log)}")
    assert process.returncode == 0, f"{' '.join(process.args)}\n{tail(log)}"


def master_state(webui_port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as reply:
            return json.load(reply)
    except (OSError, ValueError):
        return {}


def spark_env(tmp):
    env = dict(os.environ)
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_HOME=str(spark_home()),
               SPARK_WORKER_DIR=str(tmp / "worker"), SPARK_LOG_DIR=str(tmp / "logs"))
    return env


class Cluster:
    def __init__(self, url, webui_port, env, worker, worker_dir):
        self.url, self.webui_port, self.env = url, webui_port, env
        self.worker = worker            # the Worker JVM (spark-class execs java)
        self.worker_dir = worker_dir    # one folder per application, one per executor in it

    def completed_apps(self):
        return [app["name"] for app in master_state(self.webui_port).get("completedapps", [])]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one 2-core worker on 127.0.0.1, stopped at the end of the module."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime: java is not on PATH and JAVA_HOME is unset")
    spark_class = spark_home() / "bin" / "spark-class"
    if not spark_class.exists():
        pytest.skip(f"the installed pyspark has no {spark_class}")
    tmp = tmp_path_factory.mktemp("standalone")
    env = spark_env(tmp)
    port, master_ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    processes = []
    try:
        processes.append(start(
            [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(master_ui)],
            tmp / "master.log", env, tmp))
        processes.append(start(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--host",
             "127.0.0.1", "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui)],
            tmp / "worker.log", env, tmp))
        deadline = time.monotonic() + STARTUP_SECONDS
        while master_state(master_ui).get("aliveworkers", 0) < 1:
            if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
                pytest.fail(f"no worker registered with {url} within {STARTUP_SECONDS} s\n"
                            f"master:\n{tail(tmp / 'master.log')}\n"
                            f"worker:\n{tail(tmp / 'worker.log')}")
            time.sleep(0.5)
        yield Cluster(url, master_ui, env, processes[1], tmp / "worker")
    finally:
        for process in reversed(processes):
            stop(process)


# --- the job ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def input_dir(tmp_path_factory):
    """FILES parquet files of a seeded Zipf(1.4) stream: key int64, amount double."""
    directory = tmp_path_factory.mktemp("zipf-input")
    rng = np.random.default_rng(5)
    for i in range(FILES):
        frame = pd.DataFrame({
            "key": skewgroup.streams.zipf(1.4, ROWS_PER_FILE, universe=10_000, seed=100 + i),
            "amount": np.round(rng.random(ROWS_PER_FILE) * 100.0, 2),
        })
        frame.to_parquet(directory / f"part-{i:04d}.parquet", index=False)
    return directory


def job_options(input_dir, out, checkpoint):
    return ["--source", "files", "--input", str(input_dir), "--format", "parquet",
            "--max-files-per-trigger", "1", "--key", "key", "--agg", "count",
            "--agg", "sum:amount", "--strategy", "pdstream", "--workers", "4",
            "--trigger", "availableNow", "--sink", "parquet", "--output", str(out),
            "--checkpoint", str(checkpoint), "--quiet"]


def installed_job_script(cwd):
    # Asked from outside the checkout: the script of the installed package, which is what a
    # user submits and what the executors import.
    return subprocess.run(
        [sys.executable, "-c", "import skewgroup.app.job; print(skewgroup.app.job.__file__)"],
        cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def batches_written(out):
    return sorted(int(p.name.split("=", 1)[1]) for p in Path(out).glob("batch=*"))


def test_job_on_standalone_cluster_equals_local_run_and_groupby(cluster, input_dir, tmp_path):
    # Both runs start outside the checkout, whose skewgroup/ has no compiled modules.
    script = installed_job_script(tmp_path)
    assert "site-packages" in script, script

    on_cluster, local = tmp_path / "cluster", tmp_path / "local"
    # The two runs overlap: each spends most of its time starting JVMs and Python workers.
    runs = [
        (start([str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url,
                "--conf", "spark.ui.enabled=false", script,
                *job_options(input_dir, on_cluster / "out", on_cluster / "checkpoint")],
               tmp_path / "cluster.log", cluster.env, tmp_path), tmp_path / "cluster.log"),
        (start([sys.executable, "-m", "skewgroup", "run", "--master", "local[2]",
                *job_options(input_dir, local / "out", local / "checkpoint")],
               tmp_path / "local.log", cluster.env, tmp_path), tmp_path / "local.log"),
    ]
    deadline = time.monotonic() + JOB_SECONDS
    try:
        for process, log in runs:
            finish(process, log, deadline)
    finally:
        for process, _ in runs:
            stop(process)
    assert "skewgroup" in cluster.completed_apps(), "the job did not run on the cluster"

    # maxFilesPerTrigger 1: one micro-batch per file, so the streaming merge state was used.
    assert batches_written(on_cluster / "out") == list(range(FILES))
    assert batches_written(local / "out") == list(range(FILES))

    cluster_result = final_result(on_cluster / "out")
    local_result = final_result(local / "out")
    expected = groupby(input_dir)
    assert_same_aggregates(cluster_result, expected, "cluster")
    assert_same_aggregates(local_result, expected, "local")
    assert_same_aggregates(cluster_result, local_result, "cluster vs local")


def groupby(input_dir):
    """pandas' groupby of the input: what every run must end with."""
    rows = pd.concat([pd.read_parquet(p) for p in sorted(input_dir.glob("*.parquet"))])
    return (rows.groupby("key").agg(count=("amount", "size"), sum_amount=("amount", "sum"))
            .reset_index().sort_values("key").reset_index(drop=True))


def assert_same_aggregates(result, expected, name):
    assert list(result["key"]) == list(expected["key"]), name
    assert (result["count"].to_numpy() == expected["count"].to_numpy()).all(), name
    # Sums of doubles depend on the order of addition (partials per worker, then merged).
    np.testing.assert_allclose(result["sum_amount"], expected["sum_amount"], rtol=1e-9,
                               err_msg=name)


def executors(worker_pid):
    """Pids of the executor JVMs the Worker ``worker_pid`` has launched and that still run."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            # The parent pid is the 2nd field after the command name in parentheses.
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue                    # not a process, or it ended meanwhile
        if parent == worker_pid and b"CoarseGrainedExecutorBackend" in command:
            pids.append(int(entry.name))
    return pids


def test_executor_killed_mid_query_is_replaced_and_the_result_is_exact(cluster, input_dir,
                                                                      tmp_path):
    """SIGKILL the executor once the first micro-batch is committed (its state store holds
    merge and router state): the Worker launches a new executor, Spark reruns the lost tasks
    and stages from the checkpoint and the lost shuffle files, and the job ends with the same
    aggregates as pandas' groupby."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("finding the executor's process needs Linux's /proc")
    script = installed_job_script(tmp_path)
    apps_before = set(cluster.worker_dir.glob("app-*"))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    commits = checkpoint / "commits"
    log = tmp_path / "killed.log"
    driver = start([str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url,
                    "--conf", "spark.ui.enabled=false", script,
                    *job_options(input_dir, out, checkpoint)], log, cluster.env, tmp_path)
    deadline = time.monotonic() + JOB_SECONDS
    try:
        killed = None
        while killed is None and driver.poll() is None and time.monotonic() < deadline:
            done = [p for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
            running = executors(cluster.worker.pid)
            if done and running:
                assert len(done) < FILES, "the job ended before the executor could be killed"
                killed = running[0]
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
        assert killed is not None, f"no executor to kill while the job ran:\n{tail(log)}"
        finish(driver, log, deadline)
    finally:
        stop(driver)

    # The Worker replaced the killed executor: the application has a second executor folder.
    (app,) = set(cluster.worker_dir.glob("app-*")) - apps_before
    assert len([p for p in app.iterdir() if p.name.isdigit()]) >= 2, sorted(app.iterdir())
    assert batches_written(out) == list(range(FILES))
    assert_same_aggregates(final_result(out), groupby(input_dir), "executor killed")


# --- executors without skewgroup installed: a packed environment ------------------------------


class PackedEnv:
    def __init__(self, archive, seconds):
        self.archive = archive
        self.seconds = seconds          # step -> seconds it took


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory):
    """The README's commands: a wheel of this checkout, a fresh venv with it and its dependencies
    (pinned to the driver's versions), packed with venv-pack into env.tar.gz."""
    venv_pack = pytest.importorskip("venv_pack", reason="venv-pack comes with the [test] extra")
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        pytest.skip(f"no project to build a wheel of at {root}")
    tmp = tmp_path_factory.mktemp("packed")
    seconds = {}

    def run(step, *cmd):
        started = time.monotonic()
        done = subprocess.run([str(c) for c in cmd], cwd=tmp, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout}\n{done.stderr}"
        seconds[step] = seconds.get(step, 0) + time.monotonic() - started
        return done.stdout

    run("wheel", sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", "dist", root)
    (wheel,) = (tmp / "dist").glob("skewgroup-*.whl")
    # The driver's versions of numpy, pyarrow, pandas, ...: what the driver pickles, the
    # executors unpickle (and pip takes them from its cache). Only name==version lines: a
    # package installed from a path or URL cannot be a constraint.
    frozen = run("venv", sys.executable, "-m", "pip", "freeze", "--exclude", "skewgroup")
    (tmp / "driver-versions.txt").write_text("".join(
        line + "\n" for line in frozen.splitlines() if "==" in line and " @ " not in line))
    env = tmp / "env"
    run("venv", sys.executable, "-m", "venv", env)
    # What the executors' Python workers import: skewgroup (numpy, pyarrow, ... come with the
    # wheel) and pandas (pandas UDFs); pyspark comes from Spark. Not mmh3 or rich: the driver
    # alone imports them.
    run("venv", env / "bin" / "python", "-m", "pip", "install", "-q",
        "-c", "driver-versions.txt", wheel, "pandas")
    # No compiled bytecode of skewgroup in the archive: a Python worker that imports skewgroup
    # from the unpacked archive writes it there, which the test looks for after the job.
    site = Path(run("venv", env / "bin" / "python", "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    for cache in (site / "skewgroup").rglob("__pycache__"):
        shutil.rmtree(cache)
    archive = tmp / "env.tar.gz"
    started = time.monotonic()
    venv_pack.pack(prefix=str(env), output=str(archive))
    seconds["pack"] = time.monotonic() - started
    return PackedEnv(archive, seconds)


def submit_with_archive(cluster, archive, script, args, log, cwd, conf=()):
    """spark-submit as the README says: the archive unpacked as ./environment in each executor's
    folder and its bin/python the executors' Python. Nothing else tells them where Python or
    skewgroup is: no PYSPARK_PYTHON (a conf beats it anyway) nor PYTHONPATH in the environment."""
    env = {k: v for k, v in cluster.env.items() if k not in ("PYSPARK_PYTHON", "PYTHONPATH")}
    return start([str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url,
                  "--conf", "spark.ui.enabled=false",
                  "--archives", f"{archive}#environment",
                  "--conf", "spark.pyspark.python=./environment/bin/python",
                  # Without it the driver would run ./environment/bin/python too:
                  # spark.pyspark.python is the driver's Python unless this is set.
                  "--conf", f"spark.pyspark.driver.python={sys.executable}",
                  *(f"--conf={c}" for c in conf), str(script), *map(str, args)], log, env, cwd)


# One task per core, each reporting its Python worker's interpreter and where it finds skewgroup.
PROBE = textwrap.dedent("""
    import json
    import sys

    from pyspark.sql import SparkSession


    def report(_):
        import importlib.machinery
        import os
        import sys

        import skewgroup
        from skewgroup._routing import _hash

        ids = skewgroup.partitioner("pkg", 4).route(list(range(100)))
        yield {
            "executable": sys.executable, "prefix": sys.prefix, "cwd": os.getcwd(),
            "skewgroup": skewgroup.__file__, "native": _hash.__file__,
            "routed": int(len(ids)), "path": list(sys.path),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            # Every entry of sys.path that has a skewgroup package to import.
            "providers": [entry for entry in sys.path if importlib.machinery.PathFinder
                          .find_spec("skewgroup", [entry or os.getcwd()]) is not None],
        }


    spark = SparkSession.builder.appName("skewgroup-archive-probe").getOrCreate()
    reports = spark.sparkContext.parallelize(range(2), 2).mapPartitions(report).collect()
    with open(sys.argv[1], "w") as out:
        json.dump(reports, out)
    spark.stop()
""")


def norm(path):
    return Path(os.path.normpath(path))


def new_app(cluster, before):
    (app,) = set(cluster.worker_dir.glob("app-*")) - before
    return app


@pytest.mark.slow
def test_job_with_packed_environment_executors_use_only_the_archive(cluster, input_dir,
                                                                    packed_env, tmp_path):
    """Executors whose Python and skewgroup come only from the archive: the probe application
    shows each executor's Python is <its folder>/environment/bin/python, that skewgroup (its
    compiled core too) is imported from the unpacked archive, and that no other sys.path entry
    has a skewgroup (the driver's site-packages is not on it); then the job, submitted the same
    way, writes the exact aggregates and its executors compiled the archive's skewgroup."""
    started = time.monotonic()
    driver_site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    spark_files = spark_home().resolve()

    # 1. The probe, from a script that is not in a checkout.
    probe, reports = tmp_path / "probe.py", tmp_path / "probe.json"
    probe.write_text(PROBE)
    before = set(cluster.worker_dir.glob("app-*"))
    log = tmp_path / "probe.log"
    process = submit_with_archive(cluster, packed_env.archive, probe, [reports], log, tmp_path)
    try:
        finish(process, log, time.monotonic() + JOB_SECONDS)
    finally:
        stop(process)
    app = new_app(cluster, before)
    seen = json.loads(reports.read_text())
    assert len(seen) == 2, seen
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for report in seen:
        prefix = norm(report["prefix"])
        # <worker dir>/app-.../<executor id>/environment: the archive, unpacked by the executor.
        assert prefix.parent.parent == app and prefix.name == "environment", report
        assert prefix.parent.name.isdigit() and norm(report["cwd"]) == prefix.parent, report
        assert norm(report["executable"]) == prefix / "bin" / "python", report
        site = prefix / "lib" / version / "site-packages"
        assert norm(report["skewgroup"]) == site / "skewgroup" / "__init__.py", report
        assert norm(report["native"]).parent == site / "skewgroup" / "_routing", report
        assert report["routed"] == 100, report
        # The archive's site-packages is the only place on sys.path with a skewgroup ...
        assert [norm(p) for p in report["providers"]] == [site], report
        # ... and nothing of the driver's installation is on it but Spark's own files (the
        # pyspark and py4j zips, Spark's core jar): SPARK_HOME is the driver's pip-installed
        # pyspark in this test, a Spark distribution on a real cluster.
        for entry in filter(None, report["path"]):
            resolved = Path(entry).resolve()
            assert resolved not in driver_site, report["path"]
            if any(resolved.is_relative_to(s) for s in driver_site):
                assert resolved.is_relative_to(spark_files) and resolved.is_file(), \
                    report["path"]

    # 2. The job, submitted the same way; the driver runs the installed job script.
    script = installed_job_script(tmp_path)
    out = tmp_path / "out"
    log = tmp_path / "job.log"
    before = set(cluster.worker_dir.glob("app-*"))
    process = submit_with_archive(cluster, packed_env.archive, script,
                                  job_options(input_dir, out, tmp_path / "checkpoint"),
                                  log, tmp_path,
                                  # Python writes bytecode even if this test's environment
                                  # says not to (the Worker's, which executors inherit).
                                  conf=["spark.executorEnv.PYTHONDONTWRITEBYTECODE="])
    try:
        finish(process, log, time.monotonic() + JOB_SECONDS)
    finally:
        stop(process)
    app = new_app(cluster, before)
    assert batches_written(out) == list(range(FILES))
    assert_same_aggregates(final_result(out), groupby(input_dir), "packed environment")
    # The archive had no compiled bytecode of skewgroup: the job's Python workers imported it
    # from their unpacked archive (and skewgroup.spark's modules that run in tasks) and wrote it.
    site = f"*/environment/lib/{version}/site-packages/skewgroup"
    assert list(app.glob(f"{site}/__pycache__/__init__.*.pyc")), tail(log)
    assert list(app.glob(f"{site}/spark/__pycache__/*.pyc")), tail(log)
    steps = ", ".join(f"{step} {t:.0f} s" for step, t in packed_env.seconds.items())
    print(f"\npacked environment ({packed_env.archive.stat().st_size / 2**20:.0f} MiB): {steps}; "
          f"probe and job on the cluster {time.monotonic() - started:.0f} s")
