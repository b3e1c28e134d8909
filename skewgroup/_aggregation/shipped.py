"""The aggregators skewgroup ships: quantiles, top-k, distinct count, least squares, a row sample.

Each follows Spark's Aggregator protocol (``zero``/``reduce``/``merge``/``finish`` with
``bufferSchema`` and ``outputType`` as DDL strings, so pyspark's own ``udaf`` can run it) and
has a batch form of ``skewgroup.aggregators``: the Arrow one (``reduce_arrow``/``merge_arrow``,
buffers never Python objects) where the buffer is numbers or a list of values, the Python one
(``reduce_groups``/``merge_groups``) for ``TopK``, whose merge is a summary's; the others
derive the Python form from the Arrow one, for code that holds Python buffers. Its types are
written once, in Arrow (``arrow_buffer_type``, ``arrow_output_type``); the DDL strings are
rendered from them.
"""
import heapq
import numbers
from bisect import bisect_left, bisect_right

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewgroup._routing.keys import hash_keys
from skewgroup._routing._spacesaving import SpaceSaving
from skewgroup._routing._validation import check_int, check_real

# Spark SQL's DDL name of each Arrow type a shipped aggregator may use as an item type.
_DDL_NAMES = {
    "boolean": pa.bool_(), "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(),
    "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
    "binary": pa.binary(), "date": pa.date32(),
}
_DDL_OF = {arrow: ddl for ddl, arrow in _DDL_NAMES.items()}


def _ddl(arrow_type):
    """Spark SQL's DDL for an Arrow type built from the item types, lists and structs."""
    if pa.types.is_list(arrow_type):
        return f"array<{_ddl(arrow_type.value_type)}>"
    if pa.types.is_struct(arrow_type):
        return f"struct<{_ddl_fields(arrow_type)}>"
    return _DDL_OF[arrow_type]


def _ddl_fields(struct_type):
    return ", ".join(f"{field.name}: {_ddl(field.type)}" for field in struct_type)


def _item_type(item_type):
    if isinstance(item_type, pa.DataType) and item_type in _DDL_OF:
        return item_type
    if isinstance(item_type, str) and item_type.strip().lower() in _DDL_NAMES:
        return _DDL_NAMES[item_type.strip().lower()]
    raise ValueError(f"The 'item_type' parameter must be one of {', '.join(_DDL_NAMES)} (or "
                     f"the pyarrow type of one). Got {item_type!r} instead.")


class _Shipped:
    """The protocol attributes every shipped aggregator derives from its two Arrow types."""

    arrow_buffer_type: pa.StructType
    arrow_output_type: pa.DataType

    @property
    def bufferSchema(self):  # noqa: N802 - Spark's protocol names it so
        return _ddl_fields(self.arrow_buffer_type)

    @property
    def outputType(self):  # noqa: N802
        return _ddl(self.arrow_output_type)

    def __repr__(self):
        params = ", ".join(f"{key}={value!r}" for key, value in vars(self).items())
        return f"{type(self).__name__}({params})"

    # The Python batch form, for code that holds Python buffers (a hand-written stage), from
    # the Arrow form where an aggregator has one (TopK has its own).
    def reduce_groups(self, rows, offsets):
        return _tuples(self.reduce_arrow(rows, offsets))

    def merge_groups(self, buffers, offsets):
        return _tuples(self.merge_arrow(pa.array(list(buffers), self.arrow_buffer_type),
                                        np.asarray(offsets, np.int64)))


def _tuples(buffers):
    """A struct array's values as tuples of its fields (the protocol's buffers)."""
    return list(zip(*(field.to_pylist() for field in buffers.flatten())))


def _bounds(offsets):
    return zip(offsets[:-1].tolist(), offsets[1:].tolist())


def _group_sums(values, offsets):
    """Per group, the sum of ``values`` rows (axis 0) over [offsets[i], offsets[i+1])."""
    # reduceat sums [a, b) when a < b, but gives row a itself for an empty group and cannot
    # index past the end: a zero row appended, and empty groups zeroed.
    padded = np.concatenate([values, np.zeros((1,) + values.shape[1:], values.dtype)])
    sums = np.add.reduceat(padded, offsets[:-1], axis=0)
    sums[offsets[:-1] == offsets[1:]] = 0
    return sums


