"""The whole Pd-Stream grid in one run.

    pytest bench/bench_reproduce.py --benchmark-only -s

z in {1.0, ..., 2.0} x n in {16, 32, 64, 128} x every strategy (+ Pd-Stream with N = 4n),
10 M messages per cell, on both cores: the target is at most 10 minutes. The report it writes
is the one in docs/reproduction (there made by ``skewgroup reproduce all``).
"""
import resource

from skewgroup.app.reproduce import Options, reproduce
from skewgroup.app.reproduce.sim import default_jobs

TARGET_SECONDS = 600


def _cpu_seconds():
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def test_pd_stream_grid(benchmark, figures, tmp_path):
    cpu = _cpu_seconds()
    benchmark.pedantic(reproduce, args=(["pd-stream"], tmp_path, Options(jobs=default_jobs())),
                       rounds=1, iterations=1)
    wall = benchmark.stats.stats.max
    figures.add(what="pd-stream grid (240 cells + 24 N=4n), 10 M messages each",
                wall_seconds=round(wall, 1), cpu_seconds=round(_cpu_seconds() - cpu, 1),
                jobs=default_jobs(), target_seconds=TARGET_SECONDS)
    assert wall <= TARGET_SECONDS
