"""The optional libraries of the command line: rich (tables, live progress) and matplotlib
(plots), installed by the ``cli`` extra. The routing core and the Spark layer's executors never
import them, so a cluster's Python environment needs neither."""
import sys


def _missing(library, error):
    return SystemExit(f"skewgroup's command line needs {library}: pip install 'skewgroup[cli]' "
                      f"({error})")


def console(file=None, width=None):
    """A rich Console on ``file`` (default stdout)."""
    try:
        from rich.console import Console
    except ImportError as error:
        raise _missing("rich", error) from None
    return Console(file=file or sys.stdout, width=width)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError as error:
        raise _missing("matplotlib", error) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
