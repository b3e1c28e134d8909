"""Each micro-batch's critical path and total task time from Spark's UI REST API
(``{uiWebUrl}/api/v1/applications/{app id}/...``): a stream's jobs carry its run id as their
job group and ``batch = N`` in their description; a stage's tasks their ``executorRunTime``.

Read with urllib and a timeout. Spark's UI may be off (``spark.ui.enabled=false``) or out of
reach: :class:`Unavailable` says why, and the job shows the critical path as unavailable.
"""
import json
import time
import urllib.request

TIMEOUT_S = 10      # one request; the UI answers from memory in milliseconds
SETTLE_S = 15       # the most to wait for the UI's listener, which records jobs asynchronously
POLL_S = 0.25


class Unavailable(Exception):
    """Spark's UI could not be read; the message says why."""


def _reader(spark):
    """get(path) -> the parsed JSON of ``.../applications/{app id}/{path}``."""
    context = spark.sparkContext
    base = context.uiWebUrl
    if not base:
        raise Unavailable("Spark's UI is off (spark.ui.enabled=false)")
    root = f"{base.rstrip('/')}/api/v1/applications/{context.applicationId}/"
    # The UI is the driver's own: no proxy from the environment stands between them.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(path):
        try:
            with opener.open(root + path, timeout=TIMEOUT_S) as response:
                return json.loads(response.read())
        except (OSError, ValueError) as error:   # URLError, HTTPError, timeouts; not JSON
            raise Unavailable(f"Spark's UI at {base} could not be read "
                              f"({getattr(error, 'reason', None) or error})") from None

    return get


def _batch_jobs(jobs, run_id):
    """{batch id: its jobs} of the stream run ``run_id``."""
    found = {}
    for job in jobs:
        description = job.get("description") or ""
        if job.get("jobGroup") != str(run_id) or "batch = " not in description:
            continue
        batch = description.rsplit("batch = ", 1)[1].split()[0]
        if batch.isdigit():
            found.setdefault(int(batch), []).append(job)
    return found


def stage_times(spark, run_id, batch_ids):
    """{batch id: (critical path, total task time) in seconds} of the stream run ``run_id``'s
    micro-batches ``batch_ids``: each completed stage's slowest successful task
    (``executorRunTime``), summed over the micro-batch's stages (what a cluster with a core per
    task would take), and every successful task's, summed (the cores' work). A micro-batch
    whose jobs the UI no longer holds (``spark.ui.retainedJobs``) or that did not succeed is
    left out. Raises :class:`Unavailable`.
    """
    get = _reader(spark)
    wanted = set(batch_ids)
    deadline = time.monotonic() + SETTLE_S
    while True:
        by_batch = _batch_jobs(get("jobs"), run_id)
        settled = all(b in by_batch and all(j["status"] != "RUNNING" for j in by_batch[b])
                      for b in wanted)
        if settled or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    times = {}
    for batch in sorted(wanted):
        jobs = by_batch.get(batch)
        if not jobs or any(j["status"] != "SUCCEEDED" for j in jobs):
            continue
        path = total = 0.0
        # A stage may belong to several of the micro-batch's jobs: it ran once.
        for stage_id in sorted({s for job in jobs for s in job["stageIds"]}):
            for stage in get(f"stages/{stage_id}?details=false"):
                if stage["status"] != "COMPLETE":
                    continue    # skipped: its shuffle output was reused
                tasks = get(f"stages/{stage_id}/{stage['attemptId']}/taskList"
                            f"?length={max(stage['numTasks'], 1)}")
                runs = [t["taskMetrics"]["executorRunTime"] for t in tasks
                        if t.get("status") == "SUCCESS" and "taskMetrics" in t]
                path += max(runs, default=0) / 1000
                total += sum(runs) / 1000
        times[batch] = (path, total)
    return times