def _valid_offsets(valid, offsets):
    """Offsets of the groups once the rows where ``valid`` is False are dropped."""
    kept = np.concatenate([[0], np.cumsum(valid, dtype=np.int64)])
    return kept[offsets]


class KllQuantiles(_Shipped):
    """Approximate quantiles per key with a KLL sketch (datasketches ``kll_doubles_sketch``).

    One numeric column; nulls and NaN are skipped. The result is the list of the requested
    quantiles, null for a key without values. Each quantile's rank is within the sketch's
    normalized rank error of the true rank (2.296 / k**0.9723 at 99% confidence, 1.33% for
    k = 200; ``rank_error``), however the rows were split and merged.

    Spark's own function does the same job: ``kll_sketch_agg_double(x)`` with
    ``kll_sketch_get_quantile_double(sketch, array(0.5, 0.9, 0.99))`` is the same DataSketches
    KLL sketch (k = 200 by default, the same rank error; its bytes are the ``datasketches``
    package's), and ``percentile_approx(x, array(...))`` a summary with a rank error of 1 /
    accuracy (10000 by default; more memory for more accuracy). Both run in a plain streaming ``groupBy``,
    combined before the shuffle, their state in the JVM; measured beside this aggregator in
    bench/RESULTS.md ("Shipped aggregators beside Spark's own functions"). What differs:
    ``kll_sketch_get_quantile_double`` fails the query for a key whose values are all null (an
    empty sketch) unless guarded, ``when(kll_sketch_get_n_double(s) > 0, ...)``; this gives
    null. In a Spark query this aggregator has no other edge: beside Python aggregators in one
    ``skew_group`` call, ``F.kll_sketch_agg_double("x")`` goes in the same call (on a stream
    too), its quantiles read after. It is kept only for users who cannot use Spark's: outside
    Spark (``skewgroup.aggregators.adapt``, Arrow in and out, no pyspark).

    Parameters
    ----------
    quantiles : sequence of float
        Ranks in [0, 1].
    k : int
        Sketch size, 8 <= k <= 65535; the buffer holds O(k log(n / k)) values.
    """

    arrow_buffer_type = pa.struct([("sketch", pa.binary())])
    arrow_output_type = pa.list_(pa.float64())

    def __init__(self, quantiles=(0.5, 0.9, 0.99), k=200):
        if isinstance(quantiles, (str, bytes)) or not hasattr(quantiles, "__len__") \
                or len(quantiles) == 0:
            raise TypeError(f"The 'quantiles' parameter must be a non-empty sequence of real "
                            f"numbers in [0.0, 1.0]. Got {quantiles!r} instead.")
        self.quantiles = tuple(check_real("quantiles", q, 0.0, 1.0) for q in quantiles)
        self.k = check_int("k", k, 8, 65535)
        self._sketch_class()

    @staticmethod
    def _sketch_class():
        try:
            from datasketches import kll_doubles_sketch
        except ImportError:
            raise ImportError("KllQuantiles needs the datasketches package: "
                              "pip install datasketches") from None
        return kll_doubles_sketch

    @property
    def rank_error(self):
        """The normalized rank error of one quantile (99% confidence)."""
        return self._sketch_class()(self.k).normalized_rank_error(False)

    def _load(self, buffer):
        return self._sketch_class().deserialize(buffer[0])

    def zero(self):
        return (self._sketch_class()(self.k).serialize(),)

    def reduce(self, buffer, value):
        if value[0] is None:
            return buffer
        sketch = self._load(buffer)
        sketch.update(float(value[0]))
        return (sketch.serialize(),)

    def merge(self, buffer1, buffer2):
        sketch = self._load(buffer1)
        sketch.merge(self._load(buffer2))
        return (sketch.serialize(),)

    def finish(self, buffer):
        sketch = self._load(buffer)
        return None if sketch.is_empty() else sketch.get_quantiles(list(self.quantiles))

    def _buffers(self, sketches):
        return pa.StructArray.from_arrays([pa.array(sketches, pa.binary())],
                                          fields=list(self.arrow_buffer_type))

    def reduce_arrow(self, rows, offsets):
        # Nulls become NaN, which the sketch skips like the NaN values themselves. A copy: the
        # sketch takes only writable arrays, and Arrow's zero-copy view is read-only.
        values = np.array(rows.column(0).cast(pa.float64()).to_numpy(zero_copy_only=False),
                          dtype=np.float64)
        sketch_class = self._sketch_class()
        sketches = []
        for start, stop in _bounds(offsets):
            sketch = sketch_class(self.k)
            if stop > start:
                sketch.update(values[start:stop])
            sketches.append(sketch.serialize())
        return self._buffers(sketches)

    def merge_arrow(self, buffers, offsets):
        sketch_class = self._sketch_class()
        blobs = buffers.flatten()[0].to_pylist()
        merged = []
        for start, stop in _bounds(offsets):
            sketch = sketch_class(self.k)
            for blob in blobs[start:stop]:
                sketch.merge(sketch_class.deserialize(blob))
            merged.append(sketch.serialize())
        return self._buffers(merged)


