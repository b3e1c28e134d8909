"""The partial stage in Spark: per (worker, key) of a partition, one ``mapInArrow`` call per
partition, its executor side ``skewgroup._aggregation.partial``.

    placed rows (partition == worker) --mapInArrow(make_partial)--> partial rows

A call's ``_call.Layout`` says what the stage reads and writes (its keys' copies and the sum
of its aggregates' parts, each aggregate's executor step among them); every column it writes
has an internal name (``_columns``).
"""
import pyarrow as pa

from skewgroup._aggregation.partial import partial_batches, partial_tables


def partial_rows(call, placed, observed):
    """The partial rows of ``placed`` (``call.df`` after the plan's placement), one
    ``mapInArrow`` stage; ``observed``: a stream's partial rows carry the rows behind each (its
    progress observes them, ``_merge``)."""
    layout, names = call.layout, call.names
    # The placement's columns have done their work: the partial does not read them, and every
    # column it gets crosses into Python.
    placed = placed.drop(names.worker, names.place)
    return layout.partial_input(placed).mapInArrow(
        make_partial(layout, layout.partial_arrow(observed)), layout.schema(observed))


def make_partial(layout, fields):
    """mapInArrow function: the partial rows of one partition, as Arrow ``fields``."""
    partial_of = layout_partial_tables(layout, fields)
    return partial_batches(partial_of)


def layout_partial_tables(layout, fields, carried=()):
    """``_aggregation.partial.partial_tables`` of ``layout``'s keys, steps and flags, its rows
    of Arrow ``fields``; ``carried`` as there."""
    part, names = layout.part, layout.names
    return partial_tables(
        pa.schema(fields), layout.keys, part.steps,
        user_columns=layout.user_columns if part.reads_rows else (),
        spark_inputs=[f.name for f in part.spark_inputs], passes_rows=part.passes_rows,
        raw=names.raw, rows=names.rows, carried=carried)
