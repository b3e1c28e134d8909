"""Key streams for simulation, benchmarks and ``skewgroup reproduce``.

* :func:`zipf` — the Zipf streams of Pd-Stream Table IV and d-choices §V (exact law, fast);
* :func:`drifting_zipf` — the time-evolving streams of FISH §6.1: the key ranking is replaced
  at given points (hot keys become cold and cold keys hot), abruptly or over a ramp;
* :func:`skewed` — DKG §5.1's "skewness ratio" streams: one key carries a given share;
* :func:`from_file` — the keys of one column of a parquet or CSV file, in file order;
* :func:`python_source` — real keys in their natural order: the identifiers of the Python
  standard library's code, or the words of its docstrings and comments, file after file;
* :func:`split_sources` — which of s upstream routers ("sources") sees each tuple.

All generators are seeded and return int64 keys; key 0 is the hottest at the start.
"""
import os

import numpy as np

from skewgroup._routing._validation import check_int, check_real


def zipf(z, messages, universe=10**7, seed=0):
    """``messages`` keys drawn from a Zipf law of exponent ``z`` over ``universe`` keys.

    Key ``r`` (0-based rank) has probability proportional to ``1 / (r + 1) ** z``, the
    generator of Pd-Stream Table IV (a universe of 10^7 keys, 10 M messages). Sampling is
    Hörmann and Derflinger's rejection-inversion (the sampler of Apache Commons, which the
    papers' Java simulators use), vectorised: it is exact for any universe and touches no table,
    so 10^7 keys take about a second whatever the universe.

    >>> keys = zipf(1.4, 1000, universe=100, seed=1)
    >>> keys.dtype.name, int(keys.min()) >= 0, int(keys.max()) < 100
    ('int64', True, True)
    """
    z = check_real("z", z, 0.0, None)
    messages = check_int("messages", messages, 0)
    universe = check_int("universe", universe, 1)
    seed = check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)
    if z == 0.0 or universe == 1:
        return rng.integers(0, universe, size=messages, dtype=np.int64)
    return _rejection_inversion(z, universe, messages, rng) - 1