class TopK(_Shipped):
    """The k most frequent values per key, with counts, by SpaceSaving over value hashes.

    One column of ``item_type``; nulls are skipped. Each key keeps a SpaceSaving summary of
    ``capacity`` counters (Metwally et al. 2005) over the values' 64-bit hashes
    (``skewgroup.hash_keys``, seed 0) and the value of each monitored hash; partials merge as
    Agarwal et al.'s mergeable summaries. The result lists up to k structs
    ``(item, count, error)``, largest count first (ties by hash), empty for a key without
    values. For each: true count <= count <= true count + error, and error <= n / capacity for
    a key of n values; every value more frequent than n / capacity is monitored. When a key has
    at most ``capacity`` distinct values, counts are exact and errors 0. Two distinct values
    with equal 64-bit hashes would be counted as one.

    Spark's own functions for the job: ``approx_top_k(x, k[, maxItemsTracked])`` (Spark SQL;
    from Python ``F.call_function("approx_top_k", F.col("x"), F.lit(k))``) and ``mode(x)`` for
    the top one, both in a plain streaming ``groupBy``, combined before the shuffle, their state
    in the JVM; measured beside this aggregator in bench/RESULTS.md ("Shipped aggregators beside
    Spark's own functions"). What differs: ``approx_top_k`` gives ``(item, count)`` without an
    error bound, tracks up to ``maxItemsTracked`` items a key (10,000 by default, against this
    one's 10 * k counters), counts null as an item and takes no binary column;
    ``mode`` is exact and keeps every distinct value with its count. Where this one serves:
    each count's error bound in the output; a state of ``capacity`` counters a key, whatever
    the key's distinct values; binary values; beside other Python aggregators in one
    ``skew_group`` call on a stream (where ``approx_top_k`` and ``mode`` cannot merge); and
    outside Spark (``skewgroup.aggregators.adapt``).

    Parameters
    ----------
    k : int
        Values reported per key, k >= 1.
    item_type : str or pyarrow.DataType
        The column's type: a Spark SQL name (``"string"``, ``"bigint"``, ``"int"``,
        ``"double"``, ...) or its pyarrow type.
    capacity : int, optional
        Counters per key, >= k; default 10 * k. The buffer holds about 32 bytes plus one value
        per counter.
    """

    def __init__(self, k=10, item_type="string", capacity=None):
        self.k = check_int("k", k, 1, None)
        self.item_type = _item_type(item_type)
        self.capacity = check_int("capacity", 10 * self.k if capacity is None else capacity,
                                  self.k, 2**31 - 1)

    @property
    def arrow_buffer_type(self):
        return pa.struct([("total", pa.int64()), ("hashes", pa.list_(pa.int64())),
                          ("counts", pa.list_(pa.int64())), ("errors", pa.list_(pa.int64())),
                          ("items", pa.list_(self.item_type))])

    @property
    def arrow_output_type(self):
        return pa.list_(pa.struct([("item", self.item_type), ("count", pa.int64()),
                                   ("error", pa.int64())]))

    def _summary(self, buffer):
        return SpaceSaving.from_counters(self.capacity, np.asarray(buffer[1], np.int64),
                                         buffer[2], buffer[3], buffer[0])

    def _buffer(self, summary, item_of):
        """The buffer of ``summary``; ``item_of`` maps a monitored hash (int64) to its value."""
        hashes, counts, errors = summary.counters()
        signed = hashes.view(np.int64).tolist()
        return (summary.total, signed, counts.tolist(), errors.tolist(),
                [item_of[h] for h in signed])

    def zero(self):
        return (0, [], [], [], [])

    def reduce(self, buffer, value):
        item = value[0]
        if item is None:
            return buffer
        summary = self._summary(buffer)
        hashed = hash_keys(pa.array([item], type=self.item_type))
        summary.update_hashes(hashed)
        item_of = dict(zip(buffer[1], buffer[4]))
        item_of[int(hashed.view(np.int64)[0])] = item
        return self._buffer(summary, item_of)

    def merge(self, buffer1, buffer2):
        item_of = dict(zip(buffer1[1], buffer1[4]))
        item_of.update(zip(buffer2[1], buffer2[4]))
        return self._buffer(self._summary(buffer1).merge(self._summary(buffer2)), item_of)

    def finish(self, buffer):
        return [{"item": item, "count": count, "error": error}
                for item, count, error in zip(buffer[4], buffer[2], buffer[3])][:self.k]

    def reduce_groups(self, rows, offsets):
        column = rows.column(0)
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        hashes = hash_keys(column)
        rows_of = np.flatnonzero(valid)     # row index of each valid value
        offsets = _valid_offsets(valid, offsets)
        hashes = hashes[valid]
        summaries, picks = [], []
        for start, stop in _bounds(offsets):
            summary = SpaceSaving(self.capacity)
            group = hashes[start:stop]
            summary.update_hashes(group)
            monitored = summary.counters()[0]
            # The first row of each monitored hash gives its value.
            order = np.argsort(group, kind="stable")
            first = order[np.searchsorted(group, monitored, sorter=order)]
            summaries.append(summary)
            picks.append(rows_of[start + first])
        items = column.take(pa.array(np.concatenate(picks + [np.empty(0, np.int64)]))) \
            .to_pylist()
        buffers, at = [], 0
        for summary in summaries:
            hashes_, counts, errors = summary.counters()
            size = len(hashes_)
            buffers.append((summary.total, hashes_.view(np.int64).tolist(), counts.tolist(),
                            errors.tolist(), items[at:at + size]))
            at += size
        return buffers

    def merge_groups(self, buffers, offsets):
        merged = []
        for start, stop in _bounds(offsets):
            if stop == start:
                merged.append(self.zero())
                continue
            summary = self._summary(buffers[start])
            item_of = dict(zip(buffers[start][1], buffers[start][4]))
            for buffer in buffers[start + 1:stop]:
                summary = summary.merge(self._summary(buffer))
                item_of.update(zip(buffer[1], buffer[4]))
            merged.append(self._buffer(summary, item_of))
        return merged


