"""What the tests of skewgroup._aggregation.spark_functions share: a reduction run over random
partial groups (its state through pandas, as a stream's crosses it) and references' helpers."""
import math

import numpy as np
import pyarrow as pa


def split_result(reduction, args, offsets, rng, through_pandas=True):
    """Each group cut into 1-3 non-empty parts, each part reduced, the parts' states merged per
    group (through pandas, as a stream's state crosses it), the result of each merged state."""
    cuts, parts = [], []
    for start, end in zip(offsets[:-1], offsets[1:]):
        k = int(rng.integers(1, min(3, end - start) + 1))
        inner = sorted(rng.choice(np.arange(start + 1, end), k - 1, replace=False)) if k > 1 else []
        cuts += [start, *inner]
        parts.append(k)
    cuts.append(offsets[-1])
    state = reduction.reduce(args, np.array(cuts, dtype=np.int64))
    check_state(reduction, state, len(cuts) - 1)
    if through_pandas:
        state = through_pandas_frame(state, reduction.state_types)
    merged = reduction.merge(state, np.concatenate([[0], np.cumsum(parts)]).astype(np.int64))
    check_state(reduction, merged, len(offsets) - 1)
    result = reduction.result(merged)
    assert result.type == reduction.result_type
    return result.to_pylist()


def through_pandas_frame(state, types):
    """The state columns after a trip through a pandas frame, read back as the stream's merge
    reads them (skewgroup.spark._stream_merge): numbers through numpy (a NaN stays a NaN)."""
    frame = pa.table({f"s{i}": s for i, s in enumerate(state)}).to_pandas()
    out = []
    for i, t in enumerate(types):
        column = frame[f"s{i}"]
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            out.append(pa.array(column.to_numpy(), t))
        else:
            out.append(pa.Array.from_pandas(column, type=t))
    return out


def check_state(reduction, state, rows):
    assert [s.type for s in state] == reduction.state_types
    for s in state:
        assert len(s) == rows
        if pa.types.is_integer(s.type) or pa.types.is_floating(s.type):
            assert s.null_count == 0, "a number state column must never hold a null"
        assert not pa.types.is_nested(s.type)
        assert not pa.types.is_temporal(s.type), "a date or time crosses pandas as its integer"


def groups_of(rng, n_groups, max_size=12):
    sizes = rng.integers(1, max_size + 1, n_groups)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def per_group(values, offsets):
    return [values[s:e] for s, e in zip(offsets[:-1], offsets[1:])]


def close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def set_key(v):
    """A comparable stand-in of a value (NaN as one value, -0.0 as 0.0), as Spark's set has."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else ("num", v + 0.0)
    return ("v", v)
