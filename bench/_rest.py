"""Spark's UI REST API, as the benches read it: a run in a job group, its stages and tasks, a
stream's micro-batches (their jobs carry the stream's run id as job group and ``batch = N``
in their description)."""
import json
import time
import urllib.request

TASKS_PER_STAGE = 160   # the most tasks read of a stage (10 x the benches' 16 workers)


def get(spark, path):
    base = spark.sparkContext.uiWebUrl.rstrip("/")  # the port Spark really bound
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{base}/api/v1/applications/{app}/{path}", timeout=30) as r:
        return json.loads(r.read())


def run_in_group(spark, group, action):
    """(``action()``, its wall time), every job it starts in job group ``group``."""
    spark.sparkContext.setJobGroup(group, group)
    try:
        start = time.perf_counter()
        result = action()
        return result, time.perf_counter() - start
    finally:
        spark.sparkContext.setJobGroup("", "")


def stages_and_tasks(spark, group):
    """(stage, successful tasks ordered by partition) of every completed stage of ``group``."""
    for _ in range(60):  # the UI's listener is asynchronous
        jobs = [job for job in get(spark, "jobs") if job.get("jobGroup") == group]
        if jobs and all(job["status"] == "SUCCEEDED" for job in jobs):
            break
        time.sleep(0.5)
    found = []
    for stage_id in sorted({s for job in jobs for s in job["stageIds"]}):
        for stage in get(spark, f"stages/{stage_id}"):
            if stage["status"] != "COMPLETE":
                continue  # skipped: its shuffle output was reused
            tasks = get(spark, f"stages/{stage_id}/{stage['attemptId']}/taskList"
                               f"?length={TASKS_PER_STAGE}")
            tasks = sorted((t for t in tasks if t["status"] == "SUCCESS"), key=lambda t: t["index"])
            found.append((stage, tasks))
    return found


def group_stages(spark, group):
    """Per completed stage of job group ``group``: its successful tasks' (run ms, rows read)."""
    return [{"name": stage["name"][:40],
             "run_ms": [t["taskMetrics"]["executorRunTime"] for t in tasks],
             "rows": [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"]
                      or t["taskMetrics"]["inputMetrics"]["recordsRead"] for t in tasks]}
            for stage, tasks in stages_and_tasks(spark, group)]


def _batch_stage_ids(spark, run_id):
    """{batch id: its jobs' stage ids} of a stream's run, once none of its jobs runs."""
    jobs = []
    for _ in range(60):   # the UI's listener is asynchronous
        jobs = [j for j in get(spark, "jobs") if j.get("jobGroup") == str(run_id)]
        if jobs and all(j["status"] != "RUNNING" for j in jobs):
            break
        time.sleep(0.5)
    stage_ids = {}
    for job in jobs:
        description = job.get("description") or ""
        if job["status"] != "SUCCEEDED" or "batch = " not in description:
            continue
        batch = int(description.rsplit("batch = ", 1)[1].split()[0])
        stage_ids.setdefault(batch, set()).update(job["stageIds"])
    return stage_ids


def _task_seconds(spark, stage):
    tasks = get(spark, f"stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=1000")
    return [t["taskMetrics"]["executorRunTime"] / 1000 for t in tasks if t["status"] == "SUCCESS"]


def batch_stages(spark, run_id):
    """{batch id: [per completed stage: name, tasks, slowest task s, total s]} of a stream's
    run."""
    out = {}
    for batch, ids in _batch_stage_ids(spark, run_id).items():
        stages = []
        for stage_id in sorted(ids):
            for stage in get(spark, f"stages/{stage_id}"):
                if stage["status"] != "COMPLETE":
                    continue
                times = _task_seconds(spark, stage)
                stages.append({"name": stage["name"][:40], "tasks": len(times),
                               "max_task_s": round(max(times), 3),
                               "total_s": round(sum(times), 3)})
        out[batch] = stages
    return out


def batch_critical_paths(spark, run_id):
    """{batch id: (critical path, total task time)}: the sum over its completed stages of the
    slowest task's run time, and of every task's (s)."""
    paths = {}
    for batch, ids in _batch_stage_ids(spark, run_id).items():
        critical = total = 0.0
        for stage_id in ids:
            for stage in get(spark, f"stages/{stage_id}"):
                if stage["status"] != "COMPLETE":
                    continue
                times = _task_seconds(spark, stage)
                critical += max(times)
                total += sum(times)
        paths[batch] = critical, total
    return paths