class DistinctCount(_Shipped):
    """The exact number of distinct non-null values per key.

    One column of ``item_type``. The buffer is the sorted list of the key's distinct values,
    so a key's state grows with its distinct values. Float NaN values are not deduplicated
    reliably (NaN equals nothing): filter them out first.

    Spark's own function does the same job: ``size(collect_set(x))`` is exact in a streaming
    ``groupBy`` (``count(DISTINCT x)`` is refused on a stream), combined before the shuffle, its
    state (every distinct value of a key, as here) in the JVM, and it deduplicates NaN; where an
    estimate will do, ``approx_count_distinct(x)`` and ``hll_sketch_estimate(hll_sketch_agg(x))``
    keep a bounded state. Measured beside this aggregator in bench/RESULTS.md ("Shipped
    aggregators beside Spark's own functions"). In a Spark query this aggregator has no edge:
    beside Python aggregators in one ``skew_group`` call, ``F.collect_set("x")`` goes in the same
    call (on a stream too), its size taken after. It is kept only for users who cannot use
    Spark's: outside Spark (``skewgroup.aggregators.adapt``, Arrow in and out, no pyspark).

    Parameters
    ----------
    item_type : str or pyarrow.DataType
        The column's type, as for ``TopK``.
    """

    arrow_output_type = pa.int64()

    def __init__(self, item_type="string"):
        self.item_type = _item_type(item_type)

    @property
    def arrow_buffer_type(self):
        return pa.struct([("values", pa.list_(self.item_type))])

    def zero(self):
        return ([],)

    def reduce(self, buffer, value):
        # Both protocols let reduce update the buffer it is given: a sorted insert keeps a
        # row's cost at a binary search and a memmove, where a copy would cost the whole set.
        item, values = value[0], buffer[0]
        if item is not None:
            at = bisect_left(values, item)
            if at == len(values) or values[at] != item:
                values.insert(at, item)
        return buffer

    def merge(self, buffer1, buffer2):
        return (sorted(set(buffer1[0]).union(buffer2[0])),)

    def finish(self, buffer):
        return len(buffer[0])

    def _distinct(self, groups, values, count):
        """One buffer per group: the distinct (group, value) pairs of two columns, sorted."""
        pairs = pa.table({"g": groups, "v": values}).group_by(["g", "v"]).aggregate([])
        pairs = pairs.filter(pairs["v"].is_valid()).sort_by([("g", "ascending"),
                                                             ("v", "ascending")])
        sizes = np.bincount(pairs["g"].to_numpy(), minlength=count)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
        lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                         pairs["v"].combine_chunks().cast(self.item_type))
        return pa.StructArray.from_arrays([lists], fields=list(self.arrow_buffer_type))

    def reduce_arrow(self, rows, offsets):
        groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        return self._distinct(groups, rows.column(0), len(offsets) - 1)

    def merge_arrow(self, buffers, offsets):
        lists = buffers.flatten()[0]
        sizes = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
        owner = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        return self._distinct(np.repeat(owner, sizes), lists.flatten(), len(offsets) - 1)


