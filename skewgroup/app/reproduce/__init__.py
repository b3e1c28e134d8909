"""``skewgroup reproduce``: the papers' simulated experiments, ours beside the numbers they print.

Each paper module builds a list of cells (stream x strategy x n x sources, see :mod:`.sim`) and
turns their results into a report :class:`~.report.Section`: the paper's figures beside ours,
the difference, and a sentence for every gap over 5 %. :func:`reproduce` runs the chosen papers
one after the other (cells spread over ``jobs`` processes) and writes into a directory:

* ``README.md`` — the report, with the command that made it;
* ``results.json`` — every cell's measurements and every comparison;
* ``*.png`` — the figures.
"""
import json
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

from skewgroup.app.reproduce import adaptive, d_choices, dkg, fish, flexd, pd_stream, sim
from skewgroup.app.reproduce.report import Options

EXPERIMENTS = {m.KEY: m for m in (pd_stream, d_choices, fish, flexd, dkg, adaptive)}

__all__ = ["EXPERIMENTS", "Options", "reproduce", "sim"]


def reproduce(names, out_dir, opts, on_start=None, on_result=None, command=None):
    """Run the experiments ``names`` with :class:`Options` ``opts`` into ``out_dir``.

    ``on_start(name, cells)`` and ``on_result(result)`` let a caller show progress. Returns
    the path of the report.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sections, timings, all_results = [], {}, {}
    for name in names:
        module = EXPERIMENTS[name]
        cells = [c for c in module.cells(opts)
                 if opts.strategies is None or c["strategy"] in opts.strategies]
        if on_start:
            on_start(name, len(cells))
        start, cpu = time.perf_counter(), _cpu_seconds()
        results = sim.run_cells(cells, jobs=opts.jobs, on_result=on_result)
        timings[name] = dict(cells=len(cells), seconds=time.perf_counter() - start,
                             cpu_seconds=_cpu_seconds() - cpu)
        sections.append(module.section(results, opts, out_dir))
        all_results[name] = results
    report = out_dir / "README.md"
    report.write_text(_markdown(sections, timings, opts, command))
    payload = dict(command=command, options=opts.__dict__, seconds=timings,
                   environment=_environment(),
                   comparisons={s.key: [c.as_dict() for c in s.comparisons] for s in sections},
                   results=all_results)
    (out_dir / "results.json").write_text(
        json.dumps(_rounded(payload), separators=(",", ":"), default=_json_default))
    return report


def _markdown(sections, timings, opts, command):
    gaps = sum(c.gap for s in sections for c in s.comparisons)
    total = sum(len(s.comparisons) for s in sections)
    lines = ["# skewgroup: the papers' experiments, reproduced", "",
             "Made by" + (f" `{command}`" if command else " `skewgroup reproduce`") +
             f" on {platform.machine()} ({_environment()['cpus']} cores, {opts.jobs} processes).",
             "Every number the papers print for a simulated experiment stands beside ours; "
             "claims the papers make without a number are checked as claims. "
             f"{gaps} of {total} comparisons differ by more than 5 % or fail; each has a "
             "sentence saying why.", "",
             "| experiment | cells | wall seconds | CPU seconds (all processes) |",
             "|---|---|---|---|"]
    lines += [f"| {s.title} | {timings[s.key]['cells']} | {timings[s.key]['seconds']:.0f} | "
              f"{timings[s.key]['cpu_seconds']:.0f} |" for s in sections]
    lines.append("")
    lines += [s.markdown() for s in sections]
    return "\n".join(lines)


def _cpu_seconds():
    """CPU time of this process and its finished children (the pool's workers)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def _rounded(value):
    """Floats to 6 significant digits: the JSON stays readable and a few MB for a full run."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _environment():
    import os

    return dict(python=sys.version.split()[0], numpy=np.__version__,
                platform=platform.platform(), cpus=os.cpu_count())


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")
