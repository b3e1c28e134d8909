"""Collect the figures each benchmark records, print them and save them as JSON.

A benchmark calls ``figures.add(**row)``; at the end of the session the rows are printed and
written to bench/results/<date>-figures.json (the source of bench/RESULTS.md).
"""
import json
import pathlib
import platform
import time

import pytest

RESULTS = pathlib.Path(__file__).parent / "results"


class Figures:
    def __init__(self):
        self.rows = []

    def add(self, **row):
        self.rows.append(row)


_FIGURES = Figures()


@pytest.fixture(scope="session")
def figures():
    return _FIGURES


def pytest_terminal_summary(terminalreporter):
    if not _FIGURES.rows:
        return
    terminalreporter.write_sep("=", "skewgroup figures")
    for row in _FIGURES.rows:
        terminalreporter.write_line(json.dumps(row))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{time.strftime('%Y%m%d-%H%M%S')}-figures.json"
    path.write_text(json.dumps({"machine": platform.platform(), "processor": platform.processor(),
                                "rows": _FIGURES.rows}, indent=1))
    terminalreporter.write_line(f"saved {path}")
