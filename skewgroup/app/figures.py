"""The figures of each way the job compares after its run (:func:`skewgroup.app.baselines.measure`):
its micro-batch's seconds, its critical path and total task time, the state it holds; and the
best way on each.
Arithmetic only, no Spark: the summary prints these, ``--metrics`` writes them as JSON lines and
``--plot`` draws them.

A way's figures (:func:`way_figures`), the keys of its ``--metrics`` line:

* ``micro_batch_s``: the median micro-batch (progress ``triggerExecution``), over all of them;
* ``late_micro_batch_s``: the same over the last :data:`LATE` (all of them on a shorter run):
  the way once its state has grown and its caches are warm;
* ``critical_path_s`` and ``late_critical_path_s``: the medians of the micro-batches' critical
  paths, each stage's slowest task (``executorRunTime``) summed over the micro-batch's stages:
  what a cluster with a core per task would take. None when Spark's UI could not be read;
* ``task_s`` and ``late_task_s``: the medians of the micro-batches' total task time, every
  task's ``executorRunTime`` summed: the work the cores do, whatever their number. None when
  Spark's UI could not be read;
* ``state_bytes``: the bytes the way holds on disk after its last micro-batch: the state store's
  files under its checkpoint, and for ``foreachBatch`` every version of its table (all kept);
* ``micro_batches``: how many micro-batches these are over.
"""
import json
from dataclasses import dataclass
from typing import Optional

import numpy as np

LATE = 5    # the micro-batches at the end whose medians are the late figures
OURS = "skew_group"


@dataclass
class Measurement:
    """One way measured over the same micro-batches, one entry a micro-batch with rows, in order.

    ``seconds``: each one's progress ``triggerExecution``. ``critical_path_s``: each one's
    critical path (None for a micro-batch whose jobs Spark's UI no longer holds), or None with
    ``unavailable`` the reason when the UI could not be read; ``task_s`` likewise each one's
    total task time. ``state_bytes``: the bytes held on
    disk after each one, measured when its progress was seen. ``table_versions`` and
    ``latest_table_bytes``: ``foreachBatch``'s table at the end (its versions are all kept and
    counted in ``state_bytes``; the latest alone is what the next micro-batch reads).
    ``batch_ids``: the micro-batches' ids.
    """
    seconds: list
    state_bytes: list
    critical_path_s: Optional[list] = None
    task_s: Optional[list] = None
    unavailable: Optional[str] = None
    table_versions: int = 0
    latest_table_bytes: Optional[int] = None
    batch_ids: Optional[list] = None


def median(values):
    """The median of the values that are not None, or None when there is none; to 0.1 ms (the
    values are whole milliseconds, their median of an even count a half)."""
    known = [v for v in values if v is not None]
    return round(float(np.median(known)), 4) if known else None


def way_figures(way, measured):
    """``way``'s figures (the module docstring) from its :class:`Measurement`."""
    paths, tasks = measured.critical_path_s, measured.task_s
    held = [b for b in measured.state_bytes if b is not None]
    return {
        "way": way,
        "micro_batches": len(measured.seconds),
        "micro_batch_s": median(measured.seconds),
        "late_micro_batch_s": median(measured.seconds[-LATE:]),
        "critical_path_s": None if paths is None else median(paths),
        "late_critical_path_s": None if paths is None else median(paths[-LATE:]),
        "task_s": None if tasks is None else median(tasks),
        "late_task_s": None if tasks is None else median(tasks[-LATE:]),
        "state_bytes": held[-1] if held else None,
    }


# (key, what it is, its unit, the digits it is shown with: values equal once rounded to them tie)
FIGURES = (
    ("micro_batch_s", "micro-batch, median", "s", 2),
    ("late_micro_batch_s", f"micro-batch, median of the last {LATE}", "s", 2),
    ("critical_path_s", "critical path, median", "s", 2),
    ("late_critical_path_s", f"critical path, median of the last {LATE}", "s", 2),
    ("task_s", "total task time, median", "s", 2),
    ("late_task_s", f"total task time, median of the last {LATE}", "s", 2),
    ("state_bytes", "state held after the last micro-batch", "bytes", 0),
)


def best(rows, key, digits):
    """(the ways with the least ``key``, that value) among ``rows`` (:func:`way_figures` each),
    ties being the values equal once rounded to ``digits`` (what the summary shows); None when
    no way has the figure."""
    known = {row["way"]: row[key] for row in rows if row[key] is not None}
    if not known:
        return None
    least = min(round(v, digits) for v in known.values())
    winners = [way for way, v in known.items() if round(v, digits) == least]
    return winners, min(known[w] for w in winners)


def show(value, unit):
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / 1e6:,.2f} MB" if value >= 10_000 else f"{value:,} bytes"
    return f"{value:.2f} s"


def times(ratio):
    """A ratio as read: two decimals near 1, where one would show 1.0x for a 4 % gap."""
    return f"{ratio:.2f}x" if ratio < 1.1 else f"{ratio:.1f}x"


def verdict(rows, key, what, unit, digits):
    """One line naming the best way on ``key``, whichever it is, and how far skew_group is
    from it (or, when skew_group is best, how far the next way is)."""
    found = best(rows, key, digits)
    if found is None:
        return f"{what}: unavailable"
    winners, value = found
    name = " and ".join(winners) + (" (tied)" if len(winners) > 1 else "")
    line = f"{what}: best {name}, {show(value, unit)}"
    more = "as long" if unit == "s" else "as much"
    values = {row["way"]: row[key] for row in rows}
    ours = values.get(OURS)
    if OURS not in values or OURS in winners:
        others = [r for r in rows if r["way"] not in winners and r[key] is not None]
        if OURS in winners and others:
            runner = min(others, key=lambda r: r[key])
            line += f"; the next, {runner['way']}, {show(runner[key], unit)}"
            if value:
                line += f", {times(runner[key] / value)} {more}"
    elif ours is None:
        line += f"; {OURS}: unavailable"
    else:
        line += f"; not {OURS}: {OURS} {show(ours, unit)}"
        if value:
            line += f", {times(ours / value)} {more}"
    return line


def metrics_lines(rows):
    """The ``--metrics`` JSON lines of the ways' figures: one object a way, told apart from
    the per-micro-batch lines (which have no ``way``) by its ``way`` key."""
    return [json.dumps(row) + "\n" for row in rows]