def _rejection_inversion(z, universe, messages, rng):
    """1-based Zipf ranks (Hörmann & Derflinger 1996, "Rejection-inversion to generate variates
    from monotone discrete distributions"; the constants of Commons RNG's sampler)."""
    a = 1.0 - z
    # H(x) = ∫ x^-z = (x^a - 1) / a (log x at z = 1) and its inverse, written with expm1/log1p
    # so that z close to 1 loses no precision.
    if a == 0.0:
        h_integral, h_integral_inverse = np.log, np.exp
    else:
        def h_integral(x):
            return np.expm1(a * np.log(x)) / a

        def h_integral_inverse(u):
            return np.exp(np.log1p(np.maximum(u * a, -1.0)) / a)

    def h(x):
        return np.exp(-z * np.log(x))

    h_x1 = float(h_integral(1.5)) - 1.0
    h_n = float(h_integral(universe + 0.5))
    s = 2.0 - float(h_integral_inverse(h_integral(2.5) - h(2.0)))
    out = np.empty(messages, dtype=np.int64)
    filled = 0
    while filled < messages:
        need = messages - filled
        u = h_n + rng.random(need + need // 16 + 64) * (h_x1 - h_n)
        x = h_integral_inverse(u)
        k = np.clip(np.floor(x + 0.5), 1, universe)
        # Most draws pass the cheap test; only the rest pay for the exact one.
        ok = k - x <= s
        rest = np.flatnonzero(~ok)
        ok[rest] = u[rest] >= h_integral(k[rest] + 0.5) - h(k[rest])
        got = k[ok][:need]
        out[filled:filled + got.size] = got
        filled += got.size
    return out


def drifting_zipf(z, messages, changes, universe=10**5, ramp=0, seed=0):
    """A Zipf stream whose key ranking is replaced at each position of ``changes``.

    Tuples draw a Zipf rank as :func:`zipf`; the rank is mapped to a key through the ranking of
    the current phase: phase 0 is the identity (key 0 hottest), every change point starts a
    phase with a fresh random ranking, so the hot keys are replaced by keys that were cold.
    This is FISH §6.1's time-evolving ZF stream (0.8 N tuples with one ranking, 0.2 N with
    another, repeated) when ``changes`` lists those points. With ``ramp`` > 0 each change is a
    gradual shift: over the ``ramp`` tuples after a change point, the share of tuples drawn
    from the new ranking grows linearly from 0 to 1.

    Each phase holds one permutation of the universe (8 bytes per key), so keep the universe
    modest when there are many changes.

    >>> keys = drifting_zipf(2.0, 2000, changes=[1000], universe=50, seed=3)
    >>> first, second = np.bincount(keys[:1000]).argmax(), np.bincount(keys[1000:]).argmax()
    >>> int(first), bool(first != second)
    (0, True)
    """
    messages = check_int("messages", messages, 0)
    universe = check_int("universe", universe, 1)
    ramp = check_int("ramp", ramp, 0)
    points = np.sort(np.asarray(changes, dtype=np.int64).reshape(-1))
    if points.size and points[0] < 0:
        raise ValueError(f"The 'changes' parameter must hold tuple positions >= 0. "
                         f"Got {points[0]} among them.")
    ranks = zipf(z, messages, universe=universe, seed=seed)
    rng = np.random.default_rng([seed, 1])
    rankings = [np.arange(universe, dtype=np.int64)]
    rankings += [rng.permutation(universe).astype(np.int64) for _ in points]
    positions = np.arange(messages, dtype=np.int64)
    phase = np.searchsorted(points, positions, side="right")
    if ramp and points.size:
        # Inside a ramp a tuple keeps the previous ranking with probability 1 - progress.
        since = positions - np.where(phase > 0, points[np.maximum(phase - 1, 0)], 0)
        ramping = (phase > 0) & (since < ramp)
        stay = rng.random(messages) >= since / ramp
        phase = np.where(ramping & stay, phase - 1, phase)
    keys = np.empty(messages, dtype=np.int64)
    for p, ranking in enumerate(rankings):
        sel = phase == p
        keys[sel] = ranking[ranks[sel]]
    return keys


def skewed(ratio, messages, keys=204, seed=0):
    """DKG §5.1's synthetic streams: key 0 takes a share ``ratio`` of the tuples, the rest are
    uniform over all ``keys`` keys (the paper's 204 country names; ratio 0 is uniform).

    >>> s = skewed(0.8, 10_000, seed=1)
    >>> round(float(np.mean(s == 0)), 2)
    0.8
    """
    ratio = check_real("ratio", ratio, 0.0, 1.0)
    messages = check_int("messages", messages, 0)
    keys = check_int("keys", keys, 1)
    rng = np.random.default_rng(seed)
    out = rng.integers(0, keys, size=messages, dtype=np.int64)
    out[rng.random(messages) < ratio] = 0
    return out


FILE_FORMATS = (".parquet", ".pq", ".csv", ".csv.gz", ".tsv")


def from_file(path, column, limit=None):
    """The values of ``column`` in a parquet or CSV file, in file order, as a pyarrow array.

    Any Arrow type the router can hash works as a key (strings, integers, dates ...). Parquet
    reads only that column; CSV is parsed whole by pyarrow's multithreaded reader.
    """
    import pyarrow as pa

    path = os.fspath(path)
    lower = path.lower()
    if not lower.endswith(FILE_FORMATS):
        raise ValueError(f"The 'path' parameter must name a file ending in one of "
                         f"{list(FILE_FORMATS)}. Got {path!r} instead.")
    if not os.path.exists(path):
        raise FileNotFoundError(f"The 'path' parameter names no file: {path!r}.")
    if lower.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        _check_column(column, names, path)
        table = pq.read_table(path, columns=[column])
    else:
        import pyarrow.csv as pacsv

        parse = pacsv.ParseOptions(delimiter="\t" if lower.endswith(".tsv") else ",")
        table = pacsv.read_csv(path, parse_options=parse)
        _check_column(column, table.column_names, path)
    keys = table.column(column).combine_chunks()
    if limit is not None:
        keys = keys.slice(0, check_int("limit", limit, 0))
    return keys if isinstance(keys, pa.Array) else pa.array(keys)


PYTHON_SOURCE_KINDS = ("identifiers", "prose")
_TEXT = None


def python_source(kind="identifiers", limit=None, root=None):
    """Real keys in their natural order, from the Python standard library's own source.

    The files under ``root`` (default: this interpreter's standard library, without
    site-packages and tests' ``__pycache__``) are read in sorted path order, and each file's
    keys in file order, so keys come in the bursts real streams have (a function's local
    names, a module's topic):

    * ``"identifiers"``: the identifier tokens of the code (docstrings, ``#`` comments and
      triple-quoted strings removed), case kept: ``self``, ``def``, ``assertEqual`` ...;
    * ``"prose"``: the English words of the docstrings and comments, lower-cased, plus the
      reference manual's text that ships as ``pydoc_data.topics``.

    Python 3.11.7's library gives 2,205,791 identifiers (98,463 distinct; ``self`` 9.9 %) and
    1,073,016 words (20,437 distinct; "the" 4.5 %). Another Python version gives another stream:
    the version is part of what a figure measured on it depends on. Returns a pyarrow string
    array; ``limit`` keeps the first keys.

    >>> keys = python_source("identifiers", limit=5)
    >>> len(keys)
    5
    """
    import re
    import sysconfig

    import pyarrow as pa

    if kind not in PYTHON_SOURCE_KINDS:
        raise ValueError(f"The 'kind' parameter must be one of {list(PYTHON_SOURCE_KINDS)}. "
                         f"Got {kind!r} instead.")
    root = os.fspath(root) if root is not None else sysconfig.get_paths()["stdlib"]
    if not os.path.isdir(root):
        raise ValueError(f"The 'root' parameter must name a directory. Got {root!r} instead.")
    text = re.compile(r'"""(.*?)"""|\'\'\'(.*?)\'\'\'|#([^\n]*)', re.S)
    word = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
    identifier = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    out = []
    for path in _python_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            source = f.read()
        if kind == "identifiers":
            out += identifier.findall(text.sub(" ", source))
        else:
            for match in text.finditer(source):
                out += [w.lower() for w in word.findall(next(g for g in match.groups()
                                                             if g is not None))]
        if limit is not None and len(out) >= limit:
            break
    if kind == "prose" and (limit is None or len(out) < limit):
        try:
            from pydoc_data.topics import topics
        except ImportError:   # some distributions leave pydoc_data out
            topics = {}
        for name in topics:
            out += [w.lower() for w in word.findall(topics[name])]
    if limit is not None:
        out = out[:check_int("limit", limit, 0)]
    return pa.array(out, type=pa.string())


def _python_files(root):
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in ("site-packages", "__pycache__"))
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(directory, name)


