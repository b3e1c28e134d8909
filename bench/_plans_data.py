"""The plans grid's inputs (bench_plans.py, bench_auto_sample.py) and its per-row cost, the
splitmix64 mix (bench_plans.py, bench_streaming.py): ``ROWS`` rows (k, x, d) per input, written
once as parquet under /tmp, one file per input partition."""
import os
import pathlib
import tempfile

import numpy as np

ROWS = int(os.environ.get("SKEWGROUP_BENCH_PLANS_ROWS", 2_000_000))
UNIVERSE = 1_000_000
DISTINCT_VALUES = 1_000
MIX_ROUNDS = 900         # splitmix64 rounds per row: about 1 µs per row here (measured, recorded)
DATA = pathlib.Path(tempfile.gettempdir()) / "skewgroup-bench-plans"
SHAPES = {"wide": 32, "narrow": 2, "keyed": 8}

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mixed(x, rounds=MIX_ROUNDS):
    """``rounds`` rounds of the splitmix64 finaliser on every value, top 31 bits (int64): an
    exactly mergeable per-row cost, in chunks that stay in cache."""
    out = np.empty(len(x), dtype=np.int64)
    for start in range(0, len(x), 1 << 14):
        z = np.array(x[start:start + (1 << 14)], dtype=np.uint64)
        for _ in range(rounds):
            z ^= z >> np.uint64(30)
            z *= _M1
            z ^= z >> np.uint64(27)
            z *= _M2
            z ^= z >> np.uint64(31)
        out[start:start + len(z)] = (z >> np.uint64(33)).astype(np.int64)
    return out


def _key_stream(name):
    import skewgroup

    if name == "uniform":
        return np.random.default_rng(11).integers(0, UNIVERSE, ROWS, dtype=np.int64)
    z = float(name.split("-")[1])
    return skewgroup.streams.zipf(z, ROWS, universe=UNIVERSE, seed=11)


def dataset(keys_name, shape):
    """ROWS rows (k, x, d) as parquet files, one file per input partition (written once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import skewgroup

    directory = DATA / f"{keys_name}-{shape}-{ROWS}"
    if (directory / "_done").exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    keys = _key_stream(keys_name)
    x = np.random.default_rng(12).integers(0, 1 << 40, ROWS, dtype=np.int64)
    d = x % DISTINCT_VALUES
    files = SHAPES[shape]
    if shape == "keyed":   # partitioned by a hash of the key, as a keyed topic
        part = (skewgroup.hash_keys(keys, 99) % np.uint64(files)).astype(np.int64)
        groups = [np.flatnonzero(part == i) for i in range(files)]
    else:                  # arrival order, split evenly
        groups = np.array_split(np.arange(ROWS), files)
    for i, rows in enumerate(groups):
        pq.write_table(pa.table({"k": keys[rows], "x": x[rows], "d": d[rows]}),
                       directory / f"part-{i:03d}.parquet")
    (directory / "_done").write_text(f"{ROWS} rows\n")
    return directory