class LeastSquares(_Shipped):
    """A least-squares fit y ~ X per key, from its sufficient statistics.

    Columns: y, then the ``features`` feature columns. Rows with a null anywhere are skipped.
    The buffer is (n, X^T X, X^T y), so a key's state is O(p^2) for p coefficients whatever
    its rows. The result is the coefficient list (the intercept first when ``intercept``), the
    exact least-squares solution up to floating point; null when X^T X is rank deficient
    (fewer independent rows than coefficients, or collinear features), including a key
    without rows.

    With one feature and an intercept, Spark's own ``regr_intercept(y, x)`` and
    ``regr_slope(y, x)`` give the same fit (null for a key of one row, as here) in a plain
    streaming ``groupBy``, combined before the shuffle, their state in the JVM; measured beside
    this aggregator in bench/RESULTS.md ("Shipped aggregators beside Spark's own functions").
    Spark has no function for several features or a fit without intercept: by hand, a
    ``sum`` per entry of X^T X and X^T y, solved after the aggregation. Where this one serves:
    several features, or a fit without intercept; beside other Python aggregators in one
    ``skew_group`` call on a stream (where ``regr_*`` cannot merge); outside Spark
    (``skewgroup.aggregators.adapt``).

    Parameters
    ----------
    features : int
        Number of feature columns, >= 1.
    intercept : bool
        Whether to fit an intercept (a constant-1 feature) too.
    """

    arrow_buffer_type = pa.struct([("n", pa.int64()), ("xtx", pa.list_(pa.float64())),
                                   ("xty", pa.list_(pa.float64()))])
    arrow_output_type = pa.list_(pa.float64())

    def __init__(self, features, intercept=False):
        self.features = check_int("features", features, 1, None)
        if not isinstance(intercept, (bool, np.bool_)):
            raise TypeError(f"The 'intercept' parameter must be a bool. "
                            f"Got {type(intercept).__name__} instead.")
        self.intercept = bool(intercept)

    @property
    def _width(self):
        return self.features + self.intercept

    def zero(self):
        p = self._width
        return (0, [0.0] * (p * p), [0.0] * p)

    def reduce(self, buffer, value):
        if any(v is None for v in value):
            return buffer
        x = np.array(([1.0] if self.intercept else []) + list(value[1:]), dtype=np.float64)
        xtx = np.asarray(buffer[1]) + np.outer(x, x).ravel()
        xty = np.asarray(buffer[2]) + float(value[0]) * x
        return (buffer[0] + 1, xtx.tolist(), xty.tolist())

    def merge(self, buffer1, buffer2):
        return (buffer1[0] + buffer2[0], (np.asarray(buffer1[1]) + buffer2[1]).tolist(),
                (np.asarray(buffer1[2]) + buffer2[2]).tolist())

    def finish(self, buffer):
        p = self._width
        xtx = np.asarray(buffer[1], dtype=np.float64).reshape(p, p)
        if buffer[0] == 0 or np.linalg.matrix_rank(xtx) < p:
            return None
        return np.linalg.solve(xtx, np.asarray(buffer[2], dtype=np.float64)).tolist()

    def _buffers(self, n, xtx, xty):
        p, groups = self._width, len(n)

        def lists(values, width):
            ends = np.arange(0, groups * width + 1, width, dtype=np.int32)
            return pa.ListArray.from_arrays(pa.array(ends), pa.array(values.ravel(), pa.float64()))

        return pa.StructArray.from_arrays(
            [pa.array(n, pa.int64()), lists(xtx, p * p), lists(xty, p)],
            fields=list(self.arrow_buffer_type))

    def reduce_arrow(self, rows, offsets):
        data = np.column_stack([column.cast(pa.float64()).to_numpy(zero_copy_only=False)
                                for column in rows.columns])
        # A null marks a row to skip (the cast made it NaN); a NaN value is fitted, as reduce does.
        valid = np.ones(rows.num_rows, dtype=bool)
        for column in rows.columns:
            valid &= column.is_valid().to_numpy(zero_copy_only=False)
        data = data[valid]
        offsets = _valid_offsets(valid, offsets)
        y, x = data[:, 0], data[:, 1:]
        if self.intercept:
            x = np.column_stack([np.ones(len(x)), x])
        xtx = _group_sums(x[:, :, None] * x[:, None, :], offsets)
        xty = _group_sums(x * y[:, None], offsets)
        return self._buffers(np.diff(offsets), xtx, xty)

    def merge_arrow(self, buffers, offsets):
        p = self._width
        n, xtx, xty = buffers.flatten()
        for name, lists, width in (("xtx", xtx, p * p), ("xty", xty, p)):
            lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
            if (lengths != width).any() or lists.flatten().null_count:
                raise ValueError(f"LeastSquares({self.features} features) buffers hold {name} "
                                 f"lists of {width} numbers; got lengths "
                                 f"{sorted(set(lengths.tolist()))[:5]} or a null")
        return self._buffers(
            _group_sums(n.to_numpy(zero_copy_only=False), offsets),
            _group_sums(xtx.flatten().to_numpy(zero_copy_only=False).reshape(-1, p * p), offsets),
            _group_sums(xty.flatten().to_numpy(zero_copy_only=False).reshape(-1, p), offsets))


