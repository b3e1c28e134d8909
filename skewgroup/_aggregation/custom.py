"""A custom aggregate's partial (``agg.custom``): the user's function called in its calling
convention over a partition's rows grouped by key, and what it returns checked field by field.
Below the Spark layer (pyarrow, numpy, pandas; no pyspark).

Two conventions (docs/plans.md, "Custom aggregates"):

* per key, ``partial(rows) -> dict``: one call per group with the group's rows as a pandas
  DataFrame, sliced from one frame converted once in group order (no pandas groupby, no
  DataFrame built per key);
* vectorized, ``partial(rows, offsets) -> dict``: one call for the whole partition, ``rows`` a
  pyarrow Table grouped by key, ``offsets`` the g + 1 group boundaries; one value per group.

>>> import numpy as np, pyarrow as pa
>>> from skewgroup._aggregation.groups import GroupedRows
>>> grouped = GroupedRows(pa.table({"k": [1, 2, 1], "x": [1.0, 2.0, 3.0]}), ["k"], ["k", "x"])
>>> total = lambda rows, offsets: {"s": np.add.reduceat(rows["x"].to_numpy(), offsets[:-1])}
>>> partial_columns(total, True, grouped, ["s"], [pa.float64()])[0].to_pylist()
[4.0, 2.0]
"""
from collections.abc import Mapping

import pyarrow as pa


def partial_columns(partial, vectorized, grouped, fields, types):
    """The per-group values of each of ``fields`` (one Arrow array of ``types[i]`` each) that
    the user's ``partial`` gives for the groups of ``grouped`` (a ``_groups.GroupedRows``)."""
    values = (_vectorized(partial, grouped, fields) if vectorized
              else _per_key(partial, grouped, fields))
    groups = len(grouped.offsets) - 1
    return [_column(values, name, arrow_type, groups) for name, arrow_type in zip(fields, types)]


def _vectorized(partial, grouped, fields):
    result = partial(grouped.rows, grouped.offsets.copy())
    if not isinstance(result, Mapping):
        raise TypeError(f"A vectorized custom aggregate's partial must return a dict from "
                        f"each schema field {fields} to its per-group values. Got "
                        f"{type(result).__name__}.")
    extra = sorted(set(result) - set(fields))
    if extra:
        raise ValueError(f"A vectorized custom aggregate's partial returned field(s) {extra} "
                         f"that its schema lacks; the schema's fields are {fields}.")
    return result


def _per_key(partial, grouped, fields):
    frame, offsets = grouped.frame, grouped.offsets
    values = {f: [] for f in fields}
    for start, stop in zip(offsets[:-1], offsets[1:]):
        state = partial(frame.iloc[start:stop])
        if not isinstance(state, Mapping):
            raise TypeError(f"A custom aggregate's partial must return a dict from each schema "
                            f"field {fields} to the group's value. Got {type(state).__name__}.")
        for f in fields:
            if f not in state:
                raise ValueError(f"The custom aggregate's partial returned no value for field "
                                 f"{f!r}; it must return every schema field.")
            values[f].append(state[f])
    return values


def _column(values, field_name, field_type, groups):
    """The per-group values of one partial field as an Arrow array of ``field_type``."""
    if field_name not in values:
        raise ValueError(f"The custom aggregate's partial returned no value for field "
                         f"{field_name!r}; it must return every schema field.")
    column = values[field_name]
    try:
        array = column if isinstance(column, (pa.Array, pa.ChunkedArray)) else pa.array(column)
        length = len(array)
    except (TypeError, ValueError, pa.ArrowException) as error:
        raise TypeError(f"The custom aggregate's field {field_name!r} must be an array of "
                        f"{groups} values of type {field_type}; got "
                        f"{type(column).__name__}: {error}") from None
    if length != groups:
        raise ValueError(f"The custom aggregate's field {field_name!r} must hold one value per "
                         f"group: {groups} values; got {length}.")
    try:
        return array.cast(field_type)
    except (pa.ArrowException, ValueError) as error:
        raise TypeError(f"The custom aggregate's field {field_name!r} must be of type "
                        f"{field_type}; got {array.type} ({error}).") from None
