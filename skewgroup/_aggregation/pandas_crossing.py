"""How numbers cross pandas exactly, Arrow's side (pyarrow and numpy, no pyspark).

A stream's stateful merge (``transformWithStateInPandas``) takes and gives its rows as pandas
frames, where a null long becomes a float and a NaN becomes a null. So a number crosses filled
(no null, no NaN) with a status column beside it, ``status_column(name)``, holding each
value's ``STATUS_*``; Spark turns the pair back into the value after the merge. The Spark side
of the crossing (which columns cross how, and the Columns that read them back) is
``skewgroup.spark._crossing``.
"""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

STATUS_NULL, STATUS_VALUE, STATUS_NAN = 0, 1, 2


def status_column(name):
    """The name of the status column that crosses beside the number column ``name``."""
    return name + "__s"


def crosses_with_status(arrow_type):
    """Whether a value of ``arrow_type`` crosses filled, with its ``STATUS_*`` beside it."""
    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_timestamp(arrow_type))


def status(values):
    """Each number's ``STATUS_*``: null, a value, or NaN."""
    values = _array(values)
    out = np.where(values.is_valid().to_numpy(zero_copy_only=False), STATUS_VALUE,
                   STATUS_NULL).astype(np.int8)
    if pa.types.is_floating(values.type):
        out[np.isnan(values.fill_null(0.0).to_numpy(zero_copy_only=False))] = STATUS_NAN
    return pa.array(out, pa.int8())


def filled(values):
    """``values`` with each null and NaN as the type's zero (its status says which it was)."""
    values = _array(values)
    if values.null_count:
        values = values.fill_null(pa.scalar(0, values.type))
    if pa.types.is_floating(values.type):
        values = pc.if_else(pc.is_nan(values), pa.scalar(0, values.type), values)
    return values


def with_status(output, result):
    """{``output``: ``result`` filled, its status column: its ``STATUS_*``}."""
    return {output: filled(result), status_column(output): status(result)}


def filled_with_status(table, column):
    """``table`` with the number column ``column`` filled and its status column appended."""
    values = table.column(column)
    table = table.set_column(table.schema.get_field_index(column), column, filled(values))
    return table.append_column(status_column(column), status(values))


def from_pandas(frames, schema, key_status, state_columns):
    """The rows ``transformWithStateInPandas`` hands over as pandas frames, as an Arrow table of
    ``schema``. Numbers go through numpy, so a NaN stays a NaN (pandas' own conversion reads it
    as null) and a long stays exact: state columns hold no null (``state_columns``: their
    names; a reduction's value is filled, its ``n`` says where no input was), and a number
    key's nulls and NaNs are in its status column (``key_status``: key -> status column)."""
    if not frames:
        return schema.empty_table()
    tables = []
    for frame in frames:
        arrays = []
        for f in schema:
            column = frame[f.name]
            if f.name in key_status:
                statuses = frame[key_status[f.name]].to_numpy()
                values = column.to_numpy()
                if pa.types.is_floating(f.type):
                    values = np.where(statuses == STATUS_NAN, np.nan, values)
                arrays.append(pa.array(values, f.type, mask=statuses == STATUS_NULL))
            elif f.name in state_columns and (pa.types.is_floating(f.type)
                                              or pa.types.is_integer(f.type)):
                arrays.append(pa.array(column.to_numpy(), f.type))
            else:
                arrays.append(pa.Array.from_pandas(column, type=f.type))
        tables.append(pa.Table.from_arrays(arrays, schema=schema))
    return pa.concat_tables(tables)


def _array(values):
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