# The seed of RowSample's row hash: fixed, so that every partial, every replay and Spark's own
# way (skewgroup.app.baselines) rank a row alike; apart from the key hash's seed 0, so that the
# rows sampled are independent of where routing sends them.
_SAMPLE_SEED = 0x5EED_5A4D_504C_4553
# Flipping the top bit maps uint64 onto int64 keeping the order: the smallest unsigned hash is
# the smallest signed bigint, so Spark's sort of the stored bigint agrees with ours.
_TOP_BIT = np.uint64(1 << 63)


def sample_ranks(ids):
    """The rank of each row id in ``RowSample``'s order: its 64-bit hash with the top bit
    flipped, as int64 (smaller ranks are sampled first).

    ``ids`` is anything ``skewgroup.hash_keys`` takes; an integer id hashes its int64 value.
    The hash of an 8-byte integer is a bijection (XXH3's path for 4 to 8 bytes), so distinct
    ids never share a rank.
    """
    return (hash_keys(ids, _SAMPLE_SEED) ^ _TOP_BIT).view(np.int64)


def _column(rows, i):
    column = rows.column(i)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _by_group_then_rank(groups, ranks, count):
    """The permutation that sorts rows by (group, rank), rows of equal both in their order:
    ``np.lexsort((ranks, groups))``'s. ``groups`` are ids in [0, count), ``ranks`` int64.

    lexsort sorts twice, stably; one sort of a 64-bit key (the group in the high bits, the
    rank's top bits below it, as unsigned) gives the same permutation where no two rows share
    a key, about 3x sooner on a task's 50,000 rows (3.2 against 10 ms). Rows sharing a key
    (equal ranks in a group, or ranks alike in the bits kept: ~n^2 / 2^(65 - group bits) of n
    rows) take lexsort."""
    group_bits = max(int(count - 1).bit_length(), 1)
    if ranks.shape[0] < 2 or group_bits > 32:
        return np.lexsort((ranks, groups))
    # The sign bit flipped: int64 ranks in the order of unsigned integers.
    unsigned = ranks.view(np.uint64) ^ np.uint64(1 << 63)
    key = ((groups.astype(np.uint64) << np.uint64(64 - group_bits))
           | (unsigned >> np.uint64(group_bits)))
    order = np.argsort(key)
    sorted_key = key[order]
    if (sorted_key[1:] == sorted_key[:-1]).any():
        return np.lexsort((ranks, groups))
    return order


