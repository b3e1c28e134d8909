"""What the benches compute from what they measured: a function's time alone, a plan's figures
over its rounds, a spread, the hottest key's share, auto's plan choice as logged."""
import logging
import time

import numpy as np


def timed(function, *args):
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def summarize(runs):
    """Figures of one plan over its rounds (each (result, wall s, _rest.group_stages)):
    minimum, and maximum as the spread."""
    critical = [sum(max(s["run_ms"]) for s in stages) / 1000 for _, _, stages in runs]
    total = [sum(sum(s["run_ms"]) for s in stages) / 1000 for _, _, stages in runs]
    walls = [wall for _, wall, _ in runs]
    stages = runs[int(np.argmin(critical))][2]
    return {
        "critical_s": round(min(critical), 3), "critical_max_s": round(max(critical), 3),
        "total_s": round(min(total), 3), "total_max_s": round(max(total), 3),
        "wall_s": round(min(walls), 3), "wall_max_s": round(max(walls), 3),
        "stages": [{"name": s["name"], "tasks": len(s["run_ms"]),
                    "max_task_s": round(max(s["run_ms"]) / 1000, 3),
                    "total_s": round(sum(s["run_ms"]) / 1000, 3),
                    "max_rows": int(max(s["rows"])),
                    "rows_max_over_mean": round(max(s["rows"]) / max(np.mean(s["rows"]), 1e-9), 2)}
                   for s in stages],
    }


def spread(values):
    return {"min": round(min(values), 3), "max": round(max(values), 3)}


def zipf_p1(z, universe):
    """Probability of the hottest key: 1 / H(z, universe)."""
    return 1.0 / float(np.sum(np.arange(1, universe + 1, dtype=np.float64) ** -z))


class AutoLog(logging.Handler):
    """skew_group's plan choice (auto's INFO line), per ``current`` (set by the bench), heard
    inside ``with AutoLog() as log:``."""

    def __init__(self):
        super().__init__()
        self.current, self.said = None, {}

    def __enter__(self):
        logger = logging.getLogger("skewgroup.spark")
        logger.addHandler(self)
        logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *error):
        logging.getLogger("skewgroup.spark").removeHandler(self)

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("skew_group plan="):     # not the state store's line
            self.said[self.current] = message