def _check_column(column, names, path):
    if column not in names:
        raise ValueError(f"The 'column' parameter must be one of the columns of {path!r}: "
                         f"{names}. Got {column!r} instead.")


def split_sources(messages, sources, by=None):
    """The source (0 .. sources-1) of each tuple: round robin, or by the values of ``by``.

    Every paper simulates s upstream routers, each with its own state and its own local load
    vector (d-choices §V-A: sources read the input "via shuffle grouping", i.e. round robin).
    ``by`` (an array as long as the stream, e.g. a partition or a host column) sends all tuples
    with the same value to the same source: value codes in order of first sorting, modulo s.

    >>> split_sources(5, 2).tolist()
    [0, 1, 0, 1, 0]
    >>> split_sources(4, 2, by=["b", "a", "b", "c"]).tolist()
    [1, 0, 1, 0]
    """
    messages = check_int("messages", messages, 0)
    sources = check_int("sources", sources, 1)
    if by is None:
        return (np.arange(messages, dtype=np.int64) % sources).astype(np.int32)
    values = np.asarray(by.to_numpy(zero_copy_only=False) if hasattr(by, "to_numpy") else by)
    if values.shape != (messages,):
        raise ValueError(f"The 'by' parameter must give one value per tuple ({messages}). "
                         f"Got shape {values.shape} instead.")
    codes = np.unique(values, return_inverse=True)[1].reshape(-1)
    return (codes % sources).astype(np.int32)