class RowSample(_Shipped):
    """A uniform sample of k rows per key: the values of the k rows whose id hashes smallest.

    Two columns: the value to sample (``item_type``) and the row's id (an integer column: a
    row number, an event id). Each row is ranked by a fixed 64-bit hash of its id
    (``sample_ranks``), and a key keeps the k rows of smallest rank: a uniform sample without
    replacement of the key's rows (k-minimum values, bottom-k sampling), the same whatever the
    order the rows arrive in, however they are split and merged, and on a replay. A null value
    is sampled as a null (a row is a row); a row with a null id is skipped (it has no rank).
    The result is the sampled values in rank order, all of a key's values when it has at most
    k rows, empty for a key without rows. Distinct ids never tie (the hash of an integer is a
    bijection); rows sharing an id share a rank, so ids should be unique: which of two rows of
    one id is kept, when they straddle the k-th place, depends on their arrival.

    The buffer is the k smallest ranks (bigint: the hash with its top bit flipped, so the
    signed order is the hash's unsigned order) and their values, so a key's state is O(k)
    whatever its rows, and two buffers merge by keeping the k smallest of both.

    Spark has no function for it with bounded state. Its way is ``collect_list`` of every
    row (with its rank) in the ``groupBy``, then ``array_sort`` and ``slice`` after the
    aggregation: the state of a key grows with every row it ever had, and a streaming query
    rewrites it every micro-batch the key appears in. ``sample`` and ``TABLESAMPLE`` sample a
    table, not each key, and are refused on a stream; ``max_by``/``min_by`` keep one row, and
    ``array_agg`` is ``collect_list``. Measured beside it by ``skewgroup run``.

    Parameters
    ----------
    k : int
        Rows sampled per key, 1 <= k <= 100000; the buffer holds k ranks and k values.
    item_type : str or pyarrow.DataType
        The value column's type, as for ``TopK``; the result is a list of it.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa
    >>> sample = RowSample(k=2)
    >>> rows = pa.table({"amount": [1.0, 2.0, 3.0, None, 5.0], "id": [10, 11, 12, 13, 14]})
    >>> parts = sample.reduce_arrow(rows, np.array([0, 3, 5]))    # two keys: 3 rows, 2 rows
    >>> [len(s) for s in sample.finish_arrow(parts).to_pylist()]
    [2, 2]
    >>> whole = sample.reduce_arrow(rows, np.array([0, 5]))
    >>> merged = sample.merge_arrow(parts, np.array([0, 2]))      # the two partials of one key
    >>> merged.equals(whole)
    True
    """

    MAX_K = 100_000

    def __init__(self, k=5, item_type="double"):
        self.k = check_int("k", k, 1, self.MAX_K)
        self.item_type = _item_type(item_type)

    @property
    def arrow_buffer_type(self):
        return pa.struct([("hashes", pa.list_(pa.int64())),
                          ("values", pa.list_(self.item_type))])

    @property
    def arrow_output_type(self):
        return pa.list_(self.item_type)

    # --- Spark's Aggregator protocol ----------------------------------------------------------

    def zero(self):
        return ([], [])

    def reduce(self, buffer, value):
        item, row_id = value
        if row_id is None:
            return buffer
        if isinstance(row_id, bool) or not isinstance(row_id, numbers.Integral):
            raise TypeError(f"RowSample reads the row id as its second column, an integer. "
                            f"Got {row_id!r} of type {type(row_id).__name__}.")
        rank = int(sample_ranks(pa.array([row_id]))[0])
        ranks, items = buffer
        if len(ranks) == self.k and rank >= ranks[-1]:
            return buffer
        # Both protocols let reduce update the buffer it is given: a sorted insert, then the
        # largest rank dropped once there are k + 1.
        at = bisect_right(ranks, rank)
        ranks.insert(at, rank)
        items.insert(at, item)
        if len(ranks) > self.k:
            ranks.pop()
            items.pop()
        return buffer

    def merge(self, buffer1, buffer2):
        both = heapq.merge(zip(*buffer1), zip(*buffer2), key=lambda pair: pair[0])
        kept = list(zip(*(pair for pair, _ in zip(both, range(self.k)))))
        return (list(kept[0]), list(kept[1])) if kept else ([], [])

    def finish(self, buffer):
        return list(buffer[1])

    # --- the Arrow batch form -----------------------------------------------------------------

    def _smallest(self, groups, ranks, values, count):
        """One buffer per group 0..count-1: the k rows of smallest rank among those of each
        group, in rank order. ``groups`` and ``ranks`` are int64 numpy arrays, ``values`` an
        Arrow array, one entry per row each."""
        # One sort by (group, rank) for every group at once; then a row's place in its group
        # is its position minus the group's first position, and the first k places are kept.
        # Rows of one rank keep their order.
        order = _by_group_then_rank(groups, ranks, count)
        sorted_groups = groups[order]
        first = np.searchsorted(sorted_groups, np.arange(count))
        place = np.arange(len(order)) - first[sorted_groups]
        kept = order[place < self.k]
        sizes = np.bincount(groups[kept], minlength=count)
        offsets = pa.array(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32))
        taken = pa.array(kept, pa.int64())
        return pa.StructArray.from_arrays(
            [pa.ListArray.from_arrays(offsets, pa.array(ranks[kept], pa.int64())),
             pa.ListArray.from_arrays(offsets, values.take(taken).cast(self.item_type))],
            fields=list(self.arrow_buffer_type))

    def reduce_arrow(self, rows, offsets):
        values, ids = _column(rows, 0), _column(rows, 1)
        if not pa.types.is_integer(ids.type):
            raise TypeError(f"RowSample reads the row id as its second column, an integer "
                            f"column. Got a column of {ids.type}.")
        groups = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        with_id = np.flatnonzero(ids.is_valid().to_numpy(zero_copy_only=False))
        ranks = sample_ranks(ids)[with_id]
        return self._smallest(groups[with_id], ranks,
                              values.take(pa.array(with_id, pa.int64())), len(offsets) - 1)

    def merge_arrow(self, buffers, offsets):
        hashes, values = buffers.flatten()
        if hashes.null_count or values.null_count:
            raise ValueError(f"RowSample buffers hold two lists, never null; got "
                             f"{hashes.null_count} null hashes and {values.null_count} null "
                             f"values lists")
        lengths = pc.list_value_length(hashes).to_numpy(zero_copy_only=False)
        value_lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
        # A buffer's order and length are not trusted (the merge sorts again and keeps k), but
        # a value without its hash, or a hash without its value, cannot be merged.
        if (lengths != value_lengths).any():
            bad = int(np.flatnonzero(lengths != value_lengths)[0])
            raise ValueError(f"RowSample buffers hold as many values as hashes; buffer {bad} "
                             f"holds {lengths[bad]} hashes and {value_lengths[bad]} values")
        owners = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        ranks = hashes.flatten().to_numpy(zero_copy_only=False)
        return self._smallest(np.repeat(owners, lengths), ranks, values.flatten(),
                              len(offsets) - 1)

    def finish_arrow(self, buffers):
        # The values are kept in rank order already: the result is the buffer's second list.
        return buffers.flatten()[1]
